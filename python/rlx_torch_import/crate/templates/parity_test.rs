//! The crate checks itself: the reference inputs recorded at conversion time
//! must give PyTorch's outputs within the verifier's budgets.
//! Needs the weights: `$RLX_WEIGHTS`, else `../bundle/weights.safetensors`.

//! A dynamic model is checked at every sweep point too (`SWEEP`), one binding each.

use @@LIB@@::{Model, SWEEP, check_reference_at, default_reference, default_weights};
@@RANDOM_CONST@@

#[test]
fn matches_pytorch_on_the_reference_inputs() {
    let weights = default_weights();
    let mut model = Model::load(&weights).unwrap_or_else(|e| panic!("Model::load({}): {e}", weights.display()));
    let mut failed = Vec::new();
    for prefix in std::iter::once("").chain(SWEEP.iter().copied()) {
        let (outputs, report) =
            check_reference_at(&mut model, &default_reference(), prefix).expect("reference run");
        let shapes: Vec<_> = outputs.iter().map(|t| t.dims.clone()).collect();
        println!("{} (output shapes {shapes:?})", if prefix.is_empty() { "example" } else { prefix });
        for parity in &report {
@@RANDOM_PRINT@@
            println!("  {parity}");
        }
        assert!(!report.is_empty(), "the model has no outputs to check");
@@RANDOM_DROP@@
        failed.extend(report.iter().filter(|p| !p.ok()).map(|p| format!("{prefix}{p}")));
    }
    assert!(failed.is_empty(), "parity failed:\n{}", failed.join("\n"));
}

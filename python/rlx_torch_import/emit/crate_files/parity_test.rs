//! The crate checks itself: the reference inputs recorded at conversion time
//! must give PyTorch's outputs within the verifier's budgets.
//! Needs the weights: `$RLX_WEIGHTS`, else `../bundle/weights.safetensors`.

use @@LIB@@::{Model, check_reference, default_reference, default_weights};

#[test]
fn matches_pytorch_on_the_reference_inputs() {
    let weights = default_weights();
    let mut model = Model::load(&weights).unwrap_or_else(|e| panic!("loading {}: {e}", weights.display()));
    let (_, report) = check_reference(&mut model, &default_reference()).expect("reference run");
    for parity in &report {
        println!("{parity}");
    }
    assert!(!report.is_empty(), "the model has no outputs to check");
    let failed: Vec<String> = report.iter().filter(|p| !p.ok()).map(ToString::to_string).collect();
    assert!(failed.is_empty(), "parity failed:\n{}", failed.join("\n"));
}

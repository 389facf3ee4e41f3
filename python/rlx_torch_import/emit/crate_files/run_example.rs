//! Run the model on the reference inputs recorded at conversion time and
//! compare each output with PyTorch's.
//!
//!     cargo run --release --example run -- [WEIGHTS] [--reference FILE] [--save FILE]
//!
//! WEIGHTS defaults to `$RLX_WEIGHTS`, else `../bundle/weights.safetensors`.
//! `--save` writes the outputs to a safetensors file (`output.<name>` keys).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use @@LIB@@::{Model, OUTPUTS, check_reference, default_reference, default_weights, weights};

fn main() -> ExitCode {
    let mut weights_path = None;
    let mut reference = default_reference();
    let mut save = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--reference" => reference = args.next().map(PathBuf::from).unwrap_or(reference),
            "--save" => save = args.next().map(PathBuf::from),
            _ => weights_path = Some(PathBuf::from(arg)),
        }
    }
    let weights_path = weights_path.unwrap_or_else(default_weights);
    match run(&weights_path, &reference, save) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(weights_path: &std::path::Path, reference: &std::path::Path, save: Option<PathBuf>) -> Result<bool, String> {
    let mut model = Model::load(weights_path)?;
    let (outputs, report) = check_reference(&mut model, reference)?;
    for parity in &report {
        println!("{parity}");
    }
    if let Some(path) = save {
        let named: BTreeMap<_, _> = OUTPUTS
            .iter()
            .zip(outputs)
            .map(|(spec, t)| (format!("output.{}", spec.name), t))
            .collect();
        weights::write(&path, &named)?;
        println!("outputs written to {}", path.display());
    }
    Ok(report.iter().all(|p| p.ok()))
}

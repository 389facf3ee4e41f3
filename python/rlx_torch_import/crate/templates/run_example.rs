//! Run the model on the reference inputs recorded at conversion time and
//! compare each output with PyTorch's.
//!
//!     cargo run --release --example run -- [WEIGHTS] [--reference FILE] [--save FILE] [--device cpu|cuda]
//!
//! WEIGHTS defaults to `$RLX_WEIGHTS`, else `../bundle/weights.safetensors`. `--device cuda`
//! needs the crate built with `--features cuda` (default: `$RLX_TORCH_IMPORT_DEVICE`, else cpu).
//! `--save` writes the outputs to a safetensors file (`output.<name>` keys).
//!
//! Exit codes, as rlx-torch-import's: 0 every output passed, 1 parity failed, 2 bad arguments or
//! files, 7 the device is not in this build or on this machine, or cannot run the model.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use rlx_runtime::Device;

use @@LIB@@::{Model, OUTPUTS, check_device, check_reference, default_device, default_reference, default_weights, weights};
@@RANDOM_CONST@@

fn main() -> ExitCode {
    let mut weights_path = None;
    let mut reference = default_reference();
    let mut save = None;
    let mut device = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--reference" => reference = args.next().map(PathBuf::from).unwrap_or(reference),
            "--save" => save = args.next().map(PathBuf::from),
            "--device" => device = Some(args.next().unwrap_or_default()),
            _ => weights_path = Some(PathBuf::from(arg)),
        }
    }
    let weights_path = weights_path.unwrap_or_else(default_weights);
    let device = match device.as_deref() {
        None => default_device(),
        Some("cpu") => Ok(Device::Cpu),
        Some("cuda") => Ok(Device::Cuda),
        Some(other) => Err(format!("--device {other:?}: the devices are cpu and cuda")),
    };
    let device = match device {
        Ok(device) => device,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = check_device(device) {
        eprintln!("error: {e}");
        return ExitCode::from(7);
    }
    println!("device: {device:?}");
    match run(&weights_path, &reference, save, device) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(
    weights_path: &std::path::Path,
    reference: &std::path::Path,
    save: Option<PathBuf>,
    device: Device,
) -> Result<bool, String> {
    let mut model = Model::load_on(weights_path, device)?;
    let (outputs, report) = check_reference(&mut model, reference)?;
    for parity in &report {
@@RANDOM_PRINT@@
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
@@RANDOM_DROP@@
    Ok(report.iter().all(|p| p.ok()))
}

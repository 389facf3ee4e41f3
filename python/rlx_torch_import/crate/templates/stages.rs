//! Size stages: sizes that depend on tensor values (nonzero's row count, a mask's count of true
//! values, `.item()` used as a length, ...). Each stage is a small graph run on the inputs before
//! the main graph; the sizes it computes are checked against their ranges and bind the main
//! graph's symbols with the input dims, as rlx-torch-import's `BundleModel.run` does.

use rlx_ir::DType;
use rlx_runtime::{CompiledGraph, Device, Session};

use crate::host::{HostTensor, ParamSpec, to_carrier};
use crate::{INPUTS, NAME, SYMBOLS, compile_options, graph, host};

/// One size stage: its graph, the weights it reads and the sizes it computes (in output order).
pub struct Stage {
    /// The file the graph was written from (`src/stage<k>.*`).
    pub file: &'static str,
    /// RLX HIR JSON (static inputs), or `.rlxmodel` text specialized per binding of the input dims.
    pub text: &'static str,
    pub symbolic: bool,
    pub params: &'static [&'static str],
    pub sizes: &'static [StageSize],
}

/// A size a stage computes: the symbol it binds, its PyTorch name and the node it is the size of.
pub struct StageSize {
    pub symbol: u32,
    pub name: &'static str,
    pub node: &'static str,
}

/// The size stages, run in order.
pub const STAGES: &[Stage] = &[
@@STAGES@@
];

/// Compiled stages kept (the least recently used is dropped first), as the main graph's bindings.
pub const STAGE_CACHE: usize = 4;

/// One size stage compiled at a binding of the input dims and earlier stages' sizes (empty for a
/// HIR stage).
struct CompiledStage {
    stage: usize,
    binding: Vec<(u32, usize)>,
    graph: CompiledGraph,
}

/// The compiled size stages, most recently used last.
#[derive(Default)]
pub struct Stages {
    compiled: Vec<CompiledStage>,
}

/// A size read from a stage's int64 scalar output (or the dtype RLX carried it in).
fn scalar(data: &[u8], dtype: DType, what: &str) -> Result<i64, String> {
    let bytes = |n: usize| -> Result<&[u8], String> {
        data.get(..n).ok_or_else(|| format!("{what}: RLX returned {} byte(s) for a {dtype:?} scalar", data.len()))
    };
    Ok(match dtype {
        DType::I64 => i64::from_le_bytes(bytes(8)?.try_into().expect("8 bytes")),
        DType::I32 => i32::from_le_bytes(bytes(4)?.try_into().expect("4 bytes")) as i64,
        DType::F32 => f32::from_le_bytes(bytes(4)?.try_into().expect("4 bytes")).round() as i64,
        DType::F64 => f64::from_le_bytes(bytes(8)?.try_into().expect("8 bytes")).round() as i64,
        other => return Err(format!("{what}: RLX returned the size as {other:?}, not an integer")),
    })
}

impl Stages {
    /// Stage `k` compiled at `binding` (the input dims' and earlier stages' sizes; on first use), its
    /// weights bound.
    fn compiled(
        &mut self,
        k: usize,
        binding: &[(u32, usize)],
        device: Device,
        weights: &[(ParamSpec, HostTensor)],
    ) -> Result<&mut CompiledGraph, String> {
        let stage = &STAGES[k];
        let key = if stage.symbolic { binding.to_vec() } else { Vec::new() };
        if let Some(i) = self.compiled.iter().position(|c| c.stage == k && c.binding == key) {
            let entry = self.compiled.remove(i);
            self.compiled.push(entry);
        } else {
            let options = compile_options();
            let mut compiled = if stage.symbolic {
                let symbolic = rlx_ir::rlxmodel::from_text(stage.text).map_err(|e| format!("{NAME} {}: {e}", stage.file))?;
                let built = graph::build(&symbolic, binding)?;
                let built = rlx_runtime::precompile::precompile_cleanup(built, &options);
                Session::new(device).compile_with(built, &options)
            } else {
                let hir = rlx_ir::serialize::hir_from_json(stage.text)
                    .map_err(|e| format!("{NAME} {}: not valid RLX HIR: {e}", stage.file))?;
                Session::new(device)
                    .compile_hir_with(hir, &options)
                    .map_err(|e| format!("RLX could not compile size stage {}: {e:?}", stage.file))?
            };
            for (spec, t) in weights.iter().filter(|(spec, _)| stage.params.contains(&spec.name)) {
                compiled.set_param_typed(spec.name, &t.data, host::rlx_dtype(&t.dtype).expect("checked on load"));
            }
            if self.compiled.len() >= STAGE_CACHE {
                self.compiled.remove(0);
            }
            self.compiled.push(CompiledStage { stage: k, binding: key, graph: compiled });
        }
        Ok(&mut self.compiled.last_mut().expect("just pushed").graph)
    }

    /// `binding` (the input dims') extended with every size the stages compute from `inputs`, stage
    /// by stage.
    /// An error names the size, the node it is the size of and its value when that value is
    /// outside the symbol's range (the range torch.export gave it at conversion).
    pub fn bind(
        &mut self,
        mut binding: Vec<(u32, usize)>,
        inputs: &[HostTensor],
        device: Device,
        weights: &[(ParamSpec, HostTensor)],
    ) -> Result<Vec<(u32, usize)>, String> {
        for (k, stage) in STAGES.iter().enumerate() {
            // a later stage is compiled at the sizes earlier ones computed too (a chain of stages)
            let at = binding.clone();
            let graph = self.compiled(k, &at, device, weights)?;
            let carried: Vec<Vec<u8>> = INPUTS.iter().zip(inputs).map(|(spec, t)| to_carrier(t, spec.carrier)).collect();
            // A symbolic stage is compiled from a graph as the main one: RLX drops an input nothing
            // reads (and panics if it is fed), so feed the rest. A HIR stage takes every input, as
            // a static model does.
            let read: Vec<String> = graph.inputs().into_iter().map(|i| i.name).collect();
            let feed: Vec<(&str, &[u8], DType)> = INPUTS
                .iter()
                .zip(&carried)
                .filter(|(spec, _)| !stage.symbolic || read.iter().any(|r| r == spec.name))
                .map(|(spec, bytes)| (spec.name, bytes.as_slice(), spec.carrier))
                .collect();
            let raw = graph.run_typed(&feed);
            if raw.len() != stage.sizes.len() {
                return Err(format!("size stage {} gave {} output(s), not {}", stage.file, raw.len(), stage.sizes.len()));
            }
            for (size, (data, dtype)) in stage.sizes.iter().zip(raw) {
                let value = scalar(&data, dtype, stage.file)?;
                let symbol = SYMBOLS.iter().find(|s| s.id == size.symbol).expect("declared symbol");
                if value < symbol.min as i64 || symbol.max.is_some_and(|max| value > max as i64) {
                    return Err(format!(
                        "size {} ({}, the size of node {}) is {value} on these inputs, outside the range {}..{} \
                         the crate was converted for",
                        size.name,
                        symbol.name,
                        size.node,
                        symbol.min,
                        symbol.max.map_or("inf".to_string(), |m| m.to_string())
                    ));
                }
                binding.push((size.symbol, value as usize));
            }
        }
        Ok(binding)
    }
}

/// Run `compile` (the main graph compiled at `binding`), turning a panic inside RLX into an error
/// that names each size a stage computed as 0 (RLX's CPU kernels cannot compile every op over an
/// empty dim), as rlx-torch-import's bundle says it.
pub fn guarded(binding: &[(u32, usize)], compile: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let payload = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(compile)) {
        Ok(result) => return result,
        Err(payload) => payload,
    };
    let why = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic".to_string(),
    };
    let empty: Vec<String> = STAGES
        .iter()
        .flat_map(|stage| stage.sizes)
        .filter(|size| binding.iter().any(|&(id, n)| id == size.symbol && n == 0))
        .map(|size| format!("{} (the size of node {})", size.name, size.node))
        .collect();
    let because = if empty.is_empty() {
        String::new()
    } else {
        format!(
            " ({} is 0 on these inputs; RLX's CPU kernels cannot compile every op over an empty dim)",
            empty.join(", ")
        )
    };
    Err(format!("RLX could not compile {NAME} at {binding:?}{because}: RLX panicked: {why}"))
}

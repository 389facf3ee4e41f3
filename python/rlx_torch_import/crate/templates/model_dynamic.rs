/// The dims of a shape of a specialized (fully static) graph.
fn static_dims(shape: &rlx_ir::Shape) -> Vec<usize> {
    shape.dims().iter().map(|d| d.unwrap_static()).collect()
}

/// Compiled bindings a [`Model`] keeps (the least recently used is dropped first).
/// Each holds its own copy of the weights.
pub const BINDING_CACHE: usize = 4;

/// The model: its symbolic graph, its weights, and a small cache of the graph
/// compiled for RLX's CPU backend at the bindings run recently.
pub struct Model {
    /// The RLX device each binding is compiled for.
    device: Device,
    symbolic: Graph,
    weights: Vec<(ParamSpec, HostTensor)>,
    /// Compiled bindings, most recently used last.
    compiled: Vec<Compiled>,
@@STAGE_FIELD@@
}

/// The graph compiled at one binding, with its inputs' and outputs' dims there.
struct Compiled {
    binding: Vec<(u32, usize)>,
    graph: CompiledGraph,
    inputs: Vec<Vec<usize>>,
    outputs: Vec<Vec<usize>>,
}

/// Refuse inputs whose shapes are not `want`, the graph's at `binding`.
fn check_shapes(binding: &[(u32, usize)], want: &[Vec<usize>], inputs: &[HostTensor]) -> Result<(), String> {
    for ((spec, t), want) in INPUTS.iter().zip(inputs).zip(want) {
        if t.dims != *want {
            return Err(format!("input {:?} must have shape {want:?} at {binding:?}, got {:?}", spec.name, t.dims));
        }
    }
    Ok(())
}

impl Model {
    /// [`Model::load_on`] the device [`default_device`] names (the CPU unless
    /// `$RLX_TORCH_IMPORT_DEVICE` says `cuda`).
    pub fn load(weights: impl AsRef<Path>) -> Result<Self, String> {
        Self::load_on(weights, default_device()?)
    }

    /// Read the symbolic graph and the `state_dict`-named weights from the safetensors file
    /// at `weights`; a binding is compiled for `device` when first run. An error says when the
    /// device is not in this build or not on this machine.
    pub fn load_on(weights: impl AsRef<Path>, device: Device) -> Result<Self, String> {
        configure_cpu()?;
        check_device(device)?;
        Ok(Self {
            device,
            symbolic: graph::symbolic()?,
            weights: weights::load(weights.as_ref(), PARAMS)?,
            compiled: Vec::new(),
@@STAGE_INIT@@
        })
    }

    /// The binding (symbol number, size) that `inputs` give, checked against each
    /// symbol's range and across inputs that share a symbol.
    pub fn binding(&self, inputs: &[HostTensor]) -> Result<Vec<(u32, usize)>, String> {
        let mut found: Vec<(u32, usize, String)> = Vec::new();
        for &(input, axis, sym, scale, offset) in SYMBOL_AXES {
            let spec = &INPUTS[input];
            let dim = *inputs[input]
                .dims
                .get(axis)
                .ok_or_else(|| format!("input {:?} has no axis {axis}", spec.name))?;
            let symbol = SYMBOLS.iter().find(|s| s.id == sym).expect("declared symbol");
            let here = format!("input {:?} axis {axis}", spec.name);
            let rest = dim as i64 - offset;
            if rest < 0 || rest % scale != 0 {
                return Err(format!(
                    "{here} has size {dim}, which is no value of {scale}*{} + {offset}",
                    symbol.name
                ));
            }
            let size = (rest / scale) as usize;
            if size < symbol.min || symbol.max.is_some_and(|max| size > max) {
                return Err(format!(
                    "{here} has size {size} for symbol {}, outside its declared range {}..{}",
                    symbol.name,
                    symbol.min,
                    symbol.max.map_or("inf".to_string(), |m| m.to_string())
                ));
            }
            match found.iter().find(|(s, _, _)| *s == sym) {
                Some((_, other, at)) if *other != size => {
                    return Err(format!(
                        "{here} gives symbol {} size {size}, but {at} gives it {other}: inputs \
                         that share a dynamic dim must agree",
                        symbol.name
                    ));
                }
                Some(_) => {}
                None => found.push((sym, size, here)),
            }
        }
        Ok(found.into_iter().map(|(s, n, _)| (s, n)).collect())
    }

    /// The graph compiled at `binding`: built, checked against `inputs` and compiled on
    /// first use, then cached (the least recently used dropped past [`BINDING_CACHE`]).
    fn compiled_at(&mut self, binding: Vec<(u32, usize)>, inputs: &[HostTensor]) -> Result<&mut Compiled, String> {
        if let Some(i) = self.compiled.iter().position(|c| c.binding == binding) {
            check_shapes(&binding, &self.compiled[i].inputs, inputs)?;
            let entry = self.compiled.remove(i);
            self.compiled.push(entry);
        } else {
            let graph = graph::build(&self.symbolic, &binding)?;
            let ids = INPUTS
                .iter()
                .map(|spec| graph.input_id(spec.name).ok_or_else(|| format!("the graph has no input {:?}", spec.name)))
                .collect::<Result<Vec<_>, _>>()?;
            let dims_in: Vec<Vec<usize>> = ids.iter().map(|id| static_dims(graph.shape(*id))).collect();
            check_shapes(&binding, &dims_in, inputs)?;
            let dims_out = graph.outputs.iter().map(|id| static_dims(graph.shape(*id))).collect();
            let options = compile_options();
            let graph = rlx_runtime::precompile::precompile_cleanup(graph, &options);
            let mut entry = Compiled {
                binding,
                graph: Session::new(self.device).compile_with(graph, &options),
                inputs: dims_in,
                outputs: dims_out,
            };
            for (spec, t) in &self.weights {
                entry.graph.set_param_typed(spec.name, &t.data, host::rlx_dtype(&t.dtype).expect("checked on load"));
            }
            if self.compiled.len() >= BINDING_CACHE {
                self.compiled.remove(0);
            }
            self.compiled.push(entry);
        }
        Ok(self.compiled.last_mut().expect("just pushed"))
    }

    /// Run once: `inputs` follow [`INPUTS`] (any sizes in the dynamic dims'
    /// ranges), the outputs follow [`OUTPUTS`]. An input holding an index outside its
    /// [`INDEX_RANGES`] row is refused (PyTorch raises IndexError for it).
    pub fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
        if inputs.len() != INPUTS.len() {
            return Err(format!("{NAME} takes {} input(s), got {}", INPUTS.len(), inputs.len()));
        }
        for (spec, t) in INPUTS.iter().zip(inputs) {
            if t.dtype != spec.dtype || t.dims.len() != spec.dims.len() {
                return Err(format!(
                    "input {:?} must be {} of rank {}, got {}{:?}",
                    spec.name,
                    spec.dtype,
                    spec.dims.len(),
                    t.dtype,
                    t.dims
                ));
            }
        }
        check_index_ranges(INDEX_RANGES, INPUTS, inputs)?;
        let binding = self.binding(inputs)?;
@@STAGE_BIND@@
        let compiled = self.compiled_at(binding, inputs)?;
        let carried: Vec<Vec<u8>> = INPUTS.iter().zip(inputs).map(|(spec, t)| to_carrier(t, spec.carrier)).collect();
        let feed: Vec<(&str, &[u8], DType)> = INPUTS
            .iter()
            .zip(&carried)
            .map(|(spec, bytes)| (spec.name, bytes.as_slice(), spec.carrier))
            .collect();
        // RLX drops an input nothing reads when it compiles (and panics if it is fed): feed the rest.
        let read: Vec<String> = compiled.graph.inputs().into_iter().map(|i| i.name).collect();
        let feed: Vec<(&str, &[u8], DType)> = feed.into_iter().filter(|(name, _, _)| read.iter().any(|r| r == name)).collect();
        let raw = compiled.graph.run_typed(&feed);
        Ok(OUTPUTS
            .iter()
            .zip(raw)
            .zip(compiled.outputs.clone())
            .map(|((spec, (data, _)), dims)| {
                let t = HostTensor { dtype: spec.dtype.to_string(), dims, data: from_carrier(data, spec.carrier, spec.dtype) };
                host::unpad(spec, t)
            })
            .collect())
    }
}


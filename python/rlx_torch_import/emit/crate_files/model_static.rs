/// The model compiled for RLX's CPU backend, with its weights bound.
pub struct Model {
    graph: CompiledGraph,
}

impl Model {
    /// Build the graph, compile it, and bind the `state_dict`-named weights
    /// read from the safetensors file at `weights`.
    pub fn load(weights: impl AsRef<Path>) -> Result<Self, String> {
        configure_threads();
        let tensors = weights::load(weights.as_ref(), PARAMS)?;
@@LOAD@@
    }

    /// Run once: `inputs` follow [`INPUTS`], the outputs follow [`OUTPUTS`].
    pub fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
        if inputs.len() != INPUTS.len() {
            return Err(format!("{NAME} takes {} input(s), got {}", INPUTS.len(), inputs.len()));
        }
        let mut carried = Vec::with_capacity(inputs.len());
        for (spec, t) in INPUTS.iter().zip(inputs) {
            if t.dtype != spec.dtype || t.dims != spec.dims {
                return Err(format!(
                    "input {:?} must be {}{:?}, got {}{:?}",
                    spec.name, spec.dtype, spec.dims, t.dtype, t.dims
                ));
            }
            carried.push(to_carrier(t, spec.carrier));
        }
        let feed: Vec<(&str, &[u8], DType)> = INPUTS
            .iter()
            .zip(&carried)
            .map(|(spec, bytes)| (spec.name, bytes.as_slice(), spec.carrier))
            .collect();
        let raw = self.graph.run_typed(&feed);
        Ok(OUTPUTS
            .iter()
            .zip(raw)
            .map(|(spec, (data, _))| HostTensor {
                dtype: spec.dtype.to_string(),
                dims: spec.dims.to_vec(),
                data: from_carrier(data, spec.carrier, spec.dtype),
            })
            .collect())
    }
}


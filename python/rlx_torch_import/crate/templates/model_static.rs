/// The model compiled for an RLX device (the CPU, or CUDA with the `cuda` feature), with its
/// weights bound.
pub struct Model {
    graph: CompiledGraph,
}

impl Model {
    /// [`Model::load_on`] the device [`default_device`] names (the CPU unless
    /// `$RLX_TORCH_IMPORT_DEVICE` says `cuda`).
    pub fn load(weights: impl AsRef<Path>) -> Result<Self, String> {
        Self::load_on(weights, default_device()?)
    }

    /// Build the graph, compile it for `device` (`Device::Cpu`, or `Device::Cuda` with the
    /// `cuda` feature), and bind the `state_dict`-named weights read from the safetensors file
    /// at `weights`. An error says when the device is not in this build or not on this machine.
    pub fn load_on(weights: impl AsRef<Path>, device: Device) -> Result<Self, String> {
        configure_cpu()?;
        check_device(device)?;
        let tensors = weights::load(weights.as_ref(), PARAMS)?;
@@LOAD@@
    }

    /// Run once: `inputs` follow [`INPUTS`], the outputs follow [`OUTPUTS`]. An input holding an
    /// index outside its [`INDEX_RANGES`] row is refused (PyTorch raises IndexError for it).
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
        check_index_ranges(INDEX_RANGES, INPUTS, inputs)?;
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


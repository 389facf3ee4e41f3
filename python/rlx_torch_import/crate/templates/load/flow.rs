        let mut f32_weights = MapWeights::default();
        let mut typed = Vec::new();
        for (spec, t) in tensors {
            if spec.dtype == DType::F32 {
                let values = t.to_f64().into_iter().map(|v| v as f32).collect();
                f32_weights.insert(spec.name, values, t.dims.clone());
            } else {
                typed.push((spec, t));
            }
        }
        let built = flow::build(&mut f32_weights).map_err(|e| format!("building the flow of {NAME}: {e}"))?;
        let (hir, params) = built.into_parts().map_err(|e| format!("{NAME}: {e}"))?;
        let mut graph = Session::new(device)
            .compile_hir_with(hir, &compile_options())
            .map_err(|e| format!("RLX could not compile {NAME}: {e:?}"))?;
        for (name, data) in &params {
            graph.set_param(name, data);
        }
        for (spec, t) in &typed {
            graph.set_param_typed(spec.name, &t.data, host::rlx_dtype(&t.dtype).expect("checked on load"));
        }
        Ok(Self { graph })

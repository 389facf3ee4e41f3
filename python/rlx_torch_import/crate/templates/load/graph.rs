        let mut graph = Session::new(device)
            .compile_hir_with(graph::build(), &compile_options())
            .map_err(|e| format!("RLX could not compile {NAME}: {e:?}"))?;
        for (spec, t) in &tensors {
            graph.set_param_typed(spec.name, &t.data, host::rlx_dtype(&t.dtype).expect("checked on load"));
        }
        Ok(Self { graph })

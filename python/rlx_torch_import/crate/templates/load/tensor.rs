        let mut graph = Session::new(device).compile_with(graph::build(), &compile_options());
        for (spec, t) in &tensors {
            graph.set_param_typed(spec.name, &t.data, host::rlx_dtype(&t.dtype).expect("checked on load"));
        }
        Ok(Self { graph })

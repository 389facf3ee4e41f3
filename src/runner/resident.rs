//! The decode-era resident cache: f32 inputs RLX keeps in its arena between runs (a KV cache),
//! which [`Runner::run`] may then leave out, and the rows of an output copied into them after a
//! run ([`Runner::bind_resident`], [`Runner::feed_rows`]). The run path only skips a resident
//! input it is not given and unbinds one it is given again; [`Runner::run_count`] tells a caller
//! keeping resident inputs whether another run came in between.

use rlx_ir::DType;

use super::{Runner, f32_values};
use crate::error::CoreError;

impl Runner {
    /// Keep f32 input `name` in RLX's arena between runs, holding `data` (RLX's resident
    /// handle, `CompiledGraph::bind_gpu_handle`: on the CPU the input's arena slot is written
    /// once and left out of the per-run clearing); later runs may leave the input out, and
    /// [`Runner::feed_rows`] copies rows of output `feed_from` into it. Giving the input to
    /// `run` again unbinds it (RLX writes it per run from then on).
    pub fn bind_resident(
        &mut self,
        name: &str,
        data: &[u8],
        feed_from: usize,
    ) -> Result<(), CoreError> {
        let decl = self.input(name)?;
        if decl.dtype != DType::F32 || data.len() != decl.bytes {
            return Err(CoreError::Check(format!(
                "a resident input takes its declared f32 bytes; {name:?} is declared {}, got {} bytes",
                decl.describe(),
                data.len()
            )));
        }
        if self.output_dtypes.get(feed_from) != Some(&DType::F32) {
            return Err(CoreError::Check(format!(
                "resident input {name:?} is fed from output {feed_from}, which is not an f32 output \
                 (the graph has {} outputs)",
                self.output_dtypes.len()
            )));
        }
        let values = f32_values(data, DType::F32).unwrap_or_default();
        let bound = self.call("binding a resident input", |g| {
            g.bind_gpu_handle(name, &values) && g.register_kv_row_feed(name, feed_from)
        })?;
        if !bound {
            return Err(CoreError::Check(format!(
                "RLX keeps no resident inputs on {:?}; pass {name:?} to every run",
                self.device
            )));
        }
        self.resident.insert(name.to_string(), feed_from);
        Ok(())
    }

    /// How many runs were started on this graph (see the `runs` field).
    pub fn run_count(&self) -> u64 {
        self.runs
    }

    /// After a run, copy rows of each resident input's output into the input: for each
    /// `(src, dst)` in `moves`, output row `src` to input row `dst`, a row being `row_elems`
    /// consecutive elements (RLX's `CompiledGraph::feed_kv_row`). A row past either end is
    /// refused; nothing is copied then.
    pub fn feed_rows(
        &mut self,
        moves: &[(usize, usize)],
        row_elems: usize,
    ) -> Result<(), CoreError> {
        for (name, &out) in &self.resident {
            let out_elems: usize = self.output_dims[out].iter().product();
            let in_elems = self.input(name)?.bytes / 4;
            for &(src, dst) in moves {
                let past = |row: usize, elems: usize| {
                    (row + 1).checked_mul(row_elems).is_none_or(|e| e > elems)
                };
                if row_elems == 0 || past(src, out_elems) || past(dst, in_elems) {
                    return Err(CoreError::Check(format!(
                        "row move {src} -> {dst} of {row_elems} elements is past output {out} \
                         ({out_elems} elements) or resident input {name:?} ({in_elems} elements)"
                    )));
                }
            }
        }
        self.call("copying rows into resident inputs", |g| {
            for &(src, dst) in moves {
                g.feed_kv_row(src, dst, row_elems);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_runtime::Device;

    use crate::test_support::{check_message, f32_bytes, f32_from};

    /// `next = cache + x`, each F32 [2, 2], plus `extra` outputs.
    fn cache_plus_x(extra_nodes: &str, extra_outputs: &str) -> Runner {
        let program = format!(
            r#"{{
            "name": "t",
            "inputs": [{{"name": "cache", "shape": {{"dims": [{{"Static": 2}}, {{"Static": 2}}], "dtype": "F32"}}}},
                       {{"name": "x", "shape": {{"dims": [{{"Static": 2}}, {{"Static": 2}}], "dtype": "F32"}}}}],
            "params": [],
            "nodes": [
                {{"id": "next", "op": {{"Binary": "Add"}}, "inputs": ["cache", "x"],
                 "shape": {{"dims": [{{"Static": 2}}, {{"Static": 2}}], "dtype": "F32"}}}}{extra_nodes}
            ],
            "outputs": ["next"{extra_outputs}]
        }}"#
        );
        let json = crate::program::program_to_hir_json(&program).unwrap();
        Runner::from_hir_json(&json, Device::Cpu).unwrap()
    }

    #[test]
    fn a_resident_input_is_kept_fed_and_unbound() {
        let mut r = cache_plus_x("", "");
        r.bind_resident("cache", &f32_bytes(&[1.0, 2.0, 3.0, 4.0]), 0)
            .unwrap();
        let x = f32_bytes(&[10.0, 20.0, 30.0, 40.0]);
        let out = r.run(&[("x", &x, DType::F32)]).unwrap();
        assert_eq!(f32_from(out[0].0.as_bytes()), vec![11.0, 22.0, 33.0, 44.0]);
        assert_eq!(r.run_count(), 1);
        // Output row 0 ([11, 22]) into cache row 1: the cache is now [1, 2, 11, 22].
        r.feed_rows(&[(0, 1)], 2).unwrap();
        let zeros = f32_bytes(&[0.0; 4]);
        let out = r.run(&[("x", &zeros, DType::F32)]).unwrap();
        assert_eq!(f32_from(out[0].0.as_bytes()), vec![1.0, 2.0, 11.0, 22.0]);
        assert_eq!(
            check_message(r.feed_rows(&[(2, 0)], 2)),
            "row move 2 -> 0 of 2 elements is past output 0 (4 elements) or resident input \
             \"cache\" (4 elements)"
        );
        assert!(check_message(r.feed_rows(&[(0, 0)], 0)).starts_with("row move 0 -> 0 of 0"));
        // Given again, the input is written per run from then on: leaving it out is refused.
        let cache = f32_bytes(&[5.0; 4]);
        let out = r
            .run(&[("cache", &cache, DType::F32), ("x", &zeros, DType::F32)])
            .unwrap();
        assert_eq!(f32_from(out[0].0.as_bytes()), vec![5.0; 4]);
        assert_eq!(
            check_message(r.run(&[("x", &zeros, DType::F32)])),
            "missing input(s) \"cache\"; the graph takes \"cache\", \"x\""
        );
        assert_eq!(r.run_count(), 4);
    }

    #[test]
    fn a_resident_input_is_checked_against_its_declaration_and_feed() {
        let ids = r#",
            {"id": "ids", "op": {"Cast": {"to": "I64"}}, "inputs": ["x"],
             "shape": {"dims": [{"Static": 2}, {"Static": 2}], "dtype": "I64"}}"#;
        let mut r = cache_plus_x(ids, r#", "ids""#);
        let four = f32_bytes(&[0.0; 4]);
        assert_eq!(
            check_message(r.bind_resident("kv", &four, 0)),
            "unknown input \"kv\"; the graph's inputs are \"cache\", \"x\""
        );
        assert_eq!(
            check_message(r.bind_resident("cache", &four[..12], 0)),
            "a resident input takes its declared f32 bytes; \"cache\" is declared F32 [2, 2] \
             (4 elements, 16 bytes), got 12 bytes"
        );
        for feed_from in [1, 2] {
            assert_eq!(
                check_message(r.bind_resident("cache", &four, feed_from)),
                format!(
                    "resident input \"cache\" is fed from output {feed_from}, which is not an f32 \
                     output (the graph has 2 outputs)"
                )
            );
        }
        assert_eq!(
            check_message(r.run(&[("x", &four, DType::F32)])),
            "missing input(s) \"cache\"; the graph takes \"cache\", \"x\"",
            "a refused binding leaves the input unbound"
        );
    }
}

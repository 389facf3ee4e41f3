//! Symbolic graphs: one RLX graph for every size of the dynamic dims.
//!
//! The lowering works at concrete sizes, so the importer lowers a program at a few
//! *probe* bindings and hands the HIR of each here. [`generalize`] lowers each to MIR
//! and lets RLX's own `rlx_ir::dynamic::generalize_many` find which dims and shape
//! attributes are which symbol (or a derived one: `seq*16`, `(h+1)/2`), checks the
//! result against every probe, and writes it as RLX's `.rlxmodel` text, the format
//! that keeps derived symbols and symbolic attributes (the HIR JSON does not).
//! [`specialize`] makes the static graph for one binding (`rlx_ir::dynamic::specialize`),
//! which [`crate::runner::Runner::from_graph`] compiles like any other (docs/design.md, z).

use rlx_ir::dynamic::{generalize_many, specialize as rlx_specialize};
use rlx_ir::{DimBinding, Graph};

use crate::error::{CoreError, catch};
use crate::{graph_check, memory};

/// Largest constant offset a derived dim may have (`seq + 1`, a padded conv's `h + 6`).
/// Four probes pin each fit, and the result is checked against all of them.
const MAX_OFFSET: i64 = 1 << 16;

/// rlx-ir HIR JSON → its MIR graph, shapes re-inferred (as RLX's `lower_hir` does).
pub fn mir_of_hir_json(text: &str) -> Result<Graph, CoreError> {
    let hir = rlx_ir::serialize::hir_from_json(text)
        .map_err(|e| CoreError::Check(format!("not valid RLX HIR JSON: {e}")))?;
    graph_check::check_hir(&hir, memory::machine_memory())?;
    let mut mir = catch("lowering HIR to MIR", || hir.lower_to_mir())?
        .map_err(|e| CoreError::Rlx(format!("RLX could not lower the HIR: {e:?}")))?;
    catch("inferring shapes", || {
        rlx_ir::dynamic::sync_graph_shapes(mir.as_graph_mut())
    })?;
    Ok(mir.into_graph())
}

/// The binding of probe `k`: each symbol with its size there.
fn binding_at(sizes: &[(u32, Vec<usize>)], k: usize) -> DimBinding {
    sizes.iter().map(|(s, v)| (*s, v[k])).collect()
}

/// Where two static graphs differ (None: same ops, wiring and shapes).
fn first_difference(got: &Graph, want: &Graph) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} nodes vs {}", got.len(), want.len()));
    }
    for (a, b) in got.nodes().iter().zip(want.nodes()) {
        if a.op != b.op || a.inputs != b.inputs || a.shape != b.shape {
            return Some(format!(
                "node {} ({}): {} {} vs {} {}",
                a.id, b.op, a.op, a.shape, b.op, b.shape
            ));
        }
    }
    (got.outputs != want.outputs).then(|| "different outputs".to_string())
}

/// The sizes of `sizes` at the lowerings `at` (indices).
fn sizes_at(sizes: &[(u32, Vec<usize>)], at: &[usize]) -> Vec<(u32, Vec<usize>)> {
    sizes
        .iter()
        .map(|(s, v)| (*s, at.iter().map(|&k| v[k]).collect()))
        .collect()
}

/// RLX's `generalize_many` over the lowerings `at`, checked: specialized at each of
/// them, the result must be that lowering node for node.
fn generalize_checked(
    graphs: &[Graph],
    sizes: &[(u32, Vec<usize>)],
    at: &[usize],
) -> Result<Graph, CoreError> {
    let refs: Vec<&Graph> = at.iter().map(|&k| &graphs[k]).collect();
    let picked = sizes_at(sizes, at);
    let general = catch("generalizing the lowerings", || {
        generalize_many(&refs, &picked, Some(MAX_OFFSET))
    })?
    .map_err(CoreError::Rlx)?;
    for &k in at {
        if let Some(diff) = reproduces(&general, &graphs[k], sizes, k)? {
            return Err(CoreError::Rlx(format!(
                "the symbolic graph does not reproduce the lowering at {:?}: {diff}",
                binding_at(sizes, k)
            )));
        }
    }
    Ok(general)
}

/// None when `general` specialized at lowering `k`'s sizes is `graph`; else where it differs.
fn reproduces(
    general: &Graph,
    graph: &Graph,
    sizes: &[(u32, Vec<usize>)],
    k: usize,
) -> Result<Option<String>, CoreError> {
    let binding = binding_at(sizes, k);
    let again = catch("specializing the symbolic graph", || {
        rlx_specialize(general, &binding)
    })?;
    Ok(first_difference(&again, graph))
}

/// `message` with each RLX node it names (`node %84`) followed by that node's label in
/// `graph` (the torch-ir node, ATen overload and module path the lowering gave it).
fn with_labels(message: &str, graph: &Graph) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find("node %") {
        let digits: String = rest[at + 6..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let end = at + 6 + digits.len();
        out.push_str(&rest[..end]);
        if let Some(label) = digits
            .parse::<usize>()
            .ok()
            .and_then(|n| graph.nodes().get(n))
            .and_then(|n| n.name.as_deref())
            .filter(|name| !name.is_empty())
        {
            out.push_str(&format!(" [{label}]"));
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The symbolic graph and the check lowerings it does not reproduce.
pub struct Generalized {
    pub text: String,
    /// Indices (among all lowerings) of checks whose own graph differs from the
    /// symbolic one specialized there: a size that coincides with another dim can
    /// change a lowering's choices (`seq == heads`); verification runs those points.
    pub unreproduced: Vec<usize>,
}

/// One symbolic graph from the HIR of the same program at several bindings.
///
/// `sizes` lists each symbol (its RLX number) with its size in each HIR, in order; the
/// first `probes` lowerings are generalized from, the rest are checks. A check the
/// symbolic graph does not reproduce is added to the lowerings it is generalized from
/// (a fit that four probes could not pin down); if that fails too, the check's own
/// structure differs and it is reported in `unreproduced`. Errors name the node (and
/// its torch-ir label) where the probes are not one symbolic graph: a structure or a
/// constant that depends on a size.
pub fn generalize(
    hir_jsons: &[String],
    sizes: &[(u32, Vec<usize>)],
    names: &[(u32, String)],
    probes: usize,
) -> Result<Generalized, CoreError> {
    let graphs = hir_jsons
        .iter()
        .enumerate()
        .map(|(k, t)| mir_of_hir_json(t).map_err(|e| e.map(|m| format!("lowering {k}: {m}"))))
        .collect::<Result<Vec<_>, _>>()?;
    if graphs.is_empty() {
        return Err(CoreError::Check("no lowerings to generalize".into()));
    }
    if let Some((s, v)) = sizes.iter().find(|(_, v)| v.len() != graphs.len()) {
        return Err(CoreError::Check(format!(
            "symbol {s} has {} sizes for {} lowerings",
            v.len(),
            graphs.len()
        )));
    }
    let mut used: Vec<usize> = (0..probes.min(graphs.len())).collect();
    let mut general = generalize_checked(&graphs, sizes, &used)
        .map_err(|e| e.map(|m| with_labels(&m, &graphs[0])))?;
    let mut unreproduced = Vec::new();
    for k in used.len()..graphs.len() {
        if reproduces(&general, &graphs[k], sizes, k)?.is_none() {
            continue;
        }
        let with: Vec<usize> = used.iter().copied().chain([k]).collect();
        match generalize_checked(&graphs, sizes, &with) {
            Ok(better) => {
                general = better;
                used = with;
            }
            Err(_) => unreproduced.push(k),
        }
    }
    let text = write(&general, names)?;
    let back = read(&text)?;
    if let Some(diff) = reproduces(&back, &graphs[0], sizes, 0)? {
        return Err(CoreError::Rlx(format!(
            "the .rlxmodel text of the symbolic graph does not read back the same: {diff}"
        )));
    }
    Ok(Generalized { text, unreproduced })
}

/// `graph` as `.rlxmodel` text, every symbol named: `names` for the base symbols,
/// `d<n>` for derived ones. (RLX 0.2.19 writes a scaled unnamed symbol in an attribute
/// as `?0*4`, which its own reader refuses; a named one, `seq*4`, reads back.)
fn write(graph: &Graph, names: &[(u32, String)]) -> Result<String, CoreError> {
    let mut dims: Vec<(String, u32)> = names.iter().map(|(s, n)| (n.clone(), *s)).collect();
    let mut symbols = rlx_ir::dynamic::collect_dynamic_symbols(graph);
    symbols.extend(graph.sym_defs().iter().map(|d| d.sym));
    symbols.extend(graph.sym_attrs().iter().map(|a| a.sym));
    for s in symbols {
        if !dims.iter().any(|(_, d)| *d == s) {
            dims.push((format!("d{s}"), s));
        }
    }
    let mut module = rlx_ir::rlxmodel::Module::new(vec![graph.clone()]);
    module.dims = dims;
    rlx_ir::rlxmodel::write_module(&module).map_err(|e| {
        CoreError::Rlx(format!(
            "RLX could not write the symbolic graph as .rlxmodel: {e}"
        ))
    })
}

/// The one graph of a `.rlxmodel` text.
pub fn read(text: &str) -> Result<Graph, CoreError> {
    rlx_ir::rlxmodel::from_text(text)
        .map_err(|e| CoreError::Check(format!("not a valid .rlxmodel graph: {e}")))
}

/// The static graph of `graph` at `binding` (symbol number → size).
pub fn specialize(graph: &Graph, binding: &[(u32, usize)]) -> Result<Graph, CoreError> {
    // Every symbol is a dim of some tensor, which then holds at least that many bytes: a
    // size past the machine's memory cannot run (and products of such sizes could wrap).
    let limit = memory::machine_memory();
    if let Some((s, n)) = binding.iter().find(|(_, n)| *n as u64 > limit.bytes) {
        return Err(CoreError::Check(format!(
            "symbol {s} bound to {n}: a tensor with that dim would be larger than this \
             machine's memory, {}",
            memory::human(limit.bytes)
        )));
    }
    let binding: DimBinding = binding.iter().copied().collect();
    // A symbolic graph RLX cannot specialize (a declared shape its operands contradict, an op
    // missing operands) is a malformed model file: our own graphs are checked to specialize
    // back to each lowering they were made from (`generalize_checked`).
    let g = catch("specializing the symbolic graph", || {
        rlx_specialize(graph, &binding)
    })
    .map_err(|e| CoreError::Check(format!("the symbolic graph is malformed: {}", e.message())))?;
    if let Some(n) = g.nodes().iter().find(|n| !n.shape.is_static()) {
        return Err(CoreError::Check(format!(
            "node {} ({}) keeps a dynamic dim at binding {binding:?}: {}",
            n.id, n.op, n.shape
        )));
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HIR JSON of `y = reshape(relu(x), [4n])` for `x: F32 [n, 4]`, `extra` nodes added (that
    /// read `r`) and returned too.
    fn hir_at(n: usize, extra: &str, outputs: &str) -> String {
        let m = 4 * n;
        let program = format!(
            r#"{{
            "name": "t",
            "inputs": [{{"name": "x", "shape": {{"dims": [{{"Static": {n}}}, {{"Static": 4}}], "dtype": "F32"}}}}],
            "params": [],
            "nodes": [
                {{"id": "r", "op": {{"Activation": "Relu"}}, "inputs": ["x"], "label": "aten.relu",
                  "shape": {{"dims": [{{"Static": {n}}}, {{"Static": 4}}], "dtype": "F32"}}}},
                {{"id": "f", "op": {{"Reshape": {{"new_shape": [{m}]}}}}, "inputs": ["r"], "label": "aten.view",
                  "shape": {{"dims": [{{"Static": {m}}}], "dtype": "F32"}}}}{extra}
            ],
            "outputs": ["f"{outputs}]
        }}"#
        );
        crate::program::program_to_hir_json(&program).unwrap()
    }

    const SIZES: [usize; 5] = [7, 8, 10, 13, 21];

    fn n_sizes() -> Vec<(u32, Vec<usize>)> {
        vec![(0, SIZES.to_vec())]
    }

    fn n_name() -> Vec<(u32, String)> {
        vec![(0, "n".to_string())]
    }

    use crate::test_support::check_message;

    #[test]
    fn one_symbolic_graph_specializes_to_each_size() {
        let hirs: Vec<String> = SIZES.iter().map(|&n| hir_at(n, "", "")).collect();
        let general = generalize(&hirs, &n_sizes(), &n_name(), 4).unwrap();
        assert!(general.unreproduced.is_empty());
        // The reshape's length is a derived symbol of `n`, written by its name.
        assert!(
            general.text.contains("Reshape{new_shape: [n*4]}")
                && general.text.contains("f32[n, 4]"),
            "{}",
            general.text
        );
        let graph = read(&general.text).unwrap();
        // A size none of the lowerings had: the graph the lowering there would give.
        let at_5 = specialize(&graph, &[(0, 5)]).unwrap();
        let want = mir_of_hir_json(&hir_at(5, "", "")).unwrap();
        assert_eq!(first_difference(&at_5, &want), None);
        let at_6 = mir_of_hir_json(&hir_at(6, "", "")).unwrap();
        assert!(first_difference(&at_5, &at_6).is_some());
        let mut runner = crate::runner::Runner::from_graph(at_5, rlx_runtime::Device::Cpu).unwrap();
        let x: Vec<f32> = (0..20).map(|i| i as f32 - 10.0).collect();
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let out = runner.run(&[("x", &bytes, rlx_ir::DType::F32)]).unwrap();
        assert_eq!(out[0].2, vec![20]);
        let got: Vec<f32> = out[0]
            .0
            .as_bytes()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(got, x.iter().map(|v| v.max(0.0)).collect::<Vec<_>>());
    }

    #[test]
    fn a_constant_that_depends_on_the_size_is_refused_naming_its_node() {
        let hirs: Vec<String> = SIZES
            .iter()
            .map(|&n| {
                let c = (n as f32).to_le_bytes();
                let extra = format!(
                    r#", {{"id": "c", "op": {{"Constant": {{"data": {:?}}}}}, "inputs": [], "label": "aten.full",
                          "shape": {{"dims": [], "dtype": "F32"}}}},
                        {{"id": "s", "op": {{"Binary": "Add"}}, "inputs": ["r", "c"], "label": "aten.add",
                          "shape": {{"dims": [{{"Static": {n}}}, {{"Static": 4}}], "dtype": "F32"}}}}"#,
                    c.to_vec()
                );
                hir_at(n, &extra, r#", "s""#)
            })
            .collect();
        let err = generalize(&hirs, &n_sizes(), &n_name(), 4).err().unwrap();
        assert!(
            matches!(&err, CoreError::Rlx(m) if m.starts_with("node %3 [aten.full] (const(4B)): the op differs between the sizes")),
            "{err:?}"
        );
    }

    #[test]
    fn bad_lowerings_and_bindings_are_check_errors() {
        assert_eq!(
            check_message(generalize(&[], &[], &[], 4)),
            "no lowerings to generalize"
        );
        let two = vec![hir_at(7, "", ""), hir_at(8, "", "")];
        assert_eq!(
            check_message(generalize(&two, &[(0, vec![7])], &n_name(), 4)),
            "symbol 0 has 1 sizes for 2 lowerings"
        );
        let bad = vec![hir_at(7, "", ""), "{}".to_string()];
        assert!(
            check_message(generalize(&bad, &[(0, vec![7, 8])], &n_name(), 4))
                .starts_with("lowering 1: not valid RLX HIR JSON: ")
        );
        assert!(check_message(read("not a model")).starts_with("not a valid .rlxmodel graph: "));
        let hirs: Vec<String> = SIZES.iter().map(|&n| hir_at(n, "", "")).collect();
        let graph = read(&generalize(&hirs, &n_sizes(), &n_name(), 4).unwrap().text).unwrap();
        let huge = check_message(specialize(&graph, &[(0, usize::MAX)]));
        assert!(
            huge.starts_with(&format!(
                "symbol 0 bound to {}: a tensor with that dim would be larger than this machine's \
                 memory, ",
                usize::MAX
            )),
            "{huge}"
        );
        let unbound = check_message(specialize(&graph, &[]));
        assert!(
            unbound.starts_with("node %0 (input(\"x\")) keeps a dynamic dim at binding"),
            "{unbound}"
        );
    }

    #[test]
    fn messages_name_each_node_with_its_label() {
        let graph = mir_of_hir_json(&hir_at(7, "", "")).unwrap();
        assert_eq!(
            with_labels(
                "node %1 differs from node %2; node %9 and node % too",
                &graph
            ),
            "node %1 [aten.relu] differs from node %2 [aten.view]; node %9 and node % too"
        );
    }
}

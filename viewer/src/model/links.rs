//! Which spans a row of a panel's table stands for, so that the row and the chart link both
//! ways (a click selects and shows the spans, hovering outlines them, the selected span marks
//! its row): a training phase's spans, a module pair's, a gradient group's module's, an op
//! name's or op group's, the allocations of a category live at the memory peak, a file's; and
//! a table's rows' spans in each group as [`ChartSpan`]s.

use hashbrown::HashMap;

use candle_trace_schema::analysis::gradients::module_of;
use candle_trace_schema::analysis::modules::{is_module_span, module_name, ModulePaths};
use candle_trace_schema::analysis::ops::{op_groups, OpGrouping};
use candle_trace_schema::analysis::range::TimeRange;
use candle_trace_schema::analysis::spans::span_path;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::Pass;

use super::profile_links::ChartSpan;

/// Visit every span below `region` with the step of its nearest stepped ancestor strictly
/// between `region` and it (`None`: none), as the phases table sums them.
fn walk_region(doc: &TraceDocument, region: usize, mut visit: impl FnMut(usize, Option<Pass>)) {
    // Iterative: a trace may nest deeply.
    let mut stack: Vec<(u32, Option<Pass>)> = doc
        .tree
        .children(region)
        .iter()
        .map(|&c| (c, None))
        .collect();
    while let Some((i, inherited)) = stack.pop() {
        let Some(span) = doc.spans.get(i as usize) else {
            continue;
        };
        visit(i as usize, inherited);
        let next = inherited.or(span.pass);
        stack.extend(doc.tree.children(i as usize).iter().map(|&c| (c, next)));
    }
}

/// Sorted and without repeats.
fn sorted(mut spans: Vec<u32>) -> Vec<u32> {
    spans.sort_unstable();
    spans.dedup();
    spans
}

/// Whether span `i` counts in `range` ([`TimeRange::inside`]: it overlaps the range, or one of
/// duration 0 starts in it).
fn counts_in(doc: &TraceDocument, i: usize, range: TimeRange) -> bool {
    let s = &doc.spans[i];
    range.inside(s.start_ns, s.duration_or_zero()).is_some()
}

/// The spans whose time phase `pass` of the measured region `region` sums inside `range`
/// ([`TimeRange::ALL`]: the whole run): the spans below it with that step and no stepped
/// ancestor below the region that count in the range
/// ([`phases_in`](candle_trace_schema::analysis::range::phases_in)'s rule; sorted).
pub fn phase_spans(doc: &TraceDocument, region: usize, pass: Pass, range: TimeRange) -> Vec<u32> {
    let mut out = Vec::new();
    walk_region(doc, region, |i, inherited| {
        if inherited.is_none() && doc.spans[i].pass == Some(pass) && counts_in(doc, i, range) {
            out.push(i as u32);
        }
    });
    sorted(out)
}

/// For each key of `rows` (module pairs' paths), the module spans the pair sums inside `range`
/// ([`TimeRange::ALL`]: the whole run): the outermost module spans of that key below `region`
/// that ran in forward or backward and count in the range
/// ([`module_pairs_in`](candle_trace_schema::analysis::range::module_pairs_in)'s rule; sorted).
pub fn pair_spans(
    doc: &TraceDocument,
    paths: &ModulePaths,
    region: usize,
    rows: &[&str],
    range: TimeRange,
) -> Vec<Vec<u32>> {
    let row_of: HashMap<&str, usize> = rows.iter().enumerate().map(|(r, &p)| (p, r)).collect();
    let mut out = vec![Vec::new(); rows.len()];
    walk_region(doc, region, |i, _| {
        let pass = doc.spans[i].pass;
        if paths.outermost(i)
            && matches!(pass, Some(Pass::Forward | Pass::Backward))
            && counts_in(doc, i, range)
        {
            if let Some(&r) = row_of.get(paths.path(i)) {
                out[r].push(i as u32);
            }
        }
    });
    out.into_iter().map(sorted).collect()
}

/// `name` and each of its ends after a `.` (`model.fc1`, `fc1`): the module keys a module span
/// named `name` answers to.
fn name_ends(name: &str) -> impl Iterator<Item = &str> {
    std::iter::once(name).chain(name.match_indices('.').map(move |(i, _)| &name[i + 1..]))
}

/// For each module of `modules` (gradient groups': the parameter keys without their last
/// segment), its spans (sorted): the module spans whose module name or span name is it or ends
/// in `.` and it (`model.fc1` for `fc1`), or, in names mode, whose module key is it (`paths`:
/// a Llama `block` holding `model.layers.0.…` is `model.layers.0`, as the module tree joins a
/// parameter to it), only those of the backward where some ran in it. The top level (`""`,
/// the whole model) is the backward's outermost spans. A module no span answers to (a model's
/// embedding or head the trace did not wrap in a module span) has none.
pub fn module_spans(doc: &TraceDocument, paths: &ModulePaths, modules: &[&str]) -> Vec<Vec<u32>> {
    let backward = |i: usize| doc.spans[i].pass == Some(Pass::Backward);
    // Every module span under each key it answers to, in document order (one pass).
    let mut by_key: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, s) in doc.spans.iter().enumerate() {
        if !is_module_span(s) {
            continue;
        }
        let mut keys: Vec<&str> = name_ends(&s.name)
            .chain(module_name(s).into_iter().flat_map(name_ends))
            .chain(paths.module_of(i))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            by_key.entry(k).or_default().push(i as u32);
        }
    }
    let top_level: Vec<u32> = (0..doc.spans.len())
        .filter(|&i| {
            let parent = doc.tree.parent.get(i).copied().flatten();
            backward(i) && !parent.is_some_and(|p| backward(p as usize))
        })
        .map(|i| i as u32)
        .collect();
    modules
        .iter()
        .map(|&m| {
            if m.is_empty() {
                return top_level.clone();
            }
            let all = by_key.get(m).cloned().unwrap_or_default();
            let in_backward: Vec<u32> = all
                .iter()
                .copied()
                .filter(|&i| backward(i as usize))
                .collect();
            if in_backward.is_empty() {
                all
            } else {
                in_backward
            }
        })
        .collect()
}

/// For each parameter key of `keys`, its module's spans (see [`module_spans`]).
pub fn parameter_spans(doc: &TraceDocument, paths: &ModulePaths, keys: &[&str]) -> Vec<Vec<u32>> {
    let modules: Vec<&str> = keys.iter().map(|k| module_of(k)).collect();
    module_spans(doc, paths, &modules)
}

/// Each op's span (its document index), in op order: made once, so that a range's op rows
/// find their spans without looking every op's span id up again.
pub fn op_span_indices(doc: &TraceDocument) -> Vec<Option<u32>> {
    doc.ops
        .iter()
        .map(|op| doc.span_index(op.span_id).map(|i| i as u32))
        .collect()
}

/// Each op name's spans: those its ops inside `range` ran in (sorted), the ops that the
/// efficiency rows of that range count (`TimeRange::inside`; [`TimeRange::ALL`]: every op's).
/// `op_spans` is [`op_span_indices`] of `doc`.
pub fn op_name_spans_in<'a>(
    doc: &'a TraceDocument,
    op_spans: &[Option<u32>],
    range: TimeRange,
) -> HashMap<&'a str, Vec<u32>> {
    let mut by_name: HashMap<&'a str, Vec<u32>> = HashMap::new();
    for (op, span) in doc.ops.iter().zip(op_spans) {
        if range.inside(op.timestamp_ns, op.duration_ns).is_none() {
            continue;
        }
        let spans = by_name.entry(op.op_name).or_default();
        spans.extend(*span);
    }
    by_name
        .into_iter()
        .map(|(name, spans)| (name, sorted(spans)))
        .collect()
}

/// The spans the ops `op_indices` (into `doc.ops`) ran in (sorted).
fn op_spans(doc: &TraceDocument, op_indices: &[usize]) -> Vec<u32> {
    sorted(
        op_indices
            .iter()
            .filter_map(|&i| doc.span_index(doc.ops.row(i).span_id))
            .map(|i| i as u32)
            .collect(),
    )
}

/// For each op group `(op_name, shape, dtype)` of `keys`, the spans its ops ran in (sorted;
/// none for a group `doc` does not have).
pub fn op_group_spans(doc: &TraceDocument, keys: &[(&str, &[u64], &str)]) -> Vec<Vec<u32>> {
    let groups: HashMap<(String, Vec<u64>, String), Vec<usize>> =
        op_groups(&doc.ops, OpGrouping::NameShapeDtype)
            .into_iter()
            .map(|g| {
                let key = (
                    g.op_name,
                    g.shape.unwrap_or_default(),
                    g.dtype.unwrap_or_default(),
                );
                (key, g.op_indices)
            })
            .collect();
    keys.iter()
        .map(|&(name, shape, dtype)| {
            let key = (name.to_string(), shape.to_vec(), dtype.to_string());
            groups
                .get(&key)
                .map(|ops| op_spans(doc, ops))
                .unwrap_or_default()
        })
        .collect()
}

/// For each name path of `paths` (`train_step/forward/fc1`), the spans with that path (sorted).
pub fn path_spans(doc: &TraceDocument, paths: &[&str]) -> Vec<Vec<u32>> {
    let row_of: HashMap<&str, usize> = paths.iter().enumerate().map(|(r, &p)| (p, r)).collect();
    let mut out = vec![Vec::new(); paths.len()];
    for i in 0..doc.spans.len() {
        if let Some(&r) = row_of.get(span_path(doc, i).as_str()) {
            out[r].push(i as u32);
        }
    }
    out
}

/// The spans that allocated what was live at the memory peak, of `category` only when given
/// (sorted).
pub fn peak_spans(doc: &TraceDocument, category: Option<&str>) -> Vec<u32> {
    sorted(
        doc.memory_profile
            .live_at_peak
            .iter()
            .filter(|a| category.is_none_or(|c| a.category.as_str() == c))
            .filter_map(|a| doc.span_index(&a.span_id))
            .map(|i| i as u32)
            .collect(),
    )
}

/// A trace's root spans (a file's lane group, sorted).
pub fn root_spans(doc: &TraceDocument) -> Vec<u32> {
    sorted(doc.tree.roots.clone())
}

/// A table's rows' spans in each of the chart's groups (`[group][row]`, each list sorted; a
/// group with fewer rows stands for no span in the others).
pub struct GroupRows(Vec<Vec<Vec<u32>>>);

impl GroupRows {
    /// Rows whose row `r` stands for `per_group[g][r]` in group `g` (each list sorted).
    pub fn new(per_group: Vec<Vec<Vec<u32>>>) -> Self {
        GroupRows(per_group)
    }

    /// Row `pos`'s spans: group by group, each group's in its order.
    pub fn spans(&self, pos: usize) -> Vec<ChartSpan> {
        self.0
            .iter()
            .enumerate()
            .flat_map(|(group, rows)| {
                rows.get(pos)
                    .into_iter()
                    .flatten()
                    .map(move |&span| ChartSpan { group, span })
            })
            .collect()
    }

    /// Whether row `pos` stands for span `s`.
    pub fn holds(&self, pos: usize, s: ChartSpan) -> bool {
        self.0
            .get(s.group)
            .and_then(|rows| rows.get(pos))
            .is_some_and(|spans| spans.binary_search(&s.span).is_ok())
    }
}

/// `spans` split by group, for `groups` groups (each group's in their order; a span of a
/// group past them left out).
pub fn by_group(spans: &[ChartSpan], groups: usize) -> Vec<Vec<u32>> {
    let mut per_group = vec![Vec::new(); groups];
    for s in spans {
        if let Some(g) = per_group.get_mut(s.group) {
            g.push(s.span);
        }
    }
    per_group
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use candle_trace_schema::analysis::gradients::gradient_groups;
    use candle_trace_schema::analysis::phases::measured_region;

    fn fixture() -> TraceDocument {
        TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ))
    }

    /// The document indices of the spans with these ids.
    fn ids(doc: &TraceDocument, ids: &[&str]) -> Vec<u32> {
        ids.iter()
            .map(|id| doc.span_index(id).unwrap() as u32)
            .collect()
    }

    // Spans of the fixture in file order (their indices): step 0, fwd 1, fwd.fc1 2,
    // fwd.fc1.matmul 3, fwd.fc1.add 4, fwd.relu 5, fwd.relu.relu 6, fwd.fc2 7,
    // fwd.fc2.matmul 8, fwd.fc2.add 9, fwd.loss 10, fwd.loss.sub 11, fwd.loss.sqr 12,
    // fwd.loss.mean 13, bwd 14, bwd.matmul.1 15, bwd.sum.1 16, bwd.relu_backward 17,
    // bwd.matmul.2 18, bwd.sum.2 19, opt 20, opt.sgd.1..4 21..24.

    #[test]
    fn the_fixture_spans_are_in_file_order() {
        let doc = fixture();
        assert_eq!(
            ids(&doc, &["step", "fwd.fc1", "bwd", "opt.sgd.4"]),
            [0, 2, 14, 24]
        );
    }

    #[test]
    fn a_phase_is_its_outermost_spans_of_that_step() {
        let doc = fixture();
        let region = measured_region(&doc).unwrap();
        assert_eq!(region, 0);
        // forward (fwd), backward (bwd), optimizer (opt): the children of train_step.
        assert_eq!(
            phase_spans(&doc, region, Pass::Forward, TimeRange::ALL),
            [1]
        );
        assert_eq!(
            phase_spans(&doc, region, Pass::Backward, TimeRange::ALL),
            [14]
        );
        assert_eq!(
            phase_spans(&doc, region, Pass::Optimizer, TimeRange::ALL),
            [20]
        );
    }

    #[test]
    fn a_module_pair_is_its_outermost_module_spans() {
        let doc = fixture();
        let paths = ModulePaths::new(&doc);
        // Module spans fc1, relu, fc2, mse_loss, all forward, none in the backward.
        let got = pair_spans(
            &doc,
            &paths,
            0,
            &["fc1", "mse_loss", "nowhere"],
            TimeRange::ALL,
        );
        assert_eq!(got, [vec![2], vec![10], vec![]]);
    }

    /// A hand-made training step: step 0–1000 (measured) with forward 100–400 (modules `emb`
    /// 150–250 and `fc` 300–350), backward 400–800 (module `fc` 450–600) and optimizer 800–950.
    /// Spans in file order: step 0, fwd 1, fwd.a 2, fwd.b 3, bwd 4, bwd.a 5, opt 6.
    fn small_step() -> TraceDocument {
        let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2024-05-29T16:26:40Z","capture_step":0,"warmup_steps":0,"device":"cpu","measured_region_device_synchronized":false,"timing_mode":"host","tags":{},"candle_version":"0.8.0"}"#;
        let start = |id: &str,
                     parent: Option<&str>,
                     name: &str,
                     kind: &str,
                     at: u64,
                     step: Option<&str>| {
            let parent = parent.map_or(String::new(), |p| format!(r#","parent_id":"{p}""#));
            let step = step.map_or(String::new(), |s| format!(r#","step":"{s}""#));
            let measured = if parent.is_empty() {
                r#","measured":true"#
            } else {
                ""
            };
            format!(
                r#"{{"kind":"span_start","id":"{id}","name":"{name}","start_ns":{at},"span_kind":"{kind}"{parent}{step}{measured}}}"#
            )
        };
        let end =
            |id: &str, ns: u64| format!(r#"{{"kind":"span_end","id":"{id}","duration_ns":{ns}}}"#);
        let lines = [
            meta.to_string(),
            start("step", None, "train_step", "function", 0, None),
            start(
                "fwd",
                Some("step"),
                "forward",
                "function",
                100,
                Some("forward"),
            ),
            start("fwd.a", Some("fwd"), "emb", "module", 150, Some("forward")),
            end("fwd.a", 100),
            start("fwd.b", Some("fwd"), "fc", "module", 300, Some("forward")),
            end("fwd.b", 50),
            end("fwd", 300),
            start(
                "bwd",
                Some("step"),
                "backward",
                "function",
                400,
                Some("backward"),
            ),
            start("bwd.a", Some("bwd"), "fc", "module", 450, Some("backward")),
            end("bwd.a", 150),
            end("bwd", 400),
            start(
                "opt",
                Some("step"),
                "optimizer",
                "function",
                800,
                Some("optimizer"),
            ),
            end("opt", 150),
            end("step", 1000),
        ];
        TraceDocument::from_bytes(lines.join("\n").as_bytes())
    }

    #[test]
    fn in_a_range_a_phase_and_a_pair_are_the_spans_that_count_in_it() {
        use candle_trace_schema::analysis::range::phases_in;
        let doc = small_step();
        assert_eq!(ids(&doc, &["step", "fwd.b", "bwd.a", "opt"]), [0, 3, 5, 6]);
        let paths = ModulePaths::new(&doc);
        let phases = |r: TimeRange| {
            [Pass::Forward, Pass::Backward, Pass::Optimizer].map(|p| phase_spans(&doc, 0, p, r))
        };
        let pairs = |r: TimeRange| pair_spans(&doc, &paths, 0, &["fc", "emb"], r);
        // The whole run: each phase's outermost span; `fc` forward and backward, `emb` forward.
        assert_eq!(phases(TimeRange::ALL), [vec![1], vec![4], vec![6]]);
        assert_eq!(pairs(TimeRange::ALL), [vec![3, 5], vec![2]]);
        // 320–500: forward (80 ns of it) and backward (100 ns), not the optimizer; `fc`'s
        // forward (30 ns) and backward (50 ns) calls, not `emb` (150–250).
        let r = TimeRange::new(320, 500);
        assert_eq!(phases(r), [vec![1], vec![4], vec![]]);
        assert_eq!(pairs(r), [vec![3, 5], vec![]]);
        let b = phases_in(&doc, r).unwrap();
        assert_eq!((b.forward_ns, b.backward_ns, b.optimizer_ns), (80, 100, 0));
        // 400–440: forward ends where it starts (no overlap): only backward counts; no module.
        let r = TimeRange::new(400, 440);
        assert_eq!(phases(r), [vec![], vec![4], vec![]]);
        assert_eq!(pairs(r), [Vec::<u32>::new(), vec![]]);
        let b = phases_in(&doc, r).unwrap();
        assert_eq!((b.forward_ns, b.backward_ns, b.optimizer_ns), (0, 40, 0));
    }

    #[test]
    fn a_gradient_group_is_its_modules_spans() {
        let doc = fixture();
        // fc1 and fc2 ran forward only (no backward module spans): their forward spans; head
        // has no module span; the top level is the backward (bwd), not the ops below it.
        let paths = ModulePaths::new(&doc);
        assert_eq!(
            module_spans(&doc, &paths, &["fc1", "head", ""]),
            [vec![2], vec![], vec![14]]
        );
        assert_eq!(
            parameter_spans(&doc, &paths, &["fc2.bias", "w"]),
            [vec![7], vec![14]]
        );
        // The fixture's gradient groups: fc1 and fc2 have their module spans; head (`scale`,
        // `bias`), embed and aux none: no span of the trace is named so or ran inside them.
        let groups = gradient_groups(&doc.gradients);
        let modules: Vec<&str> = groups.iter().map(|g| g.module.as_str()).collect();
        assert_eq!(modules, ["fc1", "fc2", "head", "embed", "aux"]);
        assert_eq!(
            module_spans(&doc, &paths, &modules),
            [vec![2], vec![7], vec![], vec![], vec![]]
        );
    }

    #[test]
    fn a_named_model_links_its_parameters_modules_and_not_an_unwrapped_embedding() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/modules/mistral_names.trace6.jsonl"
        ));
        let paths = ModulePaths::new(&doc);
        let groups = gradient_groups(&doc.gradients);
        let modules: Vec<&str> = groups.iter().map(|g| g.module.as_str()).collect();
        let got = module_spans(&doc, &paths, &modules);
        // Every forward module span (s2–s22, no backward ones) is named after its module; the
        // embedding's gradient has no span: the fixture wraps no embedding in a module span.
        let of = |m: &str| got[modules.iter().position(|&k| k == m).unwrap()].clone();
        assert_eq!(groups.len(), 21);
        assert_eq!(of("model.embed_tokens"), Vec::<u32>::new());
        assert_eq!(of("lm_head"), ids(&doc, &["s22"]));
        assert_eq!(of("model.norm"), ids(&doc, &["s21"]));
        assert_eq!(of("model.layers.1.mlp.down_proj"), ids(&doc, &["s20"]));
        assert_eq!(got.iter().filter(|s| s.is_empty()).count(), 1);
    }

    #[test]
    fn in_names_mode_a_block_is_the_module_its_children_share() {
        // A Llama `block` owns no weight and has no module name: its key is the prefix of the
        // modules it holds, `model.layers.0`, where a parameter of the layer itself belongs.
        let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2024-05-29T16:26:40Z","capture_step":0,"warmup_steps":0,"device":"cpu","measured_region_device_synchronized":false,"timing_mode":"host","tags":{},"candle_version":"0.8.0"}"#;
        let lines = [
            meta,
            r#"{"kind":"span_start","id":"u","name":"update","start_ns":0,"span_kind":"function","measured":true}"#,
            r#"{"kind":"span_start","id":"b","name":"block","start_ns":10,"span_kind":"module","parent_id":"u"}"#,
            r#"{"kind":"span_start","id":"q","name":"linear","start_ns":20,"span_kind":"module","parent_id":"b","module":"model.layers.0.self_attn.q_proj"}"#,
            r#"{"kind":"span_end","id":"q","duration_ns":10}"#,
            r#"{"kind":"span_start","id":"d","name":"linear","start_ns":40,"span_kind":"module","parent_id":"b","module":"model.layers.0.mlp.down_proj"}"#,
            r#"{"kind":"span_end","id":"d","duration_ns":10}"#,
            r#"{"kind":"span_end","id":"b","duration_ns":50}"#,
            r#"{"kind":"span_end","id":"u","duration_ns":100}"#,
        ];
        let doc = TraceDocument::from_bytes(lines.join("\n").as_bytes());
        let paths = ModulePaths::new(&doc);
        assert_eq!(paths.module_of(1), Some("model.layers.0"));
        assert_eq!(
            parameter_spans(
                &doc,
                &paths,
                &[
                    "model.layers.0.scale",
                    "model.layers.0.mlp.down_proj.weight",
                    "model.embed_tokens.weight"
                ]
            ),
            [ids(&doc, &["b"]), ids(&doc, &["d"]), vec![]]
        );
    }

    #[test]
    fn backward_module_spans_win_and_a_prefix_names_the_module() {
        let mut doc = fixture();
        // fwd.relu (5) made a backward module span named `model.fc1`.
        doc.spans[5].name = "model.fc1".into();
        doc.spans[5].pass = Some(Pass::Backward);
        assert_eq!(
            module_spans(&doc, &ModulePaths::new(&doc), &["fc1", "model.fc1", "c1"]),
            [vec![5], vec![5], vec![]]
        );
        assert_eq!(
            name_ends("a.b.c").collect::<Vec<_>>(),
            ["a.b.c", "b.c", "c"]
        );
    }

    #[test]
    fn an_op_name_is_the_spans_its_ops_ran_in() {
        let doc = fixture();
        let op_spans = op_span_indices(&doc);
        let by_name = op_name_spans_in(&doc, &op_spans, TimeRange::ALL);
        // matmul ran in fwd.fc1.matmul, fwd.fc2.matmul, bwd.matmul.1 and bwd.matmul.2.
        assert_eq!(by_name["matmul"], [3, 8, 15, 18]);
        // dequantize ran in the fc1 module span itself.
        assert_eq!(by_name["dequantize"], [2]);
        assert_eq!(by_name["sgd_update"], [21, 22, 23, 24]);
        assert_eq!(by_name.len(), 10);
        // matmul with output [8, 16] f32: fc1's forward matmul only; [1, 16] f32: the
        // backward's first (fc2.weight's gradient); none in f16.
        let keys: [(&str, &[u64], &str); 3] = [
            ("matmul", &[8, 16], "f32"),
            ("matmul", &[1, 16], "f32"),
            ("matmul", &[8, 16], "f16"),
        ];
        assert_eq!(op_group_spans(&doc, &keys), [vec![3], vec![15], vec![]]);
        // In 100..450 µs: the matmuls at 31–89 µs (fc1) and 591–669 µs (bwd.matmul.2) are
        // outside, 201–249 µs (fc2) inside, 441–509 µs (bwd.matmul.1) crosses the end.
        let in_range = op_name_spans_in(&doc, &op_spans, TimeRange::new(100_000, 450_000));
        assert_eq!(in_range["matmul"], [8, 15]);
        // No op of a name inside: no entry.
        let early = op_name_spans_in(&doc, &op_spans, TimeRange::new(0, 1_000));
        assert!(early.is_empty(), "{early:?}");
    }

    #[test]
    fn a_path_is_its_spans() {
        let doc = fixture();
        let got = path_spans(
            &doc,
            &[
                "train_step/forward/fc1",
                "train_step/backward/matmul",
                "train_step/optimizer/sgd_update",
                "x",
            ],
        );
        assert_eq!(got, [vec![2], vec![15, 18], vec![21, 22, 23, 24], vec![]]);
    }

    #[test]
    fn the_peak_is_the_spans_that_allocated_what_was_live() {
        let doc = fixture();
        // Live at the peak (2.20 KiB at 693 µs, before any optimizer allocation): the four
        // parameters (step), x and y (fwd), fc1.out (freed at 700 µs) and the activations
        // and gradients allocated until then and not yet freed.
        let live: Vec<&str> = doc
            .memory_profile
            .live_at_peak
            .iter()
            .map(|a| a.tensor_id.as_str())
            .collect();
        assert!(live.contains(&"fc1.bias.grad"), "{live:?}");
        assert_eq!(peak_spans(&doc, Some("parameter")), [0]);
        assert_eq!(peak_spans(&doc, Some("gradient")), [15, 16, 17, 18, 19]);
        assert!(peak_spans(&doc, None).starts_with(&[0, 1]));
    }

    #[test]
    fn a_file_is_its_root_spans() {
        assert_eq!(root_spans(&fixture()), [0]);
    }

    /// A span of group `group`.
    fn cs(group: usize, span: u32) -> ChartSpan {
        ChartSpan { group, span }
    }

    #[test]
    fn a_rows_spans_go_group_by_group_and_a_shorter_group_has_none() {
        // Baseline: rows [1, 4] and [2]; candidate: row [0, 3] only.
        let rows = GroupRows::new(vec![vec![vec![1, 4], vec![2]], vec![vec![0, 3]]]);
        assert_eq!(rows.spans(0), vec![cs(0, 1), cs(0, 4), cs(1, 0), cs(1, 3)]);
        assert_eq!(rows.spans(1), vec![cs(0, 2)]);
        assert_eq!(rows.spans(2), vec![]);
        assert!(rows.holds(0, cs(0, 4)) && rows.holds(0, cs(1, 3)));
        // Span 4 of the candidate, span 0 of the baseline, a third group: not row 0's.
        assert!(!rows.holds(0, cs(1, 4)) && !rows.holds(0, cs(0, 0)) && !rows.holds(0, cs(2, 1)));
        assert!(rows.holds(1, cs(0, 2)) && !rows.holds(1, cs(1, 2)));
        assert!(!rows.holds(5, cs(0, 1)));
    }

    #[test]
    fn spans_split_by_group_keep_their_order() {
        let spans = [cs(1, 7), cs(0, 3), cs(1, 2), cs(3, 9)];
        assert_eq!(by_group(&spans, 2), vec![vec![3], vec![7, 2]]);
        assert_eq!(by_group(&[], 3), vec![Vec::<u32>::new(); 3]);
    }
}

//! Module paths: a stable name for each place in a model, from span nesting and occurrence, so
//! that fifteen spans named `linear` are fifteen places.
//!
//! The rule (one definition, used by every module view: [`module_rows`], [`op_rows_by_path`],
//! the inference profile's module trees and [`crate::analysis::phases`]):
//! - The **module path** of a span is the `/`-joined segments of the module spans
//!   (`span_kind = module`) on its layout ancestor chain ([`SpanTree`]), itself included when it
//!   is a module. Function and op spans contribute no segment, so the `update` and `forward`
//!   function spans around a model vanish and a path reads `block[1]/attn/linear[2]`.
//! - A **segment** is the span's name, followed by `[k]` when its layout parent has more than
//!   one child span (of any kind) with that same name; `k` is the 0-based rank among those
//!   same-name siblings in the tree's child order, which is (`start_ns`, file order). Spans laid
//!   out as roots are siblings of each other.
//! - A non-module span's path is its nearest module ancestor's path: the empty string when it
//!   has none.
//!
//! Two spans of repeated calls (the same model run twice under two `forward` spans) get the same
//! path: a path is a place, and its spans are that place's calls. Paths are interned: each
//! distinct text is stored once and spans refer to it by id, so a path built two ways (a module
//! named `a/b`, or `b` inside `a`) is one path, as its text is what a reader sees.
//!
//! Building is one iterative pass over the tree (no recursion: a trace may nest deeply), with
//! one hash lookup per module span: O(n) expected.

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use crate::format::document::{Span, TraceDocument};
use crate::format::events::SpanKind;
use crate::format::spans::SpanTree;

/// The module path of every span of a document (see the module docs for the rule).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModulePaths {
    /// Path id of each span, indexed like the spans.
    path_of: Vec<u32>,
    /// Path texts by id; id 0 is the empty path.
    texts: Vec<String>,
}

impl ModulePaths {
    /// The paths of a document's spans.
    pub fn new(doc: &TraceDocument) -> Self {
        Self::of_tree(&doc.spans, &doc.tree)
    }

    /// The paths of `spans` laid out by `tree` (built from the same spans).
    pub fn of_tree(spans: &[Span], tree: &SpanTree) -> Self {
        let n = spans.len();
        let mut paths = ModulePaths {
            path_of: vec![0; n],
            texts: vec![String::new()],
        };
        let mut ids: HashMap<(u32, &str, u32), u32> = HashMap::new();
        let mut by_text: HashMap<String, u32> = HashMap::new();
        let mut same_name: HashMap<&str, (u32, u32)> = HashMap::new();
        let (child_start, child_list) = tree.child_rows();
        let children = |owner: Option<usize>| -> &[u32] {
            match owner {
                None => &tree.roots,
                Some(p) => {
                    let (a, b) = (
                        child_start.get(p).copied().unwrap_or(0) as usize,
                        child_start.get(p + 1).copied().unwrap_or(0) as usize,
                    );
                    child_list.get(a..b).unwrap_or(&[])
                }
            }
        };
        // (whose children to name, the path of their nearest module ancestor)
        let mut stack: Vec<(Option<usize>, u32)> = vec![(None, 0)];
        while let Some((owner, prefix)) = stack.pop() {
            let list = children(owner);
            same_name.clear();
            for &c in list {
                if let Some(s) = spans.get(c as usize) {
                    same_name.entry(s.name.as_str()).or_insert((0, 0)).0 += 1;
                }
            }
            for &c in list {
                let Some(span) = spans.get(c as usize) else {
                    continue;
                };
                let name = span.name.as_str();
                // (count of same-name siblings, rank of the next one); the entry exists.
                let (count, rank) = same_name.get(name).copied().unwrap_or((1, 0));
                if let Some(e) = same_name.get_mut(name) {
                    e.1 += 1;
                }
                let path = if span.span_kind == SpanKind::Module {
                    // Rank u32::MAX stands for "no index" (a name met once among siblings).
                    let key = (prefix, name, if count > 1 { rank } else { u32::MAX });
                    match ids.get(&key) {
                        Some(&id) => id,
                        None => {
                            let id = paths.intern(
                                prefix,
                                name,
                                (count > 1).then_some(rank),
                                &mut by_text,
                            );
                            ids.insert(key, id);
                            id
                        }
                    }
                } else {
                    prefix
                };
                paths.path_of[c as usize] = path;
                stack.push((Some(c as usize), path));
            }
        }
        paths
    }

    fn intern(
        &mut self,
        prefix: u32,
        name: &str,
        rank: Option<u32>,
        by_text: &mut HashMap<String, u32>,
    ) -> u32 {
        let parent = self.text_of(prefix);
        let mut text = String::with_capacity(parent.len() + name.len() + 6);
        if !parent.is_empty() {
            text.push_str(parent);
            text.push('/');
        }
        text.push_str(name);
        if let Some(k) = rank {
            text.push('[');
            text.push_str(&k.to_string());
            text.push(']');
        }
        if let Some(&id) = by_text.get(&text) {
            return id;
        }
        let id = u32::try_from(self.texts.len()).unwrap_or(u32::MAX);
        by_text.insert(text.clone(), id);
        self.texts.push(text);
        id
    }

    fn text_of(&self, id: u32) -> &str {
        self.texts.get(id as usize).map_or("", String::as_str)
    }

    /// The module path of span `i` (empty when it has no module ancestor, or `i` is out of
    /// range).
    pub fn path(&self, i: usize) -> &str {
        self.text_of(self.path_id(i))
    }

    /// The id of span `i`'s path (0: the empty path); ids index [`ModulePaths::texts`].
    pub fn path_id(&self, i: usize) -> u32 {
        self.path_of.get(i).copied().unwrap_or(0)
    }

    /// Every distinct path text by id, the empty path first.
    pub fn texts(&self) -> &[String] {
        &self.texts
    }

    /// Number of spans.
    pub fn len(&self) -> usize {
        self.path_of.len()
    }

    /// True when there are no spans.
    pub fn is_empty(&self) -> bool {
        self.path_of.is_empty()
    }
}

/// How [`module_rows`] groups module spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleGrouping {
    /// One row per module path (a place in the model).
    Path,
    /// One row per span name (`linear`: every place together).
    Name,
}

/// Module spans aggregated by path or by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleRow {
    /// The module path or the span name.
    pub key: String,
    /// Module spans in the group.
    pub calls: u64,
    /// Sum of their durations (inclusive; an unclosed span counts 0).
    pub total_ns: u64,
    /// Sum of their self times.
    pub self_ns: u64,
    /// `total_ns / calls`, integer division.
    pub mean_ns: u64,
    /// `total_ns / measured total` (the summary's `total_ns`); `None` when that is 0.
    pub share: Option<f64>,
}

/// The measured total of SCHEMA.md's summary: the sum of the measured spans' durations.
fn measured_total(doc: &TraceDocument) -> u64 {
    doc.spans
        .iter()
        .filter(|s| s.measured)
        .map(Span::duration_or_zero)
        .fold(0, u64::saturating_add)
}

/// Group rows by key in first-seen order, then sort by `total` descending, ties by key.
fn rows_by_key<R>(mut rows: Vec<R>, total: impl Fn(&R) -> u64, key: impl Fn(&R) -> &str) -> Vec<R> {
    rows.sort_by(|a, b| total(b).cmp(&total(a)).then_with(|| key(a).cmp(key(b))));
    rows
}

/// Module spans (`span_kind = module`) aggregated by path or name: calls, total, self and mean
/// time and the share of the measured total; sorted by total time, largest first, then by key.
///
/// By name, a module nested in a module of the same name is counted in both spans' rows, so
/// that row's total may exceed the time spent (it adds inclusive durations).
pub fn module_rows(
    doc: &TraceDocument,
    paths: &ModulePaths,
    grouping: ModuleGrouping,
) -> Vec<ModuleRow> {
    let measured = measured_total(doc);
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut rows: Vec<ModuleRow> = Vec::new();
    for (i, s) in doc.spans.iter().enumerate() {
        if s.span_kind != SpanKind::Module {
            continue;
        }
        let key = match grouping {
            ModuleGrouping::Path => paths.path(i),
            ModuleGrouping::Name => s.name.as_str(),
        };
        let r = *index.entry(key).or_insert_with(|| {
            rows.push(ModuleRow {
                key: key.to_string(),
                calls: 0,
                total_ns: 0,
                self_ns: 0,
                mean_ns: 0,
                share: None,
            });
            rows.len() - 1
        });
        let row = &mut rows[r];
        row.calls += 1;
        row.total_ns = row.total_ns.saturating_add(s.duration_or_zero());
        row.self_ns = row
            .self_ns
            .saturating_add(doc.tree.self_ns.get(i).copied().unwrap_or(0));
    }
    for row in &mut rows {
        row.mean_ns = row.total_ns / row.calls.max(1);
        row.share = (measured > 0).then(|| row.total_ns as f64 / measured as f64);
    }
    rows_by_key(rows, |r| r.total_ns, |r| &r.key)
}

/// Ops grouped by the module path of the span they ran in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpPathRow {
    /// Module path of the op's span (empty: no module around it, or the span does not exist).
    pub path: String,
    /// Ops in the group.
    pub count: u64,
    /// Sum of their durations.
    pub total_ns: u64,
    /// `total_ns / count`, integer division.
    pub mean_ns: u64,
    /// Longest op.
    pub max_ns: u64,
    /// Sum of their output bytes ([`crate::format::events::Op::output_bytes`]).
    pub output_bytes: u64,
}

/// `op` records grouped by the module path of their span; sorted by total time, largest
/// first, then by path.
pub fn op_rows_by_path(doc: &TraceDocument, paths: &ModulePaths) -> Vec<OpPathRow> {
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut rows: Vec<OpPathRow> = Vec::new();
    for op in &doc.ops {
        let id = doc.span_index(op.span_id).map_or(0, |i| paths.path_id(i));
        let r = *index.entry(id).or_insert_with(|| {
            rows.push(OpPathRow {
                path: paths.text_of(id).to_string(),
                count: 0,
                total_ns: 0,
                mean_ns: 0,
                max_ns: 0,
                output_bytes: 0,
            });
            rows.len() - 1
        });
        let row = &mut rows[r];
        row.count += 1;
        row.total_ns = row.total_ns.saturating_add(op.duration_ns);
        row.max_ns = row.max_ns.max(op.duration_ns);
        row.output_bytes = row.output_bytes.saturating_add(op.output_bytes());
    }
    for row in &mut rows {
        row.mean_ns = row.total_ns / row.count.max(1);
    }
    rows_by_key(rows, |r| r.total_ns, |r| &r.path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;

    /// A document builder: spans get ids `s0`, `s1` ... in call order, start times increasing.
    struct Doc {
        lines: Vec<String>,
        next: u64,
    }

    impl Doc {
        fn new() -> Self {
            Doc {
                lines: vec![META.to_string()],
                next: 0,
            }
        }

        /// Add a span under `parent`, closed with `duration_ns`; returns its id.
        fn span(
            &mut self,
            parent: Option<&str>,
            name: &str,
            kind: &str,
            duration_ns: u64,
        ) -> String {
            let id = format!("s{}", self.next);
            let start_ns = self.next * 10;
            self.next += 1;
            let parent = parent.map_or(String::new(), |p| format!(r#""parent_id":"{p}","#));
            let measured = if self.next == 1 {
                r#","measured":true"#
            } else {
                ""
            };
            self.lines.push(format!(
                r#"{{"kind":"span_start","id":"{id}",{parent}"name":"{name}","start_ns":{start_ns},"span_kind":"{kind}"{measured}}}"#
            ));
            self.lines.push(format!(
                r#"{{"kind":"span_end","id":"{id}","duration_ns":{duration_ns}}}"#
            ));
            id
        }

        fn read(&self) -> TraceDocument {
            let mut text = self.lines.join("\n");
            text.push('\n');
            TraceDocument::from_bytes(text.as_bytes())
        }
    }

    /// One forward of candle-transformers' Llama with 2 layers: under the `forward` function
    /// span, `block`, `block`, `rms-norm`, `linear`; in each block `rms-norm`, `attn`,
    /// `rms-norm`, `mlp`; in attn q/k/v `linear`, two `attn-rot`, o `linear`; in mlp three
    /// `linear`. Returns the document and the ids of some spans to check.
    fn llama() -> (TraceDocument, Vec<(String, &'static str)>) {
        let (d, named) = llama_doc();
        (d.read(), named)
    }

    fn llama_doc() -> (Doc, Vec<(String, &'static str)>) {
        let mut d = Doc::new();
        let step = d.span(None, "update", "function", 1000);
        let fwd = d.span(Some(&step), "forward", "function", 900);
        let mut named = Vec::new();
        for layer in 0..2 {
            let block = d.span(Some(&fwd), "block", "module", 100);
            let norm0 = d.span(Some(&block), "rms-norm", "module", 5);
            let attn = d.span(Some(&block), "attn", "module", 50);
            let mut linears = Vec::new();
            for _ in 0..3 {
                linears.push(d.span(Some(&attn), "linear", "module", 4));
            }
            let rot0 = d.span(Some(&attn), "attn-rot", "module", 2);
            let rot1 = d.span(Some(&attn), "attn-rot", "module", 2);
            linears.push(d.span(Some(&attn), "linear", "module", 4));
            let norm1 = d.span(Some(&block), "rms-norm", "module", 5);
            let mlp = d.span(Some(&block), "mlp", "module", 30);
            let mut mlp_linears = Vec::new();
            for _ in 0..3 {
                mlp_linears.push(d.span(Some(&mlp), "linear", "module", 9));
            }
            // An op span inside the last attn linear: it has its module's path.
            let matmul = d.span(Some(&linears[3]), "matmul", "op", 1);
            if layer == 0 {
                named.push((block, "block[0]"));
                named.push((rot1, "block[0]/attn/attn-rot[1]"));
                named.push((mlp_linears[2].clone(), "block[0]/mlp/linear[2]"));
                named.push((rot0, "block[0]/attn/attn-rot[0]"));
            } else {
                named.push((norm1, "block[1]/rms-norm[1]"));
                named.push((norm0, "block[1]/rms-norm[0]"));
                named.push((linears[3].clone(), "block[1]/attn/linear[3]"));
                named.push((matmul, "block[1]/attn/linear[3]"));
                named.push((attn, "block[1]/attn"));
                named.push((mlp, "block[1]/mlp"));
            }
        }
        named.push((d.span(Some(&fwd), "rms-norm", "module", 7), "rms-norm"));
        named.push((d.span(Some(&fwd), "linear", "module", 11), "linear"));
        named.push((fwd, ""));
        named.push((step, ""));
        (d, named)
    }

    #[test]
    fn llama_paths_by_hand() {
        let (doc, named) = llama();
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let paths = ModulePaths::new(&doc);
        for (id, want) in &named {
            let i = doc.span_index(id).unwrap();
            assert_eq!(paths.path(i), *want, "span {id} ({})", doc.spans[i].name);
        }
        // Module spans: 4 under forward + 2 × (4 in the block + 6 in attn + 3 in mlp) = 30,
        // each its own place.
        let modules: Vec<&str> = (0..doc.spans.len())
            .filter(|&i| doc.spans[i].span_kind == SpanKind::Module)
            .map(|i| paths.path(i))
            .collect();
        assert_eq!(modules.len(), 30);
        let mut distinct = modules.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 30);
        // The empty path plus the 30.
        assert_eq!(paths.texts().len(), 31);
        assert_eq!(paths.path(usize::MAX), "");
    }

    #[test]
    fn repeated_calls_share_a_path_and_roots_are_siblings() {
        let mut d = Doc::new();
        let root = d.span(None, "step", "function", 100);
        let f0 = d.span(Some(&root), "forward", "function", 40);
        let f1 = d.span(Some(&root), "forward", "function", 40);
        let a = d.span(Some(&f0), "enc", "module", 30);
        let b = d.span(Some(&f1), "enc", "module", 20);
        // Two module roots with one name, and a lone root module.
        let r0 = d.span(None, "head", "module", 1);
        let r1 = d.span(None, "head", "module", 1);
        let lone = d.span(None, "tail", "module", 1);
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        let p = |id: &str| paths.path(doc.span_index(id).unwrap()).to_string();
        // `forward` appears twice under `step`, but function spans add no segment; each
        // forward holds one `enc`, so both are `enc`: two calls of one place.
        assert_eq!((p(&a), p(&b)), ("enc".into(), "enc".into()));
        assert_eq!(
            (p(&r0), p(&r1), p(&lone)),
            ("head[0]".into(), "head[1]".into(), "tail".into())
        );
        let rows = module_rows(&doc, &paths, ModuleGrouping::Path);
        let enc = rows.iter().find(|r| r.key == "enc").unwrap();
        // calls 2, total 30 + 20 = 50, mean 25, share 50 / 100 (measured `step`) = 0.5.
        assert_eq!(
            (enc.calls, enc.total_ns, enc.mean_ns, enc.share),
            (2, 50, 25, Some(0.5))
        );
    }

    #[test]
    fn same_start_ties_go_by_file_order_and_names_count_across_kinds() {
        let mut d = Doc::new();
        let root = d.span(None, "step", "function", 100);
        // A function and a module named `x` under one parent: two children named `x`, so the
        // module is `x[1]` (rank by start time, the function started first).
        d.span(Some(&root), "x", "function", 1);
        let m = d.span(Some(&root), "x", "module", 1);
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        assert_eq!(paths.path(doc.span_index(&m).unwrap()), "x[1]");

        // Same start_ns: the earlier line ranks first.
        let text = [
            META,
            r#"{"kind":"span_start","id":"p","name":"p","start_ns":0,"span_kind":"module","measured":true}"#,
            r#"{"kind":"span_start","id":"b","parent_id":"p","name":"l","start_ns":5,"span_kind":"module"}"#,
            r#"{"kind":"span_start","id":"a","parent_id":"p","name":"l","start_ns":5,"span_kind":"module"}"#,
            r#"{"kind":"span_start","id":"c","parent_id":"p","name":"l","start_ns":1,"span_kind":"module"}"#,
        ]
        .join("\n");
        let doc = TraceDocument::from_bytes(text.as_bytes());
        let paths = ModulePaths::new(&doc);
        let p = |id: &str| paths.path(doc.span_index(id).unwrap()).to_string();
        assert_eq!(
            (p("c"), p("b"), p("a")),
            ("p/l[0]".into(), "p/l[1]".into(), "p/l[2]".into())
        );
    }

    #[test]
    fn module_and_op_rows_by_hand() {
        let (doc, _) = llama();
        let paths = ModulePaths::new(&doc);
        // By name, `linear`: per layer 4 attn linears × 4 ns + 3 mlp linears × 9 ns = 43 ns,
        // two layers 86, plus the head linear 11: 97 ns in 2 × 7 + 1 = 15 calls; mean
        // 97 / 15 = 6 (integer). Self time: the last attn linear of each layer holds a 1 ns
        // matmul, so self = 97 − 2 = 95. Measured total = `update` = 1000: share 0.097.
        let rows = module_rows(&doc, &paths, ModuleGrouping::Name);
        let linear = rows.iter().find(|r| r.key == "linear").unwrap();
        assert_eq!(
            (
                linear.calls,
                linear.total_ns,
                linear.self_ns,
                linear.mean_ns
            ),
            (15, 97, 95, 6)
        );
        assert_eq!(linear.share, Some(97.0 / 1000.0));
        // Sorted by total: block (2 × 100 = 200) first.
        assert_eq!((rows[0].key.as_str(), rows[0].total_ns), ("block", 200));
        // By path: 30 rows of one call each; the first is block[0] (100, ties with block[1]
        // broken by key).
        let rows = module_rows(&doc, &paths, ModuleGrouping::Path);
        assert_eq!(rows.len(), 30);
        assert!(rows.iter().all(|r| r.calls == 1));
        assert_eq!(
            (rows[0].key.as_str(), rows[1].key.as_str()),
            ("block[0]", "block[1]")
        );

        // Ops: two in block[0]/attn/linear[3]'s span (3 + 5 ns), one naming a span that does
        // not exist and one in the `forward` function span `s1` (both path "": 7 + 4 ns).
        let linear3 = doc.spans[doc.spans.iter().position(|s| s.name == "matmul").unwrap()]
            .parent_id
            .clone()
            .unwrap();
        let op = |span: &str, ns: u64| {
            format!(
                r#"{{"kind":"op","span_id":"{span}","op_name":"matmul","shape":[2],"dtype":"f32","device":"cpu","duration_ns":{ns}}}"#
            )
        };
        let (mut d, _) = llama_doc();
        d.lines
            .extend([op(&linear3, 3), op(&linear3, 5), op("nope", 7), op("s1", 4)]);
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        let rows = op_rows_by_path(&doc, &paths);
        let got: Vec<(&str, u64, u64, u64, u64, u64)> = rows
            .iter()
            .map(|r| {
                (
                    r.path.as_str(),
                    r.count,
                    r.total_ns,
                    r.mean_ns,
                    r.max_ns,
                    r.output_bytes,
                )
            })
            .collect();
        // "" : 7 + 4 = 11 ns in 2 ops, mean 5, max 7, 2 × 8 B; the linear: 8 ns, mean 4, max 5.
        assert_eq!(
            got,
            [
                ("", 2, 11, 5, 7, 16),
                ("block[0]/attn/linear[3]", 2, 8, 4, 5, 16)
            ]
        );
    }
}

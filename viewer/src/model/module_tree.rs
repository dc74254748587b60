//! The modules tab's tree: the schema's module tree (`schema::analysis::module_tree`: time,
//! memory, parameters and gradients per module, for the whole run), or one arranged here from
//! module rows (a range's, `schema::analysis::range::module_rows_in`, cut into levels by the
//! same `level_ends`; leaf names as a flat list), each level sortable by any column, expanded
//! or collapsed per node, and the links between a node and the spans it stands for.
//!
//! A node whose key is a row's key is *measured* (its numbers are the row's); a node no row has
//! is a *group*: its numbers are the sums of its children's (the schema's rule).

use hashbrown::{HashMap, HashSet};

use candle_trace_schema::analysis::gradients::GradientCounts;
use candle_trace_schema::analysis::module_tree::ModuleTree as SchemaTree;
use candle_trace_schema::analysis::modules::{is_module_span, level_ends, ModulePaths};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::document::TraceDocument;

use super::sort::{sort_indices, SortState};

/// How keys split into tree levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStyle {
    /// Nesting paths: one level per `/`.
    Nesting,
    /// Weight names: one level per `.` or `/`.
    Names,
    /// Every key one root (leaf names).
    Flat,
}

/// The levels of `key`: each level's key (a prefix of `key`, cut by the schema's
/// `level_ends`: digits join the level before) and its label (what it adds to its parent's).
pub fn levels(key: &str, style: KeyStyle) -> Vec<(&str, &str)> {
    let ends = match style {
        KeyStyle::Flat => Vec::new(),
        KeyStyle::Nesting => level_ends(key, false),
        KeyStyle::Names => level_ends(key, true),
    };
    if ends.is_empty() {
        return vec![(key, key)];
    }
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let level = (&key[..end], &key[start..end]);
            start = end + 1;
            level
        })
        .collect()
}

/// What the schema's tree adds per node: memory, parameters and gradients (inclusive of the
/// subtree; see `schema::analysis::module_tree`).
#[derive(Debug, Clone, PartialEq)]
pub struct Extras {
    /// Bytes of the `memory` allocs made in it.
    pub alloc_bytes: u64,
    /// Bytes of the graph tensors (not parameters) seen in it.
    pub graph_bytes: u64,
    /// Bytes of its parameters, when a gradient record states them.
    pub param_bytes: Option<u64>,
    /// Its parameters' gradient states.
    pub gradients: GradientCounts,
    /// Global norm of its parameters' gradients.
    pub grad_norm: Option<f64>,
}

impl Extras {
    /// `present 3 · missing 1`, the states with parameters; empty without any.
    pub fn gradients_text(&self) -> String {
        let g = &self.gradients;
        [
            ("present", g.present),
            ("missing", g.missing),
            ("zero", g.zero),
            ("non-finite", g.non_finite),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(" · ")
    }

    /// Parameter bytes, human (`–` when not stated).
    pub fn params_text(&self) -> String {
        self.param_bytes
            .map_or_else(|| "–".to_string(), format_bytes)
    }

    /// The gradient norm with three significant digits (`–` without one).
    pub fn norm_text(&self) -> String {
        self.grad_norm
            .map_or_else(|| "–".to_string(), |n| format!("{n:.3e}"))
    }
}

/// A node's bytes (allocated, graph), or `not captured` when their source was off (the tree's
/// `alloc_note`, `graph_note`): a 0 that is no measurement.
pub fn bytes_text(bytes: u64, not_captured: bool) -> String {
    if not_captured {
        crate::model::summary::NOT_CAPTURED.to_string()
    } else {
        format_bytes(bytes)
    }
}

/// A share as the CLI writes it: `12.5%`, or `–` without a measured total.
pub fn share_text(share: Option<f64>) -> String {
    share.map_or(String::from("–"), |s| format!("{:.1}%", s * 100.0))
}

/// A row a tree is arranged from: a key and its numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeRow<'a> {
    /// The module key (or leaf name).
    pub key: &'a str,
    /// Calls.
    pub calls: u64,
    /// Total time, ns.
    pub total_ns: u64,
    /// Self time, ns.
    pub self_ns: u64,
    /// Share of the measured total.
    pub share: Option<f64>,
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's key (`block[0]/attn`).
    pub key: String,
    /// Its own level's label (`attn`).
    pub label: String,
    /// 0 for roots.
    pub depth: usize,
    /// Its parent.
    pub parent: Option<usize>,
    /// Its children, in the order first met.
    pub children: Vec<usize>,
    /// Whether a row has this key (else it is a group of its children).
    pub measured: bool,
    /// Calls (a group: its children's sum).
    pub calls: u64,
    /// Total time, ns.
    pub total_ns: u64,
    /// Self time, ns.
    pub self_ns: u64,
    /// Share of the measured total (a group: its children's sum), `None` without one.
    pub share: Option<f64>,
    /// Memory, parameters and gradients (the schema's tree only).
    pub extras: Option<Extras>,
}

impl Node {
    /// A module no span ran that has nothing below it: known only from its weights (its
    /// parameters and gradients), its time not measured. The CLI's `no span`.
    pub fn no_span(&self) -> bool {
        !self.measured && self.children.is_empty()
    }

    /// The note after the label and its tooltip: `(group)` for a level no span has that adds
    /// up its children, `(no span)` for a module known only from its weights, none for a
    /// measured node.
    pub fn note(&self) -> Option<(&'static str, &'static str)> {
        if self.measured {
            None
        } else if self.no_span() {
            Some((
                " (no span)",
                "no span ran it: a module known from its weights (parameters, gradients); its time was not measured",
            ))
        } else {
            Some((
                " (group)",
                "a group: no span ran it; its total adds up its children's",
            ))
        }
    }

    /// Total time, human; `–` for a module no span ran ([`Node::no_span`]): not measured, not 0.
    pub fn total_text(&self) -> String {
        if self.no_span() {
            "–".to_string()
        } else {
            format_ns(self.total_ns)
        }
    }
    /// Self time, human; `–` for a group (no span ran it), as the CLI shows it.
    pub fn self_text(&self) -> String {
        if self.measured {
            format_ns(self.self_ns)
        } else {
            "–".to_string()
        }
    }

    /// Calls; `–` for a group.
    pub fn calls_text(&self) -> String {
        if self.measured {
            self.calls.to_string()
        } else {
            "–".to_string()
        }
    }
    /// Share, as the modules table writes it; `–` for a module no span ran.
    pub fn share_text(&self) -> String {
        if self.no_span() {
            "–".to_string()
        } else {
            share_text(self.share)
        }
    }
}

/// A sortable column of the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeColumn {
    /// The label.
    Name,
    /// Calls.
    Calls,
    /// Total time.
    Total,
    /// Self time.
    SelfTime,
    /// Allocated bytes.
    Alloc,
    /// Graph tensor bytes.
    Graph,
    /// Parameter bytes (nodes without them last).
    Params,
    /// Parameters with a missing, zero or non-finite gradient.
    Problems,
    /// Gradient norm (nodes without one last).
    Norm,
}

/// Module rows as a tree.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModuleTree {
    /// Every node; parents before their children.
    pub nodes: Vec<Node>,
    /// The roots, in the order first met.
    pub roots: Vec<usize>,
    by_key: HashMap<String, usize>,
}

impl ModuleTree {
    /// The tree of `rows` (any order), split by `style`.
    pub fn build<'a>(rows: impl IntoIterator<Item = TreeRow<'a>>, style: KeyStyle) -> Self {
        let mut t = ModuleTree::default();
        for r in rows {
            let mut parent: Option<usize> = None;
            for (depth, (key, label)) in levels(r.key, style).into_iter().enumerate() {
                let n = match t.by_key.get(key) {
                    Some(&n) => n,
                    None => {
                        let n = t.nodes.len();
                        t.nodes.push(Node {
                            key: key.to_string(),
                            label: label.to_string(),
                            depth,
                            parent,
                            children: Vec::new(),
                            measured: false,
                            calls: 0,
                            total_ns: 0,
                            self_ns: 0,
                            share: None,
                            extras: None,
                        });
                        t.by_key.insert(key.to_string(), n);
                        match parent {
                            Some(p) => t.nodes[p].children.push(n),
                            None => t.roots.push(n),
                        }
                        n
                    }
                };
                parent = Some(n);
            }
            if let Some(n) = parent {
                let node = &mut t.nodes[n];
                node.measured = true;
                node.calls = r.calls;
                node.total_ns = r.total_ns;
                node.self_ns = r.self_ns;
                node.share = r.share;
            }
        }
        // Groups add up their children's totals, deepest first (children come after their
        // parents); no span ran a group, so it has no calls and no self time.
        for n in (0..t.nodes.len()).rev() {
            if t.nodes[n].measured {
                continue;
            }
            let (mut total, mut share) = (0u64, None);
            for &c in &t.nodes[n].children {
                let c = &t.nodes[c];
                total = total.saturating_add(c.total_ns);
                share = match (share, c.share) {
                    (None, s) | (s, None) => s,
                    (Some(a), Some(b)) => Some(a + b),
                };
            }
            let node = &mut t.nodes[n];
            node.total_ns = total;
            node.share = share;
        }
        t
    }

    /// The schema's tree (its nodes in pre-order, each with its parent).
    pub fn of_schema(tree: &SchemaTree) -> Self {
        let mut t = ModuleTree::default();
        for (i, n) in tree.nodes.iter().enumerate() {
            let parent = n.parent.map(|p| p as usize).filter(|&p| p < i);
            t.nodes.push(Node {
                key: n.key.clone(),
                label: n.label.clone(),
                depth: n.depth as usize,
                parent,
                children: Vec::new(),
                measured: n.measured,
                calls: n.calls,
                total_ns: n.total_ns,
                self_ns: n.self_ns,
                share: n.share,
                extras: Some(Extras {
                    alloc_bytes: n.alloc_bytes,
                    graph_bytes: n.graph_bytes,
                    param_bytes: n.param_bytes,
                    gradients: n.gradients,
                    grad_norm: n.grad_norm,
                }),
            });
            match parent {
                Some(p) => t.nodes[p].children.push(i),
                None => t.roots.push(i),
            }
            t.by_key.insert(n.key.clone(), i);
        }
        t
    }

    /// The node with this key.
    pub fn node_of_key(&self, key: &str) -> Option<usize> {
        self.by_key.get(key).copied()
    }

    /// The keys of `n`'s ancestors, the root first (what must be expanded to show it).
    pub fn ancestor_keys(&self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = self.nodes.get(n).and_then(|x| x.parent);
        while let Some(p) = at {
            out.push(self.nodes[p].key.clone());
            at = self.nodes[p].parent;
        }
        out.reverse();
        out
    }

    /// The keys of every node with children down to `depth` levels (0: the roots).
    pub fn keys_to_depth(&self, depth: usize) -> HashSet<String> {
        self.nodes
            .iter()
            .filter(|n| n.depth <= depth && !n.children.is_empty())
            .map(|n| n.key.clone())
            .collect()
    }

    /// `n` and every node below it.
    pub fn subtree(&self, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![n];
        while let Some(x) = stack.pop() {
            if let Some(node) = self.nodes.get(x) {
                out.push(x);
                stack.extend(node.children.iter().rev());
            }
        }
        out
    }

    fn sorted(&self, list: &[usize], sort: SortState<TreeColumn>) -> Vec<usize> {
        let mut v = list.to_vec();
        sort_indices(&mut v, &|a, b| {
            let (x, y) = (&self.nodes[a], &self.nodes[b]);
            let dir = |o: core::cmp::Ordering| if sort.descending { o.reverse() } else { o };
            // Absent values after present ones, whichever the direction (the schema's rule).
            let opt = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => dir(a.total_cmp(&b)),
                (Some(_), None) => core::cmp::Ordering::Less,
                (None, Some(_)) => core::cmp::Ordering::Greater,
                (None, None) => core::cmp::Ordering::Equal,
            };
            let extra = |n: &Node, f: fn(&Extras) -> Option<f64>| n.extras.as_ref().and_then(f);
            let primary = match sort.column {
                TreeColumn::Name => dir(x.label.cmp(&y.label)),
                TreeColumn::Calls => dir(x.calls.cmp(&y.calls)),
                TreeColumn::Total => dir(x.total_ns.cmp(&y.total_ns)),
                TreeColumn::SelfTime => dir(x.self_ns.cmp(&y.self_ns)),
                TreeColumn::Alloc => opt(
                    extra(x, |e| Some(e.alloc_bytes as f64)),
                    extra(y, |e| Some(e.alloc_bytes as f64)),
                ),
                TreeColumn::Graph => opt(
                    extra(x, |e| Some(e.graph_bytes as f64)),
                    extra(y, |e| Some(e.graph_bytes as f64)),
                ),
                TreeColumn::Params => opt(
                    extra(x, |e| e.param_bytes.map(|b| b as f64)),
                    extra(y, |e| e.param_bytes.map(|b| b as f64)),
                ),
                TreeColumn::Problems => opt(
                    extra(x, |e| Some(e.gradients.problems() as f64)),
                    extra(y, |e| Some(e.gradients.problems() as f64)),
                ),
                TreeColumn::Norm => opt(extra(x, |e| e.grad_norm), extra(y, |e| e.grad_norm)),
            };
            primary.then_with(|| x.key.cmp(&y.key))
        });
        v
    }

    /// The rows shown, top to bottom: the roots and, under each expanded node (by key), its
    /// children, every level sorted by `sort` (ties by key).
    pub fn visible(&self, expanded: &HashSet<String>, sort: SortState<TreeColumn>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack: Vec<usize> = self.sorted(&self.roots, sort).into_iter().rev().collect();
        while let Some(n) = stack.pop() {
            out.push(n);
            let node = &self.nodes[n];
            if !node.children.is_empty() && expanded.contains(&node.key) {
                stack.extend(self.sorted(&node.children, sort).into_iter().rev());
            }
        }
        out
    }
}

/// Which spans each module key stands for, and the key each span belongs to: the links
/// between the modules tab and the chart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModuleLinks {
    /// Module spans by module path, each list in document order.
    pub by_path: HashMap<String, Vec<u32>>,
    /// Module spans by name.
    pub by_name: HashMap<String, Vec<u32>>,
    /// Each span's module path (its nearest module's, itself included).
    span_path: Vec<u32>,
    /// Each span's nearest module span (itself when a module), `u32::MAX` for none.
    span_module: Vec<u32>,
    /// Path texts by id.
    texts: Vec<String>,
}

impl ModuleLinks {
    /// The links of `doc`, with its module paths.
    pub fn of(doc: &TraceDocument, paths: &ModulePaths) -> Self {
        let n = doc.spans.len();
        let mut links = ModuleLinks {
            span_path: (0..n).map(|i| paths.path_id(i)).collect(),
            span_module: vec![u32::MAX; n],
            texts: paths.texts().to_vec(),
            ..ModuleLinks::default()
        };
        // Nearest module span, top down (iterative: a trace may nest deeply).
        let mut stack: Vec<(u32, u32)> = doc.tree.roots.iter().map(|&r| (r, u32::MAX)).collect();
        while let Some((i, above)) = stack.pop() {
            let Some(span) = doc.spans.get(i as usize) else {
                continue;
            };
            let here = if is_module_span(span) { i } else { above };
            links.span_module[i as usize] = here;
            stack.extend(doc.tree.children(i as usize).iter().map(|&c| (c, here)));
        }
        for (i, s) in doc.spans.iter().enumerate() {
            if !is_module_span(s) {
                continue;
            }
            links
                .by_path
                .entry(paths.path(i).to_string())
                .or_default()
                .push(i as u32);
            links
                .by_name
                .entry(s.name.to_string())
                .or_default()
                .push(i as u32);
        }
        links
    }

    /// The key span `i` shows under in the tree by path (`by_name`: by leaf name), `None`
    /// when no module span encloses it.
    pub fn key_of_span<'a>(
        &'a self,
        doc: &'a TraceDocument,
        i: u32,
        by_name: bool,
    ) -> Option<&'a str> {
        let m = *self.span_module.get(i as usize)?;
        if m == u32::MAX {
            return None;
        }
        if by_name {
            doc.spans.get(m as usize).map(|s| s.name.as_str())
        } else {
            let id = *self.span_path.get(i as usize)?;
            self.texts.get(id as usize).map(String::as_str)
        }
    }

    /// The spans node `n` of `tree` stands for: its subtree's (sorted, deduplicated; none for
    /// a node whose keys no module span has).
    pub fn node_spans(&self, tree: &ModuleTree, n: usize, by_name: bool) -> Vec<u32> {
        let keys = tree.subtree(n);
        self.spans_of(
            keys.iter()
                .filter_map(|&x| tree.nodes.get(x))
                .map(|x| x.key.as_str()),
            by_name,
        )
    }

    /// The spans of the nodes `keys` (each list in document order), deduplicated and sorted.
    pub fn spans_of<'a>(&self, keys: impl IntoIterator<Item = &'a str>, by_name: bool) -> Vec<u32> {
        let map = if by_name {
            &self.by_name
        } else {
            &self.by_path
        };
        let mut out: Vec<u32> = keys
            .into_iter()
            .filter_map(|k| map.get(k))
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_say_not_captured_when_their_source_was_off() {
        assert_eq!(bytes_text(2048, false), "2.00 KiB");
        assert_eq!(bytes_text(0, false), "0 B");
        assert_eq!(bytes_text(0, true), "not captured");
    }
    use candle_trace_schema::analysis::module_tree::trace_tree;
    use candle_trace_schema::analysis::modules::{module_rows, ModuleGrouping, ModuleRow};

    fn row(key: &'static str, calls: u64, total_ns: u64, self_ns: u64) -> TreeRow<'static> {
        TreeRow {
            key,
            calls,
            total_ns,
            self_ns,
            share: Some(total_ns as f64 / 1000.0),
        }
    }

    /// The schema's rows as tree rows.
    fn tree_rows(rows: &[ModuleRow]) -> Vec<TreeRow<'_>> {
        rows.iter()
            .map(|r| TreeRow {
                key: &r.key,
                calls: r.calls,
                total_ns: r.total_ns,
                self_ns: r.self_ns,
                share: r.share,
            })
            .collect()
    }

    #[test]
    fn keys_split_into_levels() {
        assert_eq!(
            levels("block[1]/attn/linear[3]", KeyStyle::Nesting),
            vec![
                ("block[1]", "block[1]"),
                ("block[1]/attn", "attn"),
                ("block[1]/attn/linear[3]", "linear[3]")
            ]
        );
        // Nesting paths keep dots inside a name.
        assert_eq!(
            levels("a.b/c", KeyStyle::Nesting),
            vec![("a.b", "a.b"), ("a.b/c", "c")]
        );
        assert_eq!(
            levels("model.layers.10.self_attn.q_proj", KeyStyle::Names),
            vec![
                ("model", "model"),
                ("model.layers.10", "layers.10"),
                ("model.layers.10.self_attn", "self_attn"),
                ("model.layers.10.self_attn.q_proj", "q_proj"),
            ]
        );
        // A `/` segment under a named module; digits after `/` stay their own level.
        assert_eq!(
            levels("model.layers.0.self_attn/attn-rot", KeyStyle::Names),
            vec![
                ("model", "model"),
                ("model.layers.0", "layers.0"),
                ("model.layers.0.self_attn", "self_attn"),
                ("model.layers.0.self_attn/attn-rot", "attn-rot"),
            ]
        );
        assert_eq!(
            levels("0.weight", KeyStyle::Names),
            vec![("0", "0"), ("0.weight", "weight")]
        );
        assert_eq!(
            levels("µ.x", KeyStyle::Names),
            vec![("µ", "µ"), ("µ.x", "x")]
        );
        assert_eq!(levels("a/b", KeyStyle::Flat), vec![("a/b", "a/b")]);
        assert_eq!(levels("", KeyStyle::Nesting), vec![("", "")]);
    }

    #[test]
    fn groups_add_up_their_children_and_measured_nodes_keep_their_numbers() {
        // Names mode, as the module-names issue gives them: `model` is nobody's key.
        let rows = vec![
            row("model.layers.0.mlp", 1, 300, 100),
            row("model.layers.0.mlp.up", 1, 120, 120),
            row("model.layers.0.mlp.down", 1, 80, 80),
            row("model.layers.1.mlp", 1, 200, 200),
            row("lm_head", 1, 50, 50),
        ];
        let t = ModuleTree::build(rows, KeyStyle::Names);
        let n = |k: &str| &t.nodes[t.node_of_key(k).unwrap()];
        // model.layers.0 is a group: its one child mlp's total, no calls or self time.
        let l0 = n("model.layers.0");
        assert!(!l0.measured);
        assert_eq!(
            (l0.calls, l0.total_ns, l0.self_ns, l0.label.as_str()),
            (0, 300, 0, "layers.0")
        );
        // model: layers.0 (300) + layers.1 (200).
        let m = n("model");
        assert_eq!((m.calls, m.total_ns, m.self_ns), (0, 500, 0));
        assert_eq!(m.share, Some(0.5));
        // A measured node keeps its own numbers, not its children's sum.
        let mlp = n("model.layers.0.mlp");
        assert!(mlp.measured);
        assert_eq!((mlp.total_ns, mlp.self_ns), (300, 100));
        assert_eq!(t.roots.len(), 2);
        assert_eq!(
            t.ancestor_keys(t.node_of_key("model.layers.0.mlp.up").unwrap()),
            vec!["model", "model.layers.0", "model.layers.0.mlp"]
        );
        assert_eq!(t.subtree(t.node_of_key("model.layers.0").unwrap()).len(), 4);
    }

    #[test]
    fn visible_rows_follow_expansion_and_sort_every_level() {
        let rows = vec![
            row("a", 1, 100, 10),
            row("a/x", 3, 60, 60),
            row("a/y", 1, 30, 30),
            row("b", 2, 500, 500),
        ];
        let t = ModuleTree::build(rows, KeyStyle::Nesting);
        let keys = |v: Vec<usize>| -> Vec<String> {
            v.into_iter().map(|n| t.nodes[n].key.clone()).collect()
        };
        let by_total = SortState::new(TreeColumn::Total, true);
        // Collapsed: the roots, heaviest first.
        assert_eq!(keys(t.visible(&HashSet::new(), by_total)), ["b", "a"]);
        let open: HashSet<String> = t.keys_to_depth(0);
        assert_eq!(
            open,
            ["a".to_string()].into_iter().collect::<HashSet<String>>()
        );
        assert_eq!(keys(t.visible(&open, by_total)), ["b", "a", "a/x", "a/y"]);
        // By calls ascending, at every level: a (1) before b (2); y (1) before x (3).
        let by_calls = SortState::new(TreeColumn::Calls, false);
        assert_eq!(keys(t.visible(&open, by_calls)), ["a", "a/y", "a/x", "b"]);
        // By name descending.
        let by_name = SortState::new(TreeColumn::Name, true);
        assert_eq!(keys(t.visible(&open, by_name)), ["b", "a", "a/y", "a/x"]);
        let by_self = SortState::new(TreeColumn::SelfTime, true);
        assert_eq!(keys(t.visible(&open, by_self)), ["b", "a", "a/x", "a/y"]);
    }

    /// step 0..1000 (function): block 0..400 { attn 50..350 { linear 100..300 { matmul op } } },
    /// block 400..700 { attn 450..650 }.
    fn doc() -> TraceDocument {
        let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;
        let mut lines = vec![meta.to_string()];
        let mut span = |id: &str,
                        parent: Option<&str>,
                        name: &str,
                        kind: &str,
                        start: u64,
                        dur: u64| {
            let parent = parent.map_or(String::new(), |p| format!(r#""parent_id":"{p}","#));
            lines.push(format!(
                r#"{{"kind":"span_start","id":"{id}",{parent}"name":"{name}","start_ns":{start},"span_kind":"{kind}","measured":{}}}"#,
                id == "s"
            ));
            lines.push(format!(
                r#"{{"kind":"span_end","id":"{id}","duration_ns":{dur}}}"#
            ));
        };
        span("s", None, "step", "function", 0, 1000);
        span("b0", Some("s"), "block", "module", 0, 400);
        span("a0", Some("b0"), "attn", "module", 50, 300);
        span("l0", Some("a0"), "linear", "module", 100, 200);
        span("m0", Some("l0"), "matmul", "op", 120, 50);
        span("b1", Some("s"), "block", "module", 400, 300);
        span("a1", Some("b1"), "attn", "module", 450, 200);
        TraceDocument::from_bytes(lines.join("\n").as_bytes())
    }

    #[test]
    fn trees_built_from_rows_match_the_schema_tree() {
        // The tree a range's rows are arranged into (here the whole run's rows) has the
        // schema's nodes: keys, labels, depths, measured flags and time numbers, on nesting
        // paths and on weight names (Llama and a flat Mistral named by its weights). The
        // schema's also has the modules only gradients name (`model.embed_tokens`, which
        // fetches its weight outside any span): no time, so no row.
        for file in [
            &include_bytes!("../../../tests/fixtures/valid_panels.trace6.jsonl")[..],
            &include_bytes!("../../../tests/fixtures/modules/llama_modules.trace6.jsonl")[..],
            &include_bytes!("../../../tests/fixtures/modules/mistral_names.trace6.jsonl")[..],
        ] {
            let d = TraceDocument::from_bytes(file);
            let paths = ModulePaths::new(&d);
            let style = if paths.names() {
                KeyStyle::Names
            } else {
                KeyStyle::Nesting
            };
            let rows = module_rows(&d, &paths, ModuleGrouping::Path);
            let built = ModuleTree::build(tree_rows(&rows), style);
            let schema = ModuleTree::of_schema(&trace_tree(&d, &paths));
            let sort = SortState::new(TreeColumn::Total, true);
            let all = |t: &ModuleTree| t.keys_to_depth(usize::MAX);
            let shown = |t: &ModuleTree| -> Vec<(String, String, usize, bool, u64, u64, u64)> {
                t.visible(&all(t), sort)
                    .into_iter()
                    .filter(|&n| t.nodes[n].measured || t.nodes[n].calls > 0)
                    .map(|n| {
                        let x = &t.nodes[n];
                        (
                            x.key.clone(),
                            x.label.clone(),
                            x.depth,
                            x.measured,
                            x.calls,
                            x.total_ns,
                            x.self_ns,
                        )
                    })
                    .collect()
            };
            assert!(!schema.nodes.is_empty());
            assert_eq!(shown(&built), shown(&schema));
            // The schema lists its nodes in the order the tab shows them by total time.
            assert_eq!(
                schema.visible(&all(&schema), sort),
                (0..schema.nodes.len()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn a_module_no_span_ran_says_so_and_shows_no_time() {
        // mistral_names: `model.embed_tokens` fetches its weight outside any span (candle-nn's
        // embedding opens none) and gets a gradient; `model` is a group of measured levels.
        let d = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/modules/mistral_names.trace6.jsonl"
        ));
        let t = ModuleTree::of_schema(&trace_tree(&d, &ModulePaths::new(&d)));
        let n = |k: &str| &t.nodes[t.node_of_key(k).unwrap()];
        let embed = n("model.embed_tokens");
        assert!(embed.no_span());
        assert_eq!(embed.note().map(|(text, _)| text), Some(" (no span)"));
        assert_eq!(
            (
                embed.calls_text(),
                embed.total_text(),
                embed.self_text(),
                embed.share_text()
            ),
            ("–".into(), "–".into(), "–".into(), "–".into())
        );
        let model = n("model");
        assert!(!model.no_span());
        assert_eq!(model.note().map(|(text, _)| text), Some(" (group)"));
        assert_ne!(model.total_text(), "–");
        let head = n("lm_head");
        assert_eq!(head.note(), None);
        assert_eq!(head.total_text(), format_ns(head.total_ns));
    }

    #[test]
    fn rows_link_to_their_spans_and_spans_to_their_rows() {
        let d = doc();
        let paths = ModulePaths::new(&d);
        let links = ModuleLinks::of(&d, &paths);
        let idx = |id: &str| d.span_index(id).unwrap() as u32;
        // The op inside linear shows under block[0]/attn/linear; the step under no module.
        assert_eq!(
            links.key_of_span(&d, idx("m0"), false),
            Some("block[0]/attn/linear")
        );
        assert_eq!(
            links.key_of_span(&d, idx("a1"), false),
            Some("block[1]/attn")
        );
        assert_eq!(links.key_of_span(&d, idx("s"), false), None);
        assert_eq!(links.key_of_span(&d, idx("m0"), true), Some("linear"));
        // By name, `attn` stands for both attn spans; by path each its own.
        assert_eq!(links.spans_of(["attn"], true), vec![idx("a0"), idx("a1")]);
        assert_eq!(links.spans_of(["block[1]/attn"], false), vec![idx("a1")]);
        // A node's row stands for its subtree's spans.
        let rows = module_rows(&d, &paths, ModuleGrouping::Path);
        let t = ModuleTree::build(tree_rows(&rows), KeyStyle::Nesting);
        let b0 = t.node_of_key("block[0]").unwrap();
        assert_eq!(
            links.node_spans(&t, b0, false),
            vec![idx("b0"), idx("a0"), idx("l0")]
        );
        // A node whose keys no module span of the document has stands for none (its row is
        // no link); one past the tree too.
        let other = ModuleTree::build([row("elsewhere", 1, 10, 10)], KeyStyle::Nesting);
        assert_eq!(links.node_spans(&other, 0, false), Vec::<u32>::new());
        assert_eq!(
            links.node_spans(&t, t.nodes.len(), false),
            Vec::<u32>::new()
        );
        // The tree of the panel's rows: block[0] (400) holds attn (300) holds linear (200).
        assert_eq!(t.roots.len(), 2);
        let a0 = t.node_of_key("block[0]/attn").unwrap();
        assert_eq!(
            (t.nodes[a0].total_ns, t.nodes[a0].self_ns, t.nodes[a0].depth),
            (300, 100, 1)
        );
        assert!(
            t.nodes.iter().all(|n| n.measured),
            "nesting paths: every level is a span"
        );
    }
}

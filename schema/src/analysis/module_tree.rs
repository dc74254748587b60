//! The module tree: every module of a trace (or of an inference profile's forward calls) as a
//! collapsible tree, with its time, memory, parameters and gradients side by side.
//!
//! Rules (SCHEMA.md §4, "Module names"):
//! - The nodes are the levels of the module keys of [`crate::analysis::modules`]: a key is cut
//!   into levels by [`level_ends`] (at `/`, and in names mode at `.`; a level made only of
//!   digits joins the one before, so `model.layers.1.self_attn.q_proj` is `model` → `layers.1`
//!   → `self_attn` → `q_proj`). A node's parent is the node of the longest shorter prefix of its
//!   key, cut at a separator, that is a node itself (so a key `model.layers`, when some span has
//!   it, holds `model.layers.0` as the child `0`); its label is the rest of its key.
//! - A node some module span has as its key is **measured**: its `calls`, `total_ns` and
//!   `self_ns` are that key's aggregate ([`crate::analysis::modules::module_rows`]: outermost
//!   spans for calls and total, every span for self). A node no span has is a **group**
//!   (`measured = false`): its total is the sum of its children's totals, and it has no calls
//!   and no self time (0: no span ran the group itself).
//! - Memory, parameters and gradients are inclusive of the node's subtree: `alloc_bytes` adds the
//!   `memory` allocs made in spans whose key is in it (the counting allocator's host blocks),
//!   `graph_bytes` the bytes of the `tensor` records (parameters left out) seen in those spans;
//!   `param_bytes` and `gradients` come from the `gradient` records, whose parameter key without
//!   its last segment is a module key (`model.layers.0.mlp.down_proj.weight` →
//!   `model.layers.0.mlp.down_proj`; only in names mode: nesting paths name no parameter), with
//!   `param_bytes` the sum of their `storage_bytes` (`None` when no record in the subtree has
//!   one) and `grad_norm` the global norm, √(Σ norm²) over the finite norms. A parameter key
//!   without a `.` belongs to no node. What a document lacks (allocator off, no gradients …)
//!   is said once, in [`ModuleTree`]'s notes, not as zeros.
//! - Allocations and graph tensors in spans outside every module (the empty key: the
//!   optimizer, candle's backward …) are [`ModuleTree::outside_alloc_bytes`] and
//!   [`ModuleTree::outside_graph_bytes`].
//! - Order: children by total time, largest first, then by key ([`ModuleTree::sorted`]
//!   re-sorts every level by another column); `nodes` lists them in pre-order with each node's
//!   depth and parent.
//! - An inference profile's tree ([`profile_tree`]) adds up the module spans of every forward
//!   call given, keyed per call; it has time only.

use crate::analysis::sort;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Ordering;

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use crate::analysis::gradients::{module_of, GradientCounts};
use crate::analysis::modules::{
    is_module_span, is_separator, level_ends, ModulePaths, MAX_SPLIT_BYTES,
};
use crate::analysis::profile_modules::RequestModules;
use crate::analysis::summary::not_captured;
use crate::format::document::TraceDocument;
use crate::format::events::{source, GradientState, MemoryAction, SpanKind, TensorCategory};

/// One node of the module tree (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleNode {
    /// The module key up to this node (`model.layers.1.self_attn`).
    pub key: String,
    /// What the node adds to its parent's key (`self_attn`).
    pub label: String,
    /// 0 at the top.
    pub depth: u32,
    /// Index of the parent node in [`ModuleTree::nodes`].
    pub parent: Option<u32>,
    /// Number of children.
    pub children: u32,
    /// Some span has this key (else a group whose time sums its children's).
    pub measured: bool,
    /// Calls (outermost spans of the key; 0 for a group).
    pub calls: u64,
    /// Total time, inclusive.
    pub total_ns: u64,
    /// Self time.
    pub self_ns: u64,
    /// `total_ns / measured total` (a trace's summary `total_ns`); `None` when that is 0 or
    /// unknown (profiles).
    pub share: Option<f64>,
    /// Bytes of the `memory` allocs made in it.
    pub alloc_bytes: u64,
    /// Bytes of the graph tensors (not parameters) seen in it.
    pub graph_bytes: u64,
    /// Bytes of its parameters; `None` when no gradient record in it states them.
    pub param_bytes: Option<u64>,
    /// Its parameters' gradient states.
    pub gradients: GradientCounts,
    /// Global norm of its parameters' gradients; `None` without a finite norm.
    pub grad_norm: Option<f64>,
}

/// A column of the tree to sort by ([`ModuleTree::sorted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleColumn {
    /// The key, alphabetically.
    Key,
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
    /// Parameters whose gradient is missing, zero or non-finite.
    Problems,
    /// Gradient norm (nodes without one last).
    Norm,
}

/// The module tree of a trace or of an inference profile's forward calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModuleTree {
    /// Names mode: keys are module names; otherwise nesting paths.
    pub names: bool,
    /// The nodes in pre-order.
    pub nodes: Vec<ModuleNode>,
    /// Bytes allocated in spans outside every module.
    pub outside_alloc_bytes: u64,
    /// Graph tensor bytes seen in spans outside every module.
    pub outside_graph_bytes: u64,
    /// Why `alloc_bytes` are all 0, when they say nothing (`not captured (allocator off)`).
    pub alloc_note: Option<String>,
    /// Why `graph_bytes` are all 0, when they say nothing.
    pub graph_note: Option<String>,
    /// Why no node has parameters or gradients, when they say nothing.
    pub gradients_note: Option<String>,
}

impl ModuleTree {
    /// The same tree with the children of every node ordered by `column` (descending or
    /// ascending), ties by key.
    pub fn sorted(&self, column: ModuleColumn, descending: bool) -> ModuleTree {
        let order = preorder(&self.nodes, column, descending);
        let mut new_index = vec![0u32; self.nodes.len()];
        for (to, &from) in order.iter().enumerate() {
            new_index[from] = u32::try_from(to).unwrap_or(u32::MAX);
        }
        let nodes = order
            .iter()
            .map(|&from| {
                let mut n = self.nodes[from].clone();
                n.parent = n.parent.map(|p| new_index[p as usize]);
                n
            })
            .collect();
        ModuleTree {
            nodes,
            ..self.clone_without_nodes()
        }
    }

    fn clone_without_nodes(&self) -> ModuleTree {
        ModuleTree {
            names: self.names,
            nodes: Vec::new(),
            outside_alloc_bytes: self.outside_alloc_bytes,
            outside_graph_bytes: self.outside_graph_bytes,
            alloc_note: self.alloc_note.clone(),
            graph_note: self.graph_note.clone(),
            gradients_note: self.gradients_note.clone(),
        }
    }

    /// The nodes left showing when the nodes for which `collapsed` is true hide their
    /// subtrees: indices into `nodes`, in order.
    pub fn visible(&self, collapsed: impl Fn(usize) -> bool) -> Vec<usize> {
        let mut out = Vec::new();
        let mut hide_below: Option<u32> = None;
        for (i, n) in self.nodes.iter().enumerate() {
            match hide_below {
                Some(d) if n.depth > d => continue,
                _ => hide_below = None,
            }
            out.push(i);
            if collapsed(i) && n.children > 0 {
                hide_below = Some(n.depth);
            }
        }
        out
    }
}

/// `a` against `b` by `column` (absent values after present ones, whichever the direction).
fn compare(a: &ModuleNode, b: &ModuleNode, column: ModuleColumn, descending: bool) -> Ordering {
    let dir = |o: Ordering| if descending { o.reverse() } else { o };
    let opt = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => dir(x.total_cmp(&y)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    let by = match column {
        ModuleColumn::Key => dir(a.key.cmp(&b.key)),
        ModuleColumn::Calls => dir(a.calls.cmp(&b.calls)),
        ModuleColumn::Total => dir(a.total_ns.cmp(&b.total_ns)),
        ModuleColumn::SelfTime => dir(a.self_ns.cmp(&b.self_ns)),
        ModuleColumn::Alloc => dir(a.alloc_bytes.cmp(&b.alloc_bytes)),
        ModuleColumn::Graph => dir(a.graph_bytes.cmp(&b.graph_bytes)),
        ModuleColumn::Params => opt(
            a.param_bytes.map(|v| v as f64),
            b.param_bytes.map(|v| v as f64),
        ),
        ModuleColumn::Problems => dir(a.gradients.problems().cmp(&b.gradients.problems())),
        ModuleColumn::Norm => opt(a.grad_norm, b.grad_norm),
    };
    by.then_with(|| a.key.cmp(&b.key))
}

/// The pre-order of `nodes` (whose `parent`s index `nodes`) with siblings sorted by `column`;
/// each node's `depth` and `children` are left as they are (they do not change).
fn preorder(nodes: &[ModuleNode], column: ModuleColumn, descending: bool) -> Vec<usize> {
    let mut kids: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        match n.parent.and_then(|p| kids.get_mut(p as usize)) {
            Some(list) => list.push(i),
            None => roots.push(i),
        }
    }
    let sort = |list: &mut Vec<usize>| {
        sort::by(list, |&a, &b| {
            compare(&nodes[a], &nodes[b], column, descending)
        });
    };
    sort(&mut roots);
    for list in &mut kids {
        sort(list);
    }
    let mut out = Vec::with_capacity(nodes.len());
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        out.push(i);
        stack.extend(kids[i].iter().rev());
    }
    out
}

/// √x for x ≥ 0 (Newton's method from a halved exponent; `core` has no square root).
fn sqrt(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 || x.is_infinite() {
        return x.max(0.0);
    }
    let mut y = f64::from_bits((x.to_bits() >> 1) + (1023u64 << 51));
    for _ in 0..8 {
        let next = 0.5 * (y + x / y);
        if next == y {
            break;
        }
        y = next;
    }
    y
}

/// What one key holds itself (its subtree's are added up later).
#[derive(Debug, Clone, Copy, Default)]
struct Own {
    measured: bool,
    calls: u64,
    total_ns: u64,
    self_ns: u64,
    alloc_bytes: u64,
    graph_bytes: u64,
    param_bytes: Option<u64>,
    gradients: GradientCounts,
    norm_sq: Option<f64>,
}

impl Own {
    fn add_resources(&mut self, o: &Own) {
        self.alloc_bytes = self.alloc_bytes.saturating_add(o.alloc_bytes);
        self.graph_bytes = self.graph_bytes.saturating_add(o.graph_bytes);
        self.param_bytes = add_opt(self.param_bytes, o.param_bytes);
        self.gradients.present += o.gradients.present;
        self.gradients.missing += o.gradients.missing;
        self.gradients.zero += o.gradients.zero;
        self.gradients.non_finite += o.gradients.non_finite;
        self.norm_sq = match (self.norm_sq, o.norm_sq) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }

    fn add_time(&mut self, o: &Own) {
        self.calls = self.calls.saturating_add(o.calls);
        self.total_ns = self.total_ns.saturating_add(o.total_ns);
        self.self_ns = self.self_ns.saturating_add(o.self_ns);
    }

    /// A group's time: its children's totals. No span ran the group itself, so it has no
    /// calls and no self time.
    fn add_child_total(&mut self, o: &Own) {
        self.total_ns = self.total_ns.saturating_add(o.total_ns);
    }
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

/// Keys and what each holds, then the tree of their levels.
struct Builder<'a> {
    names: bool,
    /// Keys as added (a text may come more than once: its entries add up).
    keys: Vec<(&'a str, Own)>,
}

impl<'a> Builder<'a> {
    fn new(names: bool) -> Self {
        Builder {
            names,
            keys: Vec::new(),
        }
    }

    /// Add what a (non-empty) key holds.
    fn add(&mut self, key: &'a str, own: Own) {
        self.keys.push((key, own));
    }

    /// The segment ends of `key`: every separator after its first byte, and its end (a key
    /// longer than [`MAX_SPLIT_BYTES`] is one segment, as it is one level).
    fn segment_ends(&self, key: &str) -> impl Iterator<Item = usize> {
        let split = key.len() <= MAX_SPLIT_BYTES;
        let names = self.names;
        let len = key.len();
        let cuts: Vec<usize> = key
            .bytes()
            .enumerate()
            .skip(1)
            .filter(|&(_, c)| split && is_separator(c, names))
            .map(|(at, _)| at)
            .collect();
        cuts.into_iter().chain(core::iter::once(len))
    }

    /// The tree, in pre-order by total time; `measured_total` gives the shares.
    ///
    /// The keys are walked through a trie of their segments (cut at every separator, each
    /// with the separator before it), so that every prefix of a key at a separator is one
    /// trie entry and a key costs time in proportion to its length. The trie entries at level
    /// ends are the tree's nodes; a node's parent is the nearest node above it in the trie.
    fn build(self, measured_total: Option<u64>) -> Vec<ModuleNode> {
        let names = self.names;
        let mut trie: HashMap<(u32, &'a str), u32> = HashMap::new();
        // Per trie entry (0: the root), its node.
        let mut node_at: Vec<Option<usize>> = vec![None];
        let mut texts: Vec<&'a str> = Vec::new();
        let mut own: Vec<Own> = Vec::new();
        let mut measured: Vec<bool> = Vec::new();
        for &(key, ref o) in &self.keys {
            let ends = level_ends(key, names);
            let Some(&last) = ends.last() else { continue };
            let mut next_end = ends.iter().copied().peekable();
            let (mut entry, mut start) = (0u32, 0usize);
            for end in self.segment_ends(key) {
                let segment = &key[start..end];
                start = end;
                let fresh = u32::try_from(node_at.len()).unwrap_or(u32::MAX);
                entry = *trie.entry((entry, segment)).or_insert(fresh);
                if entry == fresh {
                    node_at.push(None);
                }
                if next_end.next_if_eq(&end).is_none() {
                    continue;
                }
                let Some(slot) = node_at.get_mut(entry as usize) else {
                    continue;
                };
                let n = *slot.get_or_insert_with(|| {
                    texts.push(&key[..end]);
                    own.push(Own::default());
                    measured.push(false);
                    texts.len() - 1
                });
                if end == last {
                    own[n].add_resources(o);
                    own[n].add_time(o);
                    measured[n] |= o.measured;
                }
            }
        }
        let n = texts.len();
        // Parents: walk the keys again, now that every node is made.
        let mut parent: Vec<Option<usize>> = vec![None; n];
        for &(key, _) in &self.keys {
            let (mut entry, mut start, mut above) = (0u32, 0usize, None);
            for end in self.segment_ends(key) {
                let Some(&e) = trie.get(&(entry, &key[start..end])) else {
                    break;
                };
                entry = e;
                start = end;
                if let Some(node) = node_at.get(entry as usize).copied().flatten() {
                    parent[node] = above;
                    above = Some(node);
                }
            }
        }
        // Sums, children before parents (a child's key is longer).
        let mut by_length: Vec<usize> = (0..n).collect();
        sort::by_key(&mut by_length, |&i| core::cmp::Reverse(texts[i].len()));
        let mut inclusive: Vec<Own> = own.clone();
        let mut time: Vec<Own> = vec![Own::default(); n];
        let mut child_time: Vec<Own> = vec![Own::default(); n];
        let mut children = vec![0u32; n];
        for &i in &by_length {
            time[i] = if measured[i] { own[i] } else { child_time[i] };
            if let Some(p) = parent[i] {
                let (c, t) = (inclusive[i], time[i]);
                inclusive[p].add_resources(&c);
                child_time[p].add_child_total(&t);
                children[p] += 1;
            }
        }
        let mut depth = vec![0u32; n];
        // Parents are shorter, so they come first by length ascending.
        for &i in by_length.iter().rev() {
            depth[i] = parent[i].map_or(0, |p| depth[p] + 1);
        }
        let nodes: Vec<ModuleNode> = (0..n)
            .map(|i| {
                let (t, r) = (&time[i], &inclusive[i]);
                // The label starts after the parent's key and its separator.
                let label_at = parent[i].map_or(0, |p| texts[p].len() + 1);
                ModuleNode {
                    key: texts[i].to_string(),
                    label: texts[i].get(label_at..).unwrap_or("").to_string(),
                    depth: depth[i],
                    parent: parent[i].map(|p| u32::try_from(p).unwrap_or(u32::MAX)),
                    children: children[i],
                    measured: measured[i],
                    calls: t.calls,
                    total_ns: t.total_ns,
                    self_ns: t.self_ns,
                    share: measured_total
                        .filter(|&m| m > 0)
                        .map(|m| t.total_ns as f64 / m as f64),
                    alloc_bytes: r.alloc_bytes,
                    graph_bytes: r.graph_bytes,
                    param_bytes: r.param_bytes,
                    gradients: r.gradients,
                    grad_norm: r.norm_sq.map(sqrt),
                }
            })
            .collect();
        let tree = ModuleTree {
            nodes,
            ..ModuleTree::default()
        };
        tree.sorted(ModuleColumn::Total, true).nodes
    }
}

/// The module tree of a trace (see the module docs), from its keys (`paths`, built from `doc`).
pub fn trace_tree(doc: &TraceDocument, paths: &ModulePaths) -> ModuleTree {
    let names = paths.names();
    // What each key holds, by key id (every span of a key adds to one entry).
    let texts = paths.texts();
    let mut by_id: Vec<Own> = vec![Own::default(); texts.len()];
    for (i, s) in doc.spans.iter().enumerate() {
        let id = paths.path_id(i) as usize;
        let Some(o) = by_id.get_mut(id).filter(|_| id != 0 && is_module_span(s)) else {
            continue;
        };
        o.measured = true;
        o.self_ns = o
            .self_ns
            .saturating_add(doc.tree.self_ns.get(i).copied().unwrap_or(0));
        if paths.outermost(i) {
            o.calls += 1;
            o.total_ns = o.total_ns.saturating_add(s.duration_or_zero());
        }
    }
    // The key id of the span a record names (0: none, or outside every module).
    let key_of = |span_id: &str| {
        doc.span_index(span_id)
            .map_or(0, |i| paths.path_id(i) as usize)
    };
    let (mut outside_alloc, mut outside_graph) = (0u64, 0u64);
    for row in doc.memory.iter() {
        if row.action != MemoryAction::Alloc {
            continue;
        }
        let key = key_of(row.span_id);
        match by_id.get_mut(key).filter(|_| key != 0) {
            Some(o) => o.alloc_bytes = o.alloc_bytes.saturating_add(row.bytes),
            None => outside_alloc = outside_alloc.saturating_add(row.bytes),
        }
    }
    for t in doc.tensors.iter() {
        if t.category == TensorCategory::Parameter {
            continue;
        }
        let key = key_of(&t.span_id);
        match by_id.get_mut(key).filter(|_| key != 0) {
            Some(o) => o.graph_bytes = o.graph_bytes.saturating_add(t.bytes()),
            None => outside_graph = outside_graph.saturating_add(t.bytes()),
        }
    }
    let mut b = Builder::new(names);
    for (text, o) in texts.iter().zip(by_id).skip(1) {
        b.add(text, o);
    }
    if names {
        // Per parameter module, in order of first appearance.
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut params: Vec<(&str, Own)> = Vec::new();
        for g in &doc.gradients {
            let module = module_of(&g.key);
            if module.is_empty() {
                continue;
            }
            let at = *index.entry(module).or_insert_with(|| {
                params.push((module, Own::default()));
                params.len() - 1
            });
            let o = &mut params[at].1;
            match g.state {
                GradientState::Present => o.gradients.present += 1,
                GradientState::Missing => o.gradients.missing += 1,
                GradientState::Zero => o.gradients.zero += 1,
                GradientState::NonFinite => o.gradients.non_finite += 1,
            }
            o.param_bytes = add_opt(o.param_bytes, g.storage_bytes);
            if let Some(norm) = g.norm.filter(|v| v.is_finite()) {
                o.norm_sq = Some(o.norm_sq.unwrap_or(0.0) + norm * norm);
            }
        }
        for (module, o) in params {
            b.add(module, o);
        }
    }
    let measured_total = doc
        .spans
        .iter()
        .filter(|s| s.measured)
        .map(|s| s.duration_or_zero())
        .fold(0, u64::saturating_add);
    let sources = doc.capture_sources.as_ref().map(|l| &l.event);
    let m = &doc.memory_profile;
    let gradients_note = if doc.gradients.is_empty() {
        not_captured(sources, true, source::GRADIENTS)
    } else if !names {
        Some(String::from(
            "not matched: gradients name their parameters, and the trace has no module names",
        ))
    } else {
        None
    };
    ModuleTree {
        names,
        nodes: b.build(Some(measured_total)),
        outside_alloc_bytes: outside_alloc,
        outside_graph_bytes: outside_graph,
        alloc_note: not_captured(
            sources,
            m.alloc_count + m.free_count == 0,
            source::ALLOCATOR,
        ),
        graph_note: not_captured(sources, doc.tensors.is_empty(), source::GRAPH),
        gradients_note,
    }
}

/// The module tree of the forward calls of `requests` (one request's, or every request's),
/// time only (see the module docs).
pub fn profile_tree(requests: &[RequestModules]) -> ModuleTree {
    let spans = || {
        requests
            .iter()
            .flat_map(|r| &r.forwards)
            .flat_map(|f| &f.spans)
    };
    let names = spans().any(|s| s.module.as_deref().is_some_and(|m| !m.is_empty()));
    let mut b = Builder::new(names);
    for s in spans() {
        let module =
            s.span_kind == SpanKind::Module || s.module.as_deref().is_some_and(|m| !m.is_empty());
        if !module || s.path.is_empty() {
            continue;
        }
        let mut o = Own {
            measured: true,
            self_ns: s.self_ns,
            ..Own::default()
        };
        if s.outermost {
            o.calls = 1;
            o.total_ns = s.duration_ns;
        }
        b.add(&s.path, o);
    }
    let none = || {
        Some(String::from(
            "not recorded per module in an inference profile",
        ))
    };
    ModuleTree {
        names,
        nodes: b.build(None),
        outside_alloc_bytes: 0,
        outside_graph_bytes: 0,
        alloc_note: none(),
        graph_note: none(),
        gradients_note: none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::profile::read_profile;
    use crate::test_lines::META;
    use alloc::format;

    /// Lines of a trace: spans get ids `s0`, `s1` … and start 10 ns apart.
    struct Lines {
        lines: Vec<String>,
        next: u64,
    }

    impl Lines {
        fn new() -> Self {
            Lines {
                lines: alloc::vec![META.to_string()],
                next: 0,
            }
        }

        fn span(
            &mut self,
            parent: Option<&str>,
            name: &str,
            kind: &str,
            ns: u64,
            module: Option<&str>,
        ) -> String {
            let id = format!("s{}", self.next);
            let start = self.next * 10;
            self.next += 1;
            let mut line = format!(
                r#"{{"kind":"span_start","id":"{id}","name":"{name}","start_ns":{start},"span_kind":"{kind}""#
            );
            match parent {
                Some(p) => line += &format!(r#","parent_id":"{p}""#),
                None => line += r#","measured":true"#,
            }
            if let Some(m) = module {
                line += &format!(r#","module":"{m}""#);
            }
            line.push('}');
            self.lines.push(line);
            self.lines.push(format!(
                r#"{{"kind":"span_end","id":"{id}","duration_ns":{ns}}}"#
            ));
            id
        }

        fn doc(&self) -> TraceDocument {
            let mut text = self.lines.join("\n");
            text.push('\n');
            TraceDocument::from_bytes(text.as_bytes())
        }
    }

    /// A 2-layer Mistral's forward (flat named `rms-norm` and `linear` spans; layer 1's each
    /// 1 ns longer, a 3 ns `matmul` op span in its `q_proj`), 256 bytes allocated in that
    /// matmul and 100 in `forward`, a 64-byte activation tensor seen in layer 0's `down_proj`
    /// (and a parameter tensor in layer 1's `q_proj`, which is no graph tensor), and gradients.
    fn mistral() -> TraceDocument {
        let mut l = Lines::new();
        let step = l.span(None, "update", "function", 1000, None);
        let fwd = l.span(Some(&step), "forward", "function", 900, None);
        let (mut matmul, mut down0, mut q1) = (String::new(), String::new(), String::new());
        for layer in 0..2u64 {
            let add = |l: &mut Lines, name: &str, ns: u64, m: &str| {
                let module = format!("model.layers.{layer}.{m}");
                l.span(Some(&fwd), name, "module", ns + layer, Some(&module))
            };
            add(&mut l, "rms-norm", 5, "input_layernorm");
            let q = add(&mut l, "linear", 10, "self_attn.q_proj");
            add(&mut l, "linear", 6, "self_attn.k_proj");
            add(&mut l, "linear", 6, "self_attn.v_proj");
            add(&mut l, "linear", 8, "self_attn.o_proj");
            add(&mut l, "rms-norm", 5, "post_attention_layernorm");
            add(&mut l, "linear", 12, "mlp.gate_proj");
            add(&mut l, "linear", 12, "mlp.up_proj");
            let down = add(&mut l, "linear", 14, "mlp.down_proj");
            if layer == 0 {
                down0 = down;
            } else {
                matmul = l.span(Some(&q), "matmul", "op", 3, None);
                q1 = q;
            }
        }
        l.span(Some(&fwd), "rms-norm", "module", 7, Some("model.norm"));
        l.span(Some(&fwd), "linear", "module", 20, Some("lm_head"));
        let memory = |span: &str, tensor: &str, bytes: u64, action: &str| {
            format!(
                r#"{{"kind":"memory","timestamp_ns":50,"tensor_id":"{tensor}","span_id":"{span}","device":"cpu","bytes":{bytes},"action":"{action}","dtype":"f32"}}"#
            )
        };
        l.lines.push(memory(&matmul, "t1", 256, "alloc"));
        l.lines.push(memory(&fwd, "t2", 100, "alloc"));
        l.lines.push(memory(&matmul, "t1", 256, "free"));
        l.lines.push(format!(
            r#"{{"kind":"tensor","span_id":"{down0}","tensor_id":"a1","shape":[4,4],"dtype":"f32","device":"cpu"}}"#
        ));
        l.lines.push(format!(
            r#"{{"kind":"tensor","span_id":"{q1}","tensor_id":"w1","shape":[32,32],"dtype":"f32","device":"cpu","category":"parameter"}}"#
        ));
        for (key, state, norm, bytes) in [
            (
                "model.layers.1.self_attn.q_proj.weight",
                "present",
                Some(3.0),
                Some(1024),
            ),
            (
                "model.layers.1.self_attn.q_proj.bias",
                "present",
                Some(4.0),
                Some(32),
            ),
            (
                "model.layers.0.mlp.down_proj.weight",
                "missing",
                None,
                Some(2048),
            ),
            ("model.embed_tokens.weight", "zero", Some(0.0), Some(4096)),
            ("lm_head.weight", "present", Some(12.0), None),
            ("scale", "present", Some(1.0), Some(4)),
        ] {
            let mut g = format!(
                r#"{{"kind":"gradient","event_id":"{key}","root":"varmap","key":"{key}","state":"{state}""#
            );
            if let Some(n) = norm {
                g += &format!(r#","norm":{n:?}"#);
            }
            if let Some(b) = bytes {
                g += &format!(r#","storage_bytes":{b}"#);
            }
            g.push('}');
            l.lines.push(g);
        }
        l.doc()
    }

    /// (indented label, measured, calls, total, self) of each node.
    fn rows(tree: &ModuleTree) -> Vec<(String, bool, u64, u64, u64)> {
        tree.nodes
            .iter()
            .map(|n| {
                let pad = "  ".repeat(n.depth as usize);
                (
                    format!("{pad}{}", n.label),
                    n.measured,
                    n.calls,
                    n.total_ns,
                    n.self_ns,
                )
            })
            .collect()
    }

    #[test]
    fn a_flat_model_grows_a_tree_from_its_names() {
        let doc = mistral();
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let tree = trace_tree(&doc, &ModulePaths::new(&doc));
        assert!(tree.names);
        let r = |label: &str, measured: bool, calls: u64, total: u64, self_ns: u64| {
            (String::from(label), measured, calls, total, self_ns)
        };
        // Layer 0: norms 5 and 5, attention 10 + 6 + 6 + 8 = 30, mlp 12 + 12 + 14 = 38: 78.
        // Layer 1: each span 1 ns longer: 6 + 6 + 34 + 41 = 87; its q_proj's self 11 − 3 = 8.
        // model = 87 + 78 + 7 (norm) = 172 in 9 + 9 + 1 = 19 calls, self 84 + 78 + 7 = 169;
        // embed_tokens has a gradient only: a group with no time.
        assert_eq!(
            rows(&tree),
            [
                r("model", false, 0, 172, 0),
                r("  layers.1", false, 0, 87, 0),
                r("    mlp", false, 0, 41, 0),
                r("      down_proj", true, 1, 15, 15),
                r("      gate_proj", true, 1, 13, 13),
                r("      up_proj", true, 1, 13, 13),
                r("    self_attn", false, 0, 34, 0),
                r("      q_proj", true, 1, 11, 8),
                r("      o_proj", true, 1, 9, 9),
                r("      k_proj", true, 1, 7, 7),
                r("      v_proj", true, 1, 7, 7),
                r("    input_layernorm", true, 1, 6, 6),
                r("    post_attention_layernorm", true, 1, 6, 6),
                r("  layers.0", false, 0, 78, 0),
                r("    mlp", false, 0, 38, 0),
                r("      down_proj", true, 1, 14, 14),
                r("      gate_proj", true, 1, 12, 12),
                r("      up_proj", true, 1, 12, 12),
                r("    self_attn", false, 0, 30, 0),
                r("      q_proj", true, 1, 10, 10),
                r("      o_proj", true, 1, 8, 8),
                r("      k_proj", true, 1, 6, 6),
                r("      v_proj", true, 1, 6, 6),
                r("    input_layernorm", true, 1, 5, 5),
                r("    post_attention_layernorm", true, 1, 5, 5),
                r("  norm", true, 1, 7, 7),
                r("  embed_tokens", false, 0, 0, 0),
                r("lm_head", true, 1, 20, 20),
            ]
        );
        let node = |key: &str| tree.nodes.iter().find(|n| n.key == key).unwrap();
        // Parents and keys.
        let q = node("model.layers.1.self_attn.q_proj");
        let parent = &tree.nodes[q.parent.unwrap() as usize];
        assert_eq!(parent.key, "model.layers.1.self_attn");
        assert_eq!((parent.children, node("model").children), (4, 4));
        // q_proj: the 256-byte alloc of its matmul; its weight and bias, 1024 + 32 bytes,
        // norm √(3² + 4²) = 5. The parameter tensor seen there is no graph tensor.
        assert_eq!(
            (q.alloc_bytes, q.graph_bytes, q.param_bytes, q.grad_norm),
            (256, 0, Some(1056), Some(5.0))
        );
        assert_eq!(q.gradients.present, 2);
        // model adds everything below it: params 1056 + 2048 + 4096 = 7200; present 2,
        // missing 1, zero 1; norm √(9 + 16 + 0) = 5; the activation's 4 × 4 × 4 = 64 bytes.
        let m = node("model");
        assert_eq!(
            (m.alloc_bytes, m.graph_bytes, m.param_bytes, m.grad_norm),
            (256, 64, Some(7200), Some(5.0))
        );
        assert_eq!(
            (m.gradients.present, m.gradients.missing, m.gradients.zero),
            (2, 1, 1)
        );
        // Share of the measured 1000 ns.
        assert_eq!(m.share, Some(0.172));
        // lm_head: a gradient without bytes; the top-level `scale` belongs to no node.
        let head = node("lm_head");
        assert_eq!((head.param_bytes, head.grad_norm), (None, Some(12.0)));
        assert_eq!(head.gradients.present, 1);
        // The 100 bytes allocated in `forward` are outside every module.
        assert_eq!(
            (tree.outside_alloc_bytes, tree.outside_graph_bytes),
            (100, 0)
        );
        assert_eq!(
            (&tree.alloc_note, &tree.graph_note, &tree.gradients_note),
            (&None, &None, &None)
        );
    }

    #[test]
    fn every_level_sorts_by_any_column_and_collapses() {
        let doc = mistral();
        let tree = trace_tree(&doc, &ModulePaths::new(&doc));
        // By key ascending: lm_head before model; under model embed_tokens, layers.0,
        // layers.1, norm.
        let by_key = tree.sorted(ModuleColumn::Key, false);
        let tops: Vec<&str> = by_key
            .nodes
            .iter()
            .filter(|n| n.depth <= 1)
            .map(|n| n.key.as_str())
            .collect();
        assert_eq!(
            tops,
            [
                "lm_head",
                "model",
                "model.embed_tokens",
                "model.layers.0",
                "model.layers.1",
                "model.norm"
            ]
        );
        // Parents still point at their nodes.
        for n in &by_key.nodes {
            if let Some(p) = n.parent {
                assert!(
                    n.key.starts_with(&by_key.nodes[p as usize].key),
                    "{}",
                    n.key
                );
                assert_eq!(by_key.nodes[p as usize].depth + 1, n.depth);
            }
        }
        // By parameter bytes, largest first: model (7200) before lm_head (none); in model
        // embed_tokens (4096), layers.0 (2048), layers.1 (1056), then norm (none).
        let by_params = tree.sorted(ModuleColumn::Params, true);
        let tops: Vec<&str> = by_params
            .nodes
            .iter()
            .filter(|n| n.depth <= 1)
            .map(|n| n.label.as_str())
            .collect();
        assert_eq!(
            tops,
            [
                "model",
                "embed_tokens",
                "layers.0",
                "layers.1",
                "norm",
                "lm_head"
            ]
        );
        // Collapsing model leaves it and lm_head.
        let model = tree.nodes.iter().position(|n| n.key == "model").unwrap();
        let shown: Vec<&str> = tree
            .visible(|i| i == model)
            .into_iter()
            .map(|i| tree.nodes[i].key.as_str())
            .collect();
        assert_eq!(shown, ["model", "lm_head"]);
        assert_eq!(tree.visible(|_| false).len(), tree.nodes.len());
    }

    #[test]
    fn nesting_paths_make_the_tree_without_names() {
        let mut l = Lines::new();
        let step = l.span(None, "step", "function", 100, None);
        let enc = l.span(Some(&step), "enc", "module", 60, None);
        l.span(Some(&enc), "fc", "module", 20, None);
        l.span(Some(&enc), "fc", "module", 15, None);
        // A dot in a span name is no level without names.
        l.span(Some(&step), "layer.0", "module", 10, None);
        let mut doc_lines = l.lines.clone();
        doc_lines.push(String::from(
            r#"{"kind":"gradient","event_id":"g","root":"v","key":"enc.fc.weight","state":"present","norm":1.0}"#,
        ));
        doc_lines.push(String::from(
            r#"{"kind":"capture_sources","sources":[{"source":"allocator","on":false,"events":0}],"events_dropped":0,"warnings":[]}"#,
        ));
        let mut text = doc_lines.join("\n");
        text.push('\n');
        let doc = TraceDocument::from_bytes(text.as_bytes());
        let tree = trace_tree(&doc, &ModulePaths::new(&doc));
        assert!(!tree.names);
        let r = |label: &str, measured: bool, calls: u64, total: u64, self_ns: u64| {
            (String::from(label), measured, calls, total, self_ns)
        };
        // enc: 60 ns, self 60 − 35 = 25.
        assert_eq!(
            rows(&tree),
            [
                r("enc", true, 1, 60, 25),
                r("  fc[0]", true, 1, 20, 20),
                r("  fc[1]", true, 1, 15, 15),
                r("layer.0", true, 1, 10, 10),
            ]
        );
        // Gradients name parameters, not nesting paths; the allocator was off; the graph
        // source is not listed.
        assert!(tree.nodes.iter().all(|n| n.gradients.present == 0));
        assert_eq!(
            tree.gradients_note.as_deref(),
            Some("not matched: gradients name their parameters, and the trace has no module names")
        );
        assert_eq!(
            tree.alloc_note.as_deref(),
            Some("not captured (allocator off)")
        );
        assert_eq!(tree.graph_note.as_deref(), Some("not captured (graph off)"));
    }

    #[test]
    fn a_key_that_is_a_prefix_holds_the_levels_below_it() {
        // A `stack` span named `model.layers` over both layers: the layers are its children
        // `0` and `1`, not the group `model`'s. (Unnamed, it would take the module holding the
        // list, `model`: `a_span_around_numbered_layers_keys_the_holder` below.)
        let mut l = Lines::new();
        let fwd = l.span(None, "forward", "function", 100, None);
        let stack = l.span(Some(&fwd), "stack", "module", 50, Some("model.layers"));
        l.span(
            Some(&stack),
            "linear",
            "module",
            20,
            Some("model.layers.0.fc"),
        );
        l.span(
            Some(&stack),
            "linear",
            "module",
            10,
            Some("model.layers.1.fc"),
        );
        let doc = l.doc();
        let tree = trace_tree(&doc, &ModulePaths::new(&doc));
        let r = |label: &str, measured: bool, calls: u64, total: u64, self_ns: u64| {
            (String::from(label), measured, calls, total, self_ns)
        };
        assert_eq!(
            rows(&tree),
            [
                r("model", false, 0, 50, 0),
                r("  layers", true, 1, 50, 20),
                r("    0", false, 0, 20, 0),
                r("      fc", true, 1, 20, 20),
                r("    1", false, 0, 10, 0),
                r("      fc", true, 1, 10, 10),
            ]
        );
    }

    #[test]
    fn a_span_around_numbered_layers_keys_the_holder() {
        // BERT's `encoder` span over `bert.encoder.layer.0` and `.1` is the module
        // `bert.encoder` (measured, the layers' parent), not a measured level `layer` under a
        // group `encoder`.
        let mut l = Lines::new();
        let fwd = l.span(None, "forward", "function", 100, None);
        let enc = l.span(Some(&fwd), "encoder", "module", 50, None);
        l.span(
            Some(&enc),
            "linear",
            "module",
            20,
            Some("bert.encoder.layer.0.dense"),
        );
        l.span(
            Some(&enc),
            "linear",
            "module",
            10,
            Some("bert.encoder.layer.1.dense"),
        );
        let doc = l.doc();
        let tree = trace_tree(&doc, &ModulePaths::new(&doc));
        let r = |label: &str, measured: bool, calls: u64, total: u64, self_ns: u64| {
            (String::from(label), measured, calls, total, self_ns)
        };
        // encoder: 50 ns, self 50 − 20 − 10 = 20.
        assert_eq!(
            rows(&tree),
            [
                r("bert", false, 0, 50, 0),
                r("  encoder", true, 1, 50, 20),
                r("    layer.0", false, 0, 20, 0),
                r("      dense", true, 1, 20, 20),
                r("    layer.1", false, 0, 10, 0),
                r("      dense", true, 1, 10, 10),
            ]
        );
    }

    /// A module event of request `r`'s forward call `index` (prefill 0): times in µs.
    #[allow(clippy::too_many_arguments)] // one argument per attribute reads best in the calls
    fn module_event(
        r: &str,
        index: u64,
        id: u64,
        parent: Option<u64>,
        name: &str,
        kind: &str,
        start_us: u64,
        us: u64,
        module: Option<&str>,
    ) -> String {
        let forward = if index == 0 { "prefill" } else { "decode" };
        let parent = parent.map_or(String::new(), |p| format!(r#""parent_span_id":{p},"#));
        let module = module.map_or(String::new(), |m| format!(r#","module":"{m}""#));
        format!(
            concat!(
                r#"{{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":1767225600000000000,"#,
                r#""timestamp":"2026-01-01T00:00:00Z","event_id":"{r}-{index}-{id}","request_id":"{r}","#,
                r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"sha256:ab","#,
                r#""phase":"module","status":"ok","duration_us":{us},"shape":{{"batch":1}},"#,
                r#""attributes":{{"span_id":{id},{parent}"name":"{name}","span_kind":"{kind}","forward":"{forward}","#,
                r#""forward_index":{index},"start_nanos_since_request_start":{start},"duration_nanos":{ns}{module}}}}}"#,
                "\n"
            ),
            r = r,
            index = index,
            id = id,
            parent = parent,
            name = name,
            kind = kind,
            forward = forward,
            us = us,
            start = start_us * 1000,
            ns = us * 1000,
            module = module,
        )
    }

    /// A phase span (`prefill` / `decode`) of request `r` lasting `us`, starting at `ts` s.
    fn phase_event(r: &str, phase: &str, ts: u64, us: u64) -> String {
        format!(
            concat!(
                r#"{{"schema_version":1,"event_kind":"timed_span","ts_unix_nanos":{ts},"#,
                r#""timestamp":"2026-01-01T00:00:00Z","event_id":"{r}-{phase}-{ts}","request_id":"{r}","#,
                r#""correlation_id":"c","entrypoint":"serve","backend":"cpu","runtime_preset_hash":"sha256:ab","#,
                r#""phase":"{phase}","status":"ok","duration_us":{us},"shape":{{"batch":1}}}}"#,
                "\n"
            ),
            r = r,
            phase = phase,
            ts = 1_767_225_600_000_000_000u64 + ts,
            us = us,
        )
    }

    /// One forward call, times × `k` µs: `forward` [0, 100) holding `model.layers.0.q`
    /// [10, 30), `model.layers.1.q` [40, 60), `lm_head` [70, 80) and `model.layers.0.q` again
    /// [85, 90).
    fn call(r: &str, index: u64, k: u64) -> String {
        let mut f = module_event(r, index, 1, None, "forward", "function", 0, 100 * k, None);
        for (id, start, us, m) in [
            (2, 10, 20, "model.layers.0.q"),
            (3, 40, 20, "model.layers.1.q"),
            (4, 70, 10, "lm_head"),
            (5, 85, 5, "model.layers.0.q"),
        ] {
            f += &module_event(
                r,
                index,
                id,
                Some(1),
                "linear",
                "module",
                start * k,
                us * k,
                Some(m),
            );
        }
        f
    }

    #[test]
    fn profiles_have_a_tree_and_coverage_per_forward_call() {
        // Request a: prefill (k = 2, its `prefill` span 200 µs) and decode step 1 (k = 1, its
        // `decode` span 120 µs); request b: prefill (k = 1) without a phase span.
        let mut file = call("a", 0, 2);
        file += &call("a", 1, 1);
        file += &phase_event("a", "prefill", 0, 200);
        file += &phase_event("a", "decode", 500_000, 120);
        file += &call("b", 0, 1);
        let doc = read_profile(file.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let requests = doc.module_spans();
        // Covered per call: 20 + 20 + 10 + 5 = 55 µs × k.
        let cov: Vec<(u64, u64, Option<u64>)> = requests
            .iter()
            .flat_map(|r| &r.forwards)
            .map(|f| {
                (
                    f.coverage.forward_ns,
                    f.coverage.covered_ns,
                    f.coverage.percent,
                )
            })
            .collect();
        // a prefill 110 of 200 µs (55%); a decode 55 of 120 (45%); b 55 of its extent 100 (55%).
        assert_eq!(
            cov,
            [
                (200_000, 110_000, Some(55)),
                (120_000, 55_000, Some(45)),
                (100_000, 55_000, Some(55)),
            ]
        );
        assert_eq!(
            requests[0].coverage(),
            crate::analysis::coverage::Coverage::new(320_000, 165_000)
        );
        // Overall 220 of 420 µs: 52% (52.4 rounded down).
        let all = crate::analysis::coverage::Coverage::sum(
            requests
                .iter()
                .flat_map(|r| &r.forwards)
                .map(|f| &f.coverage),
        );
        assert_eq!(
            (all.forward_ns, all.covered_ns, all.percent),
            (420_000, 220_000, Some(52))
        );

        // Request a's tree: layer 0's q ran twice per call, 2 calls: 4 calls, (20 + 5) µs × 3
        // = 75 µs; layer 1's q 2 calls, 60 µs; lm_head 2 calls, 30 µs; model the group of the
        // layers, 135 µs in 6 calls.
        let r = |label: &str, measured: bool, calls: u64, total: u64, self_ns: u64| {
            (String::from(label), measured, calls, total, self_ns)
        };
        let tree = profile_tree(&requests[..1]);
        assert!(tree.names);
        assert_eq!(
            rows(&tree),
            [
                r("model", false, 0, 135_000, 0),
                r("  layers.0", false, 0, 75_000, 0),
                r("    q", true, 4, 75_000, 75_000),
                r("  layers.1", false, 0, 60_000, 0),
                r("    q", true, 2, 60_000, 60_000),
                r("lm_head", true, 2, 30_000, 30_000),
            ]
        );
        // Every request: b adds 25, 20 and 10 µs.
        let tree = profile_tree(&requests);
        assert_eq!(tree.nodes[0].total_ns, 135_000 + 45_000);
        // A group has no calls of its own; its measured modules' calls over every request.
        assert_eq!(tree.nodes[0].calls, 0);
        let calls: u64 = tree
            .nodes
            .iter()
            .filter(|n| n.measured && n.key.starts_with("model."))
            .map(|n| n.calls)
            .sum();
        assert_eq!(calls, 9);
        assert!(tree.alloc_note.is_some());
    }
}

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
//!   (`measured = false`): its calls, total and self are the sums of its children's.
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

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Ordering;

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use crate::analysis::gradients::{module_of, GradientCounts};
use crate::analysis::modules::{is_module_span, level_ends, ModulePaths};
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
    /// Calls (outermost spans of the key; a group: its children's).
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
        list.sort_by(|&a, &b| compare(&nodes[a], &nodes[b], column, descending));
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
    index: HashMap<&'a str, usize>,
    keys: Vec<(&'a str, Own)>,
}

impl<'a> Builder<'a> {
    fn new(names: bool) -> Self {
        Builder {
            names,
            index: HashMap::new(),
            keys: Vec::new(),
        }
    }

    /// The entry of a (non-empty) key.
    fn at(&mut self, key: &'a str) -> &mut Own {
        let i = *self.index.entry(key).or_insert_with(|| {
            self.keys.push((key, Own::default()));
            self.keys.len() - 1
        });
        &mut self.keys[i].1
    }

    /// The tree, in pre-order by total time; `measured_total` gives the shares.
    fn build(self, measured_total: Option<u64>) -> Vec<ModuleNode> {
        let names = self.names;
        // Nodes: one per level prefix of every key.
        let mut node_of: HashMap<&'a str, usize> = HashMap::new();
        let mut texts: Vec<&'a str> = Vec::new();
        let mut own: Vec<Own> = Vec::new();
        let mut measured: Vec<bool> = Vec::new();
        for &(key, ref o) in &self.keys {
            let ends = level_ends(key, names);
            let Some(&last) = ends.last() else { continue };
            for &end in &ends {
                let prefix = &key[..end];
                if !node_of.contains_key(prefix) {
                    node_of.insert(prefix, texts.len());
                    texts.push(prefix);
                    own.push(Own::default());
                    measured.push(false);
                }
            }
            let n = node_of[&key[..last]];
            own[n].add_resources(o);
            own[n].add_time(o);
            measured[n] |= o.measured;
        }
        let n = texts.len();
        // Parents: the longest prefix, cut at a separator, that is a node.
        let separator = |c: u8| c == b'/' || (names && c == b'.');
        let mut parent: Vec<Option<usize>> = vec![None; n];
        let mut label_at: Vec<usize> = vec![0; n];
        for (i, t) in texts.iter().enumerate() {
            let bytes = t.as_bytes();
            for at in (0..bytes.len()).rev() {
                if separator(bytes[at]) {
                    if let Some(&p) = node_of.get(&t[..at]) {
                        parent[i] = Some(p);
                        label_at[i] = at + 1;
                        break;
                    }
                }
            }
        }
        // Sums, children before parents (a child's key is longer).
        let mut by_length: Vec<usize> = (0..n).collect();
        by_length.sort_by_key(|&i| core::cmp::Reverse(texts[i].len()));
        let mut inclusive: Vec<Own> = own.clone();
        let mut time: Vec<Own> = vec![Own::default(); n];
        let mut child_time: Vec<Own> = vec![Own::default(); n];
        let mut children = vec![0u32; n];
        for &i in &by_length {
            time[i] = if measured[i] { own[i] } else { child_time[i] };
            if let Some(p) = parent[i] {
                let (c, t) = (inclusive[i], time[i]);
                inclusive[p].add_resources(&c);
                child_time[p].add_time(&t);
                children[p] += 1;
            }
        }
        let nodes: Vec<ModuleNode> = (0..n)
            .map(|i| {
                let (t, r) = (&time[i], &inclusive[i]);
                ModuleNode {
                    key: texts[i].to_string(),
                    label: texts[i][label_at[i]..].to_string(),
                    depth: 0,
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
        let mut depth = vec![0u32; n];
        // Parents are shorter, so they come first by length ascending.
        for &i in by_length.iter().rev() {
            depth[i] = parent[i].map_or(0, |p| depth[p] + 1);
        }
        let mut tree = ModuleTree {
            nodes,
            ..ModuleTree::default()
        };
        for (node, d) in tree.nodes.iter_mut().zip(depth) {
            node.depth = d;
        }
        tree.sorted(ModuleColumn::Total, true).nodes
    }
}

/// The module tree of a trace (see the module docs), from its keys (`paths`, built from `doc`).
pub fn trace_tree(doc: &TraceDocument, paths: &ModulePaths) -> ModuleTree {
    let names = paths.names();
    let mut b = Builder::new(names);
    let texts = paths.texts();
    let text = |i: usize| {
        texts
            .get(paths.path_id(i) as usize)
            .map_or("", String::as_str)
    };
    for (i, s) in doc.spans.iter().enumerate() {
        if !is_module_span(s) || text(i).is_empty() {
            continue;
        }
        let o = b.at(text(i));
        o.measured = true;
        o.self_ns = o
            .self_ns
            .saturating_add(doc.tree.self_ns.get(i).copied().unwrap_or(0));
        if paths.outermost(i) {
            o.calls += 1;
            o.total_ns = o.total_ns.saturating_add(s.duration_or_zero());
        }
    }
    let (mut outside_alloc, mut outside_graph) = (0u64, 0u64);
    for row in doc.memory.iter() {
        if row.action != MemoryAction::Alloc {
            continue;
        }
        match doc
            .span_index(row.span_id)
            .map(text)
            .filter(|k| !k.is_empty())
        {
            Some(key) => {
                let o = b.at(key);
                o.alloc_bytes = o.alloc_bytes.saturating_add(row.bytes);
            }
            None => outside_alloc = outside_alloc.saturating_add(row.bytes),
        }
    }
    for t in doc.tensors.iter() {
        if t.category == TensorCategory::Parameter {
            continue;
        }
        match doc
            .span_index(&t.span_id)
            .map(text)
            .filter(|k| !k.is_empty())
        {
            Some(key) => {
                let o = b.at(key);
                o.graph_bytes = o.graph_bytes.saturating_add(t.bytes());
            }
            None => outside_graph = outside_graph.saturating_add(t.bytes()),
        }
    }
    if names {
        for g in &doc.gradients {
            let module = module_of(&g.key);
            if module.is_empty() {
                continue;
            }
            let o = b.at(module);
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
        let o = b.at(&s.path);
        o.measured = true;
        o.self_ns = o.self_ns.saturating_add(s.self_ns);
        if s.outermost {
            o.calls += 1;
            o.total_ns = o.total_ns.saturating_add(s.duration_ns);
        }
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

//! Module identity: one key per module of a model, so that fifteen spans named `linear` are
//! fifteen modules and one module's time, memory and gradients meet under one name.
//!
//! The rule (one definition, used by every module view: [`module_rows`], [`op_rows_by_path`],
//! the module tree ([`crate::analysis::module_tree`]), coverage, the inference profile's module
//! trees, [`crate::analysis::phases`], steps, findings and compare):
//! - A **module span** is a span with `span_kind = module` or with a `module` name
//!   ([`is_module_span`]); an empty `module` counts as none.
//! - **Names mode**: when at least one span of the document (of the forward call, in a profile)
//!   has a `module` name (the weights it loaded, `model.layers.0.self_attn.q_proj`; SCHEMA.md §4
//!   "Module names"), keys are module names:
//!   1. a span with a `module` name has that name as its key;
//!   2. else a module span whose descendants (in the layout tree, [`SpanTree`]) carry names has
//!      the longest common prefix of those names by `.`-segments (`model.layers.1` is a prefix
//!      of `model.layers.1.mlp`; `model.layers.1` and `model.layers.10` share `model.layers`),
//!      when that prefix is not empty; when every one of those names goes on past the prefix
//!      with a segment of digits (the prefix is a list of numbered layers, which runs no
//!      forward of its own), the prefix without its last segment, the module that holds the
//!      list (T5's `block` span around `decoder.block.0.layer.0` … `layer.2` is
//!      `decoder.block.0`, BERT's `encoder` around `bert.encoder.layer.0` … is `bert.encoder`),
//!      when that is not empty;
//!   3. else a module span has `<key of its nearest module ancestor>/<segment>`, or just
//!      `<segment>` without one (Llama's `attn-rot` inside `attn`:
//!      `model.layers.0.self_attn/attn-rot`);
//!   4. a span that is no module span has its nearest module ancestor's key, or the empty key.
//! - **Nesting mode** (no name anywhere): a module span's key is its **module path**, the
//!   `/`-joined segments of the module spans on its layout ancestor chain, itself included
//!   (`block[1]/attn/linear[2]`); function and op spans contribute no segment, so the `update`
//!   and `forward` function spans around a model vanish. A span that is no module span has its
//!   nearest module ancestor's path (rule 4).
//! - A **segment** is the span's name, followed by `[k]` when its layout parent has more than
//!   one child span (of any kind) with that same name; `k` is the 0-based rank among those
//!   same-name siblings in the tree's child order, which is (`start_ns`, file order). Spans laid
//!   out as roots are siblings of each other.
//! - **Aggregating by key** ([`module_rows`]): one key is one module, whatever spans ran it (a
//!   layer used twice, tied weights: several calls). Its `calls` are its **outermost** spans,
//!   the module spans with that key that have no layout ancestor with the same key
//!   ([`ModulePaths::outermost`]); `total_ns` adds their durations; `self_ns` adds the self
//!   time of every module span with that key. So a wrapper span whose only named descendant
//!   gives it the same key is counted once. (In nesting mode a key is always longer than its
//!   ancestors', so every module span is outermost.)
//!
//! Two spans of repeated calls (the same model run twice under two `forward` spans) get the same
//! key: a key is a place, and its spans are that place's calls. Keys are interned: each
//! distinct text is stored once and spans refer to it by id, so a key built two ways (a module
//! named `a/b`, or `b` inside `a`) is one key, as its text is what a reader sees.
//!
//! Building is a few iterative passes over the tree (no recursion: a trace may nest deeply), with
//! one hash lookup per module span: O(n) expected, plus, in names mode, the length of the names
//! compared for the common prefixes.

use crate::analysis::sort;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use crate::format::document::TraceDocument;
use crate::format::events::SpanKind;
use crate::format::records::Span;
use crate::format::spans::SpanTree;

/// The module name of a span, when it has a non-empty one.
pub fn module_name(span: &Span) -> Option<&str> {
    span.module.as_deref().filter(|m| !m.is_empty())
}

/// Names mode (see the module docs): some span has a module name, so keys are module names.
pub fn names_mode(spans: &[Span]) -> bool {
    spans.iter().any(|s| module_name(s).is_some())
}

/// A module span: `span_kind = module`, or a span with a module name.
pub fn is_module_span(span: &Span) -> bool {
    span.span_kind == SpanKind::Module || module_name(span).is_some()
}

/// The byte length of the longest common prefix of `a` and `b` by `.`-segments:
/// `model.layers.1` and `model.layers.10` share `model.layers` (12), `a.b` and `a.b.c` share
/// `a.b` (3), `ab` and `ac` nothing (0).
fn common_segments(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let ends_segment = |s: &[u8]| s.get(n).is_none_or(|&c| c == b'.');
    if ends_segment(a) && ends_segment(b) {
        return n;
    }
    a[..n].iter().rposition(|&c| c == b'.').unwrap_or(0)
}

/// A prefix of a span's module name: `(span index, byte length)`.
type Prefix = (u32, u32);

/// The names of a group of spans: their longest common prefix, and whether every one of them
/// goes on past it with a segment of digits (the prefix is a list of numbered layers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Names {
    prefix: Prefix,
    indexed: bool,
}

/// Whether `segment` is a list index: one or more ASCII digits.
fn is_index(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit())
}

/// The segment of `text` that starts at byte `at` (a segment boundary: 0, or a `.`'s place).
fn segment_at(text: &str, at: usize) -> &str {
    let from = if at == 0 { 0 } else { at + 1 };
    let rest = text.get(from..).unwrap_or("");
    rest.split('.').next().unwrap_or("")
}

/// Per span, the names of its strict descendants (`None`: no descendant has a name; a prefix
/// length of 0: they share none). One pass over the spans in reverse pre-order, so every child
/// is done before its parent.
fn prefixes_below(spans: &[Span], tree: &SpanTree) -> Vec<Option<Names>> {
    let text = |p: Prefix| {
        spans
            .get(p.0 as usize)
            .and_then(module_name)
            .and_then(|m| m.get(..p.1 as usize))
            .unwrap_or("")
    };
    // Whether every name of group `g` goes on past its first `n` bytes with an index: past
    // its own prefix, its flag; inside it, the prefix's own next segment (all share it).
    let indexed_past = |g: Names, n: usize| {
        if n >= g.prefix.1 as usize {
            g.indexed
        } else {
            is_index(segment_at(text(g.prefix), n))
        }
    };
    let join = |a: Option<Names>, b: Option<Names>| match (a, b) {
        (Some(x), Some(y)) => {
            let n = common_segments(text(x.prefix), text(y.prefix));
            Some(Names {
                prefix: (x.prefix.0, u32::try_from(n).unwrap_or(0)),
                indexed: indexed_past(x, n) && indexed_past(y, n),
            })
        }
        (x, None) | (None, x) => x,
    };
    let n = spans.len();
    let mut below: Vec<Option<Names>> = vec![None; n];
    // Below and including each span.
    let mut within: Vec<Option<Names>> = vec![None; n];
    for &i in tree.preorder().iter().rev() {
        let i = i as usize;
        let mut acc = None;
        for &c in tree.children(i) {
            acc = join(acc, within[c as usize]);
        }
        below[i] = acc;
        // A name of its own ends at its own length: it goes on past nothing.
        let own = module_name(&spans[i]).map(|m| Names {
            prefix: (i as u32, u32::try_from(m.len()).unwrap_or(0)),
            indexed: false,
        });
        within[i] = join(own, acc);
    }
    below
}

/// Rule 2's key of a span whose descendants' names are `names`: their common prefix, or, when
/// that is a list of numbered layers, the module holding the list (the prefix without its last
/// segment, where one is left); `None` for an empty prefix.
fn holder_of(spans: &[Span], names: Names) -> Option<Prefix> {
    let (at, len) = names.prefix;
    if len == 0 {
        return None;
    }
    if names.indexed {
        let text = spans
            .get(at as usize)
            .and_then(module_name)
            .and_then(|m| m.get(..len as usize))
            .unwrap_or("");
        if let Some(dot) = text.rfind('.').filter(|&d| d > 0) {
            return Some((at, u32::try_from(dot).unwrap_or(0)));
        }
    }
    Some((at, len))
}

/// The module key of every span of a document (see the module docs for the rule).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModulePaths {
    /// Key id of each span, indexed like the spans.
    path_of: Vec<u32>,
    /// Whether each span is a module span with no layout ancestor of the same key.
    outermost: Vec<bool>,
    /// Key texts by id; id 0 is the empty key.
    texts: Vec<String>,
    /// Names mode: some span has a module name.
    names: bool,
}

impl ModulePaths {
    /// The keys of a document's spans.
    pub fn new(doc: &TraceDocument) -> Self {
        Self::of_tree(&doc.spans, &doc.tree)
    }

    /// The keys of `spans` laid out by `tree` (built from the same spans).
    pub fn of_tree(spans: &[Span], tree: &SpanTree) -> Self {
        let n = spans.len();
        let names = names_mode(spans);
        let below = if names {
            prefixes_below(spans, tree)
        } else {
            Vec::new()
        };
        let mut paths = ModulePaths {
            path_of: vec![0; n],
            outermost: Vec::new(),
            texts: vec![String::new()],
            names,
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
        // The text of a prefix of a span's name.
        let prefix_text = |(at, len): Prefix| -> &str {
            spans
                .get(at as usize)
                .and_then(module_name)
                .and_then(|m| m.get(..len as usize))
                .unwrap_or("")
        };
        // Key ids by name prefix: a chain of spans over one name hashes its text once.
        let mut prefix_ids: HashMap<Prefix, u32> = HashMap::new();
        // (whose children to name, the key of their nearest module ancestor)
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
                // Rule 1, its own name; rule 2, the common prefix of the names below it.
                let named: Option<Prefix> = match module_name(span) {
                    Some(m) => Some((c, u32::try_from(m.len()).unwrap_or(0))),
                    None if names && span.span_kind == SpanKind::Module => below
                        .get(c as usize)
                        .copied()
                        .flatten()
                        .and_then(|b| holder_of(spans, b)),
                    None => None,
                };
                let path = if let Some(p) = named {
                    match prefix_ids.get(&p) {
                        Some(&id) => id,
                        None => {
                            let id = paths.intern_text(prefix_text(p), &mut by_text);
                            prefix_ids.insert(p, id);
                            id
                        }
                    }
                } else if span.span_kind == SpanKind::Module {
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
        paths.outermost = outermost(spans, tree, &paths.path_of, paths.texts.len());
        paths
    }

    fn intern_text(&mut self, text: &str, by_text: &mut HashMap<String, u32>) -> u32 {
        if let Some(&id) = by_text.get(text) {
            return id;
        }
        let id = u32::try_from(self.texts.len()).unwrap_or(u32::MAX);
        by_text.insert(text.to_string(), id);
        self.texts.push(text.to_string());
        id
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

    /// The module key of span `i` (empty when it has no module ancestor, or `i` is out of
    /// range).
    pub fn path(&self, i: usize) -> &str {
        self.text_of(self.path_id(i))
    }

    /// The id of span `i`'s key (0: the empty key); ids index [`ModulePaths::texts`].
    pub fn path_id(&self, i: usize) -> u32 {
        self.path_of.get(i).copied().unwrap_or(0)
    }

    /// Whether span `i` is a module span with no layout ancestor of the same key: one call of
    /// its module (see the module docs).
    pub fn outermost(&self, i: usize) -> bool {
        self.outermost.get(i).copied().unwrap_or(false)
    }

    /// Names mode: keys are module names (some span has one), not nesting paths.
    pub fn names(&self) -> bool {
        self.names
    }

    /// In names mode, the module span `i` ran in, as the module rows key it: a module span's
    /// own key (its module name, or for one that owns no weight, such as Llama's `block`, the
    /// prefix of what it holds: `model.layers.3`), any other span its nearest module
    /// ancestor's. `None` in nesting mode (the key is then a path of span names, not a module
    /// the program named) and outside every module.
    pub fn module_of(&self, i: usize) -> Option<&str> {
        Some(self.path(i)).filter(|k| self.names && !k.is_empty())
    }

    /// Every distinct key text by id, the empty key first.
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

/// Per span: a module span none of whose layout ancestors has its key. One depth-first walk
/// counting, per key, the module spans open on the way down.
fn outermost(spans: &[Span], tree: &SpanTree, path_of: &[u32], keys: usize) -> Vec<bool> {
    let mut open = vec![0u32; keys];
    let mut out = vec![false; spans.len()];
    // (span, entering: true; leaving: false)
    let mut stack: Vec<(u32, bool)> = tree.roots.iter().rev().map(|&r| (r, true)).collect();
    while let Some((i, entering)) = stack.pop() {
        let i_us = i as usize;
        let key = path_of.get(i_us).map_or(0, |&k| k as usize);
        if !entering {
            if let Some(o) = open.get_mut(key) {
                *o = o.saturating_sub(1);
            }
            continue;
        }
        if spans.get(i_us).is_some_and(is_module_span) {
            if let (Some(o), Some(flag)) = (open.get_mut(key), out.get_mut(i_us)) {
                *flag = *o == 0;
                *o += 1;
            }
            stack.push((i, false));
        }
        stack.extend(tree.children(i_us).iter().rev().map(|&c| (c, true)));
    }
    out
}

/// The most levels a key is cut into ([`level_ends`]); later levels join the last.
pub const MAX_LEVELS: usize = 16;

/// A key longer than this (bytes) is one level ([`level_ends`]).
pub const MAX_SPLIT_BYTES: usize = 256;

/// Whether `c` separates levels: `/`, and in names mode also `.`.
pub fn is_separator(c: u8, names: bool) -> bool {
    c == b'/' || (names && c == b'.')
}

/// Where a key's tree levels end: the byte length of each level's prefix, in order
/// (`model.layers.1.self_attn` → `model`, `model.layers.1`, `model.layers.1.self_attn`).
/// Levels are separated by `/`, and in names mode also by `.`; a level made only of digits
/// joins the one before it (`layers.1`), and empty levels are skipped. The empty key has none.
/// So that a hostile name costs no more than its own length, a key longer than
/// [`MAX_SPLIT_BYTES`] is one level, and levels past the [`MAX_LEVELS`]th join it.
pub fn level_ends(key: &str, names: bool) -> Vec<usize> {
    if key.is_empty() {
        return Vec::new();
    }
    if key.len() > MAX_SPLIT_BYTES {
        return vec![key.len()];
    }
    let mut ends: Vec<usize> = Vec::new();
    let mut start = 0;
    let bytes = key.as_bytes();
    for at in 0..=bytes.len() {
        if bytes.get(at).is_some_and(|&c| !is_separator(c, names)) {
            continue;
        }
        let level = &bytes[start..at];
        start = at + 1;
        if level.is_empty() {
            continue;
        }
        let full = ends.len() == MAX_LEVELS;
        match ends.last_mut() {
            Some(last) if full || level.iter().all(u8::is_ascii_digit) => *last = at,
            _ => ends.push(at),
        }
    }
    ends
}

/// How [`module_rows`] groups module spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleGrouping {
    /// One row per module key (a module: its name, or its path in nesting mode).
    Path,
    /// One row per span name (`linear`: every place together).
    Name,
}

/// Module spans aggregated by key or by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleRow {
    /// The module key or the span name.
    pub key: String,
    /// Calls: by key its outermost spans, by name every span of that name.
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

/// Module rows by total time, largest first, then by key (also a range's rows:
/// [`crate::analysis::range`]).
pub(crate) fn sort_module_rows(rows: &mut [ModuleRow]) {
    sort::by(rows, |a, b| {
        b.total_ns.cmp(&a.total_ns).then_with(|| a.key.cmp(&b.key))
    });
}

/// `rows` sorted by `total`, largest first, ties by key.
fn rows_by_key<R>(mut rows: Vec<R>, total: impl Fn(&R) -> u64, key: impl Fn(&R) -> &str) -> Vec<R> {
    sort::by(&mut rows, |a, b| {
        total(b).cmp(&total(a)).then_with(|| key(a).cmp(key(b)))
    });
    rows
}

/// Module spans ([`is_module_span`]) aggregated by key or name: calls, total, self and mean
/// time and the share of the measured total; sorted by total time, largest first, then by key.
///
/// By key, `calls` and `total_ns` count the outermost spans of each key and `self_ns` every
/// span of it (see the module docs). By name, every span counts: a module nested in a module
/// of the same name is counted in both spans' rows, so that row's total may exceed the time
/// spent (it adds inclusive durations).
pub fn module_rows(
    doc: &TraceDocument,
    paths: &ModulePaths,
    grouping: ModuleGrouping,
) -> Vec<ModuleRow> {
    let measured = measured_total(doc);
    // Rows by span name, or by key id (a key's text is hashed once, not once a span).
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    let mut by_id: Vec<usize> = Vec::new();
    let mut rows: Vec<ModuleRow> = Vec::new();
    for (i, s) in doc.spans.iter().enumerate() {
        if !is_module_span(s) {
            continue;
        }
        let mut new_row = |key: &str| {
            rows.push(ModuleRow {
                key: key.to_string(),
                calls: 0,
                total_ns: 0,
                self_ns: 0,
                mean_ns: 0,
                share: None,
            });
            rows.len() - 1
        };
        let r = match grouping {
            ModuleGrouping::Path => {
                let id = paths.path_id(i) as usize;
                if by_id.len() <= id {
                    by_id.resize(id + 1, usize::MAX);
                }
                if by_id[id] == usize::MAX {
                    by_id[id] = new_row(paths.path(i));
                }
                by_id[id]
            }
            ModuleGrouping::Name => *by_name
                .entry(s.name.as_str())
                .or_insert_with(|| new_row(&s.name)),
        };
        let row = &mut rows[r];
        if grouping == ModuleGrouping::Name || paths.outermost(i) {
            row.calls += 1;
            row.total_ns = row.total_ns.saturating_add(s.duration_or_zero());
        }
        row.self_ns = row
            .self_ns
            .saturating_add(doc.tree.self_ns.get(i).copied().unwrap_or(0));
    }
    for row in &mut rows {
        row.mean_ns = row.total_ns / row.calls.max(1);
        row.share = (measured > 0).then(|| row.total_ns as f64 / measured as f64);
    }
    sort_module_rows(&mut rows);
    rows
}

/// Ops grouped by the module key of the span they ran in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpPathRow {
    /// Module key of the op's span (empty: no module around it, or the span does not exist).
    pub path: String,
    /// Ops in the group.
    pub count: u64,
    /// Sum of their durations.
    pub total_ns: u64,
    /// `total_ns / count`, integer division.
    pub mean_ns: u64,
    /// Longest op.
    pub max_ns: u64,
    /// Sum of their output bytes where the record says them
    /// ([`crate::format::events::Op::known_output_bytes`]).
    pub output_bytes: u64,
    /// Ops whose output bytes no field says: not in `output_bytes`.
    pub output_unknown: u64,
}

/// `op` records grouped by the module key of their span; sorted by total time, largest
/// first, then by key.
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
                output_unknown: 0,
            });
            rows.len() - 1
        });
        let row = &mut rows[r];
        row.count += 1;
        row.total_ns = row.total_ns.saturating_add(op.duration_ns);
        row.max_ns = row.max_ns.max(op.duration_ns);
        match op.known_output_bytes() {
            Some(b) => row.output_bytes = row.output_bytes.saturating_add(b),
            None => row.output_unknown += 1,
        }
    }
    for row in &mut rows {
        row.mean_ns = row.total_ns / row.count.max(1);
    }
    rows_by_key(rows, |r| r.total_ns, |r| &r.path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_lines::META;
    use alloc::format;

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
            self.named(parent, name, kind, duration_ns, None)
        }

        /// [`Doc::span`] with a module name.
        fn named(
            &mut self,
            parent: Option<&str>,
            name: &str,
            kind: &str,
            duration_ns: u64,
            module: Option<&str>,
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
            let module = module.map_or(String::new(), |m| format!(r#","module":"{m}""#));
            self.lines.push(format!(
                r#"{{"kind":"span_start","id":"{id}",{parent}"name":"{name}","start_ns":{start_ns},"span_kind":"{kind}"{measured}{module}}}"#
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
    fn common_segment_prefixes() {
        assert_eq!(common_segments("model.layers.1", "model.layers.10"), 12);
        assert_eq!(common_segments("model.layers.1", "model.layers.1.mlp"), 14);
        assert_eq!(common_segments("a.b", "a.b"), 3);
        assert_eq!(common_segments("a.bc", "a.bd"), 1);
        assert_eq!(common_segments("ab", "ac"), 0);
        assert_eq!(common_segments("", "a"), 0);
        assert_eq!(
            level_ends("model.layers.1.self_attn.q_proj", true),
            [5, 14, 24, 31]
        );
        assert_eq!(
            level_ends("model.layers.0.self_attn/attn-rot[1]", true),
            [5, 14, 24, 36]
        );
        // Nesting mode cuts at `/` only; a leading digit level and empty levels.
        assert_eq!(level_ends("block[1]/attn/linear.3", false), [8, 13, 22]);
        assert_eq!(level_ends("0.a", true), [1, 3]);
        assert_eq!(level_ends("a..b/", true), [1, 4]);
        assert!(level_ends("", true).is_empty());
        // Past 16 levels, the rest joins the 16th; a key over 256 bytes is one level.
        let deep = "a.".repeat(20) + "z";
        let ends = level_ends(&deep, true);
        assert_eq!(ends.len(), MAX_LEVELS);
        assert_eq!((ends[14], ends[15]), (29, deep.len()));
        let long = "b.".repeat(200);
        assert_eq!(level_ends(&long, true), [400]);
    }

    /// (span id, its expected key) of the spans worth checking.
    type Named = Vec<(String, &'static str)>;

    /// One forward of a 2-layer Mistral as candle-transformers writes it: flat `rms-norm` and
    /// `linear` module spans straight under `forward`, each with the module its weights name;
    /// a `matmul` op span inside layer 1's `q_proj`.
    fn mistral_doc() -> (Doc, Named) {
        let mut d = Doc::new();
        let step = d.span(None, "update", "function", 1000);
        let fwd = d.span(Some(&step), "forward", "function", 900);
        let mut named = Vec::new();
        for layer in 0..2u64 {
            let p = |m: &str| format!("model.layers.{layer}.{m}");
            let extra = layer; // layer 1's spans each last 1 ns longer
            let add = |d: &mut Doc, name: &str, ns: u64, m: &str| {
                d.named(Some(&fwd), name, "module", ns + extra, Some(&p(m)))
            };
            add(&mut d, "rms-norm", 5, "input_layernorm");
            let q = add(&mut d, "linear", 10, "self_attn.q_proj");
            add(&mut d, "linear", 6, "self_attn.k_proj");
            add(&mut d, "linear", 6, "self_attn.v_proj");
            add(&mut d, "linear", 8, "self_attn.o_proj");
            add(&mut d, "rms-norm", 5, "post_attention_layernorm");
            add(&mut d, "linear", 12, "mlp.gate_proj");
            add(&mut d, "linear", 12, "mlp.up_proj");
            let down = add(&mut d, "linear", 14, "mlp.down_proj");
            if layer == 1 {
                let mm = d.span(Some(&q), "matmul", "op", 3);
                named.push((q, "model.layers.1.self_attn.q_proj"));
                named.push((mm, "model.layers.1.self_attn.q_proj"));
            } else {
                named.push((down, "model.layers.0.mlp.down_proj"));
            }
        }
        named.push((
            d.named(Some(&fwd), "rms-norm", "module", 7, Some("model.norm")),
            "model.norm",
        ));
        named.push((
            d.named(Some(&fwd), "linear", "module", 20, Some("lm_head")),
            "lm_head",
        ));
        named.push((fwd, ""));
        named.push((step, ""));
        (d, named)
    }

    fn check(doc: &TraceDocument, paths: &ModulePaths, named: &Named) {
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        for (id, want) in named {
            let i = doc.span_index(id).unwrap();
            assert_eq!(paths.path(i), *want, "span {id} ({})", doc.spans[i].name);
        }
    }

    #[test]
    fn flat_spans_take_their_module_names() {
        let (d, named) = mistral_doc();
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        assert!(paths.names());
        check(&doc, &paths, &named);
        // The matmul op span inside layer 1's q_proj ran in that module; `forward` in none.
        let at = |id: &str| doc.span_index(id).unwrap();
        let (q, mm) = (&named[1].0, &named[2].0);
        assert_eq!(
            paths.module_of(at(q)),
            Some("model.layers.1.self_attn.q_proj")
        );
        assert_eq!(
            paths.module_of(at(mm)),
            Some("model.layers.1.self_attn.q_proj")
        );
        assert_eq!(paths.module_of(at("s1")), None);
        // 2 × 9 named spans + norm + lm_head = 20 keys, plus the empty one.
        assert_eq!(paths.texts().len(), 21);
        let rows = module_rows(&doc, &paths, ModuleGrouping::Path);
        assert_eq!(rows.len(), 20);
        // lm_head 20 ns first; then layer 1's down_proj, 14 + 1 = 15.
        assert_eq!((rows[0].key.as_str(), rows[0].total_ns), ("lm_head", 20));
        assert_eq!(
            (rows[1].key.as_str(), rows[1].total_ns),
            ("model.layers.1.mlp.down_proj", 15)
        );
        let q = rows
            .iter()
            .find(|r| r.key == "model.layers.1.self_attn.q_proj")
            .unwrap();
        // 11 ns, 1 call, self 11 − 3 (the matmul) = 8.
        assert_eq!((q.calls, q.total_ns, q.self_ns), (1, 11, 8));
        // By name: 16 linears + lm_head... every `linear` is one row, as before names.
        let by_name = module_rows(&doc, &paths, ModuleGrouping::Name);
        let linear = by_name.iter().find(|r| r.key == "linear").unwrap();
        // Layer 0: 10 + 6 + 6 + 8 + 12 + 12 + 14 = 68; layer 1: 68 + 7 = 75; lm_head 20.
        assert_eq!((linear.calls, linear.total_ns), (15, 163));
    }

    /// One forward of candle-transformers' 2-layer Llama: `block`, `attn` and `mlp` module
    /// spans without names, their `linear` and `rms-norm` leaves named; layer 0's `attn` holds
    /// two `attn-rot` spans, layer 1's one.
    fn llama_named_doc() -> (Doc, Named) {
        let mut d = Doc::new();
        let step = d.span(None, "update", "function", 1000);
        let fwd = d.span(Some(&step), "forward", "function", 900);
        let mut named = Vec::new();
        for layer in 0..2u64 {
            let p = |m: &str| format!("model.layers.{layer}.{m}");
            let block = d.span(Some(&fwd), "block", "module", 100);
            d.named(
                Some(&block),
                "rms-norm",
                "module",
                5,
                Some(&p("input_layernorm")),
            );
            let attn = d.span(Some(&block), "attn", "module", 50);
            for proj in ["q_proj", "k_proj", "v_proj"] {
                d.named(
                    Some(&attn),
                    "linear",
                    "module",
                    4,
                    Some(&p(&format!("self_attn.{proj}"))),
                );
            }
            let rot0 = d.span(Some(&attn), "attn-rot", "module", 2);
            let rot1 = (layer == 0).then(|| d.span(Some(&attn), "attn-rot", "module", 2));
            d.named(
                Some(&attn),
                "linear",
                "module",
                4,
                Some(&p("self_attn.o_proj")),
            );
            d.named(
                Some(&block),
                "rms-norm",
                "module",
                5,
                Some(&p("post_attention_layernorm")),
            );
            let mlp = d.span(Some(&block), "mlp", "module", 30);
            for proj in ["gate_proj", "up_proj", "down_proj"] {
                d.named(
                    Some(&mlp),
                    "linear",
                    "module",
                    9,
                    Some(&p(&format!("mlp.{proj}"))),
                );
            }
            if layer == 0 {
                named.push((block, "model.layers.0"));
                named.push((attn, "model.layers.0.self_attn"));
                named.push((mlp, "model.layers.0.mlp"));
                named.push((rot0, "model.layers.0.self_attn/attn-rot[0]"));
                named.push((rot1.unwrap(), "model.layers.0.self_attn/attn-rot[1]"));
            } else {
                named.push((block, "model.layers.1"));
                named.push((rot0, "model.layers.1.self_attn/attn-rot"));
            }
        }
        d.named(Some(&fwd), "rms-norm", "module", 7, Some("model.norm"));
        d.named(Some(&fwd), "linear", "module", 11, Some("lm_head"));
        named.push((fwd, ""));
        (d, named)
    }

    #[test]
    fn composite_spans_take_the_common_prefix_of_what_they_hold() {
        let (d, named) = llama_named_doc();
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        check(&doc, &paths, &named);
        let rows = module_rows(&doc, &paths, ModuleGrouping::Path);
        let row = |k: &str| rows.iter().find(|r| r.key == k).unwrap().clone();
        // block: 100 ns; self 100 − (5 + 50 + 5 + 30) = 10.
        let b = row("model.layers.0");
        assert_eq!((b.calls, b.total_ns, b.self_ns), (1, 100, 10));
        // Layer 1's attn: 50 − (4 × 4 + 2) = 32 self.
        assert_eq!(row("model.layers.1.self_attn").self_ns, 32);
        // Every module span its own key: per layer block, 2 norms, attn, 4 linears, mlp and 3
        // linears (12), two layers 24; three attn-rot; model.norm and lm_head: 29.
        assert_eq!(rows.len(), 29);
        // The module a span ran in: a named span's own name, a `block` the prefix of what it
        // holds; the `forward` function span none.
        let module_of = |id: &str| paths.module_of(doc.span_index(id).unwrap());
        assert_eq!(module_of("s2"), Some("model.layers.0"));
        assert_eq!(module_of("s3"), Some("model.layers.0.input_layernorm"));
        assert_eq!(module_of("s4"), Some("model.layers.0.self_attn"));
        assert_eq!(module_of("s1"), None);
        assert_eq!(paths.module_of(doc.spans.len()), None);
        // Nesting mode: no module names to give.
        let (d, _) = llama_doc();
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        assert!(!paths.names());
        assert!((0..doc.spans.len()).all(|i| paths.module_of(i).is_none()));
    }

    #[test]
    fn a_common_prefix_goes_by_whole_segments() {
        let mut d = Doc::new();
        let fwd = d.span(None, "forward", "function", 100);
        let stack = d.span(Some(&fwd), "stack", "module", 50);
        d.named(
            Some(&stack),
            "mlp",
            "module",
            10,
            Some("model.layers.1.mlp"),
        );
        d.named(
            Some(&stack),
            "mlp",
            "module",
            10,
            Some("model.layers.10.mlp"),
        );
        let pair = d.span(Some(&fwd), "pair", "module", 30);
        d.named(
            Some(&pair),
            "linear",
            "module",
            5,
            Some("model.layers.1.mlp.a"),
        );
        d.named(
            Some(&pair),
            "linear",
            "module",
            5,
            Some("model.layers.1.mlp.b"),
        );
        // Names that share no segment: the nesting rule, below `forward`'s nothing.
        let apart = d.span(Some(&fwd), "apart", "module", 10);
        d.named(Some(&apart), "x", "module", 1, Some("encoder.x"));
        d.named(Some(&apart), "y", "module", 1, Some("decoder.y"));
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        let p = |id: &str| paths.path(doc.span_index(id).unwrap()).to_string();
        // `model.layers.1.mlp` and `model.layers.10.mlp` share `model.layers`, a list of
        // numbered layers both go on past with an index: the span is the module holding it.
        assert_eq!(p(&stack), "model");
        assert_eq!(p(&pair), "model.layers.1.mlp");
        assert_eq!(p(&apart), "apart");
    }

    #[test]
    fn a_span_around_numbered_layers_is_the_module_holding_the_list() {
        // T5's decoder block: a `block` span around its three layers `layer.0` … `layer.2`
        // (`self-attn`, `cross-attn`, `layer-ff`), each holding named linears.
        let mut d = Doc::new();
        let fwd = d.span(None, "forward", "function", 100);
        let block = d.span(Some(&fwd), "block", "module", 90);
        let mut layers = Vec::new();
        for (k, (name, inner)) in [
            ("self-attn", "SelfAttention.q"),
            ("cross-attn", "EncDecAttention.q"),
            ("layer-ff", "DenseReluDense.wi"),
        ]
        .into_iter()
        .enumerate()
        {
            let layer = d.span(Some(&block), name, "module", 20);
            let m = format!("decoder.block.0.layer.{k}.{inner}");
            d.named(Some(&layer), "linear", "module", 5, Some(&m));
            layers.push(layer);
        }
        // One numbered layer beside a name that is no index: the plain prefix.
        let mixed = d.span(Some(&fwd), "mixed", "module", 5);
        d.named(Some(&mixed), "linear", "module", 1, Some("enc.layers.0.q"));
        d.named(Some(&mixed), "norm", "module", 1, Some("enc.layers.norm"));
        // A span holding a named list itself and its layers: the list's own name ends there.
        let own = d.span(Some(&fwd), "own", "module", 5);
        d.named(Some(&own), "list", "module", 3, Some("dec.layers"));
        d.named(Some(&own), "linear", "module", 1, Some("dec.layers.0.q"));
        // A list at the root of the names: nothing is left above it, so the list it stays.
        let root_list = d.span(Some(&fwd), "stack", "module", 5);
        d.named(Some(&root_list), "linear", "module", 1, Some("h.0.attn"));
        d.named(Some(&root_list), "linear", "module", 1, Some("h.1.attn"));
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        let p = |id: &str| paths.path(doc.span_index(id).unwrap()).to_string();
        assert_eq!(p(&block), "decoder.block.0");
        // Each layer holds one named linear: its prefix is the linear's whole name.
        assert_eq!(p(&layers[0]), "decoder.block.0.layer.0.SelfAttention.q");
        assert_eq!(p(&mixed), "enc.layers");
        assert_eq!(p(&own), "dec.layers");
        assert_eq!(p(&root_list), "h");
    }

    #[test]
    fn a_layer_run_twice_is_one_module_and_a_wrapper_counts_once() {
        let mut d = Doc::new();
        let fwd = d.span(None, "forward", "function", 100);
        // One layer called at two places: one key, two calls.
        let a = d.named(Some(&fwd), "linear", "module", 10, Some("model.shared"));
        let b = d.named(Some(&fwd), "linear", "module", 15, Some("model.shared"));
        // A wrapper whose one named descendant gives it the same key: one call, the
        // wrapper's time; self adds both spans' self times (20 − 12 = 8, and 12).
        let head = d.span(Some(&fwd), "head", "module", 20);
        let proj = d.named(Some(&head), "linear", "module", 12, Some("model.head.proj"));
        let doc = d.read();
        let paths = ModulePaths::new(&doc);
        let i = |id: &str| doc.span_index(id).unwrap();
        assert_eq!(paths.path(i(&head)), "model.head.proj");
        assert!(paths.outermost(i(&a)) && paths.outermost(i(&b)) && paths.outermost(i(&head)));
        assert!(!paths.outermost(i(&proj)));
        // `forward` is no module span: never outermost.
        assert!(!paths.outermost(i(&fwd)));
        let rows = module_rows(&doc, &paths, ModuleGrouping::Path);
        let got: Vec<(&str, u64, u64, u64, u64)> = rows
            .iter()
            .map(|r| (r.key.as_str(), r.calls, r.total_ns, r.self_ns, r.mean_ns))
            .collect();
        assert_eq!(
            got,
            [
                ("model.shared", 2, 25, 25, 12),
                ("model.head.proj", 1, 20, 20, 20)
            ]
        );
        // The measured `forward` is 100 ns: shares 0.25 and 0.2.
        assert_eq!(rows[0].share, Some(0.25));
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

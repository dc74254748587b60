//! Numbers for a time range of a trace (the viewer's range selection): module spans, ops,
//! training phases, memory events and each device's live-bytes peak, counting only what
//! happened inside the range. The op-efficiency table of a range is
//! [`efficiency_in`](crate::analysis::flops::efficiency_in), by the rules below.
//!
//! Rules (SCHEMA.md defines no range; these are the viewer's, stated once here):
//! - A **range** is `[start_ns, end_ns]` in the trace's own time (`start_ns ≤ end_ns`).
//! - A span or op runs over `[start, start + duration]` (an unclosed span has duration 0; an
//!   op's `timestamp_ns` is its start; the end saturates at `u64::MAX`). Its **time inside**
//!   the range is the length of the overlap of the two intervals (all of its duration when it
//!   lies wholly inside). It **counts** in the range when that overlap is positive,
//!   or, for one of duration 0, when its start lies in the range (ends included).
//! - Module rows follow [`module_rows`](crate::analysis::modules::module_rows) with every
//!   duration clipped to the range: by key, `calls` counts the outermost spans of the key that
//!   count in the range and `total_ns` adds their time inside; by name every such span counts;
//!   `self_ns` adds, for every counted span of the key, its time inside less the time inside
//!   of its direct children in the layout tree (saturating at 0). A range covering the whole
//!   trace gives exactly its rows. `share` is `total_ns` over the measured region's time
//!   inside the range.
//! - An op group's `count`, `total_ns`, `mean_ns`, `max_ns` and `min_ns` use the time inside
//!   of the counted ops; `output_bytes` and `input_bytes` add the whole bytes of each counted
//!   op (bytes cannot be split), and `output_unknown` counts those whose output bytes no field
//!   says. Grouping and order are those of
//!   [`op_groups`](crate::analysis::ops::op_groups).
//! - Op efficiency ([`efficiency_in`](crate::analysis::flops::efficiency_in)): the counted ops,
//!   each with its time inside; an op crossing an edge brings the same fraction of its FLOP
//!   estimate and of its bytes moved (rounded down) as of its time, so that its FLOP/s and
//!   bytes per ns are those of the whole op (a rate, unlike the op tab's byte totals, which
//!   stay whole).
//! - Phases: the breakdown of [`phase_breakdown`](crate::analysis::phases::phase_breakdown)
//!   with the region's and each outermost stepped span's time inside the range; module pairs
//!   as [`module_pairs`](crate::analysis::phases::module_pairs) pairs them (the outermost
//!   spans of each key), counting those that count in the range with their time inside.
//! - Memory: `alloc` and `free` events whose `timestamp_ns` lies in the range (ends included)
//!   are counted, and the bytes of the allocs added. A device's **peak in the range** is the
//!   largest live value of its curve over the range: the value in force when the range starts
//!   (after the last event before it) and every value after an event inside it.

use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use crate::analysis::modules::{
    is_module_span, sort_module_rows, ModuleGrouping, ModulePaths, ModuleRow,
};
use crate::analysis::ops::{sort_groups, GroupKey, OpGroup, OpGrouping};
use crate::analysis::phases::{measured_region, sort_pairs, ModulePair, PhaseBreakdown};
use crate::format::document::TraceDocument;
use crate::format::events::{MemoryAction, Pass};
use crate::format::table::{OpRow, OpTable};

/// A closed time range, ns in the trace's own time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    /// First ns of the range.
    pub start_ns: u64,
    /// Last ns of the range (`≥ start_ns`).
    pub end_ns: u64,
}

impl TimeRange {
    /// The range between two times, in either order.
    pub fn new(a_ns: u64, b_ns: u64) -> Self {
        TimeRange {
            start_ns: a_ns.min(b_ns),
            end_ns: a_ns.max(b_ns),
        }
    }

    /// Every time: the whole trace.
    pub const ALL: TimeRange = TimeRange {
        start_ns: 0,
        end_ns: u64::MAX,
    };

    /// The range's length.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// Whether `ns` lies in the range (ends included).
    pub fn contains(&self, ns: u64) -> bool {
        self.start_ns <= ns && ns <= self.end_ns
    }

    /// The time inside the range of something running from `start_ns` for `duration_ns`, and
    /// whether it counts in the range (see the module docs).
    pub fn inside(&self, start_ns: u64, duration_ns: u64) -> Option<u64> {
        let end_ns = start_ns.saturating_add(duration_ns);
        if duration_ns == 0 {
            return self.contains(start_ns).then_some(0);
        }
        // Wholly inside: all of it (also when its end saturates at u64::MAX).
        if start_ns >= self.start_ns && end_ns <= self.end_ns {
            return Some(duration_ns);
        }
        let overlap = end_ns
            .min(self.end_ns)
            .saturating_sub(start_ns.max(self.start_ns));
        (overlap > 0).then_some(overlap)
    }
}

/// Each span's time inside `range`, `None` for spans that do not count in it.
fn span_time_inside(doc: &TraceDocument, range: TimeRange) -> Vec<Option<u64>> {
    doc.spans
        .iter()
        .map(|s| range.inside(s.start_ns, s.duration_or_zero()))
        .collect()
}

/// Module spans inside `range`, grouped as [`module_rows`](crate::analysis::modules::module_rows)
/// groups them, with every time clipped to the range (module docs); sorted by total time,
/// largest first, then by key.
pub fn module_rows_in(
    doc: &TraceDocument,
    paths: &ModulePaths,
    grouping: ModuleGrouping,
    range: TimeRange,
) -> Vec<ModuleRow> {
    let inside = span_time_inside(doc, range);
    let measured = doc
        .spans
        .iter()
        .zip(&inside)
        .filter(|(s, _)| s.measured)
        .filter_map(|(_, t)| *t)
        .fold(0u64, u64::saturating_add);
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut rows: Vec<ModuleRow> = Vec::new();
    for (i, s) in doc.spans.iter().enumerate() {
        if !is_module_span(s) {
            continue;
        }
        let Some(time) = inside[i] else {
            continue;
        };
        let children = doc
            .tree
            .children(i)
            .iter()
            .filter_map(|&c| inside.get(c as usize).copied().flatten())
            .fold(0u64, u64::saturating_add);
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
        if grouping == ModuleGrouping::Name || paths.outermost(i) {
            row.calls += 1;
            row.total_ns = row.total_ns.saturating_add(time);
        }
        row.self_ns = row.self_ns.saturating_add(time.saturating_sub(children));
    }
    for row in &mut rows {
        row.mean_ns = row.total_ns / row.calls.max(1);
        row.share = (measured > 0).then(|| row.total_ns as f64 / measured as f64);
    }
    sort_module_rows(&mut rows);
    rows
}

/// `op`'s group key under `grouping`.
fn op_key<'a>(op: &OpRow<'a>, grouping: OpGrouping) -> GroupKey<'a> {
    match grouping {
        OpGrouping::Name => (op.op_name, None),
        OpGrouping::NameShapeDtype => (op.op_name, Some((op.shape, op.dtype))),
    }
}

/// Op groups being counted: each group and the exact sum of its ops' times (for the mean).
#[derive(Default)]
struct GroupSums {
    groups: Vec<OpGroup>,
    sums: Vec<u128>,
}

impl GroupSums {
    /// Open a group keyed by `key`; its number.
    fn open(&mut self, key: GroupKey<'_>) -> usize {
        self.groups.push(OpGroup::empty(key));
        self.sums.push(0);
        self.groups.len() - 1
    }

    /// Count op `i` (`op`) in group `g` with `time` inside the range.
    fn add(&mut self, g: usize, i: usize, op: &OpRow<'_>, time: u64) {
        self.sums[g] = self.sums[g].saturating_add(u128::from(time));
        let group = &mut self.groups[g];
        group.count += 1;
        group.total_ns = group.total_ns.saturating_add(time);
        group.max_ns = group.max_ns.max(time);
        group.min_ns = group.min_ns.min(time);
        group.add_output(op.known_output_bytes());
        group.input_bytes = group.input_bytes.saturating_add(op.input_storage_bytes);
        group.op_indices.push(i);
    }

    /// The groups with their means, in `op_groups`' order.
    fn finish(self) -> Vec<OpGroup> {
        let mut groups = self.groups;
        for (g, sum) in groups.iter_mut().zip(self.sums) {
            g.mean_ns = u64::try_from(sum / u128::from(g.count.max(1))).unwrap_or(u64::MAX);
        }
        sort_groups(&mut groups);
        groups
    }
}

/// Ops inside `range`, grouped as [`op_groups`](crate::analysis::ops::op_groups) groups them,
/// with each op's time clipped to the range (module docs). `op_indices` lists the counted
/// ops. Reads every op; [`op_groups_in_with`] gives the same groups range after range.
pub fn op_groups_in(ops: &OpTable, grouping: OpGrouping, range: TimeRange) -> Vec<OpGroup> {
    let mut sums = GroupSums::default();
    let mut index: HashMap<GroupKey<'_>, usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        let Some(time) = range.inside(op.timestamp_ns, op.duration_ns) else {
            continue;
        };
        let key = op_key(&op, grouping);
        let g = *index.entry(key).or_insert_with(|| sums.open(key));
        sums.add(g, i, &op, time);
    }
    sums.finish()
}

/// How many ops of the time order share one latest end in [`OpIndex`].
const END_BLOCK: usize = 64;

/// An op table arranged for counting range after range ([`op_groups_in_with`]), made once:
/// each op's group number under each grouping (so a range hashes no name), and the ops in
/// order of their start with the latest end so far every [`END_BLOCK`] ops (so a range finds
/// the ops that can count in it by binary search, not by reading every op).
#[derive(Debug, Clone, PartialEq)]
pub struct OpIndex {
    /// Each op's group number by name, then by (name, shape, dtype), numbered as first met.
    group_of: [Vec<u32>; 2],
    /// How many groups each grouping has.
    groups: [usize; 2],
    /// Op indices in order of `timestamp_ns` (file order among equal starts).
    by_start: Vec<u32>,
    /// The latest end (`timestamp_ns + duration_ns`, saturating) of the ops of `by_start`
    /// up to the end of each block of [`END_BLOCK`].
    ends_by_block: Vec<u64>,
}

impl OpIndex {
    /// The index of `ops`.
    pub fn of(ops: &OpTable) -> Self {
        // An op's group by the numbers of its stored strings and shape (cheap to hash), each
        // such triple's group by the texts once (two numbers may stand for one text).
        let numbers = |grouping: OpGrouping| {
            let mut by_key: HashMap<GroupKey<'_>, u32> = HashMap::new();
            let mut by_cells: HashMap<(u32, u32, u32), u32> = HashMap::new();
            let of_op: Vec<u32> = (0..ops.len())
                .zip(ops.cells())
                .map(|(i, c)| {
                    let cells = match grouping {
                        OpGrouping::Name => (c.op_name, u32::MAX, u32::MAX),
                        OpGrouping::NameShapeDtype => (c.op_name, c.shape, c.dtype),
                    };
                    *by_cells.entry(cells).or_insert_with(|| {
                        let next = u32::try_from(by_key.len()).unwrap_or(u32::MAX);
                        *by_key.entry(op_key(&ops.row(i), grouping)).or_insert(next)
                    })
                })
                .collect();
            (of_op, by_key.len())
        };
        let (by_name, names) = numbers(OpGrouping::Name);
        let (by_shape, shapes) = numbers(OpGrouping::NameShapeDtype);
        let cells = ops.cells();
        let mut by_start: Vec<u32> = (0..cells.len())
            .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        // Stable: file order among equal starts (a trace's ops mostly come in start order).
        by_start.sort_by_key(|&i| cells[i as usize].timestamp_ns);
        let mut latest = 0u64;
        let ends_by_block = by_start
            .chunks(END_BLOCK)
            .map(|block| {
                for &i in block {
                    let c = &cells[i as usize];
                    latest = latest.max(c.timestamp_ns.saturating_add(c.duration_ns));
                }
                latest
            })
            .collect();
        OpIndex {
            group_of: [by_name, by_shape],
            groups: [names, shapes],
            by_start,
            ends_by_block,
        }
    }

    /// The ops of `ops` (this index's table) that count in `range`, each with its time inside,
    /// in file order. Only ops that start by the range's end and whose block of the time order
    /// reaches its start are read: any other starts after it, or ends before it, so it does
    /// not count ([`TimeRange::inside`]).
    fn counted(&self, ops: &OpTable, range: TimeRange) -> Vec<(usize, u64)> {
        let cells = ops.cells();
        let start_of = |i: u32| cells.get(i as usize).map_or(u64::MAX, |c| c.timestamp_ns);
        let first = self
            .ends_by_block
            .partition_point(|&end| end < range.start_ns)
            .saturating_mul(END_BLOCK);
        let last = self
            .by_start
            .partition_point(|&i| start_of(i) <= range.end_ns);
        let mut counted: Vec<(usize, u64)> = self
            .by_start
            .get(first.min(last)..last)
            .unwrap_or_default()
            .iter()
            .filter_map(|&i| {
                let c = cells.get(i as usize)?;
                let time = range.inside(c.timestamp_ns, c.duration_ns)?;
                Some((i as usize, time))
            })
            .collect();
        counted.sort_unstable_by_key(|&(i, _)| i);
        counted
    }
}

/// [`op_groups_in`] with the ops arranged beforehand (`index`: [`OpIndex::of`] the same
/// `ops`): the same groups, reading only the ops that can count in `range`.
pub fn op_groups_in_with(
    ops: &OpTable,
    index: &OpIndex,
    grouping: OpGrouping,
    range: TimeRange,
) -> Vec<OpGroup> {
    let g = usize::from(grouping == OpGrouping::NameShapeDtype);
    let (group_of, groups) = (&index.group_of[g], index.groups[g]);
    let mut sums = GroupSums::default();
    // Each group number's group in the range, opened as first met in file order.
    let mut slot = vec![usize::MAX; groups];
    for (i, time) in index.counted(ops, range) {
        let (Some(op), Some(&n)) = (ops.get(i), group_of.get(i)) else {
            continue;
        };
        let Some(s) = slot.get_mut(n as usize) else {
            continue;
        };
        if *s == usize::MAX {
            *s = sums.open(op_key(&op, grouping));
        }
        sums.add(*s, i, &op, time);
    }
    sums.finish()
}

/// The training-phase breakdown of the measured region inside `range`; `None` without a
/// measured span (module docs).
pub fn phases_in(doc: &TraceDocument, range: TimeRange) -> Option<PhaseBreakdown> {
    let region = measured_region(doc)?;
    let time = |i: usize| {
        doc.spans
            .get(i)
            .and_then(|s| range.inside(s.start_ns, s.duration_or_zero()))
            .unwrap_or(0)
    };
    let mut b = PhaseBreakdown {
        region_span: region,
        region_ns: time(region),
        ..PhaseBreakdown::default()
    };
    // The outermost stepped spans below the region: a stepped span's subtree is not entered.
    let mut stack: Vec<u32> = doc.tree.children(region).to_vec();
    while let Some(i) = stack.pop() {
        let i = i as usize;
        match doc.spans.get(i).and_then(|s| s.pass) {
            Some(step) => {
                let t = time(i);
                match step {
                    Pass::Forward => b.forward_ns = b.forward_ns.saturating_add(t),
                    Pass::Backward => b.backward_ns = b.backward_ns.saturating_add(t),
                    Pass::Optimizer => b.optimizer_ns = b.optimizer_ns.saturating_add(t),
                }
            }
            None => stack.extend_from_slice(doc.tree.children(i)),
        }
    }
    let stepped = b
        .forward_ns
        .saturating_add(b.backward_ns)
        .saturating_add(b.optimizer_ns);
    b.other_ns = b.region_ns.saturating_sub(stepped);
    b.overlap_ns = stepped.saturating_sub(b.region_ns);
    Some(b)
}

/// Module spans of the measured region inside `range`, paired by module path as
/// [`module_pairs`](crate::analysis::phases::module_pairs) pairs them (module docs).
pub fn module_pairs_in(
    doc: &TraceDocument,
    paths: &ModulePaths,
    range: TimeRange,
) -> Vec<ModulePair> {
    let Some(region) = measured_region(doc) else {
        return Vec::new();
    };
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut rows: Vec<ModulePair> = Vec::new();
    let mut stack: Vec<u32> = doc.tree.children(region).to_vec();
    while let Some(i) = stack.pop() {
        let i = i as usize;
        stack.extend_from_slice(doc.tree.children(i));
        let Some(span) = doc.spans.get(i) else {
            continue;
        };
        if !paths.outermost(i) {
            continue;
        }
        let Some(step @ (Pass::Forward | Pass::Backward)) = span.pass else {
            continue;
        };
        let Some(time) = range.inside(span.start_ns, span.duration_or_zero()) else {
            continue;
        };
        let path = paths.path(i);
        let r = *index.entry(path).or_insert_with(|| {
            rows.push(ModulePair {
                path: path.to_string(),
                forward_count: 0,
                forward_ns: 0,
                backward_count: 0,
                backward_ns: 0,
            });
            rows.len() - 1
        });
        let row = &mut rows[r];
        if step == Pass::Forward {
            row.forward_count += 1;
            row.forward_ns = row.forward_ns.saturating_add(time);
        } else {
            row.backward_count += 1;
            row.backward_ns = row.backward_ns.saturating_add(time);
        }
    }
    sort_pairs(&mut rows);
    rows
}

/// Memory events inside a range, over every device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryInRange {
    /// `alloc` events in the range.
    pub alloc_count: u64,
    /// Their bytes.
    pub alloc_bytes: u64,
    /// `free` events in the range.
    pub free_count: u64,
}

/// The `memory` events of `doc` inside `range` (module docs).
pub fn memory_in(doc: &TraceDocument, range: TimeRange) -> MemoryInRange {
    let mut m = MemoryInRange::default();
    for e in doc.memory.iter() {
        if !range.contains(e.timestamp_ns) {
            continue;
        }
        match e.action {
            MemoryAction::Alloc => {
                m.alloc_count += 1;
                m.alloc_bytes = m.alloc_bytes.saturating_add(e.bytes);
            }
            MemoryAction::Free => m.free_count += 1,
        }
    }
    m
}

/// The largest live value of one device's curve over `range`, and when it was first reached
/// (the range's start when it was already in force then); `None` when the curve has no value
/// in force during the range (no event before its end). `timestamps_ns` (non-decreasing) and
/// `live_bytes` are the device's curve: its live bytes after each memory event, as
/// [`MemoryProfile::samples`](crate::format::memory::MemoryProfile::samples) holds them.
pub fn live_peak_in(
    timestamps_ns: &[u64],
    live_bytes: &[u64],
    range: TimeRange,
) -> Option<(u64, u64)> {
    let n = timestamps_ns.len().min(live_bytes.len());
    let t = &timestamps_ns[..n];
    // Events before the range: the last one's value is in force when it starts.
    let first_inside = t.partition_point(|&ts| ts < range.start_ns);
    let after = t.partition_point(|&ts| ts <= range.end_ns);
    let mut best: Option<(u64, u64)> = first_inside
        .checked_sub(1)
        .map(|i| (live_bytes[i], range.start_ns));
    for i in first_inside..after {
        if best.is_none_or(|(b, _)| live_bytes[i] > b) {
            best = Some((live_bytes[i], t[i]));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::flops::{efficiency, efficiency_in, Efficiency};
    use crate::analysis::modules::module_rows;
    use crate::analysis::ops::op_groups;
    use crate::analysis::phases::{module_pairs, phase_breakdown};
    use alloc::format;
    use alloc::string::String;
    use alloc::vec;

    /// A training step written by hand (times in ns):
    ///
    /// ```text
    /// step      0..1000  function, measured
    ///   fwd     0..400   function, step forward
    ///     enc   50..350  module
    ///       lin 100..300 module        ops: matmul 100..250, add 250..300
    ///     lin   360..390 module (path `lin`, directly in the forward)   op: matmul 360..390
    ///   bwd     400..900 function, step backward
    ///     enc   450..850 module        op: matmul 500..800
    ///   opt     900..1000 function, step optimizer   op: add 950..950 (0 ns)
    /// ```
    ///
    /// Every op's output is 2×2 f32 (16 B). The matmuls read 48 B of inputs: 12 f32 elements
    /// = b·(M+N)·K = 1·4·K, so K = 3 and each is 2·1·2·2·3 = 24 FLOPs moving 48 + 16 = 64 B;
    /// an add is 4 FLOPs (one per output element) moving 16 B.
    ///
    /// memory on cpu: alloc 100 B at 100, alloc 300 B at 300, free (the 100 B) at 500,
    /// alloc 50 B at 700 → live 100, 400, 300, 350.
    const FIXTURE: &str = concat!(
        r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
        "\n",
        r#"{"kind":"span_start","id":"step","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
        "\n",
        r#"{"kind":"span_start","id":"fwd","parent_id":"step","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}"#,
        "\n",
        r#"{"kind":"span_start","id":"enc","parent_id":"fwd","name":"enc","start_ns":50,"span_kind":"module","step":"forward"}"#,
        "\n",
        r#"{"kind":"span_start","id":"lin","parent_id":"enc","name":"lin","start_ns":100,"span_kind":"module","step":"forward"}"#,
        "\n",
        r#"{"kind":"span_end","id":"lin","duration_ns":200}"#,
        "\n",
        r#"{"kind":"span_end","id":"enc","duration_ns":300}"#,
        "\n",
        r#"{"kind":"span_start","id":"lin2","parent_id":"fwd","name":"lin","start_ns":360,"span_kind":"module","step":"forward"}"#,
        "\n",
        r#"{"kind":"span_end","id":"lin2","duration_ns":30}"#,
        "\n",
        r#"{"kind":"span_end","id":"fwd","duration_ns":400}"#,
        "\n",
        r#"{"kind":"span_start","id":"bwd","parent_id":"step","name":"backward","start_ns":400,"span_kind":"function","step":"backward"}"#,
        "\n",
        r#"{"kind":"span_start","id":"benc","parent_id":"bwd","name":"enc","start_ns":450,"span_kind":"module","step":"backward"}"#,
        "\n",
        r#"{"kind":"span_end","id":"benc","duration_ns":400}"#,
        "\n",
        r#"{"kind":"span_end","id":"bwd","duration_ns":500}"#,
        "\n",
        r#"{"kind":"span_start","id":"opt","parent_id":"step","name":"optimizer","start_ns":900,"span_kind":"function","step":"optimizer"}"#,
        "\n",
        r#"{"kind":"span_end","id":"opt","duration_ns":100}"#,
        "\n",
        r#"{"kind":"span_end","id":"step","duration_ns":1000}"#,
        "\n",
        r#"{"kind":"op","span_id":"lin","op_name":"matmul","shape":[2,2],"dtype":"f32","device":"cpu","input_storage_bytes":48,"duration_ns":150,"timestamp_ns":100}"#,
        "\n",
        r#"{"kind":"op","span_id":"lin","op_name":"add","shape":[2,2],"dtype":"f32","device":"cpu","duration_ns":50,"timestamp_ns":250}"#,
        "\n",
        r#"{"kind":"op","span_id":"lin2","op_name":"matmul","shape":[2,2],"dtype":"f32","device":"cpu","input_storage_bytes":48,"duration_ns":30,"timestamp_ns":360}"#,
        "\n",
        r#"{"kind":"op","span_id":"benc","op_name":"matmul","shape":[2,2],"dtype":"f32","device":"cpu","input_storage_bytes":48,"duration_ns":300,"timestamp_ns":500}"#,
        "\n",
        r#"{"kind":"op","span_id":"opt","op_name":"add","shape":[2,2],"dtype":"f32","device":"cpu","duration_ns":0,"timestamp_ns":950}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":100,"tensor_id":"a","span_id":"lin","device":"cpu","bytes":100,"action":"alloc","dtype":"u8"}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":300,"tensor_id":"b","span_id":"lin","device":"cpu","bytes":300,"action":"alloc","dtype":"u8"}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":500,"tensor_id":"a","span_id":"benc","device":"cpu","bytes":100,"action":"free","dtype":"u8"}"#,
        "\n",
        r#"{"kind":"memory","timestamp_ns":700,"tensor_id":"c","span_id":"benc","device":"cpu","bytes":50,"action":"alloc","dtype":"u8"}"#,
        "\n",
    );

    fn doc() -> TraceDocument {
        let d = TraceDocument::from_bytes(FIXTURE.as_bytes());
        assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
        d
    }

    fn rows(rows: &[ModuleRow]) -> Vec<(&str, u64, u64, u64, u64)> {
        rows.iter()
            .map(|r| (r.key.as_str(), r.calls, r.total_ns, r.self_ns, r.mean_ns))
            .collect()
    }

    #[test]
    fn the_time_inside_a_range() {
        let r = TimeRange::new(300, 200);
        assert_eq!((r.start_ns, r.end_ns, r.duration_ns()), (200, 300, 100));
        assert_eq!(r.inside(100, 150), Some(50)); // 100..250: 200..250 inside
        assert_eq!(r.inside(250, 100), Some(50)); // 250..350: 250..300 inside
        assert_eq!(r.inside(100, 300), Some(100)); // covers it
        assert_eq!(r.inside(300, 10), None); // starts at its end: no overlap
        assert_eq!(r.inside(190, 10), None); // ends at its start
        assert_eq!(r.inside(300, 0), Some(0)); // an instant on its end counts
        assert_eq!(r.inside(301, 0), None);
        assert_eq!(TimeRange::ALL.inside(7, 5), Some(5));
        // Hostile times saturate: wholly inside the whole run, all of the duration counts.
        assert_eq!(TimeRange::ALL.inside(u64::MAX, u64::MAX), Some(u64::MAX));
        assert_eq!(r.inside(u64::MAX, 5), None);
    }

    #[test]
    fn module_rows_in_a_range_worked_out_by_hand() {
        let d = doc();
        let paths = ModulePaths::new(&d);
        // Range 200..600:
        // enc (fwd) 50..350 → 150 inside; its child lin 100..300 → 100 inside; self 50.
        // enc (bwd) 450..850 → 150 inside (450..600), no children: self 150.
        // Both `enc` spans have path `enc` (their parents fwd/bwd are functions).
        // enc/lin → 100, self 100. lin (in forward, 360..390) → 30, self 30.
        // measured step 0..1000 → 400 inside: enc's share 300 / 400.
        let r = module_rows_in(&d, &paths, ModuleGrouping::Path, TimeRange::new(200, 600));
        assert_eq!(
            rows(&r),
            vec![
                ("enc", 2, 300, 200, 150),
                ("enc/lin", 1, 100, 100, 100),
                ("lin", 1, 30, 30, 30),
            ]
        );
        assert_eq!(r[0].share, Some(0.75));
        // By name, `lin` adds enc/lin and lin: 2 calls, 130 ns.
        let r = module_rows_in(&d, &paths, ModuleGrouping::Name, TimeRange::new(200, 600));
        assert_eq!(
            rows(&r),
            vec![("enc", 2, 300, 200, 150), ("lin", 2, 130, 130, 65)]
        );
        // 860..1000 holds no module span.
        assert!(
            module_rows_in(&d, &paths, ModuleGrouping::Path, TimeRange::new(860, 1000)).is_empty()
        );
    }

    #[test]
    fn a_module_used_twice_counts_its_outermost_call_in_a_range() {
        // Names mode: `lm` (0..? 100..600) wraps `lin` (200..500); both are named `model.lm`,
        // so `lin` is no call of its own (its key's outermost span is `lm`).
        let text = concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"span_start","id":"a","parent_id":"s","name":"lm","start_ns":100,"span_kind":"module","module":"model.lm"}"#,
            "\n",
            r#"{"kind":"span_start","id":"b","parent_id":"a","name":"linear","start_ns":200,"span_kind":"module","module":"model.lm"}"#,
            "\n",
            r#"{"kind":"span_end","id":"b","duration_ns":300}"#,
            "\n",
            r#"{"kind":"span_end","id":"a","duration_ns":500}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":1000}"#,
            "\n",
        );
        let d = TraceDocument::from_bytes(text.as_bytes());
        let paths = ModulePaths::new(&d);
        assert!(paths.names());
        // Range 300..1000: lm 300..600 → 300 inside, less its child's 300..500 → self 100;
        // linear 300..500 → self 200. One call, total 300, self 300.
        let r = module_rows_in(&d, &paths, ModuleGrouping::Path, TimeRange::new(300, 1000));
        assert_eq!(rows(&r), vec![("model.lm", 1, 300, 300, 300)]);
        // By name each span is its own row: lm 300 (self 100), linear 200.
        let r = module_rows_in(&d, &paths, ModuleGrouping::Name, TimeRange::new(300, 1000));
        assert_eq!(
            rows(&r),
            vec![("lm", 1, 300, 100, 300), ("linear", 1, 200, 200, 200)]
        );
    }

    #[test]
    fn op_groups_in_a_range_worked_out_by_hand() {
        let d = doc();
        // Range 200..600: matmul 100..250 → 50, matmul 360..390 → 30, matmul 500..800 → 100;
        // add 250..300 → 50; add at 950 (0 ns) is outside.
        let g = op_groups_in(&d.ops, OpGrouping::Name, TimeRange::new(200, 600));
        let got: Vec<_> = g
            .iter()
            .map(|g| {
                (
                    g.op_name.as_str(),
                    g.count,
                    g.total_ns,
                    g.mean_ns,
                    g.max_ns,
                    g.min_ns,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![("matmul", 3, 180, 60, 100, 30), ("add", 1, 50, 50, 50, 50)]
        );
        // Whole bytes of each counted op: 3 matmuls of 2×2 f32 = 3 × 16.
        assert_eq!(g[0].output_bytes, 48);
        assert_eq!(g[0].op_indices, vec![0, 2, 3]);
        // The 0 ns add at 950 counts in 900..1000 with 0 ns.
        let g = op_groups_in(&d.ops, OpGrouping::Name, TimeRange::new(900, 1000));
        assert_eq!(
            g.iter()
                .map(|g| (g.op_name.as_str(), g.count, g.total_ns))
                .collect::<Vec<_>>(),
            vec![("add", 1, 0)]
        );
    }

    /// `op_groups_in_with` equals `op_groups_in` (which reads every op) over every range
    /// between two of `points` and the ops' starts and ends, one ns before and after each too:
    /// ranges whose edges cross ops, touch them, or hold none.
    fn fast_op_groups_equal_every_op_read(ops: &OpTable, points: &[u64], stride: usize) {
        let index = OpIndex::of(ops);
        let mut at: Vec<u64> = points.to_vec();
        for op in ops.iter() {
            let end = op.timestamp_ns.saturating_add(op.duration_ns);
            for t in [op.timestamp_ns, end] {
                at.extend([t.saturating_sub(1), t, t.saturating_add(1)]);
            }
        }
        at.sort_unstable();
        at.dedup();
        let at: Vec<u64> = at.into_iter().step_by(stride).collect();
        for (k, &a) in at.iter().enumerate() {
            for &b in &at[k..] {
                let r = TimeRange::new(a, b);
                for g in [OpGrouping::Name, OpGrouping::NameShapeDtype] {
                    assert_eq!(
                        op_groups_in_with(ops, &index, g, r),
                        op_groups_in(ops, g, r),
                        "{r:?} {g:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn op_groups_from_the_index_equal_every_op_read_on_a_hand_made_step() {
        // The step above: matmuls crossing 200 and 600, a 0 ns add at 950.
        let d = doc();
        fast_op_groups_equal_every_op_read(&d.ops, &[0, 200, 600, u64::MAX], 1);
        // And the hand-worked range itself.
        let index = OpIndex::of(&d.ops);
        let g = op_groups_in_with(&d.ops, &index, OpGrouping::Name, TimeRange::new(200, 600));
        assert_eq!(
            g.iter()
                .map(|g| (g.op_name.as_str(), g.count, g.total_ns))
                .collect::<Vec<_>>(),
            vec![("matmul", 3, 180), ("add", 1, 50)]
        );
        assert_eq!(g[0].op_indices, vec![0, 2, 3]);
    }

    /// A trace of `n` ops out of start order in the file (a small generator, fixed seed): equal
    /// starts, 0 ns ops, one op lasting over most of the others, one whose end saturates at
    /// `u64::MAX`, names with shapes and dtypes that group apart (`f32` and `F32` too).
    fn scattered_ops(n: u64) -> TraceDocument {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut text = String::from(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
        ));
        let names = ["matmul", "add", "relu"];
        let dtypes = ["f32", "bf16", "F32"];
        for i in 0..n {
            let (start, duration) = match i {
                7 => (100, 9_000),
                11 => (u64::MAX - 5, 100),
                _ => (next(200) * 50, [0, 10, 50, 120][next(4) as usize]),
            };
            let shape = if next(2) == 0 { "[2,2]" } else { "[4]" };
            text.push_str(&format!(
                r#"{{"kind":"op","span_id":"s","op_name":"{}","shape":{shape},"dtype":"{}","device":"cpu","duration_ns":{duration},"timestamp_ns":{start}}}"#,
                names[next(3) as usize],
                dtypes[next(3) as usize],
            ));
            text.push('\n');
        }
        TraceDocument::from_bytes(text.as_bytes())
    }

    #[test]
    fn op_groups_from_the_index_equal_every_op_read_on_scattered_ops() {
        let d = scattered_ops(300);
        assert_eq!(d.ops.len(), 300);
        let starts: Vec<u64> = d.ops.iter().map(|o| o.timestamp_ns).collect();
        assert!(starts.windows(2).any(|w| w[0] > w[1]), "not in start order");
        fast_op_groups_equal_every_op_read(&d.ops, &[0, 5_000, u64::MAX - 1, u64::MAX], 10);
    }

    #[cfg(feature = "std")]
    #[test]
    fn op_groups_from_the_index_equal_every_op_read_on_train_step() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/train_step.trace6.jsonl"
        );
        let d = TraceDocument::from_bytes(&std::fs::read(path).unwrap());
        assert_eq!(d.ops.len(), 18);
        fast_op_groups_equal_every_op_read(&d.ops, &[0, u64::MAX], 1);
    }

    /// (name, count, total_ns, flops, estimated_ns, flops_per_s, bytes_moved) of each row.
    type EffRow<'a> = (&'a str, u64, u64, u64, u64, Option<u64>, u64);

    fn eff_rows(e: &Efficiency) -> Vec<EffRow<'_>> {
        e.rows
            .iter()
            .map(|r| {
                (
                    r.op_name.as_str(),
                    r.count,
                    r.total_ns,
                    r.flops,
                    r.estimated_ns,
                    r.flops_per_s,
                    r.bytes_moved,
                )
            })
            .collect()
    }

    #[test]
    fn efficiency_in_a_range_worked_out_by_hand() {
        let d = doc();
        // The whole run: matmuls 3 × 24 = 72 FLOPs in 150 + 30 + 300 = 480 ns → 72e9 / 480 =
        // 150 M FLOP/s, 3 × 64 = 192 B; adds 2 × 4 = 8 FLOPs in 50 + 0 ns → 160 M FLOP/s, 32 B.
        let whole = efficiency(&d);
        assert_eq!(
            eff_rows(&whole),
            vec![
                ("matmul", 3, 480, 72, 480, Some(150_000_000), 192),
                ("add", 2, 50, 8, 50, Some(160_000_000), 32),
            ]
        );
        // Range 200..600:
        // - matmul 100..250 crosses the start: 50 of its 150 ns inside, a third: 24 / 3 = 8
        //   FLOPs, 64 / 3 = 21.3 → 21 B;
        // - add 250..300 and matmul 360..390 are wholly inside: 4 FLOPs in 50 ns, 16 B; 24
        //   FLOPs in 30 ns, 64 B;
        // - matmul 500..800 crosses the end: 100 of 300 ns, a third: 8 FLOPs, 21 B;
        // - add at 950 is outside.
        // matmul: 3 ops, 50 + 30 + 100 = 180 ns, 8 + 24 + 8 = 40 FLOPs → 40e9 / 180 =
        // 222 222 222.2 FLOP/s (rounded down), 21 + 64 + 21 = 106 B → 106 / 180 B/ns.
        let e = efficiency_in(&d, TimeRange::new(200, 600));
        assert_eq!(
            eff_rows(&e),
            vec![
                ("matmul", 3, 180, 40, 180, Some(222_222_222), 106),
                ("add", 1, 50, 4, 50, Some(80_000_000), 16),
            ]
        );
        assert_eq!(e.rows[0].bytes_per_ns, Some(106.0 / 180.0));
        assert_eq!(e.rows[0].dtypes, vec![("f32".into(), 3)]);
        // Totals: 44 FLOPs in 230 ns → 44e9 / 230 = 191 304 347.8 FLOP/s; 4 ops, all estimated.
        assert_eq!(
            (
                e.flops,
                e.estimated_ns,
                e.total_ns,
                e.count,
                e.estimated_count,
                e.flops_per_s
            ),
            (44, 230, 230, 4, 4, Some(191_304_347))
        );
        // An op crossing an edge keeps its FLOP/s: 500..800 alone in 700..1000 (100 of 300 ns)
        // is 8 FLOPs in 100 ns = 80 M FLOP/s = 24 FLOPs / 300 ns; the 0 ns add at 950 counts
        // whole, 4 FLOPs in 0 ns (no rate of its own).
        let e = efficiency_in(&d, TimeRange::new(700, 1000));
        assert_eq!(
            eff_rows(&e),
            vec![
                ("matmul", 1, 100, 8, 100, Some(80_000_000), 21),
                ("add", 1, 0, 4, 0, None, 16),
            ]
        );
        assert_eq!(e.rows[1].bytes_per_ns, None);
        // Between the ops (300..360) no op counts, and no name has a row.
        let e = efficiency_in(&d, TimeRange::new(300, 360));
        assert_eq!(
            (e.rows.len(), e.count, e.flops, e.flops_per_s),
            (0, 0, 0, None)
        );
    }

    #[test]
    fn phases_and_memory_in_a_range_worked_out_by_hand() {
        let d = doc();
        // Range 200..600: region 400; forward 0..400 → 200; backward 400..900 → 200; opt 0.
        let p = phases_in(&d, TimeRange::new(200, 600)).unwrap();
        assert_eq!(
            (
                p.region_ns,
                p.forward_ns,
                p.backward_ns,
                p.optimizer_ns,
                p.other_ns,
                p.overlap_ns
            ),
            (400, 200, 200, 0, 0, 0)
        );
        // Range 850..1000: region 150; backward 850..900 → 50; optimizer 900..1000 → 100.
        let p = phases_in(&d, TimeRange::new(850, 1000)).unwrap();
        assert_eq!(
            (
                p.region_ns,
                p.forward_ns,
                p.backward_ns,
                p.optimizer_ns,
                p.other_ns
            ),
            (150, 0, 50, 100, 0)
        );
        // Module pairs in 200..600: enc forward 150 (50..350), backward 150 (450..600);
        // enc/lin forward 100; lin forward 30.
        let paths = ModulePaths::new(&d);
        let pairs: Vec<_> = module_pairs_in(&d, &paths, TimeRange::new(200, 600))
            .into_iter()
            .map(|p| {
                (
                    p.path,
                    p.forward_count,
                    p.forward_ns,
                    p.backward_count,
                    p.backward_ns,
                )
            })
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("enc".into(), 1, 150, 1, 150),
                ("enc/lin".into(), 1, 100, 0, 0),
                ("lin".into(), 1, 30, 0, 0),
            ]
        );
        // Memory in 200..600: alloc 300 B at 300 and the free at 500.
        assert_eq!(
            memory_in(&d, TimeRange::new(200, 600)),
            MemoryInRange {
                alloc_count: 1,
                alloc_bytes: 300,
                free_count: 1
            }
        );
        // The curve: 100 @100, 400 @300, 300 @500, 350 @700.
        let c = &d.memory_profile;
        let (t, live): (Vec<u64>, Vec<u64>) = c
            .samples
            .iter()
            .map(|s| (s.timestamp_ns, s.live_bytes))
            .unzip();
        assert_eq!(live, vec![100, 400, 300, 350]);
        // 200..600: 100 in force at 200, then 400 at 300.
        assert_eq!(
            live_peak_in(&t, &live, TimeRange::new(200, 600)),
            Some((400, 300))
        );
        // 550..650: 300 in force since 500, nothing inside.
        assert_eq!(
            live_peak_in(&t, &live, TimeRange::new(550, 650)),
            Some((300, 550))
        );
        // 600..700 (end included): 300 in force, then 350 at 700.
        assert_eq!(
            live_peak_in(&t, &live, TimeRange::new(600, 700)),
            Some((350, 700))
        );
        // Before the first event nothing is live yet.
        assert_eq!(live_peak_in(&t, &live, TimeRange::new(0, 50)), None);
        assert_eq!(
            live_peak_in(&t, &live, TimeRange::new(0, 100)),
            Some((100, 100))
        );
    }

    #[cfg(feature = "std")]
    #[test]
    fn the_whole_trace_as_a_range_gives_the_whole_trace_numbers() {
        let root =
            std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures"));
        // Every trace/6 fixture, in subdirectories too (the names fixtures, the steps sets).
        let mut files = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.to_string_lossy().ends_with(".trace6.jsonl") {
                    files.push(path);
                }
            }
        }
        let mut checked = 0;
        for path in files {
            let d = TraceDocument::from_bytes(&std::fs::read(&path).unwrap());
            let paths = ModulePaths::new(&d);
            let name = path.display();
            for g in [ModuleGrouping::Path, ModuleGrouping::Name] {
                assert_eq!(
                    module_rows_in(&d, &paths, g, TimeRange::ALL),
                    module_rows(&d, &paths, g),
                    "{name}"
                );
            }
            for g in [OpGrouping::Name, OpGrouping::NameShapeDtype] {
                assert_eq!(
                    op_groups_in(&d.ops, g, TimeRange::ALL),
                    op_groups(&d.ops, g),
                    "{name}"
                );
            }
            // A finite range covering every op gives the whole run's efficiency table.
            let ops_end = d
                .ops
                .iter()
                .map(|op| op.timestamp_ns.saturating_add(op.duration_ns))
                .max()
                .unwrap_or(0);
            assert_eq!(
                efficiency_in(&d, TimeRange::new(0, ops_end)),
                efficiency(&d),
                "{name}"
            );
            assert_eq!(phases_in(&d, TimeRange::ALL), phase_breakdown(&d), "{name}");
            assert_eq!(
                module_pairs_in(&d, &paths, TimeRange::ALL),
                module_pairs(&d),
                "{name}"
            );
            let m = memory_in(&d, TimeRange::ALL);
            assert_eq!(
                (m.alloc_count, m.free_count),
                (d.memory_profile.alloc_count, d.memory_profile.free_count),
                "{name}"
            );
            for (dev, profile) in d.memory_profile.devices.iter().enumerate() {
                let (t, live): (Vec<u64>, Vec<u64>) = d
                    .memory_profile
                    .samples
                    .iter()
                    .filter(|s| s.device as usize == dev)
                    .map(|s| (s.timestamp_ns, s.live_bytes))
                    .unzip();
                if t.is_empty() {
                    continue;
                }
                let (peak, at) = live_peak_in(&t, &live, TimeRange::ALL).unwrap();
                assert_eq!(peak, profile.peak_bytes, "{name}");
                assert_eq!(Some(at), profile.peak_timestamp_ns, "{name}");
            }
            checked += 1;
        }
        assert!(checked > 40, "trace fixtures: {checked}");
    }
}

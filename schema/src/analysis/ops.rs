//! Op aggregates: ops grouped by name, or by (name, shape, dtype).

use crate::analysis::sort;
use alloc::string::String;
use alloc::string::ToString;
use alloc::vec::Vec;

use hashbrown::HashMap;

use crate::format::table::OpTable;

/// How to group ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpGrouping {
    /// One group per `op_name`.
    Name,
    /// One group per (`op_name`, `shape`, `dtype`).
    NameShapeDtype,
}

/// Aggregate numbers of a group of ops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpGroup {
    /// Op name.
    pub op_name: String,
    /// Output shape (only when grouping by shape).
    pub shape: Option<Vec<u64>>,
    /// Output dtype (only when grouping by dtype).
    pub dtype: Option<String>,
    /// Number of ops.
    pub count: u64,
    /// Sum of durations (saturating at `u64::MAX`).
    pub total_ns: u64,
    /// Integer mean duration (the exact sum / count, so never below the shortest duration even
    /// when `total_ns` saturates).
    pub mean_ns: u64,
    /// Longest duration.
    pub max_ns: u64,
    /// Shortest duration.
    pub min_ns: u64,
    /// Sum of output bytes (`storage_bytes` or derived) of the ops whose record says them.
    pub output_bytes: u64,
    /// Ops whose output bytes no field says (no `storage_bytes`, no dtype of known size: a
    /// leaf layer's row): not in `output_bytes`.
    pub output_unknown: u64,
    /// Sum of `input_storage_bytes`.
    pub input_bytes: u64,
    /// Indices into `TraceDocument::ops` of the group's ops, in file order.
    pub op_indices: Vec<usize>,
}

impl OpGroup {
    /// A group of no ops yet, keyed by `key`.
    pub(crate) fn empty(key: GroupKey<'_>) -> Self {
        OpGroup {
            op_name: key.0.to_string(),
            shape: key.1.map(|(s, _)| s.to_vec()),
            dtype: key.1.map(|(_, d)| String::from(d)),
            count: 0,
            total_ns: 0,
            mean_ns: 0,
            max_ns: 0,
            min_ns: u64::MAX,
            output_bytes: 0,
            output_unknown: 0,
            input_bytes: 0,
            op_indices: Vec::new(),
        }
    }

    /// Output bytes per ns of op time, `None` when the total time is 0 or an op's output bytes
    /// are unknown.
    pub fn output_bytes_per_ns(&self) -> Option<f64> {
        (self.total_ns > 0 && self.output_unknown == 0)
            .then(|| self.output_bytes as f64 / self.total_ns as f64)
    }

    /// Add `bytes` (`None`: unknown) to the group's output.
    pub(crate) fn add_output(&mut self, bytes: Option<u64>) {
        match bytes {
            Some(b) => self.output_bytes = self.output_bytes.saturating_add(b),
            None => self.output_unknown += 1,
        }
    }
}

/// (op name, (shape, dtype) when grouping by them).
pub(crate) type GroupKey<'a> = (&'a str, Option<(&'a [u64], &'a str)>);

/// Group `ops`; groups are sorted by total time, largest first (ties by name, then first use).
pub fn op_groups(ops: &OpTable, grouping: OpGrouping) -> Vec<OpGroup> {
    let mut groups: Vec<OpGroup> = Vec::new();
    // Exact duration sums for the means (a sum of u64s fits u128 for any realistic count).
    let mut sums: Vec<u128> = Vec::new();
    let mut index: HashMap<GroupKey<'_>, usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        let key = match grouping {
            OpGrouping::Name => (op.op_name, None),
            OpGrouping::NameShapeDtype => (op.op_name, Some((op.shape, op.dtype))),
        };
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(OpGroup::empty(key));
            sums.push(0);
            groups.len() - 1
        });
        sums[g] = sums[g].saturating_add(u128::from(op.duration_ns));
        let group = &mut groups[g];
        group.count += 1;
        group.total_ns = group.total_ns.saturating_add(op.duration_ns);
        group.max_ns = group.max_ns.max(op.duration_ns);
        group.min_ns = group.min_ns.min(op.duration_ns);
        group.add_output(op.known_output_bytes());
        group.input_bytes = group.input_bytes.saturating_add(op.input_storage_bytes);
        group.op_indices.push(i);
    }
    for (g, sum) in groups.iter_mut().zip(sums) {
        // The mean of u64 values is at most their maximum, so it fits u64.
        g.mean_ns = u64::try_from(sum / u128::from(g.count.max(1))).unwrap_or(u64::MAX);
    }
    // Stable sort keeps first-use order among equal keys.
    sort_groups(&mut groups);
    groups
}

/// Op groups by total time, largest first, ties by name then first use (also a range's
/// groups: [`crate::analysis::range`]).
pub(crate) fn sort_groups(groups: &mut [OpGroup]) {
    // Stable: first-use order among equal keys.
    sort::by(groups, |a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.op_name.cmp(&b.op_name))
    });
}

/// Op indices sorted by output bytes, largest first, those whose bytes are unknown last (ties
/// by file order), at most `limit`.
pub fn heaviest_ops(ops: &OpTable, limit: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by(|&a, &b| {
        ops.row(b)
            .known_output_bytes()
            .cmp(&ops.row(a).known_output_bytes())
            .then(a.cmp(&b))
    });
    order.truncate(limit);
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::Op;
    use crate::format::records::Lined;
    use alloc::vec;

    fn op(name: &str, duration_ns: u64) -> Lined<Op> {
        Lined::new(1, plain_op(name, duration_ns))
    }

    fn plain_op(name: &str, duration_ns: u64) -> Op {
        Op {
            span_id: "s".into(),
            op_name: name.into(),
            inputs: vec![],
            output: None,
            shape: vec![2],
            dtype: "f32".into(),
            device: "cpu".into(),
            duration_ns,
            timestamp_ns: 0,
            storage_bytes: None,
            input_storage_bytes: 0,
        }
    }

    #[test]
    fn the_mean_stays_exact_when_the_total_saturates() {
        // Regression (fuzz target any_reader_chunked on tests/fixtures/malformed/
        // u64_max_values.trace6.jsonl): two ops of u64::MAX ns had total u64::MAX (saturated)
        // and so a mean of u64::MAX / 2, below their shortest duration.
        let ops: OpTable = [
            op("huge", u64::MAX),
            op("huge", u64::MAX),
            op("small", 3),
            op("small", 4),
        ]
        .into_iter()
        .collect();
        let groups = op_groups(&ops, OpGrouping::Name);
        assert_eq!(groups[0].op_name, "huge");
        assert_eq!(groups[0].total_ns, u64::MAX);
        assert_eq!(groups[0].mean_ns, u64::MAX);
        assert_eq!((groups[1].total_ns, groups[1].mean_ns), (7, 3));
        for g in &groups {
            assert!(g.min_ns <= g.mean_ns && g.mean_ns <= g.max_ns);
        }
    }

    #[test]
    fn a_leaf_layers_output_is_unknown_unless_its_record_says_it() {
        // A leaf layer's rows carry no tensor (shape [], dtype ""): `linear` once with the
        // 2048 bytes the allocator saw, once with none, `norm` never; `add` is shape [2] f32.
        let layer = |name: &str, bytes: Option<u64>| {
            let mut o = plain_op(name, 10);
            o.shape = vec![];
            o.dtype = "".into();
            o.storage_bytes = bytes;
            Lined::new(1, o)
        };
        let ops: OpTable = [
            layer("linear", Some(2048)),
            layer("linear", None),
            layer("norm", None),
            op("add", 10),
        ]
        .into_iter()
        .collect();
        let groups = op_groups(&ops, OpGrouping::Name);
        let by = |name: &str| groups.iter().find(|g| g.op_name == name).unwrap();
        assert_eq!(
            (by("linear").output_bytes, by("linear").output_unknown),
            (2048, 1)
        );
        assert_eq!((by("norm").output_bytes, by("norm").output_unknown), (0, 1));
        assert_eq!((by("add").output_bytes, by("add").output_unknown), (8, 0));
        assert_eq!(by("linear").output_bytes_per_ns(), None);
        assert_eq!(by("norm").output_bytes_per_ns(), None);
        assert_eq!(by("add").output_bytes_per_ns(), Some(0.8));
        // The heaviest first, the unknown ones last in file order.
        assert_eq!(heaviest_ops(&ops, 4), [0, 3, 1, 2]);
    }
}

//! Search by name: which spans match a query, and stepping through the matches in time order.

/// Indices of the spans whose name or module (the chart's label for a module span: its module
/// key, or the weight path a capture named it by) contains `query` (ASCII case-insensitive),
/// ordered by `start_ns` (ties by index). An empty or blank query matches nothing.
pub fn matching_spans<'a>(
    names: impl IntoIterator<Item = (&'a str, Option<&'a str>, u64)>,
    query: &str,
) -> Vec<u32> {
    let query = query.trim();
    if query.is_empty() {
        return Vec::new();
    }
    let needle = query.to_ascii_lowercase();
    let mut hits: Vec<(u64, u32)> = names
        .into_iter()
        .enumerate()
        .filter(|(_, (name, module, _))| {
            contains_ignore_ascii_case(name, &needle)
                || module.is_some_and(|m| contains_ignore_ascii_case(m, &needle))
        })
        .map(|(i, (_, _, start))| (start, i as u32))
        .collect();
    hits.sort_unstable();
    hits.into_iter().map(|(_, i)| i).collect()
}

/// `haystack` contains `needle_lower` (already lowercase), ignoring ASCII case.
fn contains_ignore_ascii_case(haystack: &str, needle_lower: &str) -> bool {
    let (h, n) = (haystack.as_bytes(), needle_lower.as_bytes());
    if n.len() > h.len() {
        return false;
    }
    h.windows(n.len())
        .any(|w| w.iter().zip(n).all(|(a, b)| a.to_ascii_lowercase() == *b))
}

/// The next position in a match list of `len` after `current` (wrapping; `forward` false
/// steps back). Without a current match, forward starts at the first and back at the last.
pub fn step_match(len: usize, current: Option<usize>, forward: bool) -> Option<usize> {
    if len == 0 {
        return None;
    }
    Some(match (current, forward) {
        (None, true) => 0,
        (None, false) => len - 1,
        (Some(c), true) => (c + 1) % len,
        (Some(c), false) => (c + len - 1) % len,
    })
}

/// Several groups' matches (each `(axis time, span)`) in one list ordered by axis time, ties
/// by group then span: `(group, span)`.
pub fn merge_by_time(groups: impl IntoIterator<Item = Vec<(f64, u32)>>) -> Vec<(usize, u32)> {
    let mut all: Vec<(f64, usize, u32)> = groups
        .into_iter()
        .enumerate()
        .flat_map(|(g, m)| m.into_iter().map(move |(t, s)| (t, g, s)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    all.into_iter().map(|(_, g, s)| (g, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_case_insensitively_in_time_order() {
        let names = [
            ("MatMul", None, 30u64),
            ("relu", None, 10),
            ("matmul_bwd", None, 20),
            ("µs-op", None, 5),
            ("linear", Some("model.layers.1.self_attn.q_proj"), 40),
            ("linear", Some("model.layers.1.mlp.up_proj"), 35),
        ];
        assert_eq!(matching_spans(names, "matmul"), vec![2, 0]);
        assert_eq!(matching_spans(names, "  RELU "), vec![1]);
        assert_eq!(matching_spans(names, "µs"), vec![3]);
        assert!(matching_spans(names, "").is_empty());
        assert!(matching_spans(names, "softmax").is_empty());
        // A named span matches by its module and by its own name.
        assert_eq!(matching_spans(names, "Q_PROJ"), vec![4]);
        assert_eq!(matching_spans(names, "layers.1."), vec![5, 4]);
        assert_eq!(matching_spans(names, "linear"), vec![5, 4]);
    }

    #[test]
    fn groups_merge_in_axis_time() {
        // Group 0 matches at 10 and 50, group 1 (shifted) at 30 and 50.
        let merged = merge_by_time([vec![(10.0, 4), (50.0, 2)], vec![(30.0, 9), (50.0, 1)]]);
        assert_eq!(merged, vec![(0, 4), (1, 9), (0, 2), (1, 1)]);
        assert!(merge_by_time(Vec::<Vec<(f64, u32)>>::new()).is_empty());
    }

    #[test]
    fn stepping_wraps() {
        assert_eq!(step_match(0, None, true), None);
        assert_eq!(step_match(3, None, true), Some(0));
        assert_eq!(step_match(3, None, false), Some(2));
        assert_eq!(step_match(3, Some(2), true), Some(0));
        assert_eq!(step_match(3, Some(0), false), Some(2));
    }
}

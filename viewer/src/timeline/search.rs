//! Search by name: which spans match a query, and stepping through the matches in time order.

/// Indices of the spans whose name contains `query` (ASCII case-insensitive), ordered by
/// `start_ns` (ties by index). An empty or blank query matches nothing.
pub fn matching_spans<'a>(
    names: impl IntoIterator<Item = (&'a str, u64)>,
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
        .filter(|(_, (name, _))| contains_ignore_ascii_case(name, &needle))
        .map(|(i, (_, start))| (start, i as u32))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_case_insensitively_in_time_order() {
        let names = [
            ("MatMul", 30u64),
            ("relu", 10),
            ("matmul_bwd", 20),
            ("µs-op", 5),
        ];
        assert_eq!(matching_spans(names, "matmul"), vec![2, 0]);
        assert_eq!(matching_spans(names, "  RELU "), vec![1]);
        assert_eq!(matching_spans(names, "µs"), vec![3]);
        assert!(matching_spans(names, "").is_empty());
        assert!(matching_spans(names, "softmax").is_empty());
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

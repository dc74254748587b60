//! How every sortable table of the page sorts: one column at a time, a click on the sorted
//! column flips its direction, a click on another column sorts by it in that column's first
//! direction. The tables' row orders are their own (`ops`, `gradients`, `compare`); this is
//! the state their headers share.

/// A table's sort: the column and the direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortState<C> {
    /// The column sorted by.
    pub column: C,
    /// Largest (or last) first.
    pub descending: bool,
}

impl<C: Copy + PartialEq> SortState<C> {
    /// Sorted by `column`, descending or not.
    pub fn new(column: C, descending: bool) -> Self {
        SortState { column, descending }
    }

    /// After a click on `column`: the same column flips; another is sorted descending when
    /// `descending_first` (numbers: largest first), ascending otherwise (names: A first).
    pub fn clicked(self, column: C, descending_first: bool) -> Self {
        if column == self.column {
            SortState {
                descending: !self.descending,
                ..self
            }
        } else {
            SortState::new(column, descending_first)
        }
    }

    /// `aria-sort` of `column`: `descending`, `ascending` or `none`.
    pub fn aria(self, column: C) -> &'static str {
        match (column == self.column, self.descending) {
            (false, _) => "none",
            (true, true) => "descending",
            (true, false) => "ascending",
        }
    }
}

/// Sort indices by `cmp` (stable). One sorting routine for every caller: each `sort_by` with a
/// closure of its own would be compiled into the page's wasm again.
pub fn sort_indices(v: &mut [usize], cmp: &dyn Fn(usize, usize) -> core::cmp::Ordering) {
    candle_trace_schema::analysis::sort::by(v, |&a, &b| cmp(a, b));
}

/// The mark after a header's label for its `aria-sort`.
pub fn sort_arrow(aria: &str) -> &'static str {
    match aria {
        "descending" => " ▼",
        "ascending" => " ▲",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clicks_flip_or_switch() {
        let s = SortState::new('t', true);
        assert_eq!(s.aria('t'), "descending");
        assert_eq!(s.aria('n'), "none");
        // The sorted column flips.
        let flipped = s.clicked('t', true);
        assert_eq!(flipped, SortState::new('t', false));
        assert_eq!(flipped.aria('t'), "ascending");
        // Another column starts in its own first direction.
        assert_eq!(s.clicked('n', false), SortState::new('n', false));
        assert_eq!(flipped.clicked('c', true), SortState::new('c', true));
        assert_eq!(sort_arrow("descending"), " ▼");
        assert_eq!(sort_arrow("ascending"), " ▲");
        assert_eq!(sort_arrow("none"), "");
    }

    #[test]
    fn indices_sort_stably_by_a_comparison() {
        let keys = [3, 1, 3, 0];
        let mut v: Vec<usize> = (0..4).collect();
        sort_indices(&mut v, &|a, b| keys[b].cmp(&keys[a]));
        // Descending; the two 3s keep their order.
        assert_eq!(v, [0, 2, 1, 3]);
    }
}

//! Long tables drawn a window at a time: which rows of a table scrolled to `scroll_top` are
//! on screen (with a few more either side), and the empty space that stands in for the rest,
//! so a table of a hundred thousand rows builds a few dozen.

/// Tables with at most this many rows are built whole (and read whole by the browser tests);
/// longer ones a window at a time.
pub const WHOLE_ROWS: usize = 300;
/// Rows built beyond each edge of the visible part.
pub const OVERSCAN: usize = 12;

/// The rows to build and the space above and below them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowWindow {
    /// First row built.
    pub first: usize,
    /// One past the last row built.
    pub end: usize,
    /// Height standing in for the rows above `first`, CSS pixels.
    pub before_px: f64,
    /// Height standing in for the rows from `end` on.
    pub after_px: f64,
}

/// The window of a table of `rows` rows of `row_px` each, scrolled so that `scroll_top`
/// pixels of rows are above the visible part, `view_px` high. Tables of at most
/// [`WHOLE_ROWS`] rows are built whole.
pub fn row_window(rows: usize, row_px: f64, scroll_top: f64, view_px: f64) -> RowWindow {
    if rows <= WHOLE_ROWS || row_px <= 0.0 {
        return RowWindow {
            first: 0,
            end: rows,
            before_px: 0.0,
            after_px: 0.0,
        };
    }
    let top = (scroll_top.max(0.0) / row_px).floor() as usize;
    let shown = (view_px.max(0.0) / row_px).ceil() as usize + 1;
    let first = top.saturating_sub(OVERSCAN).min(rows);
    let end = (top + shown + OVERSCAN).min(rows).max(first);
    RowWindow {
        first,
        end,
        before_px: first as f64 * row_px,
        after_px: (rows - end) as f64 * row_px,
    }
}

/// The `scroll_top` that brings row `i` into a view `view_px` high now scrolled to
/// `scroll_top`: unchanged when it is already wholly visible, else the row at the nearest edge
/// (its top, when it is higher than the view).
pub fn scroll_to_row(i: usize, row_px: f64, scroll_top: f64, view_px: f64) -> f64 {
    let top = i as f64 * row_px;
    scroll_to_show((top, top + row_px), scroll_top, view_px)
}

/// The `scroll_top` that brings `[top, bottom)` (content pixels) into a view `view_px` high
/// now scrolled to `scroll_top`: unchanged when it is already wholly visible, else the part at
/// the nearest edge (its top, when it is higher than the view or higher than the view is).
pub fn scroll_to_show((top, bottom): (f64, f64), scroll_top: f64, view_px: f64) -> f64 {
    if top < scroll_top || bottom - top >= view_px {
        top
    } else if bottom > scroll_top + view_px {
        (bottom - view_px).max(0.0)
    } else {
        scroll_top
    }
}

/// What to bring into view for a row at `row` (content pixels) when the rows of another table
/// in the same scroll box were brought into view for the same selection (`kept`): both when
/// they fit in `view_px`, else nothing more (`None`: the first table's row stays in view).
pub fn with_kept(kept: Option<(f64, f64)>, row: (f64, f64), view_px: f64) -> Option<(f64, f64)> {
    match kept {
        None => Some(row),
        Some((top, bottom)) => {
            let both = (top.min(row.0), bottom.max(row.1));
            (both.1 - both.0 <= view_px).then_some(both)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_tables_are_built_whole() {
        let w = row_window(300, 24.0, 5000.0, 200.0);
        assert_eq!(
            (w.first, w.end, w.before_px, w.after_px),
            (0, 300, 0.0, 0.0)
        );
    }

    #[test]
    fn long_tables_build_the_visible_rows_and_some_more() {
        // 10 000 rows of 24 px, a 240 px view scrolled to row 100: rows 100..111 visible
        // (10 and one cut), 12 more each side.
        let w = row_window(10_000, 24.0, 2400.0, 240.0);
        assert_eq!((w.first, w.end), (88, 123));
        assert_eq!(w.before_px, 88.0 * 24.0);
        assert_eq!(w.after_px, (10_000 - 123) as f64 * 24.0);
        // At the top and past the bottom.
        let w = row_window(10_000, 24.0, 0.0, 240.0);
        assert_eq!((w.first, w.end), (0, 23));
        let w = row_window(1000, 24.0, 1e9, 240.0);
        assert_eq!((w.first, w.end, w.after_px), (1000, 1000, 0.0));
        // Built rows and spacers always add up to the whole table.
        for top in [0.0, 100.0, 7777.0, 23_000.0] {
            let w = row_window(1000, 24.0, top, 300.0);
            let built = (w.end - w.first) as f64 * 24.0;
            assert_eq!(w.before_px + built + w.after_px, 24_000.0, "{top}");
        }
    }

    #[test]
    fn scrolling_to_a_row_moves_only_as_far_as_needed() {
        // View 240 px at 480: rows 20..30 visible.
        assert_eq!(scroll_to_row(25, 24.0, 480.0, 240.0), 480.0);
        assert_eq!(scroll_to_row(10, 24.0, 480.0, 240.0), 240.0);
        // Row 40 (960..984) at the bottom edge: 984 − 240.
        assert_eq!(scroll_to_row(40, 24.0, 480.0, 240.0), 744.0);
        assert_eq!(scroll_to_row(0, 24.0, 0.0, 10.0), 0.0);
    }

    #[test]
    fn a_second_tables_row_keeps_the_first_in_view() {
        // Nothing kept: the row alone.
        assert_eq!(with_kept(None, (500.0, 526.0), 200.0), Some((500.0, 526.0)));
        // A row 100 px under the kept one: both fit in 200 px.
        assert_eq!(
            with_kept(Some((400.0, 426.0)), (500.0, 526.0), 200.0),
            Some((400.0, 526.0))
        );
        // 300 px apart: the kept row stays, the second is not scrolled to.
        assert_eq!(with_kept(Some((100.0, 126.0)), (400.0, 426.0), 200.0), None);
        // Both shown from a view scrolled past them: their top at the view's top.
        assert_eq!(scroll_to_show((400.0, 526.0), 600.0, 200.0), 400.0);
        // Below the view: their bottom at its bottom.
        assert_eq!(scroll_to_show((400.0, 526.0), 0.0, 200.0), 326.0);
        // In view: unchanged.
        assert_eq!(scroll_to_show((400.0, 526.0), 380.0, 200.0), 380.0);
    }
}

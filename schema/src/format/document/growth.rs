//! How a [`TraceReader`](super::TraceReader)'s record lists grow when the file's size is known.

use super::span_index::SpanIndex;
use crate::format::records::Span;
use crate::format::table::Room;

/// Make room for one more record in `v`, which holds records of one kind. When the file's
/// size is known and enough of it has been read to judge the mix of kinds, a full `v` grows to
/// what the whole file will need at the rate seen so far (plus 1/16), instead of doubling: a
/// large trace's records are then moved once or not at all, rather than about once per doubling.
/// Before that point, or without a size, `v` doubles as usual.
pub(super) fn make_room(v: &mut impl Room, consumed: u64, total: u64) {
    if v.len() < v.capacity() {
        return;
    }
    if let Some(extra) = projected_extra(v.len(), consumed, total) {
        v.reserve_exact(extra);
    }
}

/// The same for the span id map.
pub(super) fn make_room_map(m: &mut SpanIndex, spans: &[Span], consumed: u64, total: u64) {
    if m.len() < m.capacity() {
        return;
    }
    if let Some(extra) = projected_extra(m.len(), consumed, total) {
        m.reserve(spans, extra);
    }
}

/// How many more records of a kind to make room for, `len` of them having been seen in the
/// first `consumed` bytes of a `total`-byte file; `None` to let the collection double. The
/// projection waits for 1/64 of the file (and at least 1 MiB), so a kind that clusters at the
/// start (parameter allocations, say) cannot reserve far too much; it is also capped at one
/// record per 16 bytes of file, below the size of any valid line.
pub(super) fn projected_extra(len: usize, consumed: u64, total: u64) -> Option<usize> {
    if total <= consumed || consumed < (total / 64).max(1 << 20) {
        return None;
    }
    let projected = (len as u128 + 1) * u128::from(total) / u128::from(consumed);
    let projected = (projected + projected / 16).min(u128::from(total / 16));
    let want = usize::try_from(projected).ok()?;
    Some(want.saturating_sub(len).max(len / 8 + 16))
}

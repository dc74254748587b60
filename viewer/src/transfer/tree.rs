//! The span tree part: its arrays are plain numbers, a table each, read in one step.

use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::spans::{SpanTree, SpanTreeParts};

use super::columns::{columns, OptU32, Read, Write, U32, U64};
use super::wire::{broken, In, Out, Result, Strs};

columns! {
    /// A span's place in the tree (parallel to the spans).
    Nodes {
        parent: OptU32,
        depth: U32,
        self_ns: U64,
    }
}

columns! {
    /// A list of span rows (the roots, each span's first child, the children).
    Rows {
        row: U32,
    }
}

/// The tree into `out`.
pub(super) fn write(out: &mut Out, t: &SpanTree) {
    out.u32(t.max_depth);
    let n = t.parent.len();
    let mut c = Nodes::<Write>::new(n);
    for ((p, d), s) in t.parent.iter().zip(&t.depth).zip(&t.self_ns) {
        c.parent.put(*p);
        c.depth.u32(*d);
        c.self_ns.u64(*s);
    }
    c.finish(n, out);
    let (child_start, child_list) = t.child_rows();
    for list in [&t.roots[..], child_start, child_list] {
        let mut c = Rows::<Write>::new(list.len());
        for v in list {
            c.row.u32(*v);
        }
        c.finish(list.len(), out);
    }
}

/// The tree, into `d` (whose spans are decoded).
#[inline(never)]
pub(super) fn read(d: &mut TraceDocument, r: &mut In<'_>, b: &[u8], s: Strs<'_>) -> Result<()> {
    let max_depth = r.u32()?;
    let t = r.table()?;
    let nodes = Nodes::<Read<'_>>::from(&t, b, s)?;
    let mut rows = || -> Result<Vec<u32>> {
        let t = r.table()?;
        Ok(Rows::<Read<'_>>::from(&t, b, s)?.row.all())
    };
    let (roots, child_start, child_list) = (rows()?, rows()?, rows()?);
    let parts = SpanTreeParts {
        parent: nodes.parent.all().collect(),
        depth: nodes.depth.all(),
        self_ns: nodes.self_ns.all(),
        roots,
        max_depth,
        child_start,
        child_list,
    };
    // A document without spans has an empty tree (no offsets at all).
    if !(d.spans.is_empty() && parts.child_start.is_empty()) {
        d.tree = SpanTree::from_parts(parts).map_err(|e| broken(format!("span tree: {e}")))?;
    }
    Ok(())
}

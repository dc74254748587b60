//! Training-phase breakdown: where the measured region's time went (forward, backward,
//! optimizer, other), and each module's forward time paired with its backward time.
//!
//! Rules (SCHEMA.md defines `step` and `measured` but no breakdown):
//! - The **region** is the first span in file order with `measured = true`; without one there
//!   is no breakdown. Only spans below it in the layout tree ([`SpanTree`](crate::format::spans::SpanTree)) count.
//! - A span is **outermost-stepped** when its `step` is set and no span between it and the
//!   region (the region excluded) has a `step`. Time in step X is the sum of the durations of
//!   the outermost-stepped spans with step X, so nested spans (which inherit their step) are not
//!   counted twice, and a span of another step nested inside (a recomputed forward inside
//!   backward) is charged to the outer step. The region's own `step` is ignored.
//! - `other_ns` = region duration − forward − backward − optimizer, saturating at 0
//!   (`overlap_ns` says by how much the steps exceed the region, 0 normally).
//! - **Module pairing**: a module span in the region whose own `step` is `forward` or
//!   `backward` is keyed by its *module key*, the one rule of [`crate::analysis::modules`]: its
//!   module name, or in nesting mode the module spans on its layout path (itself included), each
//!   with `[k]` when its parent has several children of that name. Function and op spans on the
//!   way (`forward`, `backward` ...) are left out, so `forward/fc1` and `backward/fc1` share the
//!   key `fc1`. A row adds up the durations (inclusive) and counts of the outermost spans with
//!   that key ([`ModulePaths::outermost`]) per step. Rows are ordered by forward + backward time,
//!   largest first, then by key.

use crate::analysis::sort;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::analysis::modules::ModulePaths;
use crate::format::document::TraceDocument;
use crate::format::events::Pass;

/// Time per training step inside the measured region.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseBreakdown {
    /// Index of the measured span in `TraceDocument::spans`.
    pub region_span: usize,
    /// Duration of the measured span.
    pub region_ns: u64,
    /// Outermost forward spans.
    pub forward_ns: u64,
    /// Outermost backward spans.
    pub backward_ns: u64,
    /// Outermost optimizer spans.
    pub optimizer_ns: u64,
    /// The rest of the region (saturating).
    pub other_ns: u64,
    /// How much the three steps exceed the region (0 unless spans overlap or outlive it).
    pub overlap_ns: u64,
}

impl PhaseBreakdown {
    /// The time of one step.
    pub fn get(&self, pass: Pass) -> u64 {
        match pass {
            Pass::Forward => self.forward_ns,
            Pass::Backward => self.backward_ns,
            Pass::Optimizer => self.optimizer_ns,
        }
    }
}

/// One module's forward and backward time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModulePair {
    /// Module path (`encoder/layer0/attn`).
    pub path: String,
    /// Forward spans with this path.
    pub forward_count: u64,
    /// Sum of their durations.
    pub forward_ns: u64,
    /// Backward spans with this path.
    pub backward_count: u64,
    /// Sum of their durations.
    pub backward_ns: u64,
}

/// The first measured span in file order.
pub fn measured_region(doc: &TraceDocument) -> Option<usize> {
    doc.spans.iter().position(|s| s.measured)
}

/// Preorder of the spans below `root` (root excluded), each with its nearest stepped ancestor
/// below the root. Iterative.
fn walk(doc: &TraceDocument, root: usize, mut visit: impl FnMut(usize, Option<Pass>)) {
    // (span, step of nearest stepped ancestor strictly between root and span)
    let mut stack: Vec<(u32, Option<Pass>)> = doc
        .tree
        .children(root)
        .iter()
        .rev()
        .map(|&c| (c, None))
        .collect();
    while let Some((i, inherited)) = stack.pop() {
        let span = &doc.spans[i as usize];
        visit(i as usize, inherited);
        let next_step = inherited.or(span.pass);
        for &c in doc.tree.children(i as usize).iter().rev() {
            stack.push((c, next_step));
        }
    }
}

/// The breakdown of the measured region; `None` without a measured span.
pub fn phase_breakdown(doc: &TraceDocument) -> Option<PhaseBreakdown> {
    let region = measured_region(doc)?;
    let mut b = PhaseBreakdown {
        region_span: region,
        region_ns: doc.spans[region].duration_or_zero(),
        ..PhaseBreakdown::default()
    };
    walk(doc, region, |i, inherited| {
        let span = &doc.spans[i];
        if let (None, Some(pass)) = (inherited, span.pass) {
            let d = span.duration_or_zero();
            match pass {
                Pass::Forward => b.forward_ns = b.forward_ns.saturating_add(d),
                Pass::Backward => b.backward_ns = b.backward_ns.saturating_add(d),
                Pass::Optimizer => b.optimizer_ns = b.optimizer_ns.saturating_add(d),
            }
        }
    });
    let stepped = b
        .forward_ns
        .saturating_add(b.backward_ns)
        .saturating_add(b.optimizer_ns);
    b.other_ns = b.region_ns.saturating_sub(stepped);
    b.overlap_ns = stepped.saturating_sub(b.region_ns);
    Some(b)
}

/// Module spans of the measured region paired by module path (empty without a region).
pub fn module_pairs(doc: &TraceDocument) -> Vec<ModulePair> {
    let Some(region) = measured_region(doc) else {
        return Vec::new();
    };
    let paths = ModulePaths::new(doc);
    // Per path id, its row.
    let mut row_of: Vec<u32> = Vec::new();
    let mut sums: Vec<(u32, ModulePair)> = Vec::new();
    walk(doc, region, |i, _| {
        let span = &doc.spans[i];
        if !paths.outermost(i) {
            return;
        }
        let Some(pass @ (Pass::Forward | Pass::Backward)) = span.pass else {
            return;
        };
        let path = paths.path_id(i);
        let p = path as usize;
        if row_of.len() <= p {
            row_of.resize(p + 1, u32::MAX);
        }
        if row_of[p] == u32::MAX {
            row_of[p] = u32::try_from(sums.len()).unwrap_or(u32::MAX);
            sums.push((
                path,
                ModulePair {
                    path: String::new(),
                    forward_count: 0,
                    forward_ns: 0,
                    backward_count: 0,
                    backward_ns: 0,
                },
            ));
        }
        let row = &mut sums[row_of[p] as usize].1;
        let d = span.duration_or_zero();
        if pass == Pass::Forward {
            row.forward_count += 1;
            row.forward_ns = row.forward_ns.saturating_add(d);
        } else {
            row.backward_count += 1;
            row.backward_ns = row.backward_ns.saturating_add(d);
        }
    });
    let mut rows: Vec<ModulePair> = sums
        .into_iter()
        .map(|(path, mut row)| {
            row.path = paths
                .texts()
                .get(path as usize)
                .cloned()
                .unwrap_or_default();
            row
        })
        .collect();
    sort_pairs(&mut rows);
    rows
}

/// Module pairs by forward + backward time, largest first, then by path (also a range's pairs:
/// [`crate::analysis::range`]).
pub(crate) fn sort_pairs(rows: &mut [ModulePair]) {
    sort::by(rows, |a, b| {
        let ta = a.forward_ns.saturating_add(a.backward_ns);
        let tb = b.forward_ns.saturating_add(b.backward_ns);
        tb.cmp(&ta).then_with(|| a.path.cmp(&b.path))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_lines::{end, read, start_named as start, META};

    fn doc(lines: &[&str]) -> TraceDocument {
        let mut all = alloc::vec![META];
        all.extend_from_slice(lines);
        read(&all)
    }

    /// (path, forward count, forward ns, backward count, backward ns) per row.
    fn rows(pairs: &[ModulePair]) -> Vec<(&str, u64, u64, u64, u64)> {
        fn row(p: &ModulePair) -> (&str, u64, u64, u64, u64) {
            let (fc, fns) = (p.forward_count, p.forward_ns);
            (p.path.as_str(), fc, fns, p.backward_count, p.backward_ns)
        }
        pairs.iter().map(row).collect()
    }

    #[test]
    fn nested_steps_count_once_and_modules_pair_by_path() {
        let lines = [
            start("m", None, "step", "function", None),
            start("f", Some("m"), "forward", "function", Some("forward")),
            start("f1", Some("f"), "enc", "module", Some("forward")),
            start("f2", Some("f1"), "fc", "module", Some("forward")),
            start("b", Some("m"), "backward", "function", Some("backward")),
            start("b1", Some("b"), "enc", "module", Some("backward")),
            start("b2", Some("b1"), "fc", "module", Some("backward")),
            // a recomputed forward inside backward is charged to backward
            start("b3", Some("b1"), "fc", "module", Some("forward")),
            start("o", Some("m"), "optimizer", "function", Some("optimizer")),
            end("m", 1000),
            end("f", 300),
            end("f1", 250),
            end("f2", 100),
            end("b", 500),
            end("b1", 400),
            end("b2", 150),
            end("b3", 50),
            end("o", 120),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let d = doc(&refs);
        let b = phase_breakdown(&d).unwrap();
        assert_eq!(
            (b.forward_ns, b.backward_ns, b.optimizer_ns, b.other_ns),
            (300, 500, 120, 80)
        );
        assert_eq!(b.overlap_ns, 0);
        // Backward's `enc` has two children named `fc` (b2, and the recomputed forward b3), so
        // they are the places `enc/fc[0]` and `enc/fc[1]` (crate::analysis::modules); forward's `enc`
        // has one `fc`, the place `enc/fc`. Ordered by forward + backward: 650, 150, 100, 50.
        assert_eq!(
            rows(&module_pairs(&d)),
            alloc::vec![
                ("enc", 1, 250, 1, 400),
                ("enc/fc[0]", 0, 0, 1, 150),
                ("enc/fc", 1, 100, 0, 0),
                ("enc/fc[1]", 1, 50, 0, 0)
            ]
        );
    }

    #[test]
    fn a_path_is_its_text_however_the_modules_spell_it() {
        // `enc/fc` as one module's name and as `fc` below `enc` is one row, as the path's
        // text keys the rows.
        let lines = [
            start("m", None, "step", "function", None),
            start("f1", Some("m"), "enc", "module", Some("forward")),
            start("f2", Some("f1"), "fc", "module", Some("forward")),
            start("g", Some("m"), "enc/fc", "module", Some("forward")),
            // Under a function span, so not a second `enc/fc` sibling of `g` (that would be
            // the place `enc/fc[1]`).
            start("w", Some("m"), "backward", "function", None),
            start("b", Some("w"), "enc/fc", "module", Some("backward")),
            end("m", 1000),
            end("f1", 300),
            end("f2", 100),
            end("g", 40),
            end("w", 10),
            end("b", 7),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        assert_eq!(
            rows(&module_pairs(&doc(&refs))),
            alloc::vec![("enc", 1, 300, 0, 0), ("enc/fc", 2, 140, 1, 7)]
        );
    }

    #[test]
    fn no_measured_span_no_breakdown() {
        let d = doc(&[
            r#"{"kind":"span_start","id":"a","name":"a","start_ns":0,"span_kind":"function"}"#,
        ]);
        assert_eq!(phase_breakdown(&d), None);
        assert!(module_pairs(&d).is_empty());
    }
}

//! Lane layout: one lane per depth, each lane's spans sorted by start time, with the queries
//! the flame chart needs (visible range, hit testing) in time logarithmic in the lane size plus
//! linear in the visible spans.
//!
//! trace/6 spans carry no thread, so lanes are per depth only. Within a lane spans normally do
//! not overlap, but a broken or concurrent trace may make them; the queries stay correct then
//! because they use a running maximum of end times (monotonic, so binary-searchable).

use core::ops::Range;

/// Time extent of one span, as the layout sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanExtent {
    /// Start, ns since the run started.
    pub start_ns: u64,
    /// End (start + duration; equal to start for an unclosed span).
    pub end_ns: u64,
    /// Lane (the span's depth).
    pub depth: u32,
}

/// One lane: its spans in start order, as parallel arrays.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lane {
    /// Span indices (into the document) sorted by (start, end, index).
    pub spans: Vec<u32>,
    /// Start of each span in `spans`.
    pub start_ns: Vec<u64>,
    /// End of each span in `spans`.
    pub end_ns: Vec<u64>,
    /// Running maximum of `end_ns` over `spans[..=i]`; empty when that is `end_ns` itself
    /// (ends in start order never decrease: no span in the lane ends inside an earlier one,
    /// as in every well-formed trace), so such a lane keeps no copy.
    max_end_ns: Vec<u64>,
    /// For each chunk of [`CHUNK`] spans (positions `c * CHUNK..(c + 1) * CHUNK`, the last
    /// one possibly shorter): the longest duration and the latest end in it. Level of detail
    /// merges a whole chunk of narrow spans at once with these.
    pub(crate) chunks: Vec<ChunkExtent>,
}

/// Spans per chunk of a lane (see [`Lane::chunks`]).
pub const CHUNK: usize = 64;

/// What a chunk of a lane's spans spans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ChunkExtent {
    /// The longest duration (`end - start`; `u64::MAX` where a span ends before it starts).
    pub(crate) max_duration_ns: u64,
    /// The latest end.
    pub(crate) max_end_ns: u64,
}

impl Lane {
    /// Number of spans in the lane.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when the lane has no spans.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Positions (into `spans`) of the spans that overlap `[from_ns, to_ns]`, as a range that
    /// may also contain a few earlier spans that end before `from_ns` (only when spans overlap
    /// within the lane); callers check each one. Costs two binary searches.
    pub fn candidates(&self, from_ns: u64, to_ns: u64) -> Range<usize> {
        // First span whose running max end reaches `from_ns`: nothing before it can overlap.
        let max_end_ns = if self.max_end_ns.is_empty() {
            &self.end_ns
        } else {
            &self.max_end_ns
        };
        let lo = max_end_ns.partition_point(|&e| e < from_ns);
        // First span starting after `to_ns`: nothing from it on can overlap.
        let hi = self.start_ns.partition_point(|&s| s <= to_ns);
        lo..hi.max(lo)
    }

    /// Position of the first span starting at or after `ns`.
    pub fn first_starting_at_or_after(&self, ns: u64) -> usize {
        self.start_ns.partition_point(|&s| s < ns)
    }
}

/// All lanes of a trace plus its time bounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lanes {
    /// Lane `d` holds the spans at depth `d`.
    pub lanes: Vec<Lane>,
    /// Earliest span start (0 without spans).
    pub start_ns: u64,
    /// Latest span end (0 without spans).
    pub end_ns: u64,
}

impl Lanes {
    /// Lay out spans given by their extents (indexed like the document's spans).
    pub fn build(extents: &[SpanExtent]) -> Self {
        let depth_count = extents
            .iter()
            .map(|e| e.depth as usize + 1)
            .max()
            .unwrap_or(0);
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); depth_count];
        for (i, e) in extents.iter().enumerate() {
            members[e.depth as usize].push(i as u32);
        }
        let lanes = members
            .into_iter()
            .map(|mut spans| {
                spans.sort_by_key(|&i| {
                    let e = &extents[i as usize];
                    (e.start_ns, e.end_ns, i)
                });
                let start_ns: Vec<u64> = spans
                    .iter()
                    .map(|&i| extents[i as usize].start_ns)
                    .collect();
                let end_ns: Vec<u64> = spans.iter().map(|&i| extents[i as usize].end_ns).collect();
                let max_end_ns = if end_ns.is_sorted() {
                    Vec::new()
                } else {
                    let mut running = 0;
                    end_ns
                        .iter()
                        .map(|&e| {
                            running = running.max(e);
                            running
                        })
                        .collect()
                };
                let chunks = start_ns
                    .chunks(CHUNK)
                    .zip(end_ns.chunks(CHUNK))
                    .map(|(starts, ends)| ChunkExtent {
                        // A span ending before it starts makes the chunk "wide": level of
                        // detail then looks at each of its spans.
                        max_duration_ns: starts
                            .iter()
                            .zip(ends)
                            .map(|(s, e)| e.checked_sub(*s).unwrap_or(u64::MAX))
                            .max()
                            .unwrap_or(0),
                        max_end_ns: ends.iter().copied().max().unwrap_or(0),
                    })
                    .collect();
                Lane {
                    spans,
                    start_ns,
                    end_ns,
                    max_end_ns,
                    chunks,
                }
            })
            .collect();
        Lanes {
            lanes,
            start_ns: extents.iter().map(|e| e.start_ns).min().unwrap_or(0),
            end_ns: extents.iter().map(|e| e.end_ns).max().unwrap_or(0),
        }
    }

    /// Number of lanes.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// True when there are no lanes (no spans).
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// The span in `lane` under time `ns`, allowing `tolerance_ns` on both sides for spans too
    /// narrow to aim at. An exact hit wins over a near one; among exact hits, the shortest
    /// (the innermost when spans overlap); among near ones, the closest.
    pub fn hit(&self, lane: usize, ns: f64, tolerance_ns: f64) -> Option<u32> {
        let lane = self.lanes.get(lane)?;
        if !ns.is_finite() {
            return None;
        }
        let from = (ns - tolerance_ns).max(0.0) as u64;
        let to = (ns + tolerance_ns).max(0.0).ceil() as u64;
        let mut best: Option<(bool, f64, u32)> = None; // (exact, distance or length, span)
        for p in lane.candidates(from, to) {
            let (s, e) = (lane.start_ns[p] as f64, lane.end_ns[p] as f64);
            // The range above was clamped at 0; the test is in the query's own (maybe
            // negative) time.
            if e < ns - tolerance_ns || s > ns + tolerance_ns {
                continue;
            }
            let exact = s <= ns && ns <= e;
            let key = if exact {
                e - s
            } else {
                (s - ns).abs().min((e - ns).abs())
            };
            let better = match best {
                None => true,
                Some((b_exact, b_key, _)) => {
                    (exact && !b_exact) || (exact == b_exact && key < b_key)
                }
            };
            if better {
                best = Some((exact, key, lane.spans[p]));
            }
        }
        best.map(|(_, _, span)| span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(start_ns: u64, end_ns: u64, depth: u32) -> SpanExtent {
        SpanExtent {
            start_ns,
            end_ns,
            depth,
        }
    }

    fn sample() -> Lanes {
        Lanes::build(&[
            ext(0, 1000, 0),  // 0 root
            ext(100, 400, 1), // 1
            ext(500, 900, 1), // 2
            ext(120, 130, 2), // 3
            ext(450, 460, 1), // 4
        ])
    }

    #[test]
    fn one_lane_per_depth_sorted_by_start() {
        let l = sample();
        assert_eq!(l.len(), 3);
        assert_eq!(l.lanes[0].spans, vec![0]);
        assert_eq!(l.lanes[1].spans, vec![1, 4, 2]);
        assert_eq!(l.lanes[1].start_ns, vec![100, 450, 500]);
        assert_eq!(l.lanes[2].spans, vec![3]);
        assert_eq!((l.start_ns, l.end_ns), (0, 1000));
    }

    #[test]
    fn candidates_cover_exactly_the_overlap_without_overlaps() {
        let l = sample();
        let lane = &l.lanes[1];
        assert_eq!(lane.candidates(0, 50), 0..0);
        assert_eq!(lane.candidates(0, 100), 0..1);
        assert_eq!(lane.candidates(401, 449), 1..1);
        assert_eq!(lane.candidates(455, 2000), 1..3);
        assert_eq!(lane.candidates(901, 2000), 3..3);
        assert_eq!(lane.first_starting_at_or_after(451), 2);
    }

    #[test]
    fn candidates_with_overlapping_spans_use_the_running_max() {
        // A long span overlapping later short ones in the same lane.
        let l = Lanes::build(&[ext(0, 1000, 0), ext(10, 20, 0), ext(30, 40, 0)]);
        let lane = &l.lanes[0];
        let r = lane.candidates(500, 600);
        assert!(r.contains(&0));
        assert_eq!(r.end, 3);
        assert_eq!(lane.max_end_ns, vec![1000, 1000, 1000]);
        // A lane whose ends never decrease keeps no running max.
        assert!(sample().lanes.iter().all(|l| l.max_end_ns.is_empty()));
    }

    #[test]
    fn candidates_hold_every_overlapping_span() {
        // Lanes with and without overlaps (a fixed pseudo-random sequence), every window
        // against a brute-force scan.
        let mut x = 12345u64;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for overlapping in [false, true] {
            let mut extents = Vec::new();
            let mut at = 0;
            for _ in 0..200 {
                let start = at + next(5);
                let len = if overlapping { next(60) } else { next(5) };
                extents.push(ext(start, start + len, 0));
                at = if overlapping { start } else { start + len };
            }
            let lanes = Lanes::build(&extents);
            let lane = &lanes.lanes[0];
            assert_eq!(lane.max_end_ns.is_empty(), !overlapping);
            for _ in 0..500 {
                let from = next(at + 10);
                let to = from + next(30);
                let r = lane.candidates(from, to);
                for p in 0..lane.len() {
                    if lane.start_ns[p] <= to && lane.end_ns[p] >= from {
                        assert!(r.contains(&p), "{from}..{to}: {p} missing from {r:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn hit_testing() {
        let l = sample();
        assert_eq!(l.hit(0, 500.0, 0.0), Some(0));
        assert_eq!(l.hit(1, 200.0, 0.0), Some(1));
        assert_eq!(l.hit(1, 420.0, 0.0), None);
        // Near miss within tolerance picks the closest.
        assert_eq!(l.hit(1, 440.0, 15.0), Some(4));
        assert_eq!(l.hit(1, 405.0, 50.0), Some(1));
        assert_eq!(l.hit(7, 0.0, 0.0), None);
        assert_eq!(l.hit(1, f64::NAN, 0.0), None);
        // Before time 0 (a group drawn at an offset): only within the tolerance of the start.
        assert_eq!(l.hit(0, -50.0, 3.0), None);
        assert_eq!(l.hit(0, -2.0, 3.0), Some(0));
        // Exact beats near; shortest exact wins among overlaps.
        let o = Lanes::build(&[ext(0, 1000, 0), ext(10, 20, 0)]);
        assert_eq!(o.hit(0, 15.0, 100.0), Some(1));
        assert_eq!(o.hit(0, 500.0, 100.0), Some(0));
    }

    #[test]
    fn empty() {
        let l = Lanes::build(&[]);
        assert!(l.is_empty());
        assert_eq!(l.hit(0, 0.0, 1.0), None);
    }
}

/// The extents of a trace document's spans (depth from its span tree). A span that was never
/// closed is drawn to the end of its parent's extent, or of the trace for a root, so that it
/// stays visible (its tooltip says it was never closed).
pub fn extents_of(doc: &candle_trace_schema::format::document::TraceDocument) -> Vec<SpanExtent> {
    let mut extents: Vec<SpanExtent> = doc
        .spans
        .iter()
        .enumerate()
        .map(|(i, s)| SpanExtent {
            start_ns: s.start_ns,
            end_ns: s.end_ns(),
            depth: doc.tree.depth.get(i).copied().unwrap_or(0),
        })
        .collect();
    // Only unclosed spans need their parents' extents; most traces have none.
    if doc.spans.iter().all(|s| s.duration_ns.is_some()) {
        return extents;
    }
    let trace_end = extents.iter().map(|e| e.end_ns).max().unwrap_or(0);
    // Parents come before their children in pre-order, so a parent's extent is final first.
    for i in doc.tree.preorder() {
        let i = i as usize;
        let (Some(span), Some(parent)) = (doc.spans.get(i), doc.tree.parent.get(i)) else {
            continue;
        };
        if span.duration_ns.is_none() {
            let limit = match parent {
                Some(p) => extents.get(*p as usize).map_or(trace_end, |e| e.end_ns),
                None => trace_end,
            };
            if let Some(e) = extents.get_mut(i) {
                e.end_ns = limit.max(span.start_ns);
            }
        }
    }
    extents
}

#[cfg(test)]
mod doc_tests {
    use super::*;
    use candle_trace_schema::format::document::TraceDocument;

    #[test]
    fn lanes_of_the_golden_trace() {
        let bytes = include_bytes!("../../../tests/fixtures/train_step.trace6.jsonl");
        let doc = TraceDocument::from_bytes(bytes);
        let lanes = Lanes::build(&extents_of(&doc));
        assert_eq!(lanes.len() as u64, doc.summary().max_depth + 1);
        let total: usize = lanes.lanes.iter().map(Lane::len).sum();
        assert_eq!(total, doc.spans.len());
        assert_eq!(lanes.lanes[0].len() as u64, doc.summary().root_span_count);
    }

    #[test]
    fn unclosed_spans_reach_their_parents_end() {
        let bytes = include_bytes!("../../../tests/fixtures/broken_unclosed.trace6.jsonl");
        let doc = TraceDocument::from_bytes(bytes);
        let ext = extents_of(&doc);
        let mm = doc.span_index("mm").unwrap();
        let root = doc.span_index("root").unwrap();
        assert!(doc.spans[mm].duration_ns.is_none());
        assert_eq!(ext[mm].end_ns, ext[root].end_ns);
        assert_eq!(ext[root].end_ns, 10_000);
    }
}

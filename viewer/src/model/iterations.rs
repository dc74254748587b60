//! The Iterations tab of an inference profile: its batched forwards in time order
//! (`schema::analysis::iterations`), worded for the table, and their distribution.

use candle_trace_schema::analysis::findings::iteration_key;
use candle_trace_schema::analysis::range::TimeRange;
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::profile::ProfileDocument;

/// One batched forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IterationRow {
    /// `engine/iteration`: the row's key (a finding's link names it).
    pub key: String,
    /// The engine.
    pub engine: String,
    /// Its number within the engine.
    pub iteration: u64,
    /// Start on the chart's axis (ns after the profile's time 0).
    pub start_ns: u64,
    /// Start on the chart's axis, human.
    pub start: String,
    /// Exact duration, ns.
    pub duration_ns: u64,
    /// Duration, human.
    pub duration: String,
    /// Requests in it.
    pub batch_size: u64,
    /// Prompt tokens.
    pub prefill_tokens: u64,
    /// Decode tokens.
    pub decode_tokens: u64,
    /// Tokens committed.
    pub committed_tokens: u64,
    /// (prefill + decode) tokens per second, or `–`.
    pub tokens_per_s: String,
    /// The requests it lists, `, `-joined.
    pub requests: String,
    /// Its status.
    pub status: String,
    /// Line of its event.
    pub line: u64,
}

/// The tab's numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IterationsPanel {
    /// In time order.
    pub rows: Vec<IterationRow>,
    /// (p50, p90) of batch size.
    pub batch_size: Option<(u64, u64)>,
    /// (p50, p90) of forward time, ns.
    pub duration_ns: Option<(u64, u64)>,
    /// One line: how many forwards and their distribution.
    pub headline: String,
}

impl IterationsPanel {
    /// The batched forwards of `doc`, their starts after `origin_unix_nanos` (the chart's
    /// time 0; without one, the first forward's start).
    pub fn of(doc: &ProfileDocument, origin_unix_nanos: Option<i64>) -> Self {
        let all = doc.iterations();
        let first = origin_unix_nanos
            .or_else(|| all.iterations.first().map(|i| i.start_unix_nanos))
            .unwrap_or(0);
        let after = |t: i64| u64::try_from(i128::from(t) - i128::from(first)).unwrap_or(0);
        let rows: Vec<IterationRow> = all
            .iterations
            .iter()
            .map(|it| IterationRow {
                key: iteration_key(&it.engine, it.iteration),
                engine: it.engine.clone(),
                iteration: it.iteration,
                start_ns: after(it.start_unix_nanos),
                start: format_ns(after(it.start_unix_nanos)),
                duration_ns: it.duration_ns,
                duration: format_ns(it.duration_ns),
                batch_size: it.batch_size,
                prefill_tokens: it.prefill_tokens,
                decode_tokens: it.decode_tokens,
                committed_tokens: it.committed_tokens,
                tokens_per_s: it
                    .tokens_per_s
                    .map_or_else(|| String::from("–"), |t| t.to_string()),
                requests: it
                    .requests
                    .iter()
                    .map(|r| r.request_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                status: it.status.clone(),
                line: it.line,
            })
            .collect();
        let batch_size = all.batch_size.map(|p| (p.p50, p.p90));
        let duration_ns = all.duration_ns.map(|p| (p.p50, p.p90));
        let headline = match (batch_size, duration_ns) {
            (Some((b50, b90)), Some((d50, d90))) => format!(
                "{} forward(s): batch size p50 {b50}, p90 {b90}; forward time p50 {}, p90 {}",
                rows.len(),
                format_ns(d50),
                format_ns(d90)
            ),
            _ => String::from("No batched forwards (an engine's `iteration` events)."),
        };
        IterationsPanel {
            rows,
            batch_size,
            duration_ns,
            headline,
        }
    }
}

impl IterationsPanel {
    /// The rows of the forwards that ran in `range` (a forward crossing an edge with its part
    /// inside), each with its time inside it, and the line that says so.
    pub fn in_range(&self, range: TimeRange) -> (Vec<(usize, u64)>, String) {
        let rows: Vec<(usize, u64)> = self
            .rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| range.inside(r.start_ns, r.duration_ns).map(|t| (i, t)))
            .collect();
        let inside = rows.iter().fold(0u64, |a, r| a.saturating_add(r.1));
        let line = format!(
            "{} of {} forward(s) ran in the range, {} of forward time inside it.",
            rows.len(),
            self.rows.len(),
            format_ns(inside)
        );
        (rows, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::read_profile;

    /// `tests/fixtures/serving/batched.profile.jsonl` (its `make.py` states the forwards).
    fn serving() -> ProfileDocument {
        read_profile(include_bytes!(
            "../../../tests/fixtures/serving/batched.profile.jsonl"
        ))
    }

    #[test]
    fn the_forwards_of_the_serving_fixture() {
        let doc = serving();
        // The chart's time 0: a's open (`serving/make.py`).
        let p = IterationsPanel::of(&doc, doc.request_axis().origin_unix_nanos);
        let rows: Vec<(&str, u64, u64, u64, &str, &str)> = p
            .rows
            .iter()
            .map(|r| {
                (
                    r.key.as_str(),
                    r.batch_size,
                    r.prefill_tokens,
                    r.decode_tokens,
                    r.tokens_per_s.as_str(),
                    r.start.as_str(),
                )
            })
            .collect();
        // Forwards at 1, 3, 4, 5.5, 7 ms after a's open, where the chart's axis puts them;
        // 9 / 2 ms, 2 / 1 ms, 2 / 1 ms, 7 / 1.5 ms, 1 / 1 ms.
        assert_eq!(
            rows,
            [
                ("engine-0/0", 2, 9, 0, "4500", "1.00 ms"),
                ("engine-0/1", 2, 0, 2, "2000", "3.00 ms"),
                ("engine-0/2", 2, 0, 2, "2000", "4.00 ms"),
                ("engine-0/3", 2, 6, 1, "4666", "5.50 ms"),
                ("engine-0/4", 1, 0, 1, "1000", "7.00 ms"),
            ]
        );
        let starts: Vec<u64> = p.rows.iter().map(|r| r.start_ns).collect();
        assert_eq!(
            starts,
            [1_000_000, 3_000_000, 4_000_000, 5_500_000, 7_000_000]
        );
        // 2.5–5.75 ms: 0.5 ms of forward 0 (1–3), forwards 1 (3–4) and 2 (4–5) whole,
        // 0.25 ms of forward 3 (5.5–7); forward 4 (7–8) not.
        let (inside, line) = p.in_range(TimeRange::new(2_500_000, 5_750_000));
        assert_eq!(
            inside,
            [(0, 500_000), (1, 1_000_000), (2, 1_000_000), (3, 250_000)]
        );
        assert_eq!(
            line,
            "4 of 5 forward(s) ran in the range, 2.75 ms of forward time inside it."
        );
        // Without the chart's time 0: after the first forward.
        assert_eq!(IterationsPanel::of(&doc, None).rows[1].start, "2.00 ms");
        assert_eq!(p.rows[3].requests, "c, b");
        assert_eq!(p.batch_size, Some((2, 2)));
        assert_eq!(p.duration_ns, Some((1_000_000, 2_000_000)));
        assert_eq!(
            p.headline,
            "5 forward(s): batch size p50 2, p90 2; forward time p50 1.00 ms, p90 2.00 ms"
        );
    }

    #[test]
    fn a_profile_without_batched_forwards_says_so() {
        let p = IterationsPanel::of(
            &read_profile(include_bytes!(
                "../../../tests/fixtures/infer_run.profile.jsonl"
            )),
            None,
        );
        assert!(p.rows.is_empty());
        assert!(p.headline.starts_with("No batched forwards"));
    }
}

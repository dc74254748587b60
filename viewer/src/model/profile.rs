//! The request table of an inference profile.

use candle_trace_schema::analysis::range::TimeRange;
use candle_trace_schema::analysis::requests::RequestSummary;
use candle_trace_schema::analysis::sort;
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::profile::{ProfileDocument, ProfileRecord};

use super::chart::{num, polyline, Scale};
use super::profile_modules::ProfileModulesPanel;

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRow {
    /// Request id.
    pub request_id: String,
    /// `ok`, `failure` or `diagnostic_only`.
    pub status: &'static str,
    /// Model, or empty.
    pub model: String,
    /// Backend, or empty.
    pub backend: String,
    /// Exact duration in µs.
    pub duration_us: Option<u64>,
    /// Exact TTFT in µs.
    pub ttft_us: Option<u64>,
    /// Exact mean ITL in µs.
    pub itl_us_avg: Option<u64>,
    /// Phases in order of first appearance, joined with `, `.
    pub phases: String,
    /// Request duration, human.
    pub duration: String,
    /// Time to first token, human.
    pub ttft: String,
    /// Output tokens, or empty.
    pub output_tokens: String,
    /// Mean inter-token latency, human.
    pub itl_avg: String,
    /// Events, and how many are invalid.
    pub event_count: u64,
    /// Invalid events.
    pub invalid_event_count: u64,
    /// Forward calls with module spans; `None` when the profile has no module events.
    pub forward_calls: Option<u64>,
    /// Module spans in those forward calls; `None` when the profile has no module events.
    pub module_spans: Option<u64>,
}

fn us(v: Option<u64>) -> String {
    v.map_or_else(|| "—".into(), |us| format_ns(us.saturating_mul(1_000)))
}

/// One row per request (a document's [`ProfileDocument::requests`], in the profile's order),
/// with its forward calls and module spans from `modules` (the panel of the same document).
pub fn request_rows(
    requests: Vec<RequestSummary>,
    modules: &ProfileModulesPanel,
) -> Vec<RequestRow> {
    requests
        .into_iter()
        .map(|r| {
            let counts = modules.counts(&r.request_id);
            RequestRow {
                status: r.status.as_str(),
                model: r.model.unwrap_or_default(),
                backend: r.backend.unwrap_or_default(),
                duration_us: r.duration_us,
                ttft_us: r.ttft_us,
                itl_us_avg: r.itl_us_avg,
                phases: r.phases.join(", "),
                duration: us(r.duration_us),
                ttft: us(r.ttft_us),
                output_tokens: r.output_tokens.map(|n| n.to_string()).unwrap_or_default(),
                itl_avg: us(r.itl_us_avg),
                event_count: r.event_count,
                invalid_event_count: r.invalid_event_count,
                forward_calls: counts.map(|c| c.0),
                module_spans: counts.map(|c| c.1),
                request_id: r.request_id,
            }
        })
        .collect()
}

/// An event listed apart (errors, diagnostic-only events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Line in the file.
    pub line: u64,
    /// Request id.
    pub request_id: String,
    /// Phase.
    pub phase: String,
    /// `event_kind`.
    pub event_kind: String,
    /// Error kind and message, or the event's attributes in short.
    pub detail: String,
    /// Blocking error.
    pub blocking: bool,
}

fn event_row(r: &ProfileRecord) -> EventRow {
    let e = &r.event;
    let detail = match &e.error {
        Some(err) => format!(
            "{}: {}",
            err.kind.as_deref().unwrap_or("?"),
            err.message.as_deref().unwrap_or("")
        ),
        None => e
            .attributes
            .iter()
            .take(4)
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
    };
    EventRow {
        line: r.line,
        request_id: e.request_id.clone().unwrap_or_default(),
        phase: e.phase.clone().unwrap_or_default(),
        event_kind: e.event_kind.clone().unwrap_or_default(),
        detail,
        blocking: e.error.as_ref().is_some_and(|err| err.blocking),
    }
}

/// Failures (status `failure` or an `error` object) and diagnostic-only events, apart.
pub fn event_lists(doc: &ProfileDocument) -> (Vec<EventRow>, Vec<EventRow>) {
    (
        doc.failures().into_iter().map(event_row).collect(),
        doc.diagnostic_only().into_iter().map(event_row).collect(),
    )
}

/// Width of the memory-snapshot chart's viewBox.
pub const SNAPSHOT_W: f64 = 800.0;
/// Height of the memory-snapshot chart's viewBox.
pub const SNAPSHOT_H: f64 = 140.0;

/// One memory snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRow {
    /// Line.
    pub line: u64,
    /// Request.
    pub request_id: String,
    /// Scope.
    pub scope: String,
    /// On the chart's axis: ns after the profile's time 0.
    pub at_ns: u64,
    /// Time, human.
    pub at: String,
    /// Current bytes.
    pub current_bytes: Option<u64>,
    /// High-water bytes.
    pub high_water_bytes: Option<u64>,
    /// Available bytes.
    pub available_bytes: Option<i64>,
    /// Human current / high water / available.
    pub texts: [String; 3],
}

/// The memory snapshots over time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SnapshotChart {
    /// Rows in time order (file order among equal times).
    pub rows: Vec<SnapshotRow>,
    /// Current bytes polyline.
    pub current_path: String,
    /// High-water polyline.
    pub high_water_path: String,
    /// Points (x, y) of current bytes, for dots.
    pub current_points: Vec<(String, String)>,
    /// Top of the byte axis, human.
    pub max: String,
    /// Axis start, human.
    pub start: String,
    /// Axis end, human.
    pub extent: String,
}

/// The snapshot chart of `doc` (current and high water on one byte axis; available in the
/// table), its times after `origin_unix_nanos` (the chart's time 0; without one, the first
/// snapshot's).
pub fn snapshot_chart(doc: &ProfileDocument, origin_unix_nanos: Option<i64>) -> SnapshotChart {
    let mut snaps = doc.memory_snapshots();
    sort::by_key(&mut snaps, |s| s.ts_unix_nanos.unwrap_or(i64::MAX));
    let t0 = origin_unix_nanos
        .or_else(|| snaps.iter().filter_map(|s| s.ts_unix_nanos).min())
        .unwrap_or(0);
    let bytes_text = |v: Option<u64>| v.map_or_else(|| "—".to_string(), format_bytes);
    let rows: Vec<SnapshotRow> = snaps
        .iter()
        .map(|s| {
            let at_ns = s.ts_unix_nanos.map_or(0, |t| {
                u64::try_from(i128::from(t) - i128::from(t0)).unwrap_or(0)
            });
            SnapshotRow {
                line: s.line,
                request_id: s.request_id.clone().unwrap_or_default(),
                scope: s.scope.clone().unwrap_or_default(),
                at_ns,
                at: format_ns(at_ns),
                current_bytes: s.current_bytes,
                high_water_bytes: s.high_water_bytes,
                available_bytes: s.available_bytes,
                texts: [
                    bytes_text(s.current_bytes),
                    bytes_text(s.high_water_bytes),
                    bytes_text(s.available_bytes.and_then(|a| u64::try_from(a).ok())),
                ],
            }
        })
        .collect();
    chart_of(rows, 0)
}

impl SnapshotChart {
    /// The snapshots taken in `range` (their times inside it), drawn from its start.
    pub fn in_range(&self, range: TimeRange) -> SnapshotChart {
        let rows = self
            .rows
            .iter()
            .filter(|r| range.contains(r.at_ns))
            .cloned()
            .collect();
        chart_of(rows, range.start_ns)
    }
}

/// The chart of `rows`, its time axis from `from_ns`.
fn chart_of(rows: Vec<SnapshotRow>, from_ns: u64) -> SnapshotChart {
    if rows.is_empty() {
        return SnapshotChart::default();
    }
    let end = rows.iter().map(|r| r.at_ns).max().unwrap_or(0);
    let top = rows
        .iter()
        .flat_map(|r| [r.current_bytes, r.high_water_bytes])
        .flatten()
        .max()
        .unwrap_or(0);
    let x = Scale::new(from_ns as f64, end as f64, 8.0, SNAPSHOT_W - 8.0);
    let y = Scale::new(0.0, top as f64, SNAPSHOT_H - 4.0, 12.0);
    let pts = |f: &dyn Fn(&SnapshotRow) -> Option<u64>| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| f(r).map(|v| (x.px(r.at_ns as f64), y.px(v as f64))))
            .collect()
    };
    let current = pts(&|r| r.current_bytes);
    SnapshotChart {
        current_path: polyline(&current),
        high_water_path: polyline(&pts(&|r| r.high_water_bytes)),
        current_points: current.iter().map(|&(a, b)| (num(a), num(b))).collect(),
        max: format_bytes(top),
        start: format_ns(from_ns),
        extent: format_ns(end),
        rows,
    }
}

/// Detail level and sample rate as shown.
pub fn settings_text(doc: &ProfileDocument) -> (String, String) {
    let s = doc.settings();
    (
        s.detail_level.unwrap_or_else(|| "not stated".into()),
        s.sample_rate
            .map_or_else(|| "not stated".into(), |r| format!("{r}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::read_profile;

    #[test]
    fn golden_profile_requests() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let rows = request_rows(doc.requests(), &ProfileModulesPanel::of(&doc));
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().any(|r| r.status == "failure"));
        assert_eq!(rows.iter().map(|r| r.event_count).sum::<u64>(), 17);
        assert_eq!(rows[0].backend, "cpu");
        assert_eq!(rows[0].ttft_us, Some(1200));
        // No module events in the fixture: nothing to count, not 0.
        assert!(rows
            .iter()
            .all(|r| r.forward_calls.is_none() && r.module_spans.is_none()));
    }

    #[test]
    fn fixture_lists_snapshots_and_settings() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let (failures, diagnostic) = event_lists(&doc);
        assert!(failures
            .iter()
            .any(|f| f.detail.starts_with("kv_cache_exhausted")));
        assert_eq!(diagnostic.len(), 1);
        assert_eq!(diagnostic[0].phase, "kernel");
        let c = snapshot_chart(&doc, doc.request_axis().origin_unix_nanos);
        assert_eq!(c.rows.len(), doc.memory_snapshots().len());
        // `make_fixtures.py`: each request's snapshot 5 µs after its decode ends (req-1's at
        // 2.985 + 0.02 ms, req-2's at 5 + 1.765 ms, req-3's at 9 + 2.1 ms), on the chart's
        // time, whose 0 is req-1's open.
        let at: Vec<u64> = c.rows.iter().map(|r| r.at_ns).collect();
        assert_eq!(at, [3_010_000, 6_770_000, 11_105_000]);
        // 3.01–11 ms holds the first two (ends included), not the third.
        let r = c.in_range(TimeRange::new(3_010_000, 11_000_000));
        let lines: Vec<u64> = r.rows.iter().map(|r| r.line).collect();
        assert_eq!(lines, [6, 11]);
        assert!(c.in_range(TimeRange::new(0, 3_000_000)).rows.is_empty());
        assert_eq!(
            settings_text(&doc),
            ("kernel".to_string(), "not stated".to_string())
        );
    }
}

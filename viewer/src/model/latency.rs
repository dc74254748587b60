//! TTFT and ITL histograms with p50 / p90 / p99 / max lines. Bins are
//! `candle_trace_schema::analysis::histogram`'s; percentiles are the schema's nearest-rank ones.

use candle_trace_schema::analysis::histogram::Histogram;
use candle_trace_schema::analysis::percentiles::Percentiles;
use candle_trace_schema::analysis::requests::{LatencyStats, RequestSummary};
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::profile::ProfileDocument;

use super::chart::Scale;

/// Width of a histogram's viewBox.
pub const HIST_W: f64 = 600.0;
/// Height of a histogram's viewBox.
pub const HIST_H: f64 = 150.0;
const PLOT_TOP: f64 = 18.0;
const PLOT_BOTTOM: f64 = HIST_H - 4.0;

/// One bin.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Left edge.
    pub x: f64,
    /// Width.
    pub w: f64,
    /// Top.
    pub y: f64,
    /// Height.
    pub h: f64,
    /// Values in the bin.
    pub count: u64,
    /// `[1.20 ms, 1.48 ms): 2`.
    pub label: String,
}

/// One percentile line.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// `p50`, `p90`, `p99`, `max`.
    pub name: &'static str,
    /// The exact value in the histogram's unit (`data-value`).
    pub value: u64,
    /// x of the line.
    pub x: f64,
    /// `p50 1.20 ms`.
    pub label: String,
}

/// A histogram ready to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramChart {
    /// `ttft` or `itl`.
    pub id: &'static str,
    /// Title.
    pub title: &'static str,
    /// Number of values.
    pub count: u64,
    /// Bins.
    pub bars: Vec<Bar>,
    /// p50, p90, p99, max.
    pub markers: Vec<Marker>,
    /// Axis labels: smallest value and end of the last bin.
    pub axis: (String, String),
}

fn chart(
    id: &'static str,
    title: &'static str,
    values: &[u64],
    p: Option<Percentiles>,
    ns_per_unit: u64,
) -> Option<HistogramChart> {
    let h = Histogram::of(values)?;
    let p = p?;
    let text = |v: u64| format_ns(v.saturating_mul(ns_per_unit));
    let x = Scale::new(h.min as f64, h.end() as f64, 0.0, HIST_W);
    let tallest = h.counts.iter().copied().max().unwrap_or(1).max(1);
    let y = Scale::new(0.0, tallest as f64, PLOT_BOTTOM, PLOT_TOP);
    let bars = h
        .counts
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let (lo, hi) = (h.bin_start(i), h.bin_start(i + 1));
            let (x0, x1) = (x.px(lo as f64), x.px(hi as f64));
            Bar {
                x: x0,
                w: (x1 - x0 - 1.0).max(1.0),
                y: y.px(count as f64),
                h: PLOT_BOTTOM - y.px(count as f64),
                count,
                label: format!("[{}, {}): {count}", text(lo), text(hi)),
            }
        })
        .collect();
    let markers = [
        ("p50", p.p50),
        ("p90", p.p90),
        ("p99", p.p99),
        ("max", p.max),
    ]
    .into_iter()
    .map(|(name, value)| Marker {
        name,
        value,
        // The middle of the value's unit interval, so `max` sits inside the last bin.
        x: x.px(value as f64 + 0.5),
        label: format!("{name} {}", text(value)),
    })
    .collect();
    Some(HistogramChart {
        id,
        title,
        count: p.count,
        bars,
        markers,
        axis: (text(h.min), text(h.end())),
    })
}

/// The TTFT (µs) and ITL (ns) histograms of `doc`; `None` for a metric without values.
pub fn latency_charts(doc: &ProfileDocument) -> (Option<HistogramChart>, Option<HistogramChart>) {
    latency_charts_of(&doc.requests())
}

/// [`latency_charts`] from a document's requests, already computed.
pub fn latency_charts_of(
    requests: &[RequestSummary],
) -> (Option<HistogramChart>, Option<HistogramChart>) {
    let ttft: Vec<u64> = requests.iter().filter_map(|r| r.ttft_us).collect();
    let itl: Vec<u64> = requests
        .iter()
        .flat_map(|r| r.itl_nanos.iter().copied())
        .collect();
    let stats = LatencyStats::of(requests);
    (
        chart("ttft", "Time to first token", &ttft, stats.ttft_us, 1_000),
        chart("itl", "Inter-token latency", &itl, stats.itl_nanos, 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::read_profile;

    #[test]
    fn fixture_histograms() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let (ttft, itl) = latency_charts(&doc);
        let ttft = ttft.unwrap();
        // 3 values 900, 1200, 1450 → 2 bins of width 276 from 900.
        assert_eq!(
            ttft.bars.iter().map(|b| b.count).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(ttft.bars[1].label, "[1.18 ms, 1.45 ms): 2");
        let m: Vec<(&str, u64)> = ttft.markers.iter().map(|m| (m.name, m.value)).collect();
        assert_eq!(
            m,
            vec![("p50", 1200), ("p90", 1450), ("p99", 1450), ("max", 1450)]
        );
        assert!(ttft.markers[3].x < HIST_W);
        let itl = itl.unwrap();
        assert_eq!(itl.count, 7);
        assert_eq!(itl.bars.iter().map(|b| b.count).sum::<u64>(), 7);
        assert_eq!(itl.markers[0].label, "p50 440 µs");
    }
}

//! The memory charts: per device, allocator live bytes over time stacked by category (with the
//! peak marked), and the reconciliation of device checkpoints (`device_memory` used bytes)
//! against the allocator's live bytes — the memory no recorded allocation explains.
//!
//! Both charts of a device share the trace's time axis (spans, memory events and checkpoints);
//! each has its own byte axis from 0 (the stacked chart up to the device's peak, the
//! reconciliation chart up to the largest of used and live bytes).

use std::sync::Arc;

use candle_trace_schema::analysis::reconcile::{reconcile_with, CheckpointGap};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::TensorCategory;
use candle_trace_schema::format::memory::MemorySample;

use super::chart::{
    column_reduce, focus_range, num, polyline, push_num, push_point, step_band, Scale,
};

/// Width of the charts' viewBox.
pub const CHART_W: f64 = 800.0;
/// Height of the charts' viewBox.
pub const CHART_H: f64 = 160.0;
/// Top of the plot area (room for the peak label).
const PLOT_TOP: f64 = 14.0;
/// Bottom of the plot area.
const PLOT_BOTTOM: f64 = CHART_H - 2.0;

/// One stacked layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// Category.
    pub category: &'static str,
    /// Closed SVG path (empty when the category is never live). Shared, as the other paths of
    /// a chart are, with the element that draws it: a path is the largest string of the page's
    /// panels.
    pub path: Arc<str>,
}

/// One checkpoint drawn on the reconciliation chart.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointMark {
    /// x of the checkpoint.
    pub x: f64,
    /// y of the device's used bytes.
    pub y_used: f64,
    /// y of the allocator's live bytes.
    pub y_live: f64,
    /// The numbers.
    pub gap: CheckpointGap,
}

/// The peak marker.
#[derive(Debug, Clone, PartialEq)]
pub struct PeakMark {
    /// x of the peak.
    pub x: f64,
    /// y of the peak's top.
    pub y: f64,
    /// Peak bytes.
    pub bytes: u64,
    /// When.
    pub timestamp_ns: u64,
    /// `2.20 KiB at 693 µs`.
    pub label: String,
}

/// One device's charts.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceChart {
    /// Device name.
    pub device: String,
    /// Peak live bytes on the device (top of the stacked chart).
    pub peak_bytes: u64,
    /// Human peak.
    pub peak: String,
    /// Layers bottom-up in [`TensorCategory::ALL`] order (empty without memory events).
    pub layers: Vec<Layer>,
    /// The peak marker, on the device that has the trace's peak.
    pub peak_mark: Option<PeakMark>,
    /// Top of the reconciliation chart's byte axis.
    pub reconcile_max_bytes: u64,
    /// The allocator's live total as a step line on the reconciliation chart's scale.
    pub live_path: Arc<str>,
    /// Checkpoints (used vs live) on the reconciliation chart.
    pub checkpoints: Vec<CheckpointMark>,
    /// The checkpoints' used bytes joined.
    pub used_path: Arc<str>,
    /// Every checkpoint's bar from used to live bytes, as one path (see [`gaps_path`]).
    pub gaps_path: Arc<str>,
    /// Every checkpoint's dot at its used bytes, as one path (see [`dots_path`]).
    pub dots_path: Arc<str>,
}

/// Bars 6 units wide centred on each checkpoint, from its used to its live bytes (at least 1
/// unit high), as one SVG path: one element for any number of checkpoints.
pub fn gaps_path(marks: &[CheckpointMark]) -> String {
    let mut d = String::new();
    for c in marks {
        let top = c.y_used.min(c.y_live);
        let height = (c.y_used - c.y_live).abs().max(1.0);
        push_point(&mut d, 'M', c.x - 3.0, top);
        d.push_str("h6v");
        push_num(&mut d, height);
        d.push_str("h-6z");
    }
    d
}

/// A dot of radius 3 at each checkpoint's used bytes (two half-circle arcs each), as one SVG
/// path.
pub fn dots_path(marks: &[CheckpointMark]) -> String {
    let mut d = String::new();
    for c in marks {
        push_point(&mut d, 'M', c.x - 3.0, c.y_used);
        d.push_str("a3 3 0 1 0 6 0a3 3 0 1 0 -6 0");
    }
    d
}

/// One reconciliation row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileRow {
    /// The numbers.
    pub gap: CheckpointGap,
    /// Time, human.
    pub time: String,
    /// Used, human.
    pub used: String,
    /// Live, human.
    pub live: String,
    /// Unexplained (or `−x` when the allocator counts more than the device uses), human.
    pub unexplained: String,
}

/// Every device's charts and the reconciliation table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryCharts {
    /// Start of the time axis.
    pub start_ns: u64,
    /// End of the time axis.
    pub end_ns: u64,
    /// One entry per device with memory events or checkpoints, in the profile's order.
    pub devices: Vec<DeviceChart>,
    /// All checkpoints in time order.
    pub reconcile: Vec<ReconcileRow>,
    /// The largest unexplained gap.
    pub max_unexplained: Option<ReconcileRow>,
}

fn row(gap: &CheckpointGap) -> ReconcileRow {
    ReconcileRow {
        time: format_ns(gap.timestamp_ns),
        used: format_bytes(gap.used_bytes),
        live: format_bytes(gap.live_bytes),
        unexplained: if gap.overcount_bytes > 0 {
            format!("−{}", format_bytes(gap.overcount_bytes))
        } else {
            format_bytes(gap.unexplained_bytes)
        },
        gap: gap.clone(),
    }
}

impl MemoryCharts {
    /// The charts of `doc`; empty without memory events and checkpoints.
    pub fn of(doc: &TraceDocument) -> Self {
        Self::of_samples(doc, &doc.memory_profile.samples)
    }

    /// The charts of `doc` with its memory samples given apart (the page takes them out of
    /// the document: `model::MemoryViews::take`).
    pub fn of_samples(doc: &TraceDocument, all_samples: &[MemorySample]) -> Self {
        let p = &doc.memory_profile;
        if all_samples.is_empty() && doc.device_memory.is_empty() {
            return MemoryCharts::default();
        }
        let times = doc
            .spans
            .iter()
            .flat_map(|s| [s.start_ns, s.end_ns()])
            .chain(all_samples.iter().map(|s| s.timestamp_ns))
            .chain(doc.device_memory.iter().map(|c| c.timestamp_ns));
        let (mut start_ns, mut end_ns) = (u64::MAX, 0u64);
        for t in times {
            start_ns = start_ns.min(t);
            end_ns = end_ns.max(t);
        }
        let x = Scale::new(start_ns as f64, end_ns as f64, 0.0, CHART_W);
        let r = reconcile_with(doc, all_samples);
        let mut devices = Vec::new();
        for (d, dev) in p.devices.iter().enumerate() {
            let samples: Vec<_> = all_samples
                .iter()
                .filter(|s| s.device as usize == d)
                .collect();
            let gaps: Vec<&CheckpointGap> =
                r.points.iter().filter(|g| g.device == dev.device).collect();
            if samples.is_empty() && gaps.is_empty() {
                continue;
            }
            let xs: Vec<f64> = samples
                .iter()
                .map(|s| x.px(s.timestamp_ns as f64))
                .collect();
            let keep = column_reduce(&xs, |i| samples[i].live_bytes);
            let kx: Vec<f64> = keep.iter().map(|&i| xs[i]).collect();
            let y = Scale::new(0.0, dev.peak_bytes as f64, PLOT_BOTTOM, PLOT_TOP);
            let mut below = vec![0u64; keep.len()];
            let mut layers = Vec::new();
            if !samples.is_empty() {
                for c in TensorCategory::ALL {
                    let above: Vec<u64> = keep
                        .iter()
                        .zip(&below)
                        .map(|(&i, b)| b.saturating_add(samples[i].by_category[c.index()]))
                        .collect();
                    let any = keep.iter().any(|&i| samples[i].by_category[c.index()] > 0);
                    let top: Vec<f64> = above.iter().map(|&v| y.px(v as f64)).collect();
                    let bottom: Vec<f64> = below.iter().map(|&v| y.px(v as f64)).collect();
                    layers.push(Layer {
                        category: c.as_str(),
                        path: if any {
                            step_band(&kx, &top, &bottom, CHART_W).into()
                        } else {
                            Arc::default()
                        },
                    });
                    below = above;
                }
            }
            let peak_mark = match (&p.peak_device, p.peak_timestamp_ns) {
                (Some(pd), Some(t)) if *pd == dev.device => Some(PeakMark {
                    x: x.px(t as f64),
                    y: y.px(p.peak_bytes as f64),
                    bytes: p.peak_bytes,
                    timestamp_ns: t,
                    label: format!("peak {} at {}", format_bytes(p.peak_bytes), format_ns(t)),
                }),
                _ => None,
            };
            let reconcile_max_bytes = gaps
                .iter()
                .map(|g| g.used_bytes.max(g.live_bytes))
                .chain([dev.peak_bytes])
                .max()
                .unwrap_or(0);
            let ry = Scale::new(0.0, reconcile_max_bytes as f64, PLOT_BOTTOM, PLOT_TOP);
            let live_points: Vec<(f64, f64)> = {
                let mut pts = Vec::new();
                let mut last_y = ry.px(0.0);
                pts.push((0.0, last_y));
                for (k, &i) in keep.iter().enumerate() {
                    let ny = ry.px(samples[i].live_bytes as f64);
                    pts.push((kx[k], last_y));
                    pts.push((kx[k], ny));
                    last_y = ny;
                }
                pts.push((CHART_W, last_y));
                pts
            };
            let checkpoints: Vec<CheckpointMark> = gaps
                .iter()
                .map(|g| CheckpointMark {
                    x: x.px(g.timestamp_ns as f64),
                    y_used: ry.px(g.used_bytes as f64),
                    y_live: ry.px(g.live_bytes as f64),
                    gap: (*g).clone(),
                })
                .collect();
            let used_path = polyline(
                &checkpoints
                    .iter()
                    .map(|c| (c.x, c.y_used))
                    .collect::<Vec<_>>(),
            );
            devices.push(DeviceChart {
                device: dev.device.clone(),
                peak_bytes: dev.peak_bytes,
                peak: format_bytes(dev.peak_bytes),
                layers,
                peak_mark,
                reconcile_max_bytes,
                live_path: polyline(&live_points).into(),
                gaps_path: gaps_path(&checkpoints).into(),
                dots_path: dots_path(&checkpoints).into(),
                checkpoints,
                used_path: used_path.into(),
            });
        }
        MemoryCharts {
            start_ns,
            end_ns,
            devices,
            max_unexplained: r.max_unexplained.map(|i| row(&r.points[i])),
            reconcile: r.points.iter().map(row).collect(),
        }
    }

    /// The time at x pixel `px` of a chart (viewBox units), clamped to the axis.
    pub fn ns_at(&self, px: f64) -> u64 {
        let x = Scale::new(self.start_ns as f64, self.end_ns as f64, 0.0, CHART_W);
        let v = x.value(px.clamp(0.0, CHART_W)).round();
        (v.max(0.0) as u64).clamp(self.start_ns, self.end_ns.max(self.start_ns))
    }

    /// The timeline range to show for time `t`.
    pub fn focus(&self, t: u64) -> (u64, u64) {
        focus_range(t, self.start_ns, self.end_ns)
    }

    /// Tick labels of the time axis: (x, label) at the start, middle and end.
    pub fn time_labels(&self) -> Vec<(String, String)> {
        let mid = self.start_ns + (self.end_ns - self.start_ns) / 2;
        [
            (0.0, self.start_ns),
            (CHART_W / 2.0, mid),
            (CHART_W, self.end_ns),
        ]
        .into_iter()
        .map(|(x, t)| (num(x), format_ns(t)))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panels() -> TraceDocument {
        TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/valid_panels.trace6.jsonl"
        ))
    }

    #[test]
    fn charts_of_the_panels_fixture() {
        let m = MemoryCharts::of(&panels());
        assert_eq!((m.start_ns, m.end_ns), (0, 100_000));
        let names: Vec<&str> = m.devices.iter().map(|d| d.device.as_str()).collect();
        assert_eq!(names, vec!["cuda:0", "cpu"]);
        let cuda = &m.devices[0];
        assert_eq!(cuda.peak_bytes, 8_250_000);
        let peak = cuda.peak_mark.as_ref().unwrap();
        assert_eq!((peak.bytes, peak.timestamp_ns), (8_250_000, 70_000));
        assert_eq!(peak.x, 560.0);
        assert_eq!(peak.y, PLOT_TOP);
        let drawn: Vec<&str> = cuda
            .layers
            .iter()
            .filter(|l| !l.path.is_empty())
            .map(|l| l.category)
            .collect();
        assert_eq!(
            drawn,
            vec!["parameter", "activation", "gradient", "optimizer"]
        );
        assert_eq!(cuda.checkpoints.len(), 4);
        // One bar and one dot per checkpoint, each path one element.
        assert_eq!(cuda.gaps_path.matches('M').count(), 4);
        assert_eq!(cuda.dots_path.matches('M').count(), 4);
        assert_eq!(m.reconcile.len(), 5);
        let max = m.max_unexplained.as_ref().unwrap();
        assert_eq!(
            (
                max.gap.unexplained_bytes,
                max.gap.timestamp_ns,
                max.gap.device.as_str()
            ),
            (5_000_000, 88_000, "cuda:0")
        );
        assert_eq!(max.unexplained, "4.77 MiB");
        assert!(m.devices[1].peak_mark.is_none());
    }

    #[test]
    fn layers_summing_past_u64_saturate() {
        // A parameter and an activation of 2^63 bytes each: stacked, 2^64, one past u64.
        let doc = TraceDocument::from_bytes(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"memory","timestamp_ns":1,"tensor_id":"t","span_id":"s","device":"cpu","bytes":9223372036854775808,"action":"alloc","dtype":"f32","category":"parameter"}"#,
            "\n",
            r#"{"kind":"memory","timestamp_ns":2,"tensor_id":"u","span_id":"s","device":"cpu","bytes":9223372036854775808,"action":"alloc","dtype":"f32","category":"activation"}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":1000}"#,
            "\n",
        ).as_bytes());
        let m = MemoryCharts::of(&doc);
        let drawn: Vec<&str> = m.devices[0]
            .layers
            .iter()
            .filter(|l| !l.path.is_empty())
            .map(|l| l.category)
            .collect();
        assert_eq!(drawn, vec!["parameter", "activation"]);
    }

    #[test]
    fn clicks_map_to_times_and_focus_ranges() {
        let m = MemoryCharts::of(&panels());
        assert_eq!(m.ns_at(400.0), 50_000);
        assert_eq!(m.ns_at(-5.0), 0);
        assert_eq!(m.ns_at(9000.0), 100_000);
        assert_eq!(m.focus(50_000), (48_000, 52_000));
        assert_eq!(
            m.time_labels()[1],
            ("400".to_string(), "50.0 µs".to_string())
        );
    }

    #[test]
    fn checkpoint_bars_and_dots_by_hand() {
        let gap = CheckpointGap {
            timestamp_ns: 0,
            device: "cpu".into(),
            used_bytes: 0,
            free_bytes: 0,
            reserved_bytes: None,
            live_bytes: 0,
            unexplained_bytes: 0,
            overcount_bytes: 0,
            line: 1,
        };
        let mark = |x, y_used, y_live| CheckpointMark {
            x,
            y_used,
            y_live,
            gap: gap.clone(),
        };
        // Used above live (smaller y), then a zero gap drawn 1 unit high.
        let marks = [mark(100.0, 20.0, 50.0), mark(10.25, 80.0, 80.0)];
        assert_eq!(gaps_path(&marks), "M97 20h6v30h-6zM7.3 80h6v1h-6z");
        assert_eq!(
            dots_path(&marks),
            "M97 20a3 3 0 1 0 6 0a3 3 0 1 0 -6 0M7.3 80a3 3 0 1 0 6 0a3 3 0 1 0 -6 0"
        );
        assert_eq!(gaps_path(&[]), "");
    }

    #[test]
    fn no_memory_no_charts() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/broken_cycle.trace6.jsonl"
        ));
        assert_eq!(MemoryCharts::of(&doc), MemoryCharts::default());
    }
}

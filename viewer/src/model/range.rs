//! A range selected on the chart's time axis (Shift+drag), and what the tabs that follow it
//! show for it: every number from `schema::analysis::range`, worded here.

use candle_trace_schema::analysis::range::{live_peak_in, memory_in, MemoryInRange, TimeRange};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::document::TraceDocument;

use crate::timeline::memory_curve::DeviceCurve;

/// `Range 1.20 ms – 3.40 ms (2.20 ms)`: the range as the tabs name it.
pub fn range_text(range: TimeRange) -> String {
    format!(
        "Range {} – {} ({})",
        format_ns(range.start_ns),
        format_ns(range.end_ns),
        format_ns(range.duration_ns())
    )
}

/// One device's live-bytes peak inside a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevicePeak {
    /// Device name.
    pub device: String,
    /// The largest live value in the range (exact).
    pub peak_bytes: u64,
    /// When it was first reached (the range's start when it was in force already).
    pub at_ns: u64,
    /// `2.20 KiB at 693 µs`.
    pub text: String,
}

/// The memory tab's numbers for a range.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryRange {
    /// Each device with a value in force during the range, in the curves' order.
    pub devices: Vec<DevicePeak>,
    /// Allocs, their bytes and frees inside the range.
    pub events: MemoryInRange,
}

impl MemoryRange {
    /// The numbers of `range`, from the trace's memory events and its devices' live curves.
    pub fn of(doc: &TraceDocument, curves: &[DeviceCurve], range: TimeRange) -> Self {
        let devices = curves
            .iter()
            .filter_map(|c| {
                let (peak_bytes, at_ns) = live_peak_in(&c.timestamp_ns, &c.live_bytes, range)?;
                Some(DevicePeak {
                    device: c.device.clone(),
                    peak_bytes,
                    at_ns,
                    text: format!("{} at {}", format_bytes(peak_bytes), format_ns(at_ns)),
                })
            })
            .collect();
        MemoryRange {
            devices,
            events: memory_in(doc, range),
        }
    }

    /// `3 allocs (1.50 KiB) and 1 free in the range`.
    pub fn events_text(&self) -> String {
        let e = &self.events;
        format!(
            "{} alloc{} ({}) and {} free{} in the range",
            e.alloc_count,
            if e.alloc_count == 1 { "" } else { "s" },
            format_bytes(e.alloc_bytes),
            e.free_count,
            if e.free_count == 1 { "" } else { "s" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::memory_curve::device_curves;

    #[test]
    fn memory_in_a_range_from_the_curves() {
        // cpu: alloc 100 @100, alloc 300 @300, free the 100 @500; cuda:0: alloc 64 @400.
        let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;
        let mem = |t: u64, id: &str, dev: &str, bytes: u64, action: &str| {
            format!(
                r#"{{"kind":"memory","timestamp_ns":{t},"tensor_id":"{id}","span_id":"s","device":"{dev}","bytes":{bytes},"action":"{action}","dtype":"u8"}}"#
            )
        };
        let text = [
            meta.to_string(),
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#.into(),
            r#"{"kind":"span_end","id":"s","duration_ns":1000}"#.into(),
            mem(100, "a", "cpu", 100, "alloc"),
            mem(300, "b", "cpu", 300, "alloc"),
            mem(400, "g", "cuda:0", 64, "alloc"),
            mem(500, "a", "cpu", 100, "free"),
        ]
        .join("\n");
        let doc = TraceDocument::from_bytes(text.as_bytes());
        let curves = device_curves(&doc.memory_profile);
        // 350..600: cpu 400 in force at 350 (its peak), then 300; cuda:0 64 at 400.
        let m = MemoryRange::of(&doc, &curves, TimeRange::new(350, 600));
        let got: Vec<_> = m
            .devices
            .iter()
            .map(|d| (d.device.as_str(), d.peak_bytes, d.at_ns))
            .collect();
        assert_eq!(got, vec![("cpu", 400, 350), ("cuda:0", 64, 400)]);
        assert_eq!(m.devices[0].text, "400 B at 350 ns");
        assert_eq!(m.events_text(), "1 alloc (64 B) and 1 free in the range");
        // 0..50: nothing is live yet on any device.
        let m = MemoryRange::of(&doc, &curves, TimeRange::new(0, 50));
        assert!(m.devices.is_empty());
        assert_eq!(m.events_text(), "0 allocs (0 B) and 0 frees in the range");
        assert_eq!(
            range_text(TimeRange::new(1_200_000, 3_400_000)),
            "Range 1.20 ms – 3.40 ms (2.20 ms)"
        );
    }
}

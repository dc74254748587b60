//! The memory strip under the flame chart: each device's live bytes over time (a step
//! function: the value after a memory event holds until the next event), reduced to one
//! maximum per pixel column of the view so drawing costs the width, not the event count.

use candle_trace_schema::format::memory::MemoryProfile;

use super::viewport::Viewport;

/// One device's live-bytes curve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceCurve {
    /// Device name.
    pub device: String,
    /// Event times, non-decreasing.
    pub timestamp_ns: Vec<u64>,
    /// Live bytes after each event.
    pub live_bytes: Vec<u64>,
    /// Largest value.
    pub peak_bytes: u64,
}

/// One curve per device of the profile, in the profile's device order.
pub fn device_curves(profile: &MemoryProfile) -> Vec<DeviceCurve> {
    // Each device's samples counted first, so each curve is allocated once at its size (a
    // large trace has a sample per memory event).
    let mut counts = vec![0usize; profile.devices.len()];
    for s in &profile.samples {
        if let Some(n) = counts.get_mut(s.device as usize) {
            *n += 1;
        }
    }
    let mut curves: Vec<DeviceCurve> = profile
        .devices
        .iter()
        .zip(counts)
        .map(|(d, n)| DeviceCurve {
            device: d.device.clone(),
            timestamp_ns: Vec::with_capacity(n),
            live_bytes: Vec::with_capacity(n),
            peak_bytes: 0,
        })
        .collect();
    for s in &profile.samples {
        if let Some(c) = curves.get_mut(s.device as usize) {
            c.timestamp_ns.push(s.timestamp_ns);
            c.live_bytes.push(s.live_bytes);
            c.peak_bytes = c.peak_bytes.max(s.live_bytes);
        }
    }
    curves.retain(|c| !c.timestamp_ns.is_empty());
    curves
}

/// The largest live value in each pixel column of `view` (`None` before the first event).
pub fn column_max(curve: &DeviceCurve, view: &Viewport) -> Vec<Option<u64>> {
    let width = view.width_px.ceil().max(0.0) as usize;
    let mut cols: Vec<Option<u64>> = vec![None; width];
    if width == 0 || curve.timestamp_ns.is_empty() {
        return cols;
    }
    let (view_start, view_end) = (view.start_ns, view.end_ns());
    let t = &curve.timestamp_ns;
    // The event in force at the left edge: the last one at or before it.
    let first = t
        .partition_point(|&ts| (ts as f64) <= view_start)
        .saturating_sub(1);
    let column =
        |ns: f64| -> usize { (view.x_from_ns(ns).floor().max(0.0) as usize).min(width - 1) };
    for i in first..t.len() {
        let seg_start = t[i] as f64;
        if seg_start > view_end {
            break;
        }
        let seg_end = t.get(i + 1).map_or(view_end, |&n| n as f64);
        if seg_end < view_start {
            continue;
        }
        let (a, b) = (
            column(seg_start.max(view_start)),
            column(seg_end.min(view_end)),
        );
        // A segment ending exactly on a column edge does not reach into that column.
        let b = if seg_end < view_end && b > a && view.x_from_ns(seg_end).fract() == 0.0 {
            b - 1
        } else {
            b
        };
        let v = curve.live_bytes[i];
        for c in &mut cols[a..=b] {
            *c = Some(c.map_or(v, |old| old.max(v)));
        }
    }
    cols
}

/// The curve drawn in a strip `height_px` high whose top is `top_bytes`: one polyline per run
/// of columns with a value, points at the column centres, 2 px padding above and below.
pub fn curve_lines(
    curve: &DeviceCurve,
    view: &Viewport,
    top_bytes: u64,
    height_px: f64,
) -> Vec<Vec<(f64, f64)>> {
    let top = top_bytes.max(1) as f64;
    let y_of = |bytes: u64| height_px - 2.0 - (bytes as f64 / top) * (height_px - 4.0);
    let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut drawing = false;
    for (x, v) in column_max(curve, view).into_iter().enumerate() {
        match v {
            Some(bytes) => {
                let point = (x as f64 + 0.5, y_of(bytes));
                match lines.last_mut() {
                    Some(line) if drawing => line.push(point),
                    _ => lines.push(vec![point]),
                }
                drawing = true;
            }
            None => drawing = false,
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::document::TraceDocument;

    fn curve(points: &[(u64, u64)]) -> DeviceCurve {
        DeviceCurve {
            device: "cpu".into(),
            timestamp_ns: points.iter().map(|p| p.0).collect(),
            live_bytes: points.iter().map(|p| p.1).collect(),
            peak_bytes: points.iter().map(|p| p.1).max().unwrap_or(0),
        }
    }

    #[test]
    fn steps_hold_until_the_next_event() {
        let c = curve(&[(10, 100), (50, 300), (60, 0)]);
        let v = Viewport::fit(0, 100, 10.0); // 10 ns per column
        let cols = column_max(&c, &v);
        assert_eq!(
            cols,
            vec![
                None,
                Some(100),
                Some(100),
                Some(100),
                Some(100),
                Some(300),
                Some(0),
                Some(0),
                Some(0),
                Some(0)
            ]
        );
    }

    #[test]
    fn lines_scale_to_the_strip() {
        // Columns: none, 100 × 4, 300, 0 × 4 (see above); top 400 bytes in a 48 px strip:
        // y = 46 − bytes / 400 × 44, so 100 → 35, 300 → 13, 0 → 46.
        let c = curve(&[(10, 100), (50, 300), (60, 0)]);
        let lines = curve_lines(&c, &Viewport::fit(0, 100, 10.0), 400, 48.0);
        assert_eq!(lines.len(), 1);
        let ys: Vec<f64> = lines[0].iter().map(|p| p.1).collect();
        assert_eq!(
            ys,
            vec![35.0, 35.0, 35.0, 35.0, 13.0, 46.0, 46.0, 46.0, 46.0]
        );
        assert_eq!(lines[0][0].0, 1.5);
        // No value at all: no line.
        let empty = curve(&[(500, 7)]);
        assert!(curve_lines(&empty, &Viewport::fit(0, 100, 10.0), 7, 48.0).is_empty());
    }

    #[test]
    fn narrow_spikes_survive_as_column_maxima() {
        // A 1 ns spike inside a 10 ns column is still drawn.
        let c = curve(&[(0, 10), (33, 1000), (34, 10)]);
        let v = Viewport::fit(0, 100, 10.0);
        let cols = column_max(&c, &v);
        assert_eq!(cols[3], Some(1000));
        assert_eq!(cols[2], Some(10));
        assert_eq!(cols[4], Some(10));
    }

    #[test]
    fn zoomed_in_view_starts_with_the_value_in_force() {
        let c = curve(&[(0, 5), (1000, 7)]);
        let v = Viewport::fit(0, 2000, 100.0).show_range(400, 600, 0.0);
        assert!(column_max(&c, &v).iter().all(|&x| x == Some(5)));
    }

    #[test]
    fn golden_curves() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let curves = device_curves(&doc.memory_profile);
        let cpu = curves.iter().find(|c| c.device == "cpu").unwrap();
        assert_eq!(cpu.peak_bytes, 2252);
        let v = Viewport::fit(0, 1_000_000, 500.0);
        let max = column_max(cpu, &v).into_iter().flatten().max();
        assert_eq!(max, Some(2252));
    }
}

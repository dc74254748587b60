//! The memory panel: the peak (where, when, by category), per-device peaks and capacity, and
//! the largest allocations live at the peak.

use candle_trace_schema::analysis::modules::ModulePaths;
use candle_trace_schema::analysis::sort;
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::TensorCategory;

/// One device's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRow {
    /// Device name.
    pub device: String,
    /// Peak live bytes (exact).
    pub peak_bytes: u64,
    /// Peak in human units, with the capacity share when known (`1.00 GiB of 16.0 GiB (6%)`).
    pub peak: String,
    /// Allocations and frees on the device.
    pub allocs_frees: String,
}

/// One allocation live at the peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRow {
    /// Tensor id.
    pub tensor_id: String,
    /// Bytes, human.
    pub bytes: String,
    /// Category.
    pub category: &'static str,
    /// Where it was allocated: the module (in a trace whose capture named modules), else the
    /// span's name (or the id when it names no span), and the op.
    pub origin: String,
    /// Index of the span that allocated it, for the click-through.
    pub span: Option<u32>,
}

/// The memory panel.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryPanel {
    /// `2.20 KiB on cpu at 693 µs`, or `None` without memory events.
    pub peak: Option<String>,
    /// (category, bytes) live at the peak, non-zero ones only, largest first.
    pub by_category: Vec<(&'static str, String)>,
    /// One row per device.
    pub devices: Vec<DeviceRow>,
    /// The largest allocations live at the peak (at most `limit`).
    pub live: Vec<LiveRow>,
    /// How many allocations were live at the peak in all.
    pub live_count: usize,
}

impl MemoryPanel {
    /// The panel of `doc`, listing at most `limit` live allocations; `paths` (the document's)
    /// name the module each was allocated in.
    pub fn of(doc: &TraceDocument, paths: &ModulePaths, limit: usize) -> Self {
        let p = &doc.memory_profile;
        if p.alloc_count == 0 && p.free_count == 0 && p.devices.is_empty() {
            return MemoryPanel::default();
        }
        let peak = Some(match (&p.peak_device, p.peak_timestamp_ns) {
            (Some(d), Some(t)) => {
                format!("{} on {d} at {}", format_bytes(p.peak_bytes), format_ns(t))
            }
            _ => format_bytes(p.peak_bytes),
        });
        let mut by_category: Vec<(TensorCategory, u64)> = TensorCategory::ALL
            .iter()
            .map(|&c| (c, p.peak_by_category[c.index()]))
            .filter(|&(_, b)| b > 0)
            .collect();
        sort::by(&mut by_category, |a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let devices = p
            .devices
            .iter()
            .map(|d| {
                let share = d
                    .capacity_bytes
                    .filter(|&c| c > 0)
                    .map(|c| {
                        let pct = d.peak_bytes as f64 / c as f64 * 100.0;
                        // The ends say so rather than round onto them: under 1 % is not
                        // 0 %, and a peak short of the capacity is not 100 %.
                        let pct = if d.peak_bytes > 0 && pct < 1.0 {
                            "<1".to_string()
                        } else if d.peak_bytes < c && pct >= 99.5 {
                            ">99".to_string()
                        } else {
                            format!("{pct:.0}")
                        };
                        format!(" of {} ({pct}%)", format_bytes(c))
                    })
                    .unwrap_or_default();
                DeviceRow {
                    device: d.device.clone(),
                    peak_bytes: d.peak_bytes,
                    peak: format!("{}{share}", format_bytes(d.peak_bytes)),
                    allocs_frees: format!("{} / {}", d.alloc_count, d.free_count),
                }
            })
            .collect();
        let live = p
            .live_at_peak
            .iter()
            .take(limit)
            .map(|a| {
                let span = doc.span_index(&a.span_id);
                let place = span.map_or(a.span_id.as_str(), |i| {
                    paths.module_of(i).unwrap_or(doc.spans[i].name.as_str())
                });
                LiveRow {
                    tensor_id: a.tensor_id.clone(),
                    bytes: format_bytes(a.bytes),
                    category: a.category.as_str(),
                    origin: origin_text(place, a.op_name.as_deref()),
                    span: span.map(|i| i as u32),
                }
            })
            .collect();
        MemoryPanel {
            peak,
            by_category: by_category
                .into_iter()
                .map(|(c, b)| (c.as_str(), format_bytes(b)))
                .collect(),
            devices,
            live,
            live_count: p.live_at_peak.len(),
        }
    }
}

/// Where an allocation was made: its module or span, then the op that made it (`block.0 ·
/// matmul`); the name once when the op is the span itself (`add`, not `add · add`).
pub fn origin_text(place: &str, op: Option<&str>) -> String {
    match op {
        Some(op) if op != place => format!("{place} · {op}"),
        _ => place.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_names_a_place_and_an_op_once_each() {
        assert_eq!(origin_text("block.0", Some("matmul")), "block.0 · matmul");
        assert_eq!(origin_text("add", Some("add")), "add");
        assert_eq!(origin_text("step", None), "step");
    }

    #[test]
    fn golden_memory_panel() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let m = MemoryPanel::of(&doc, &ModulePaths::new(&doc), 3);
        assert_eq!(m.peak.as_deref(), Some("2.20 KiB on cpu at 693 µs"));
        // activation 804, gradient 900, other 160, parameter 388 (fixtures README).
        let cats: Vec<&str> = m.by_category.iter().map(|c| c.0).collect();
        assert_eq!(cats, vec!["gradient", "activation", "parameter", "other"]);
        let cpu = m.devices.iter().find(|d| d.device == "cpu").unwrap();
        assert_eq!(cpu.peak_bytes, 2252);
        assert_eq!(cpu.peak, "2.20 KiB of 16.0 GiB (<1%)");
        assert_eq!(m.live.len(), 3);
        assert!(m.live_count >= 3);
        assert!(m.live.iter().all(|l| l.span.is_some()));
    }

    #[test]
    fn a_share_short_of_the_capacity_is_not_rounded_to_100() {
        // Capacity 1000 B (used + free of the checkpoint); peaks of 995 and 1000 bytes.
        let doc = |peak: u64| {
            let text = format!(
                concat!(
                    r#"{{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{{}}}}"#,
                    "\n",
                    r#"{{"kind":"device_memory","timestamp_ns":1,"device":"cpu","used_bytes":0,"free_bytes":1000}}"#,
                    "\n",
                    r#"{{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}}"#,
                    "\n",
                    r#"{{"kind":"memory","timestamp_ns":2,"tensor_id":"t","span_id":"s","device":"cpu","bytes":{peak},"action":"alloc","dtype":"f32","category":"activation"}}"#,
                    "\n",
                    r#"{{"kind":"span_end","id":"s","duration_ns":10}}"#,
                    "\n",
                ),
                peak = peak
            );
            let doc = TraceDocument::from_bytes(text.as_bytes());
            MemoryPanel::of(&doc, &ModulePaths::new(&doc), 10)
        };
        assert_eq!(doc(995).devices[0].peak, "995 B of 1000 B (>99%)");
        assert_eq!(doc(1000).devices[0].peak, "1000 B of 1000 B (100%)");
        assert_eq!(doc(500).devices[0].peak, "500 B of 1000 B (50%)");
    }

    #[test]
    fn allocations_name_the_module_they_were_made_in() {
        // At the peak (3000 ns) m1 (4096 B, in the matmul op span inside layer 1's q_proj),
        // m3 (2048 B, in backward) and m2 (1024 B, in layer 0's down_proj) are live.
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/modules/mistral_names.trace6.jsonl"
        ));
        let m = MemoryPanel::of(&doc, &ModulePaths::new(&doc), 10);
        let origins: Vec<(&str, &str)> = m
            .live
            .iter()
            .map(|l| (l.tensor_id.as_str(), l.origin.as_str()))
            .collect();
        assert_eq!(
            origins,
            [
                ("m1", "model.layers.1.self_attn.q_proj"),
                ("m3", "backward"),
                ("m2", "model.layers.0.mlp.down_proj"),
            ]
        );
    }

    #[test]
    fn no_memory_no_panel() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/broken_cycle.trace6.jsonl"
        ));
        assert_eq!(
            MemoryPanel::of(&doc, &ModulePaths::new(&doc), 10),
            MemoryPanel::default()
        );
    }
}

//! What was captured: each capture source on or off with its event count, dropped events and
//! the capture's warnings (the `capture_sources` line, `candle-trace summary`'s `captured:`
//! line), and what the views say instead of 0 where a source was off
//! (`schema::analysis::summary::NotCaptured`, the CLI's rule).

use candle_trace_schema::analysis::summary::NotCaptured;
use candle_trace_schema::analysis::units::format_bytes;
use candle_trace_schema::format::document::TraceDocument;

/// What the line says for a file without a `capture_sources` line (older traces, Chrome
/// imports).
pub const NOT_STATED: &str = "capture sources not stated";

/// One source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRow {
    /// The source's name (`tracing`, `layer_ops` ...).
    pub source: String,
    /// Whether it was on for the captured step.
    pub on: bool,
    /// Events it produced (exact).
    pub events: u64,
    /// `allocator on (412 events, ≥ 1.00 KiB)`, `gradients off`: the CLI's wording.
    pub text: String,
}

/// The "captured" line and its warnings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapturePanel {
    /// False when the file has no `capture_sources` line.
    pub stated: bool,
    /// One row per listed source, in the file's order.
    pub sources: Vec<SourceRow>,
    /// Events the writer dropped (full rings).
    pub events_dropped: u64,
    /// `events dropped: 3 (the writer's rings were full)` when any were.
    pub dropped: Option<String>,
    /// Every warning the capture wrote.
    pub warnings: Vec<String>,
    /// What the cards and panels say instead of 0 for an off source.
    pub not_captured: NotCaptured,
}

impl CapturePanel {
    /// The header chip's words: `2 capture warnings` (dropped events count as one warning),
    /// `None` when there is nothing to warn about.
    pub fn alerts_label(&self) -> Option<String> {
        match self.warnings.len() + usize::from(self.dropped.is_some()) {
            0 => None,
            1 => Some("1 capture warning".to_string()),
            n => Some(format!("{n} capture warnings")),
        }
    }

    /// The panel of `doc`.
    pub fn of(doc: &TraceDocument) -> Self {
        let not_captured = NotCaptured::of(doc);
        let Some(line) = &doc.capture_sources else {
            return CapturePanel {
                not_captured,
                ..CapturePanel::default()
            };
        };
        let s = &line.event;
        CapturePanel {
            stated: true,
            sources: s
                .sources
                .iter()
                .map(|c| {
                    let threshold = c
                        .threshold_bytes
                        .map_or(String::new(), |t| format!(", ≥ {}", format_bytes(t)));
                    SourceRow {
                        source: c.source.clone(),
                        on: c.on,
                        events: c.events,
                        text: if c.on {
                            format!("{} on ({} events{threshold})", c.source, c.events)
                        } else {
                            format!("{} off", c.source)
                        },
                    }
                })
                .collect(),
            events_dropped: s.events_dropped,
            dropped: (s.events_dropped > 0).then(|| {
                format!(
                    "events dropped: {} (the writer's rings were full)",
                    s.events_dropped
                )
            }),
            warnings: s.warnings.clone(),
            not_captured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;
    const STEP: &str = concat!(
        r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
        "\n",
        r#"{"kind":"span_end","id":"s","duration_ns":100}"#,
        "\n",
    );

    fn read(sources_line: &str) -> TraceDocument {
        TraceDocument::from_bytes(format!("{META}\n{STEP}{sources_line}\n").as_bytes())
    }

    #[test]
    fn each_source_with_its_count_dropped_and_warnings() {
        let doc = read(
            r#"{"kind":"capture_sources","sources":[{"source":"tracing","on":true,"events":2},{"source":"allocator","on":true,"events":0,"threshold_bytes":1024},{"source":"layer_ops","on":false,"events":0}],"events_dropped":3,"warnings":["no tracing spans"]}"#,
        );
        let p = CapturePanel::of(&doc);
        assert!(p.stated);
        let rows: Vec<(&str, bool, u64, &str)> = p
            .sources
            .iter()
            .map(|s| (s.source.as_str(), s.on, s.events, s.text.as_str()))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("tracing", true, 2, "tracing on (2 events)"),
                ("allocator", true, 0, "allocator on (0 events, ≥ 1.00 KiB)"),
                ("layer_ops", false, 0, "layer_ops off"),
            ]
        );
        assert_eq!(p.events_dropped, 3);
        assert_eq!(
            p.dropped.as_deref(),
            Some("events dropped: 3 (the writer's rings were full)")
        );
        assert_eq!(p.warnings, vec!["no tracing spans".to_string()]);
        // One warning and the dropped events: two in the header's chip.
        assert_eq!(p.alerts_label().as_deref(), Some("2 capture warnings"));
        // No ops with layer_ops off; allocator on with no events is a true 0; gradients not
        // listed at all counts as off.
        assert_eq!(
            p.not_captured.ops.as_deref(),
            Some("not captured (layer_ops off)")
        );
        assert_eq!(p.not_captured.memory, None);
        assert_eq!(
            p.not_captured.gradients.as_deref(),
            Some("not captured (gradients off)")
        );
    }

    #[test]
    fn without_the_line_nothing_is_stated() {
        let doc = read("");
        let p = CapturePanel::of(&doc);
        assert!(!p.stated);
        assert!(p.sources.is_empty());
        assert_eq!(p.dropped, None);
        assert_eq!(p.alerts_label(), None);
        assert_eq!(p.not_captured.ops.as_deref(), Some("not captured"));
        assert_eq!(p.not_captured.memory.as_deref(), Some("not captured"));
        assert_eq!(p.not_captured.gradients.as_deref(), Some("not captured"));
    }
}

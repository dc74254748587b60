//! Summary cards: the eight `TraceSummary` numbers (and a profile's headline numbers), each
//! with its exact integer and a human rendering.

use candle_trace_schema::analysis::percentiles::Percentiles;
use candle_trace_schema::analysis::requests::ProfileSummary;
use candle_trace_schema::analysis::summary::{NotCaptured, TraceSummary};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::profile::attribute;

/// One card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryCard {
    /// Field name (`op_count` ...): the card's `data-testid` is `summary-<field>`.
    pub field: String,
    /// Human label.
    pub label: &'static str,
    /// The exact integer (`data-value`).
    pub value: u64,
    /// The value in human units, or what was not captured (`not captured (layer_ops off)`).
    pub display: String,
    /// Set when the number is 0 only because its source was off (then `display` says so).
    pub not_captured: Option<String>,
}

fn card(field: &str, label: &'static str, value: u64, display: String) -> SummaryCard {
    SummaryCard {
        field: field.to_string(),
        label,
        value,
        display,
        not_captured: None,
    }
}

fn count(n: u64) -> String {
    // Thousands separated by a thin space: 1 234 567.
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    out
}

/// The eight cards of a trace, in SCHEMA.md order.
pub fn trace_cards(s: &TraceSummary) -> Vec<SummaryCard> {
    vec![
        card(
            "total_ns",
            "measured total",
            s.total_ns,
            format_ns(s.total_ns),
        ),
        card("op_count", "ops", s.op_count, count(s.op_count)),
        card("span_count", "spans", s.span_count, count(s.span_count)),
        card(
            "root_span_count",
            "root spans",
            s.root_span_count,
            count(s.root_span_count),
        ),
        card("max_depth", "max depth", s.max_depth, count(s.max_depth)),
        card("alloc_count", "allocs", s.alloc_count, count(s.alloc_count)),
        card("free_count", "frees", s.free_count, count(s.free_count)),
        card(
            "peak_bytes",
            "peak memory",
            s.peak_bytes,
            format_bytes(s.peak_bytes),
        ),
    ]
}

/// The human label of a trace summary field (`total_ns` → `measured total`), the field itself
/// for one that is not a card's.
pub fn trace_label(field: &str) -> &str {
    trace_cards(&TraceSummary::default())
        .into_iter()
        .find(|c| c.field == field)
        .map_or(field, |c| c.label)
}

/// Word the cards a switched-off source left at 0 as not captured (`op_count` for
/// `layer_ops`, `peak_bytes` for `allocator`: the CLI `summary`'s rule, with its reason; the
/// allocator's counts, `alloc_count` and `free_count`, say `not captured` beside it); `value`
/// stays the exact integer of `summary --json`.
pub fn mark_not_captured(cards: &mut [SummaryCard], n: &NotCaptured) {
    for c in cards {
        let (why, display) = match c.field.as_str() {
            "op_count" => (&n.ops, None),
            "peak_bytes" => (&n.memory, None),
            "alloc_count" | "free_count" => (&n.memory, Some(NOT_CAPTURED)),
            _ => continue,
        };
        if let Some(why) = why {
            c.display = display.map_or_else(|| why.clone(), str::to_string);
            c.not_captured = Some(why.clone());
        }
    }
}

/// A count's words when its source was off (the reason is on the card's peak beside it).
pub const NOT_CAPTURED: &str = "not captured";

/// The cards in runs for the header's strip: a series of cards sharing a label (a profile's
/// `TTFT` p50, p90, p99, max: fields `<series>-<name>`) is one run that shows its label once,
/// every other card a run of its own (`None`: each card shows its own label).
pub fn card_runs(cards: &[SummaryCard]) -> Vec<(Option<&'static str>, Vec<SummaryCard>)> {
    let series = |c: &SummaryCard| c.field.split_once('-').map(|(s, _)| s.to_string());
    let mut runs: Vec<(Option<&'static str>, Vec<SummaryCard>)> = Vec::new();
    for c in cards {
        let joins = match (runs.last(), series(c)) {
            (Some((Some(label), run)), Some(s)) => {
                *label == c.label && run.last().and_then(series).as_deref() == Some(s.as_str())
            }
            _ => false,
        };
        match runs.last_mut() {
            Some((_, run)) if joins => run.push(c.clone()),
            _ => runs.push((series(c).map(|_| c.label), vec![c.clone()])),
        }
    }
    runs
}

fn percentile_cards(
    out: &mut Vec<SummaryCard>,
    field: &str,
    label: &'static str,
    p: &Option<Percentiles>,
    to_ns: u64,
) {
    let Some(p) = p else { return };
    for (name, v) in [
        ("p50", p.p50),
        ("p90", p.p90),
        ("p99", p.p99),
        ("max", p.max),
    ] {
        out.push(card(
            &format!("{field}-{name}"),
            label,
            v,
            format!("{name} {}", format_ns(v.saturating_mul(to_ns))),
        ));
    }
}

/// The headline cards of an inference profile: counts, then TTFT and ITL percentiles
/// (`summary-ttft_us-p50` ...), values in the profile's own unit (µs for TTFT, ns for ITL).
pub fn profile_cards(s: &ProfileSummary) -> Vec<SummaryCard> {
    let mut out = vec![
        card(
            "request_count",
            "requests",
            s.request_count,
            count(s.request_count),
        ),
        card("event_count", "events", s.event_count, count(s.event_count)),
        card(
            "invalid_event_count",
            "invalid",
            s.invalid_event_count,
            count(s.invalid_event_count),
        ),
        card("error_count", "errors", s.error_count, count(s.error_count)),
        card(
            "memory_snapshot_count",
            "snapshots",
            s.memory_snapshot_count,
            count(s.memory_snapshot_count),
        ),
    ];
    percentile_cards(&mut out, attribute::TTFT_US, "TTFT", &s.ttft_us, 1_000);
    percentile_cards(&mut out, attribute::ITL_NANOS, "ITL", &s.itl_nanos, 1);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::document::TraceDocument;
    use candle_trace_schema::format::profile::read_profile;

    #[test]
    fn golden_trace_cards_carry_exact_values() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let cards = trace_cards(&doc.summary());
        let get = |f: &str| cards.iter().find(|c| c.field == f).map(|c| c.value);
        assert_eq!(cards.len(), 8);
        assert_eq!(get("op_count"), Some(18));
        assert_eq!(get("total_ns"), Some(950_000));
        assert_eq!(get("span_count"), Some(25));
        assert_eq!(get("root_span_count"), Some(1));
        assert_eq!(get("max_depth"), Some(3));
        assert_eq!(get("alloc_count"), Some(25));
        assert_eq!(get("free_count"), Some(9));
        assert_eq!(get("peak_bytes"), Some(2252));
        assert_eq!(cards[0].display, "950 µs");
        assert_eq!(cards[7].display, "2.20 KiB");
    }

    #[test]
    fn profile_cards_have_requests_and_latency() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let cards = profile_cards(&doc.summary());
        let get = |f: &str| cards.iter().find(|c| c.field == f).map(|c| c.value);
        assert_eq!(get("request_count"), Some(3));
        assert_eq!(get("event_count"), Some(17));
        assert_eq!(get("ttft_us-p50"), Some(1200));
        assert_eq!(get("itl_nanos-max"), Some(530_000));
    }

    #[test]
    fn cards_of_an_off_source_say_not_captured() {
        let mut cards = trace_cards(&TraceSummary {
            total_ns: 100,
            alloc_count: 2,
            free_count: 1,
            peak_bytes: 2048,
            ..TraceSummary::default()
        });
        mark_not_captured(
            &mut cards,
            &NotCaptured {
                ops: Some("not captured (layer_ops off)".into()),
                memory: None,
                gradients: Some("not captured (gradients off)".into()),
            },
        );
        let ops = &cards[1];
        assert_eq!(ops.field, "op_count");
        assert_eq!(ops.value, 0);
        assert_eq!(ops.display, "not captured (layer_ops off)");
        assert_eq!(
            ops.not_captured.as_deref(),
            Some("not captured (layer_ops off)")
        );
        let peak = &cards[7];
        assert_eq!(peak.display, "2.00 KiB");
        assert_eq!(peak.not_captured, None);
        assert!(cards.iter().filter(|c| c.not_captured.is_some()).count() == 1);
        // The allocator off: its peak gives the reason, its two counts say not captured.
        let mut cards = trace_cards(&TraceSummary::default());
        let off = "not captured (allocator off)";
        mark_not_captured(
            &mut cards,
            &NotCaptured {
                ops: None,
                memory: Some(off.into()),
                gradients: None,
            },
        );
        let shown: Vec<(&str, &str, Option<&str>)> = cards
            .iter()
            .filter(|c| c.not_captured.is_some())
            .map(|c| {
                (
                    c.field.as_str(),
                    c.display.as_str(),
                    c.not_captured.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            vec![
                ("alloc_count", "not captured", Some(off)),
                ("free_count", "not captured", Some(off)),
                ("peak_bytes", off, Some(off)),
            ]
        );
    }

    #[test]
    fn fields_have_human_labels() {
        assert_eq!(trace_label("total_ns"), "measured total");
        assert_eq!(trace_label("peak_bytes"), "peak memory");
        assert_eq!(trace_label("root_span_count"), "root spans");
        assert_eq!(trace_label("other"), "other");
    }

    #[test]
    fn a_series_of_cards_is_one_run_with_one_label() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let runs = card_runs(&profile_cards(&doc.summary()));
        let shape: Vec<(Option<&str>, Vec<&str>)> = runs
            .iter()
            .map(|(l, r)| (*l, r.iter().map(|c| c.field.as_str()).collect()))
            .collect();
        // Five counts, each its own run; then TTFT's and ITL's four percentiles each.
        assert_eq!(shape.len(), 7);
        assert_eq!(shape[0], (None, vec!["request_count"]));
        assert_eq!(
            shape[5],
            (
                Some("TTFT"),
                vec!["ttft_us-p50", "ttft_us-p90", "ttft_us-p99", "ttft_us-max"]
            )
        );
        assert_eq!(
            shape[6],
            (
                Some("ITL"),
                vec![
                    "itl_nanos-p50",
                    "itl_nanos-p90",
                    "itl_nanos-p99",
                    "itl_nanos-max"
                ]
            )
        );
        // A trace's eight cards: eight runs of one.
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let runs = card_runs(&trace_cards(&doc.summary()));
        assert_eq!(runs.len(), 8);
        assert!(runs.iter().all(|(l, r)| l.is_none() && r.len() == 1));
    }

    #[test]
    fn counts_are_grouped() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_234_567), "1\u{2009}234\u{2009}567");
    }
}

//! Several traces at once (one per rank, say): where each file sits on a shared time axis and
//! what the files add up to.
//!
//! Alignment: each file's meta `timestamp` (RFC 3339) is taken as the wall-clock time of the
//! file's `0 ns`. The earliest parsed timestamp is placed at 0 and every other file at its
//! distance from it ([`align`]). A file whose meta has no timestamp, or one that is not an
//! RFC 3339 date-time, is placed at 0 and the page says so ([`AlignSource`]). The user can then
//! move any file by hand (the offset input, in µs).
//!
//! Totals ([`totals`]), one rule per summary number:
//! - `op_count`, `span_count`, `root_span_count`, `alloc_count`, `free_count`: sums;
//! - `max_depth`: the maximum;
//! - `peak_bytes`: the maximum of the files' peaks (their peaks happen at unrelated times,
//!   often on different devices, so a sum would claim a simultaneous peak nobody measured);
//! - `total_ns`: the wall span of the aligned union of the files' measured windows — from the
//!   earliest measured span start to the latest measured span end, each shifted by its file's
//!   offset. For one file with one measured span this is its `total_ns`; files without a
//!   measured span take no part (0 when none has one).

use std::sync::Arc;

use candle_trace_schema::analysis::summary::TraceSummary;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::profile::is_rfc3339;

use super::summary::{trace_cards, SummaryCard, NOT_CAPTURED};
use super::TraceModel;

/// Unix nanoseconds of an RFC 3339 `date-time` (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`),
/// `None` when `s` is not one. Fractions beyond nanoseconds are cut.
pub fn unix_ns_of_rfc3339(s: &str) -> Option<i128> {
    if !is_rfc3339(s) {
        return None;
    }
    let b = s.as_bytes();
    let num = |from: usize, to: usize| -> Option<i64> { s.get(from..to)?.parse().ok() };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let mut at = 19;
    let mut frac_ns: i64 = 0;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let digits_from = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        let digits = &s[digits_from..at];
        let kept: String = digits.chars().take(9).collect();
        frac_ns = format!("{kept:0<9}").parse().ok()?;
    }
    let offset_s: i64 = match b.get(at)? {
        b'Z' | b'z' => 0,
        sign @ (b'+' | b'-') => {
            let (h, m) = (num(at + 1, at + 3)?, num(at + 4, at + 6)?);
            let v = h * 3600 + m * 60;
            if *sign == b'+' {
                v
            } else {
                -v
            }
        }
        _ => return None,
    };
    // Leap seconds (`:60`) count as the next second's start.
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(i128::from(seconds) * 1_000_000_000 + i128::from(frac_ns))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Where a file's automatic offset came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlignSource {
    /// Its meta timestamp.
    Timestamp,
    /// No meta, or a meta without a timestamp: placed at 0.
    Missing,
    /// A timestamp that is not RFC 3339 (kept for the message): placed at 0.
    Unparseable(String),
}

impl AlignSource {
    /// What the page says about it.
    pub fn note(&self) -> String {
        match self {
            AlignSource::Timestamp => "aligned by its meta timestamp".into(),
            AlignSource::Missing => "no meta timestamp: aligned at 0".into(),
            AlignSource::Unparseable(t) => {
                format!("timestamp `{t}` is not RFC 3339: aligned at 0")
            }
        }
    }

    /// `timestamp`, `missing` or `unparseable` (the group's `data-align`).
    pub fn as_str(&self) -> &'static str {
        match self {
            AlignSource::Timestamp => "timestamp",
            AlignSource::Missing => "missing",
            AlignSource::Unparseable(_) => "unparseable",
        }
    }
}

/// A file's automatic place on the shared axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alignment {
    /// Nanoseconds after the earliest file (0 for it and for files that could not be placed).
    pub offset_ns: i64,
    /// Where that came from.
    pub source: AlignSource,
}

/// The automatic offsets of files with these meta timestamps (see the module docs).
pub fn align(timestamps: &[Option<&str>]) -> Vec<Alignment> {
    let parsed: Vec<Option<i128>> = timestamps
        .iter()
        .map(|t| t.and_then(unix_ns_of_rfc3339))
        .collect();
    let earliest = parsed.iter().flatten().min().copied();
    timestamps
        .iter()
        .zip(&parsed)
        .map(|(t, p)| match (t, p, earliest) {
            (_, Some(ns), Some(first)) => Alignment {
                offset_ns: (ns - first).clamp(0, i128::from(i64::MAX)) as i64,
                source: AlignSource::Timestamp,
            },
            (Some(t), None, _) if !t.trim().is_empty() => Alignment {
                offset_ns: 0,
                source: AlignSource::Unparseable((*t).to_string()),
            },
            _ => Alignment {
                offset_ns: 0,
                source: AlignSource::Missing,
            },
        })
        .collect()
}

/// `[first measured start, last measured end]` of a document, `None` without measured spans.
pub fn measured_window(doc: &TraceDocument) -> Option<(u64, u64)> {
    doc.spans
        .iter()
        .filter(|s| s.measured)
        .map(|s| (s.start_ns, s.start_ns.saturating_add(s.duration_or_zero())))
        .reduce(|(a0, a1), (b0, b1)| (a0.min(b0), a1.max(b1)))
}

/// One file's part in the totals: its summary, measured window and offset on the shared axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FileTotalsInput {
    /// The file's eight numbers.
    pub summary: TraceSummary,
    /// Its measured window in its own time.
    pub window: Option<(u64, u64)>,
    /// Its offset on the shared axis (ns).
    pub offset_ns: i64,
}

/// The totals row (the rules are in the module docs).
pub fn totals(files: &[FileTotalsInput]) -> TraceSummary {
    let sum = |f: fn(&TraceSummary) -> u64| {
        files
            .iter()
            .map(|x| f(&x.summary))
            .fold(0u64, u64::saturating_add)
    };
    let max = |f: fn(&TraceSummary) -> u64| files.iter().map(|x| f(&x.summary)).max().unwrap_or(0);
    let windows = files.iter().filter_map(|f| {
        f.window.map(|(s, e)| {
            let o = i128::from(f.offset_ns);
            (i128::from(s) + o, i128::from(e) + o)
        })
    });
    let total_ns = windows
        .reduce(|(a0, a1), (b0, b1)| (a0.min(b0), a1.max(b1)))
        .map_or(0, |(s, e)| (e - s).clamp(0, i128::from(u64::MAX)) as u64);
    TraceSummary {
        op_count: sum(|s| s.op_count),
        total_ns,
        span_count: sum(|s| s.span_count),
        root_span_count: sum(|s| s.root_span_count),
        max_depth: max(|s| s.max_depth),
        alloc_count: sum(|s| s.alloc_count),
        free_count: sum(|s| s.free_count),
        peak_bytes: max(|s| s.peak_bytes),
    }
}

/// The totals row's cards: each total worded by its rule (`max 4` for a maximum, `span 1.20 ms`
/// for the aligned wall span, a plain sum otherwise), and `not captured` where no file
/// captured the number's source (`files`: each file's cards, marked by
/// [`super::summary::mark_not_captured`]).
pub fn total_cards(totals: &TraceSummary, files: &[&[SummaryCard]]) -> Vec<SummaryCard> {
    let mut cards = trace_cards(totals);
    for c in &mut cards {
        let captured_nowhere = !files.is_empty()
            && files.iter().all(|f| {
                f.iter()
                    .find(|x| x.field == c.field)
                    .is_some_and(|x| x.not_captured.is_some())
            });
        if captured_nowhere {
            c.display = NOT_CAPTURED.to_string();
            c.not_captured = Some(NOT_CAPTURED.to_string());
            continue;
        }
        match c.field.as_str() {
            "total_ns" => c.display = format!("span {}", c.display),
            "max_depth" | "peak_bytes" => c.display = format!("max {}", c.display),
            _ => {}
        }
    }
    cards
}

/// The rule behind each total, for the table's header tooltips and the docs.
pub fn total_rule(field: &str) -> &'static str {
    match field {
        "total_ns" => "wall span of the aligned union of the measured windows",
        "max_depth" | "peak_bytes" => "maximum over the files",
        _ => "sum over the files",
    }
}

/// One opened file.
#[derive(Debug, Clone)]
pub struct MultiFile {
    /// The file's name.
    pub name: String,
    /// Its view models.
    pub model: Arc<TraceModel>,
    /// Its eight numbers.
    pub summary: TraceSummary,
    /// Its measured window, own time.
    pub window: Option<(u64, u64)>,
    /// Its automatic place.
    pub alignment: Alignment,
}

/// Several files on one axis.
#[derive(Debug, Clone)]
pub struct MultiModel {
    /// The files, in the order opened.
    pub files: Vec<MultiFile>,
}

impl MultiModel {
    /// Lay out `docs` (name, document) and align them.
    pub fn new(docs: Vec<(String, TraceDocument)>) -> Self {
        let timestamps: Vec<Option<String>> = docs
            .iter()
            .map(|(_, d)| d.meta.as_ref().map(|m| m.event.timestamp.clone()))
            .collect();
        let refs: Vec<Option<&str>> = timestamps.iter().map(|t| t.as_deref()).collect();
        let alignment = align(&refs);
        let files = docs
            .into_iter()
            .zip(alignment)
            .map(|((name, doc), alignment)| MultiFile {
                name,
                summary: doc.summary(),
                window: measured_window(&doc),
                model: Arc::new(TraceModel::without_findings(doc)),
                alignment,
            })
            .collect();
        MultiModel { files }
    }

    /// The automatic offsets, one per file.
    pub fn auto_offsets(&self) -> Vec<i64> {
        self.files.iter().map(|f| f.alignment.offset_ns).collect()
    }

    /// The totals with the files at `offsets_ns`.
    pub fn totals(&self, offsets_ns: &[i64]) -> TraceSummary {
        let inputs: Vec<FileTotalsInput> = self
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| FileTotalsInput {
                summary: f.summary,
                window: f.window,
                offset_ns: offsets_ns.get(i).copied().unwrap_or(0),
            })
            .collect();
        totals(&inputs)
    }
}

/// Microseconds typed into an offset input → ns (`None` for anything not a finite number).
pub fn offset_ns_of_us_text(text: &str) -> Option<i64> {
    let us: f64 = text.trim().parse().ok()?;
    us.is_finite().then(|| {
        (us * 1000.0)
            .round()
            .clamp(i64::MIN as f64, i64::MAX as f64) as i64
    })
}

/// ns → the offset input's µs text (`50`, `12.5`, `-3`).
pub fn us_text_of_offset_ns(ns: i64) -> String {
    let us = ns as f64 / 1000.0;
    if ns % 1000 == 0 {
        format!("{}", ns / 1000)
    } else {
        format!("{us}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn summary(n: u64) -> TraceSummary {
        TraceSummary {
            op_count: n,
            total_ns: 10 * n,
            span_count: 2 * n,
            root_span_count: 1,
            max_depth: n,
            alloc_count: 3 * n,
            free_count: n,
            peak_bytes: 100 * n,
        }
    }

    #[test]
    fn rfc3339_to_unix_ns() {
        assert_eq!(unix_ns_of_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            unix_ns_of_rfc3339("2026-01-01T00:00:00Z"),
            Some(1_767_225_600 * 1_000_000_000)
        );
        assert_eq!(
            unix_ns_of_rfc3339("2026-01-01T00:00:00.000050Z"),
            Some(1_767_225_600 * 1_000_000_000 + 50_000)
        );
        // An offset: 01:00+01:00 is 00:00Z.
        assert_eq!(
            unix_ns_of_rfc3339("2026-01-01T01:00:00+01:00"),
            unix_ns_of_rfc3339("2026-01-01T00:00:00Z")
        );
        assert_eq!(
            unix_ns_of_rfc3339("2025-12-31T23:00:00-01:00"),
            unix_ns_of_rfc3339("2026-01-01T00:00:00Z")
        );
        // Leap day and more than nine fraction digits (cut).
        assert_eq!(
            unix_ns_of_rfc3339("2024-02-29T12:00:00.1234567891z"),
            Some((1_709_208_000) * 1_000_000_000 + 123_456_789)
        );
        assert_eq!(
            unix_ns_of_rfc3339("1969-12-31T23:59:59Z"),
            Some(-1_000_000_000)
        );
        for bad in [
            "",
            "t",
            "yesterday",
            "2026-02-30T00:00:00Z",
            "2026-01-01 00:00:00Z",
        ] {
            assert_eq!(unix_ns_of_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn alignment_puts_the_earliest_at_zero_and_says_why_others_are_at_zero() {
        let a = align(&[
            Some("2026-01-01T00:00:00.000050Z"),
            Some("2026-01-01T00:00:00Z"),
            None,
            Some("yesterday"),
            Some("2026-01-01T00:00:01+00:00"),
        ]);
        let offsets: Vec<i64> = a.iter().map(|x| x.offset_ns).collect();
        assert_eq!(offsets, [50_000, 0, 0, 0, 1_000_000_000]);
        assert_eq!(a[0].source, AlignSource::Timestamp);
        assert_eq!(a[2].source, AlignSource::Missing);
        assert_eq!(a[3].source, AlignSource::Unparseable("yesterday".into()));
        assert_eq!(
            a[3].source.note(),
            "timestamp `yesterday` is not RFC 3339: aligned at 0"
        );
        assert_eq!(a[2].source.note(), "no meta timestamp: aligned at 0");
        // No parseable timestamp at all: everything at 0.
        let none = align(&[None, Some("")]);
        assert!(none
            .iter()
            .all(|x| x.offset_ns == 0 && x.source == AlignSource::Missing));
    }

    #[test]
    fn totals_follow_the_documented_rules() {
        let files = [
            FileTotalsInput {
                summary: summary(1),
                window: Some((0, 100)),
                offset_ns: 0,
            },
            FileTotalsInput {
                summary: summary(2),
                window: Some((10, 60)),
                offset_ns: 80,
            },
            FileTotalsInput {
                summary: summary(3),
                window: None,
                offset_ns: 1_000_000,
            },
        ];
        let t = totals(&files);
        assert_eq!(t.op_count, 6);
        assert_eq!(t.span_count, 12);
        assert_eq!(t.root_span_count, 3);
        assert_eq!(t.alloc_count, 18);
        assert_eq!(t.free_count, 6);
        assert_eq!(t.max_depth, 3);
        assert_eq!(t.peak_bytes, 300);
        // [0, 100] ∪ [90, 140] → 140; the file without a measured span takes no part.
        assert_eq!(t.total_ns, 140);
        // A negative manual offset moves the union's start.
        let mut moved = files;
        moved[1].offset_ns = -30;
        assert_eq!(totals(&moved).total_ns, 120); // [-20, 100]
                                                  // One file: its own total for a single measured span.
        assert_eq!(totals(&files[..1]).total_ns, 100);
        assert_eq!(totals(&[]), totals(&[]));
        assert_eq!(totals(&[]).total_ns, 0);
        assert_eq!(total_rule("peak_bytes"), "maximum over the files");
    }

    #[test]
    fn total_cards_say_their_rule_and_what_no_file_captured() {
        let t = TraceSummary {
            total_ns: 1_200_000,
            op_count: 7,
            max_depth: 4,
            peak_bytes: 2048,
            ..TraceSummary::default()
        };
        let mut off = trace_cards(&TraceSummary::default());
        crate::model::summary::mark_not_captured(
            &mut off,
            &candle_trace_schema::analysis::summary::NotCaptured {
                ops: None,
                memory: Some("not captured (allocator off)".into()),
                gradients: None,
            },
        );
        let on = trace_cards(&t);
        let shown = |cards: Vec<SummaryCard>| -> Vec<(String, String)> {
            cards.into_iter().map(|c| (c.field, c.display)).collect()
        };
        // One file with the allocator on: every total is a number.
        assert_eq!(
            shown(total_cards(&t, &[&off, &on])),
            [
                ("total_ns", "span 1.20 ms"),
                ("op_count", "7"),
                ("span_count", "0"),
                ("root_span_count", "0"),
                ("max_depth", "max 4"),
                ("alloc_count", "0"),
                ("free_count", "0"),
                ("peak_bytes", "max 2.00 KiB"),
            ]
            .map(|(f, d)| (f.to_string(), d.to_string()))
        );
        // No file captured memory: its three totals say so.
        let both_off = total_cards(&t, &[&off, &off]);
        let not: Vec<&str> = both_off
            .iter()
            .filter(|c| c.not_captured.is_some())
            .map(|c| c.field.as_str())
            .collect();
        assert_eq!(not, ["alloc_count", "free_count", "peak_bytes"]);
        assert_eq!(both_off[7].display, "not captured");
        assert_eq!(both_off[7].value, 2048);
    }

    #[test]
    fn model_of_the_compare_fixtures() {
        let dir = format!("{}/../tests/fixtures/compare", env!("CARGO_MANIFEST_DIR"));
        let read =
            |n: &str| TraceDocument::from_bytes(&std::fs::read(format!("{dir}/{n}")).unwrap());
        let m = MultiModel::new(vec![
            ("base".into(), read("base.trace6.jsonl")),
            ("cand".into(), read("cand.trace6.jsonl")),
        ]);
        // Same timestamp: both at 0; the union of two measured windows starting at 0 is the
        // longer one.
        assert_eq!(m.auto_offsets(), [0, 0]);
        let t = m.totals(&m.auto_offsets());
        let (a, b) = (&m.files[0].summary, &m.files[1].summary);
        assert_eq!(t.total_ns, a.total_ns.max(b.total_ns));
        assert_eq!(t.span_count, a.span_count + b.span_count);
        assert_eq!(m.totals(&[0, 1_000_000]).total_ns, 1_000_000 + b.total_ns);
    }

    #[test]
    fn offset_text_round_trips() {
        assert_eq!(offset_ns_of_us_text("50"), Some(50_000));
        assert_eq!(offset_ns_of_us_text(" -2.5 "), Some(-2_500));
        assert_eq!(offset_ns_of_us_text("x"), None);
        assert_eq!(offset_ns_of_us_text("inf"), None);
        assert_eq!(us_text_of_offset_ns(50_000), "50");
        assert_eq!(us_text_of_offset_ns(-2_500), "-2.5");
        assert_eq!(us_text_of_offset_ns(0), "0");
    }
}

//! Findings: a handful of statements that explain a run, each with its evidence and a link to
//! where it shows ([`trace_findings`], [`profile_findings`]).
//!
//! Every finding is computed by the existing analyses; the rules (SCHEMA.md has none):
//! - `gradients_missing` — [`gradient_groups`]: every module
//!   whose parameters got no gradient (all or some missing), nearest the loss first: the
//!   modules the forward ran (a span whose `module` is the gradients' module), the last one
//!   first and named in the title, then the others in file order (the first
//!   [`EVIDENCE_LINES`], then how many more); at stake: the parameters without one.
//! - `gradients_unusable` — [`gradient_groups`]: every module with parameters whose gradient
//!   arrived all zero or NaN / infinite (it cannot train them), those with a non-finite one
//!   first, then nearest the loss as for `gradients_missing`; the first named in the title.
//!   At stake: those parameters.
//! - `backward_short` / `backward_long` — [`phase_breakdown`]:
//!   backward below half the forward time (gradients reach few parameters), or above 3 × the
//!   forward time. At stake: forward − backward, or backward − 3 × forward. Needs a forward
//!   time above 0 and a backward span (an inference trace has none to call short).
//! - `dominant_phase` — [`phase_breakdown`]: a phase (forward, backward or optimizer) that
//!   takes more than half of the measured region (the step). At stake: the part by which it
//!   exceeds the rest of the step, phase − (region − phase). Evidence: each phase's time and
//!   share of the step. Links to the phase's row. Needs a training step: a region longer
//!   than 0 with time in at least two phases (an inference forward is all forward).
//! - `dominant_module` — [`module_rows`] by key: the deepest module key (most tree levels,
//!   [`level_ends`], then the largest time) whose total is more than half of the measured
//!   total. At stake: its total.
//! - `outlier_step` — [`StepSet`] over several step files: the step
//!   furthest from the median total, the phase and module paths that made it slow. At stake:
//!   its excess over the median.
//! - `memory_peak` — the [memory profile](crate::format::memory::MemoryProfile): the peak, the training
//!   step of the outermost stepped span open at the peak's timestamp (on the span clock), and
//!   the categories live at the peak (activations kept for backward, optimizer state,
//!   gradients …), largest first; of the category that step allocates (forward: activations,
//!   backward: gradients, optimizer: optimizer), the bytes freed after the peak and before
//!   the step's span ended are that step's temporaries, named apart (candle's AdamW makes a
//!   dozen per parameter and copies the result into its state). At stake: the peak bytes.
//! - `ttft_tail` — inference: TTFT p99 more than 2 × p50 ([`LatencyStats`](crate::analysis::requests::LatencyStats)),
//!   with the requests at or above the p90 and their `shape.prompt_tokens`; the request whose
//!   earliest event is the profile's earliest is named as the first (whatever the server sets up
//!   on its first request counts in its TTFT), in the title too when it is the slowest. At stake:
//!   (p99 − p50) µs in ns. Needs at least [`MIN_REQUESTS`] requests with a TTFT.
//! - `itl_drift` — inference: a request whose mean inter-token latency over the second half of
//!   its `itl_nanos` is more than 1.5 × the mean over the first half (integer means; the middle
//!   element of an odd count is left out). At stake: (second − first mean) × the second half's
//!   count. Needs at least 4 intervals in a request.
//!
//! - `batch_underfill` — [`Iterations`](crate::analysis::iterations::Iterations): batched
//!   forwards whose batch size is at most half the p50 batch size (p50 ≥ 2, at least
//!   [`MIN_ITERATIONS`] forwards). At stake: per such forward, its duration × (p50 − its
//!   size) / p50 (integer), summed: the forward time that served no one it could have.
//! - `queueing_ttft` — [`RequestAxis`](crate::analysis::request_axis::RequestAxis): over the
//!   requests with a TTFT (at least [`MIN_REQUESTS`]), their queueing (open → first forward)
//!   sums to more than half their TTFT. At stake: the queueing summed.
//! - `kv_pressure` — [`Resources`](crate::analysis::resources::Resources): per resource kind
//!   with deferrals or rejections; evidence: the peak against the capacity, each reason's count,
//!   the requests that waited. At stake: deferrals + rejections (a count).
//! - `resource_accounting` — the same, per kind with underflows or reservations never released.
//!   At stake: their number.
//!
//! Ranking: by the time at stake (largest first), then by the bytes at stake, then the rest
//! (by their count); at most [`MAX_FINDINGS`]. A rule that cannot decide says why in
//! [`Findings::notes`] instead of guessing.
//!
//! [`gradient_groups`]: crate::analysis::gradients::gradient_groups
//! [`phase_breakdown`]: crate::analysis::phases::phase_breakdown
//! [`module_rows`]: crate::analysis::modules::module_rows
//! [`level_ends`]: crate::analysis::modules::level_ends
//! [`StepSet`]: crate::analysis::steps::StepSet

use crate::analysis::sort;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::analysis::units::{format_bytes, format_ns};

mod profile;
mod trace;

pub use profile::{iteration_key, profile_findings};
pub use trace::trace_findings;

/// At most this many findings are shown.
pub const MAX_FINDINGS: usize = 5;

/// The gradient finding lists at most this many modules (then how many more).
pub const EVIDENCE_LINES: usize = 5;

/// The TTFT tail and ITL drift rules need this many requests (tail) or intervals (drift); so
/// does the queueing rule.
pub const MIN_REQUESTS: usize = 3;

/// The batch under-fill rule needs this many batched forwards.
pub const MIN_ITERATIONS: usize = 4;

/// Where a finding shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "snake_case")]
pub enum Link {
    /// A span: its id and the line of its `span_start`.
    Span {
        /// Span id.
        id: String,
        /// 1-based line.
        line: u64,
    },
    /// A row of a table (`modules`, `gradients`, `phases`, `steps`, `memory`, `requests`).
    Row {
        /// The table.
        table: String,
        /// The row's key.
        key: String,
    },
}

/// What is at stake in a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stake {
    /// Nanoseconds.
    Ns(u64),
    /// Bytes.
    Bytes(u64),
    /// A count: parameters, or deferrals and rejections, or accounting errors
    /// ([`stake_text`] says which).
    Count(u64),
}

impl Stake {
    fn rank(self) -> (u8, u64) {
        match self {
            Stake::Ns(v) => (0, v),
            Stake::Bytes(v) => (1, v),
            Stake::Count(v) => (2, v),
        }
    }
}

/// What a finding's stake says, for reading: `600 µs`, `4.00 KiB`, or a count with what it
/// counts (`2 parameter(s)`, `3 deferral(s) and rejection(s)`, `2 accounting error(s)`).
pub fn stake_text(rule: &str, stake: Stake) -> String {
    match stake {
        Stake::Ns(ns) => format_ns(ns),
        Stake::Bytes(b) => format_bytes(b),
        Stake::Count(n) => {
            let what = match rule {
                "kv_pressure" => "deferral(s) and rejection(s)",
                "resource_accounting" => "accounting error(s)",
                _ => "parameter(s)",
            };
            format!("{n} {what}")
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule's id (`backward_short` …).
    pub rule: String,
    /// One sentence.
    pub title: String,
    /// What is at stake.
    pub stake: Stake,
    /// The numbers behind it, one line each.
    pub evidence: Vec<String>,
    /// Where it shows.
    pub link: Option<Link>,
}

/// The findings of some files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    /// At most [`MAX_FINDINGS`], ranked (see the module docs).
    pub findings: Vec<Finding>,
    /// How many more the ranking left out.
    pub left_out: usize,
    /// Rules that had too little data, with why.
    pub notes: Vec<String>,
}

impl Findings {
    fn ranked(mut findings: Vec<Finding>, notes: Vec<String>) -> Findings {
        sort::by(&mut findings, |a, b| {
            let (ka, va) = a.stake.rank();
            let (kb, vb) = b.stake.rank();
            ka.cmp(&kb)
                .then(vb.cmp(&va))
                .then_with(|| a.rule.cmp(&b.rule))
        });
        let left_out = findings.len().saturating_sub(MAX_FINDINGS);
        findings.truncate(MAX_FINDINGS);
        Findings {
            findings,
            left_out,
            notes,
        }
    }
}

fn row(table: &str, key: &str) -> Option<Link> {
    Some(Link::Row {
        table: String::from(table),
        key: String::from(key),
    })
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return String::from("–");
    }
    format!("{:.0}%", part as f64 / whole as f64 * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::document::TraceDocument;
    use crate::format::profile::ProfileDocument;
    use alloc::string::ToString;
    use alloc::vec;

    /// A step of `forward_ns`, then `backward_ns`, lasting twice their sum (so that neither
    /// takes more than half of it).
    fn doc(forward_ns: u64, backward_ns: u64) -> TraceDocument {
        doc_step(forward_ns, backward_ns, 2 * (forward_ns + backward_ns))
    }

    /// A step of `total_ns` with a forward and a backward span.
    fn doc_step(forward_ns: u64, backward_ns: u64, total_ns: u64) -> TraceDocument {
        let text = format!(
            concat!(
                r#"{{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{{}}}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"f","parent_id":"s","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"f","duration_ns":{f}}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"b","parent_id":"s","name":"backward","start_ns":0,"span_kind":"function","step":"backward"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"b","duration_ns":{b}}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"s","duration_ns":{t}}}"#,
                "\n",
            ),
            f = forward_ns,
            b = backward_ns,
            t = total_ns,
        );
        TraceDocument::from_bytes(text.as_bytes())
    }

    fn rules(f: &Findings) -> Vec<(&str, Stake)> {
        f.findings
            .iter()
            .map(|x| (x.rule.as_str(), x.stake))
            .collect()
    }

    #[test]
    fn gradients_that_arrive_all_zero_or_not_finite_are_a_finding() {
        // `a` has two parameters, one all zero; `b` one NaN; `c` one missing (that is
        // `gradients_missing`'s); `d` one present. No spans: file order, non-finite first.
        let mut text = String::from(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
        );
        for (i, (key, state)) in [
            ("a.weight", "zero"),
            ("a.bias", "present"),
            ("b.weight", "non_finite"),
            ("c.weight", "missing"),
            ("d.weight", "present"),
        ]
        .iter()
        .enumerate()
        {
            text.push_str(&format!(
                "\n{{\"kind\":\"gradient\",\"event_id\":\"g{i}\",\"root\":\"varmap\",\"key\":\"{key}\",\"state\":\"{state}\"}}"
            ));
        }
        text.push('\n');
        let d = TraceDocument::from_bytes(text.as_bytes());
        let f = trace_findings(&[&d]);
        let bad = f
            .findings
            .iter()
            .find(|x| x.rule == "gradients_unusable")
            .unwrap();
        assert_eq!(
            bad.title,
            "2 parameter(s) in 2 module(s) get an unusable gradient (1 all zero, 1 NaN or infinite); first: b"
        );
        assert_eq!(bad.stake, Stake::Count(2));
        assert_eq!(
            bad.evidence,
            [
                "b: 1 NaN or infinite of 1 parameter(s)",
                "a: 1 all zero of 2 parameter(s)"
            ]
        );
        assert_eq!(
            bad.link,
            Some(Link::Row {
                table: String::from("gradients"),
                key: String::from("b")
            })
        );
    }

    #[test]
    fn the_memory_peak_tells_a_pass_s_temporaries_from_what_it_keeps() {
        // forward 0–100, backward 100–200, optimizer 200–400. Live at the optimizer's peak
        // (t = 230): a forward activation a1 (1000 B, never freed), a backward gradient g1
        // (2000 B, freed at 390, after the backward: kept), optimizer allocations o1 (4000 B)
        // and o2 (3000 B) freed at 300, inside the optimizer, and o3 (1000 B, never freed).
        // a2 (500 B) is freed at 50, before the peak. Peak 11000 B: the optimizer step's
        // temporaries 7000 (64%), gradients 2000 (18%), activations 1000 (9%), optimizer state
        // 1000 (9%); ties keep the categories' order.
        let mut lines = vec![
            String::from(
                r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            ),
            String::from(
                r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            ),
        ];
        for (id, step, start, ns) in [
            ("f", "forward", 0, 100),
            ("b", "backward", 100, 100),
            ("o", "optimizer", 200, 200),
        ] {
            lines.push(format!(
                r#"{{"kind":"span_start","id":"{id}","parent_id":"s","name":"{step}","start_ns":{start},"span_kind":"function","step":"{step}"}}"#
            ));
            lines.push(format!(
                r#"{{"kind":"span_end","id":"{id}","duration_ns":{ns}}}"#
            ));
        }
        lines.push(String::from(
            r#"{"kind":"span_end","id":"s","duration_ns":400}"#,
        ));
        for (ts, tensor, span, bytes, action, category) in [
            (10, "a1", "f", 1000, "alloc", "activation"),
            (20, "a2", "f", 500, "alloc", "activation"),
            (50, "a2", "f", 500, "free", "activation"),
            (120, "g1", "b", 2000, "alloc", "gradient"),
            (210, "o1", "o", 4000, "alloc", "optimizer"),
            (220, "o2", "o", 3000, "alloc", "optimizer"),
            (230, "o3", "o", 1000, "alloc", "optimizer"),
            (300, "o1", "o", 4000, "free", "optimizer"),
            (300, "o2", "o", 3000, "free", "optimizer"),
            (390, "g1", "o", 2000, "free", "gradient"),
        ] {
            lines.push(format!(
                r#"{{"kind":"memory","timestamp_ns":{ts},"tensor_id":"{tensor}","span_id":"{span}","device":"cpu","bytes":{bytes},"action":"{action}","dtype":"u8","category":"{category}"}}"#
            ));
        }
        let text = lines.join("\n") + "\n";
        let d = TraceDocument::from_bytes(text.as_bytes());
        assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
        let f = trace_findings(&[&d]);
        let peak = f.findings.iter().find(|x| x.rule == "memory_peak").unwrap();
        assert_eq!(
            peak.title,
            "memory peaks at 10.7 KiB in optimizer, held mostly by the optimizer step's temporaries (freed before it ended)"
        );
        assert_eq!(
            peak.evidence,
            [
                "the optimizer step's temporaries (freed before it ended): 6.84 KiB (64%)",
                "gradients: 1.95 KiB (18%)",
                "activations (kept for backward): 1000 B (9%)",
                "optimizer state: 1000 B (9%)",
            ]
        );
    }

    #[test]
    fn backward_against_forward() {
        // 100 forward, 400 backward: 400 > 3 × 100, at stake 400 − 300 = 100.
        let d = doc(100, 400);
        let f = trace_findings(&[&d]);
        assert_eq!(rules(&f), [("backward_long", Stake::Ns(100))]);
        assert_eq!(
            f.findings[0].title,
            "backward takes 4.0× the forward time, more than 3×"
        );
        // 248 forward and 6000 backward: 24.19…, to one decimal.
        assert_eq!(
            trace_findings(&[&doc(248, 6000)]).findings[0].title,
            "backward takes 24.2× the forward time, more than 3×"
        );
        // 100 and 300 (exactly 3×) and 100 and 50 (exactly half): neither rule.
        assert!(trace_findings(&[&doc(100, 300)]).findings.is_empty());
        assert!(trace_findings(&[&doc(100, 50)]).findings.is_empty());
        // 100 and 49: below half, at stake 51.
        assert_eq!(
            rules(&trace_findings(&[&doc(100, 49)])),
            [("backward_short", Stake::Ns(51))]
        );
        // 1001 and 500: under half (500.5), though `1001 / 2` rounds to 500.
        assert_eq!(
            rules(&trace_findings(&[&doc(1001, 500)])),
            [("backward_short", Stake::Ns(501))]
        );
        // No backward span at all (an inference trace): no finding, a note.
        let text = concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"infer","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"s","name":"generate","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"span_start","id":"f","parent_id":"s","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}"#,
            "\n",
            r#"{"kind":"span_end","id":"f","duration_ns":900}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":1000}"#,
            "\n",
        );
        let f = trace_findings(&[&TraceDocument::from_bytes(text.as_bytes())]);
        assert!(f.findings.is_empty(), "{:?}", f.findings);
        assert!(f.notes.contains(&String::from(
            "backward_short/backward_long: no backward span to compare with"
        )));
        // No forward time: the rule says it cannot compare.
        let f = trace_findings(&[&doc(0, 40)]);
        assert!(f.findings.is_empty());
        assert!(f.notes.contains(&String::from(
            "backward_short/backward_long: no forward time to compare with"
        )));
    }

    #[test]
    fn a_phase_that_takes_most_of_the_step() {
        // An 8-layer model's step as issue #37 measured it, rounded: forward 50 ms, backward
        // 200 ms (4 × forward), optimizer 792 ms of a 1070 ms step; other 1070 − 1042 = 28 ms.
        let ms = 1_000_000u64;
        let text = format!(
            concat!(
                r#"{{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{{}}}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"f","parent_id":"s","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"f","duration_ns":{f}}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"b","parent_id":"s","name":"backward","start_ns":{f},"span_kind":"function","step":"backward"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"b","duration_ns":{b}}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"o","parent_id":"s","name":"optimizer","start_ns":{fb},"span_kind":"function","step":"optimizer"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"o","duration_ns":{o}}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"s","duration_ns":{t}}}"#,
                "\n",
            ),
            f = 50 * ms,
            b = 200 * ms,
            fb = 250 * ms,
            o = 792 * ms,
            t = 1070 * ms,
        );
        let d = TraceDocument::from_bytes(text.as_bytes());
        assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
        let f = trace_findings(&[&d]);
        // Optimizer: 792 − (1070 − 792) = 514 ms at stake, above backward_long's
        // 200 − 3 × 50 = 50 ms.
        assert_eq!(
            rules(&f),
            [
                ("dominant_phase", Stake::Ns(514 * ms)),
                ("backward_long", Stake::Ns(50 * ms))
            ]
        );
        let top = &f.findings[0];
        // 792 / 1070 = 74.0 %.
        assert_eq!(top.title, "optimizer takes 74% of the step");
        // 50 / 1070 = 4.7 %, 200 / 1070 = 18.7 %, 28 / 1070 = 2.6 %.
        assert_eq!(
            top.evidence,
            [
                "forward 50.0 ms (5%)",
                "backward 200 ms (19%)",
                "optimizer 792 ms (74%)",
                "other 28.0 ms (3%)",
                "measured step 1.07 s",
            ]
        );
        assert_eq!(
            top.link,
            Some(Link::Row {
                table: "phases".into(),
                key: "optimizer".into()
            })
        );
        // Exactly half is not more than half: forward 500 (backward 300) of a 1000 ns step.
        assert_eq!(rules(&trace_findings(&[&doc_step(500, 300, 1000)])), []);
        // 501 of 1000: at stake 501 − 499 = 2.
        assert_eq!(
            rules(&trace_findings(&[&doc_step(501, 300, 1000)])),
            [("dominant_phase", Stake::Ns(2))]
        );
    }

    /// A step whose forward runs `net.a` at 100 and 400 ns and `net.c` at 300 (`with_spans`),
    /// and whose backward runs `net.d`; gradients in file order: `net.b` missing, `net.c` one
    /// of two missing, `net.a` missing, `net.d` missing, `net.e` present.
    fn gradients_doc(with_spans: bool) -> TraceDocument {
        let module = |id: &str, m: &str, start: u64, step: &str, parent: &str| {
            format!(
                concat!(
                    r#"{{"kind":"span_start","id":"{id}","parent_id":"{p}","name":"linear","start_ns":{s},"span_kind":"module","step":"{step}","module":"{m}"}}"#,
                    "\n",
                    r#"{{"kind":"span_end","id":"{id}","duration_ns":50}}"#,
                    "\n"
                ),
                id = id,
                p = parent,
                s = start,
                step = step,
                m = m,
            )
        };
        let mut text = format!(
            "{}\n{}\n{}\n",
            crate::test_lines::META,
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            r#"{"kind":"span_start","id":"f","parent_id":"s","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}"#,
        );
        if with_spans {
            text.push_str(&module("a1", "net.a", 100, "forward", "f"));
            text.push_str(&module("c1", "net.c", 300, "forward", "f"));
            text.push_str(&module("a2", "net.a", 400, "forward", "f"));
        }
        text.push_str(concat!(
            r#"{"kind":"span_end","id":"f","duration_ns":600}"#,
            "\n",
            r#"{"kind":"span_start","id":"b","parent_id":"s","name":"backward","start_ns":600,"span_kind":"function","step":"backward"}"#,
            "\n",
        ));
        if with_spans {
            text.push_str(&module("d1", "net.d", 700, "backward", "b"));
        }
        text.push_str(concat!(
            r#"{"kind":"span_end","id":"b","duration_ns":300}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":1000}"#,
            "\n",
        ));
        for (i, (key, state)) in [
            ("net.b.weight", "missing"),
            ("net.c.weight", "missing"),
            ("net.c.bias", "present"),
            ("net.a.weight", "missing"),
            ("net.d.weight", "missing"),
            ("net.e.weight", "present"),
        ]
        .into_iter()
        .enumerate()
        {
            text.push_str(&gradient_line(i, "varmap", key, state));
        }
        let d = TraceDocument::from_bytes(text.as_bytes());
        assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
        d
    }

    /// A `gradient` line (with its `\n`); a present gradient has norm 1.
    fn gradient_line(i: usize, root: &str, key: &str, state: &str) -> String {
        let norm = if state == "present" {
            r#","norm":1.0"#
        } else {
            ""
        };
        let mut line = format!(
            r#"{{"kind":"gradient","event_id":"g{i}","root":"{root}","key":"{key}","state":"{state}"{norm}}}"#
        );
        line.push('\n');
        line
    }

    /// The document's `gradients_missing` finding.
    fn gradients(d: &TraceDocument) -> Finding {
        trace_findings(&[d])
            .findings
            .into_iter()
            .find(|x| x.rule == "gradients_missing")
            .expect("a gradients_missing finding")
    }

    #[test]
    fn missing_gradients_nearest_the_loss_first() {
        // The forward ran net.a last (its second call, at 400), net.c before it (300); net.b
        // ran in no span, and net.d only in the backward: they follow in file order.
        let f = gradients(&gradients_doc(true));
        assert_eq!(
            f.title,
            "4 parameter(s) in 4 module(s) get no gradient; the last of them in the forward: net.a"
        );
        assert_eq!(f.stake, Stake::Count(4));
        assert_eq!(
            f.evidence,
            [
                "net.a: 1 of 1 parameter(s) missing",
                "net.c: 1 of 2 parameter(s) missing",
                "net.b: 1 of 1 parameter(s) missing",
                "net.d: 1 of 1 parameter(s) missing",
            ]
        );
        assert_eq!(
            f.link,
            Some(Link::Row {
                table: "gradients".into(),
                key: "net.a".into()
            })
        );
        // Without module spans nothing says which came last: file order, and no claim.
        let f = gradients(&gradients_doc(false));
        assert_eq!(f.title, "4 parameter(s) in 4 module(s) get no gradient");
        assert_eq!(
            f.evidence,
            [
                "net.b: 1 of 1 parameter(s) missing",
                "net.c: 1 of 2 parameter(s) missing",
                "net.a: 1 of 1 parameter(s) missing",
                "net.d: 1 of 1 parameter(s) missing",
            ]
        );
    }

    #[test]
    fn missing_gradients_name_their_root_only_among_several() {
        let mut text = format!(
            "{}\n{}\n{}\n",
            crate::test_lines::META,
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            r#"{"kind":"span_end","id":"s","duration_ns":1000}"#,
        );
        for (i, (root, key, state)) in [
            ("generator", "net.a.weight", "missing"),
            ("critic", "net.a.weight", "missing"),
            ("critic", "bias", "missing"),
            ("critic", "net.b.weight", "present"),
        ]
        .into_iter()
        .enumerate()
        {
            text.push_str(&gradient_line(i, root, key, state));
        }
        let d = TraceDocument::from_bytes(text.as_bytes());
        assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
        let f = gradients(&d);
        assert_eq!(f.title, "3 parameter(s) in 3 module(s) get no gradient");
        assert_eq!(
            f.evidence,
            [
                "generator.net.a: 1 of 1 parameter(s) missing",
                "critic.net.a: 1 of 1 parameter(s) missing",
                "critic (top level): 1 of 1 parameter(s) missing",
            ]
        );
        // One root: its name is left out, as in the gradients tab (the top level included).
        let one = text.replace(
            r#""root":"generator","key":"net.a.weight""#,
            r#""root":"critic","key":"net.c.weight""#,
        );
        let f = gradients(&TraceDocument::from_bytes(one.as_bytes()));
        assert_eq!(f.title, "3 parameter(s) in 3 module(s) get no gradient");
        assert_eq!(
            f.evidence,
            [
                "net.c: 1 of 1 parameter(s) missing",
                "net.a: 1 of 1 parameter(s) missing",
                "(top level): 1 of 1 parameter(s) missing",
            ]
        );
    }

    #[test]
    fn no_documents_no_findings() {
        assert_eq!(trace_findings(&[]), Findings::default());
    }

    fn profile_rules(doc: &ProfileDocument) -> Vec<(String, Stake)> {
        profile_findings(doc)
            .findings
            .into_iter()
            .map(|f| (f.rule, f.stake))
            .collect()
    }

    #[test]
    fn batch_underfill_by_hand() {
        use crate::analysis::iterations::tests::iteration_line;
        // Batch sizes 4, 4, 2, 1, 4, 4 of 1 ms each: sorted [1, 2, 4, 4, 4, 4], p50 (rank 3) 4.
        // At most half of it: the 2 (1 ms × 2/4 = 0.5 ms at stake) and the 1 (0.75 ms).
        let ids = ["a", "b", "c", "d"];
        let text: String = [4usize, 4, 2, 1, 4, 4]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let parts: Vec<(&str, u64, u64, u64)> =
                    ids[..n].iter().map(|id| (*id, 0, 1, 1)).collect();
                iteration_line(
                    "e",
                    i as u64,
                    1_767_225_600_000_000_000 + i as i64 * 1_000_000,
                    1_000_000,
                    &parts,
                )
            })
            .collect();
        let doc = crate::format::profile::read_profile(text.as_bytes());
        let f = profile_findings(&doc);
        let under = f
            .findings
            .iter()
            .find(|x| x.rule == "batch_underfill")
            .unwrap();
        assert_eq!(under.stake, Stake::Ns(1_250_000));
        assert_eq!(
            under.title,
            "2 of 6 forwards ran at most half the usual batch of 4"
        );
        assert_eq!(
            under.evidence[0],
            "batch size p50 4, p90 4 over 6 forward(s)"
        );
        assert_eq!(under.evidence[2], "e iteration 2: 2 request(s), 1.00 ms");
        assert_eq!(
            under.link,
            Some(Link::Row {
                table: "iterations".into(),
                key: "e/2".into()
            })
        );
        // Three forwards: too few, a note.
        let three: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
        let f = profile_findings(&crate::format::profile::read_profile(three.as_bytes()));
        assert!(f
            .notes
            .iter()
            .any(|n| n.starts_with("batch_underfill: 3 batched forward(s)")));
    }

    #[test]
    fn a_ttft_tail_led_by_the_first_request_says_so() {
        use crate::analysis::request_axis::tests::request;
        // TTFTs a 5000, b 1000, c 1100, d 1200 µs, a opened first: sorted 1000, 1100, 1200,
        // 5000, p50 (rank 2) 1100, p90 (rank ceil 3.6 = 4) and p99 5000 > 2 × 1100.
        let ms: i64 = 1_000_000;
        let text = [
            request("a", 0, "main", 6000, &[5_000_000, 5_500_000]),
            request("b", 10 * ms, "main", 2000, &[1_000_000, 1_500_000]),
            request("c", 20 * ms, "main", 2000, &[1_100_000, 1_600_000]),
            request("d", 30 * ms, "main", 2000, &[1_200_000, 1_700_000]),
        ]
        .concat();
        let doc = crate::format::profile::read_profile(text.as_bytes());
        let f = profile_findings(&doc);
        let tail = f.findings.iter().find(|x| x.rule == "ttft_tail").unwrap();
        assert_eq!(
            tail.title,
            "TTFT p99 (5000 µs) is 4.5× the p50 (1100 µs); the slowest is the profile's first request"
        );
        assert_eq!(
            tail.evidence[1],
            "a: TTFT 5000 µs, prompt 4 tokens; the profile's first request (what the server set \
             up on its first request counts in its TTFT)"
        );
        // The same TTFTs with d opened first: nothing said of a.
        let text = [
            request("a", 0, "main", 6000, &[5_000_000, 5_500_000]),
            request("b", 10 * ms, "main", 2000, &[1_000_000, 1_500_000]),
            request("c", 20 * ms, "main", 2000, &[1_100_000, 1_600_000]),
            request("d", -ms, "main", 2000, &[1_200_000, 1_700_000]),
        ]
        .concat();
        let f = profile_findings(&crate::format::profile::read_profile(text.as_bytes()));
        let tail = f.findings.iter().find(|x| x.rule == "ttft_tail").unwrap();
        assert_eq!(tail.title, "TTFT p99 (5000 µs) is 4.5× the p50 (1100 µs)");
        assert_eq!(tail.evidence[1], "a: TTFT 5000 µs, prompt 4 tokens");
    }

    #[test]
    fn queueing_that_dominates_ttft_by_hand() {
        use crate::analysis::iterations::tests::iteration_line;
        use crate::analysis::request_axis::tests::{request, T0};
        // a queues 2 ms (TTFT 3 ms), b 1 ms (TTFT 2 ms), c 1.5 ms (TTFT 2.5 ms): 4.5 of 7.5 ms.
        let ms: i64 = 1_000_000;
        let ums: u64 = 1_000_000;
        let text = [
            request("a", 0, "main", 4000, &[3 * ums, 4 * ums]),
            request("b", ms, "main", 3000, &[2 * ums, 3 * ums]),
            request("c", 3 * ms / 2, "main", 3000, &[5 * ums / 2, 3 * ums]),
            iteration_line("e", 0, T0 + 2 * ms, ums, &[("a", 4, 0, 1), ("b", 4, 0, 1)]),
            iteration_line(
                "e",
                1,
                T0 + 3 * ms,
                ums,
                &[("a", 0, 1, 1), ("b", 0, 1, 1), ("c", 4, 0, 1)],
            ),
            iteration_line("e", 2, T0 + 4 * ms, ums / 2, &[("c", 0, 1, 1)]),
        ]
        .concat();
        let doc = crate::format::profile::read_profile(text.as_bytes());
        let f = profile_findings(&doc);
        let q = f
            .findings
            .iter()
            .find(|x| x.rule == "queueing_ttft")
            .unwrap();
        assert_eq!(q.stake, Stake::Ns(4_500_000));
        assert_eq!(
            q.title,
            "requests wait in the queue for 60% of their time to first token"
        );
        assert_eq!(
            q.evidence[0],
            "queued 4.50 ms of 7.50 ms time to first token over 3 request(s)"
        );
        assert_eq!(q.evidence[1], "queue p50 1.50 ms, TTFT p50 2.50 ms");
        assert_eq!(q.evidence[2], "a: queued 2.00 ms of its 3.00 ms TTFT");
        assert_eq!(
            q.link,
            Some(Link::Row {
                table: "requests".into(),
                key: "a".into()
            })
        );
    }

    #[test]
    fn kv_pressure_and_accounting_errors_by_hand() {
        use crate::analysis::resources::tests::resource_line;
        let step = |r: &str, at: i64, action: &str, amount: i64, before: i64, after: i64| {
            resource_line(
                r,
                at,
                "request",
                &format!(
                    r#""action":"{action}","amount":{amount},"before":{before},"after":{after},"capacity":10"#
                ),
            )
        };
        let defer = |r: &str, at: i64| {
            resource_line(
                r,
                at,
                "request",
                r#""action":"defer","amount":6,"before":6,"after":6,"capacity":10,"reason":"kv_blocks: 6 needed, 4 free""#,
            )
        };
        let text = [
            step("a", 10, "reserve", 6, 0, 6),
            defer("b", 20),
            defer("b", 30),
            step("a", 40, "release", 8, 6, 0),
            step("b", 50, "reserve", 6, 0, 6),
        ]
        .concat();
        let doc = crate::format::profile::read_profile(text.as_bytes());
        assert_eq!(
            profile_rules(&doc),
            [
                ("kv_pressure".to_string(), Stake::Count(2)),
                ("resource_accounting".to_string(), Stake::Count(2))
            ]
        );
        let f = profile_findings(&doc);
        let kv = &f.findings[0];
        assert_eq!(
            kv.title,
            "kv_blocks: 2 deferral(s) and 0 rejection(s) for want of capacity"
        );
        assert_eq!(
            kv.evidence,
            [
                "peak 6 of 10 in use (60%)",
                "2 × defer: kv_blocks: 6 needed, 4 free",
                "1 request(s) waited or were refused: b",
            ]
        );
        // a released 8 of its 6; b never released its 6.
        assert_eq!(
            f.findings[1].evidence,
            [
                "line 4: a went 2 below 0 (release_exceeds_holding)",
                "b still holds 6 at the end"
            ]
        );
    }
}

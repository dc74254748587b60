//! Findings: a handful of statements that explain a run, each with its evidence and a link to
//! where it shows ([`trace_findings`], [`profile_findings`]).
//!
//! Every finding is computed by the existing analyses; the rules (SCHEMA.md has none):
//! - `gradients_missing` — [`gradient_groups`]: every module
//!   whose parameters got no gradient (all or some missing), grouped by the module where the
//!   flow stops (the first [`EVIDENCE_LINES`] in file order, then how many more); at stake:
//!   the parameters without one.
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
//!   gradients …), largest first. At stake: the peak bytes.
//! - `ttft_tail` — inference: TTFT p99 more than 2 × p50 ([`LatencyStats`](crate::analysis::requests::LatencyStats)),
//!   with the requests at or above the p90 and their `shape.prompt_tokens`. At stake:
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

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::analysis::gradients::{gradient_groups, GradientFlow};
use crate::analysis::modules::{level_ends, module_rows, ModuleGrouping, ModulePaths};
use crate::analysis::phases::phase_breakdown;
use crate::analysis::steps::StepSet;
use crate::analysis::units::{format_bytes, format_ns};
use crate::format::document::TraceDocument;
use crate::format::events::{Pass, TensorCategory};
use crate::format::profile::ProfileDocument;

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
        findings.sort_by(|a, b| {
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

fn span_link(doc: &TraceDocument, i: usize) -> Option<Link> {
    doc.spans.get(i).map(|s| Link::Span {
        id: s.id.to_string(),
        line: s.line,
    })
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

/// Findings of one or several trace files (several: the steps of one run; the single-file
/// rules read the first step in capture order).
pub fn trace_findings(docs: &[&TraceDocument]) -> Findings {
    let mut found = Vec::new();
    let mut notes = Vec::new();
    let set = StepSet::of(docs);
    let Some(first) = set.steps.first().and_then(|s| docs.get(s.input)) else {
        return Findings::default();
    };
    let doc: &TraceDocument = first;

    // Gradients that never arrive.
    let groups = gradient_groups(&doc.gradients);
    let stopped: Vec<_> = groups
        .iter()
        .filter(|g| g.flow != GradientFlow::NoneMissing)
        .collect();
    if doc.gradients.is_empty() {
        notes.push(String::from(
            "gradients_missing: the trace has no gradient records",
        ));
    } else if !stopped.is_empty() {
        let missing: u64 = stopped.iter().map(|g| g.counts.missing).sum();
        let first_stop = stopped[0];
        let module = |g: &crate::analysis::gradients::GradientGroup| {
            if g.module.is_empty() {
                format!("{} (top level)", g.root)
            } else {
                format!("{}.{}", g.root, g.module)
            }
        };
        found.push(Finding {
            rule: String::from("gradients_missing"),
            title: format!(
                "{missing} parameter(s) get no gradient; the flow stops at {}",
                module(first_stop)
            ),
            stake: Stake::Count(missing),
            evidence: {
                let mut lines: Vec<String> = stopped
                    .iter()
                    .take(EVIDENCE_LINES)
                    .map(|g| {
                        format!(
                            "{}: {} of {} parameter(s) missing",
                            module(g),
                            g.counts.missing,
                            g.params
                        )
                    })
                    .collect();
                if stopped.len() > EVIDENCE_LINES {
                    lines.push(format!(
                        "and {} more module(s)",
                        stopped.len() - EVIDENCE_LINES
                    ));
                }
                lines
            },
            link: row("gradients", &first_stop.module),
        });
    }

    // Backward against forward.
    match phase_breakdown(doc) {
        None => notes.push(String::from(
            "backward_short/backward_long: no measured span, so no phases",
        )),
        Some(b) if b.forward_ns == 0 => notes.push(String::from(
            "backward_short/backward_long: no forward time to compare with",
        )),
        // An inference trace, or a capture without the backward step: nothing to call short.
        Some(_) if !doc.spans.iter().any(|s| s.pass == Some(Pass::Backward)) => notes.push(
            String::from("backward_short/backward_long: no backward span to compare with"),
        ),
        Some(b) => {
            let evidence = alloc::vec![
                format!("forward {}", format_ns(b.forward_ns)),
                format!("backward {}", format_ns(b.backward_ns)),
            ];
            let link = span_link(doc, b.region_span);
            // Under half, exactly: 500 of 1001 is short (`forward / 2` would round to 500).
            if b.backward_ns.saturating_mul(2) < b.forward_ns {
                found.push(Finding {
                    rule: String::from("backward_short"),
                    title: format!(
                        "backward takes {} of the forward time: gradients reach few parameters",
                        percent(b.backward_ns, b.forward_ns)
                    ),
                    stake: Stake::Ns(b.forward_ns - b.backward_ns),
                    evidence,
                    link,
                });
            } else if b.backward_ns > b.forward_ns.saturating_mul(3) {
                found.push(Finding {
                    rule: String::from("backward_long"),
                    title: format!(
                        "backward takes {} of the forward time, more than 3×",
                        percent(b.backward_ns, b.forward_ns)
                    ),
                    stake: Stake::Ns(b.backward_ns - b.forward_ns.saturating_mul(3)),
                    evidence,
                    link,
                });
            }
        }
    }

    // One phase taking most of the step.
    if let Some(b) = phase_breakdown(doc).filter(|b| b.region_ns > 0) {
        let phases = [
            (Pass::Forward, b.forward_ns),
            (Pass::Backward, b.backward_ns),
            (Pass::Optimizer, b.optimizer_ns),
        ];
        // A training step (two phases with time): an inference forward is all forward.
        let timed = phases.iter().filter(|(_, ns)| *ns > 0).count();
        if let Some(&(step, ns)) = phases
            .iter()
            .find(|(_, ns)| timed >= 2 && ns.saturating_mul(2) > b.region_ns)
        {
            let mut evidence: Vec<String> = phases
                .iter()
                .map(|(s, ns)| {
                    format!(
                        "{} {} ({})",
                        s.as_str(),
                        format_ns(*ns),
                        percent(*ns, b.region_ns)
                    )
                })
                .collect();
            evidence.push(format!(
                "other {} ({})",
                format_ns(b.other_ns),
                percent(b.other_ns, b.region_ns)
            ));
            evidence.push(format!("measured step {}", format_ns(b.region_ns)));
            found.push(Finding {
                rule: String::from("dominant_phase"),
                title: format!(
                    "{} takes {} of the step",
                    step.as_str(),
                    percent(ns, b.region_ns)
                ),
                stake: Stake::Ns(ns.saturating_sub(b.region_ns.saturating_sub(ns))),
                evidence,
                link: row("phases", step.as_str()),
            });
        }
    }

    // One module taking most of the step.
    let total = doc.summary().total_ns;
    let paths = ModulePaths::new(doc);
    let rows = module_rows(doc, &paths, ModuleGrouping::Path);
    let depth = |key: &str| level_ends(key, paths.names()).len();
    if let Some(r) = rows
        .iter()
        .filter(|r| total > 0 && r.total_ns > total / 2)
        .max_by(|a, b| {
            depth(&a.key)
                .cmp(&depth(&b.key))
                .then(a.total_ns.cmp(&b.total_ns))
                .then_with(|| b.key.cmp(&a.key))
        })
    {
        found.push(Finding {
            rule: String::from("dominant_module"),
            title: format!("{} takes {} of the step", r.key, percent(r.total_ns, total)),
            stake: Stake::Ns(r.total_ns),
            evidence: alloc::vec![
                format!(
                    "{}: {} in {} call(s)",
                    r.key,
                    format_ns(r.total_ns),
                    r.calls
                ),
                format!("measured total {}", format_ns(total)),
            ],
            link: row("modules", &r.key),
        });
    }

    // An outlier step.
    if docs.len() > 1 {
        if let Some(why) = &set.outliers_reason {
            notes.push(format!("outlier_step: {why}"));
        } else if let Some(o) = set.outliers.first() {
            let step = o
                .capture_step
                .map_or_else(|| String::from("(no meta)"), |s| s.to_string());
            let mut evidence = Vec::new();
            if let Some(t) = &set.total {
                evidence.push(format!(
                    "step {step}: {} against a median of {} (MAD {})",
                    format_ns(o.total_ns),
                    format_ns(t.median),
                    format_ns(t.mad)
                ));
            }
            if let Some((phase, ns)) = &o.phase {
                evidence.push(format!("{phase} {} above its median", format_ns(*ns)));
            }
            for (path, ns) in &o.module_paths {
                evidence.push(format!("{path} {} above its median", format_ns(*ns)));
            }
            let why = o
                .phase
                .as_ref()
                .map_or_else(String::new, |(p, _)| format!(", mostly in {p}"));
            found.push(Finding {
                rule: String::from("outlier_step"),
                title: format!(
                    "step {step} is an outlier: {} from the median{why}",
                    format_ns(o.excess_ns.unsigned_abs())
                ),
                stake: Stake::Ns(o.excess_ns.unsigned_abs()),
                evidence,
                link: row("steps", &step),
            });
        }
    }

    // The memory peak.
    let m = &doc.memory_profile;
    if let Some(why) = crate::analysis::summary::NotCaptured::of(doc).memory {
        notes.push(format!("memory_peak: memory {why}"));
    } else if m.peak_bytes > 0 {
        let phase = m.peak_timestamp_ns.and_then(|ts| step_at(doc, ts));
        let mut held: Vec<(TensorCategory, u64)> = TensorCategory::ALL
            .iter()
            .zip(m.peak_by_category)
            .filter(|(_, b)| *b > 0)
            .map(|(c, b)| (*c, b))
            .collect();
        held.sort_by_key(|h| core::cmp::Reverse(h.1));
        let holder = |c: TensorCategory| match c {
            TensorCategory::Activation => "activations (kept for backward)",
            TensorCategory::Optimizer => "optimizer state",
            TensorCategory::Gradient => "gradients",
            TensorCategory::Parameter => "parameters",
            TensorCategory::Other => "other",
        };
        let held_by = held.first().map_or("nothing recorded", |(c, _)| holder(*c));
        found.push(Finding {
            rule: String::from("memory_peak"),
            title: format!(
                "memory peaks at {}{}, held mostly by {held_by}",
                format_bytes(m.peak_bytes),
                phase.map_or_else(String::new, |p| format!(" in {p}"))
            ),
            stake: Stake::Bytes(m.peak_bytes),
            evidence: held
                .iter()
                .map(|(c, b)| {
                    format!(
                        "{}: {} ({})",
                        holder(*c),
                        format_bytes(*b),
                        percent(*b, m.peak_bytes)
                    )
                })
                .collect(),
            link: row("memory", "peak"),
        });
    }
    Findings::ranked(found, notes)
}

/// The step (`forward` …) of the outermost stepped span open at `ts`, or `None`.
fn step_at(doc: &TraceDocument, ts: u64) -> Option<&'static str> {
    doc.spans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.pass.is_some() && s.start_ns <= ts && ts < s.end_ns())
        .min_by_key(|(i, _)| doc.tree.depth.get(*i).copied().unwrap_or(u32::MAX))
        .and_then(|(_, s)| s.pass)
        .map(|s| match s {
            Pass::Forward => "forward",
            Pass::Backward => "backward",
            Pass::Optimizer => "optimizer",
        })
}

/// Findings of an inference profile.
pub fn profile_findings(doc: &ProfileDocument) -> Findings {
    let mut found = Vec::new();
    let mut notes = Vec::new();
    let requests = doc.requests();

    let with_ttft: Vec<_> = requests.iter().filter(|r| r.ttft_us.is_some()).collect();
    match doc.latency().ttft_us {
        Some(p) if with_ttft.len() >= MIN_REQUESTS => {
            if p.p99 > p.p50.saturating_mul(2) {
                let mut slow: Vec<(&str, u64, Option<u64>)> = with_ttft
                    .iter()
                    .filter_map(|r| {
                        let t = r.ttft_us?;
                        (t >= p.p90)
                            .then(|| (r.request_id.as_str(), t, prompt_tokens(doc, &r.request_id)))
                    })
                    .collect();
                slow.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
                let mut evidence = alloc::vec![format!(
                    "TTFT p50 {} µs, p90 {} µs, p99 {} µs over {} request(s)",
                    p.p50, p.p90, p.p99, p.count
                )];
                for (id, t, prompt) in &slow {
                    evidence.push(format!(
                        "{id}: TTFT {t} µs, prompt {}",
                        prompt.map_or_else(
                            || String::from("length unknown"),
                            |n| format!("{n} tokens")
                        )
                    ));
                }
                let median_prompt = {
                    let mut all: Vec<u64> = with_ttft
                        .iter()
                        .filter_map(|r| prompt_tokens(doc, &r.request_id))
                        .collect();
                    all.sort_unstable();
                    crate::analysis::percentiles::nearest_rank(&all, 50)
                };
                if let Some(n) = median_prompt {
                    evidence.push(format!("median prompt {n} tokens"));
                }
                found.push(Finding {
                    rule: String::from("ttft_tail"),
                    title: format!(
                        "TTFT p99 ({} µs) is {:.1}× the p50 ({} µs)",
                        p.p99,
                        p.p99 as f64 / p.p50.max(1) as f64,
                        p.p50
                    ),
                    stake: Stake::Ns((p.p99 - p.p50).saturating_mul(1000)),
                    evidence,
                    link: slow.first().and_then(|(id, _, _)| row("requests", id)),
                });
            }
        }
        _ => notes.push(format!(
            "ttft_tail: {} request(s) with a TTFT, the rule needs {MIN_REQUESTS}",
            with_ttft.len()
        )),
    }

    let mut drift_checked = 0;
    for r in &requests {
        let itl = &r.itl_nanos;
        if itl.len() < 4 {
            continue;
        }
        drift_checked += 1;
        let half = itl.len() / 2;
        let mean = |xs: &[u64]| xs.iter().map(|&x| u128::from(x)).sum::<u128>() / xs.len() as u128;
        let (first, second) = (mean(&itl[..half]), mean(&itl[itl.len() - half..]));
        let (first, second) = (
            u64::try_from(first).unwrap_or(u64::MAX),
            u64::try_from(second).unwrap_or(u64::MAX),
        );
        if second.saturating_mul(2) > first.saturating_mul(3) {
            found.push(Finding {
                rule: String::from("itl_drift"),
                title: format!(
                    "inter-token latency of {} drifts from {} to {} over the request",
                    r.request_id,
                    format_ns(first),
                    format_ns(second)
                ),
                stake: Stake::Ns((second - first).saturating_mul(half as u64)),
                evidence: alloc::vec![
                    format!("first {half} interval(s): mean {}", format_ns(first)),
                    format!("last {half} interval(s): mean {}", format_ns(second)),
                ],
                link: row("requests", &r.request_id),
            });
        }
    }
    if drift_checked == 0 {
        notes.push(String::from(
            "itl_drift: no request has the 4 inter-token intervals the rule needs",
        ));
    }
    serving_findings(doc, &requests, &mut found, &mut notes);
    Findings::ranked(found, notes)
}

/// The serving rules: `batch_underfill`, `queueing_ttft`, `kv_pressure`, `resource_accounting`.
fn serving_findings(
    doc: &ProfileDocument,
    requests: &[crate::analysis::requests::RequestSummary],
    found: &mut Vec<Finding>,
    notes: &mut Vec<String>,
) {
    let iterations = doc.iterations();
    let forwards = &iterations.iterations;
    match iterations.batch_size {
        Some(sizes) if forwards.len() >= MIN_ITERATIONS && sizes.p50 >= 2 => {
            let usual = sizes.p50;
            let under: Vec<_> = forwards
                .iter()
                .filter(|f| f.batch_size.saturating_mul(2) <= usual)
                .collect();
            if !under.is_empty() {
                let total: u64 = forwards.iter().map(|f| f.duration_ns).sum();
                let under_ns: u64 = under.iter().map(|f| f.duration_ns).sum();
                let at_stake: u64 = under
                    .iter()
                    .map(|f| {
                        let missing = u128::from(usual - f.batch_size);
                        let ns = u128::from(f.duration_ns) * missing / u128::from(usual);
                        u64::try_from(ns).unwrap_or(u64::MAX)
                    })
                    .sum();
                let mut evidence = alloc::vec![
                    format!(
                        "batch size p50 {usual}, p90 {} over {} forward(s)",
                        sizes.p90,
                        forwards.len()
                    ),
                    format!(
                        "{} forward(s) with at most {} request(s) take {} of {} forward time",
                        under.len(),
                        usual / 2,
                        format_ns(under_ns),
                        format_ns(total)
                    ),
                ];
                for f in under.iter().take(EVIDENCE_LINES) {
                    evidence.push(format!(
                        "{} iteration {}: {} request(s), {}",
                        f.engine,
                        f.iteration,
                        f.batch_size,
                        format_ns(f.duration_ns)
                    ));
                }
                if under.len() > EVIDENCE_LINES {
                    evidence.push(format!("… and {} more", under.len() - EVIDENCE_LINES));
                }
                found.push(Finding {
                    rule: String::from("batch_underfill"),
                    title: format!(
                        "{} of {} forwards ran at most half the usual batch of {usual}",
                        under.len(),
                        forwards.len()
                    ),
                    stake: Stake::Ns(at_stake),
                    evidence,
                    link: under
                        .first()
                        .and_then(|f| row("iterations", &iteration_key(&f.engine, f.iteration))),
                });
            }
        }
        Some(_) if forwards.len() < MIN_ITERATIONS => notes.push(format!(
            "batch_underfill: {} batched forward(s), the rule needs {MIN_ITERATIONS}",
            forwards.len()
        )),
        _ => {}
    }

    // Queueing against time to first token, over the requests that have both.
    let axis = doc.request_axis();
    let mut queued: Vec<(&str, u64, u64)> = Vec::new();
    for lane in axis.groups.iter().flat_map(|g| &g.requests) {
        let Some(ttft_us) = requests
            .iter()
            .find(|r| r.request_id == lane.request_id)
            .and_then(|r| r.ttft_us)
        else {
            continue;
        };
        let queue = lane.queue.map_or(0, |q| q.end_ns - q.start_ns);
        queued.push((
            lane.request_id.as_str(),
            queue,
            ttft_us.saturating_mul(1000),
        ));
    }
    let any_queue = queued.iter().any(|q| q.1 > 0);
    if queued.len() >= MIN_REQUESTS && any_queue {
        let queue_ns: u64 = queued.iter().map(|q| q.1).sum();
        let ttft_ns: u64 = queued.iter().map(|q| q.2).sum();
        if queue_ns.saturating_mul(2) > ttft_ns {
            let mut sorted: Vec<u64> = queued.iter().map(|q| q.1).collect();
            sorted.sort_unstable();
            let mut ttfts: Vec<u64> = queued.iter().map(|q| q.2).collect();
            ttfts.sort_unstable();
            let p50 = |v: &[u64]| crate::analysis::percentiles::nearest_rank(v, 50).unwrap_or(0);
            let mut evidence = alloc::vec![
                format!(
                    "queued {} of {} time to first token over {} request(s)",
                    format_ns(queue_ns),
                    format_ns(ttft_ns),
                    queued.len()
                ),
                format!(
                    "queue p50 {}, TTFT p50 {}",
                    format_ns(p50(&sorted)),
                    format_ns(p50(&ttfts))
                ),
            ];
            queued.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            for (id, queue, ttft) in queued.iter().take(3) {
                evidence.push(format!(
                    "{id}: queued {} of its {} TTFT",
                    format_ns(*queue),
                    format_ns(*ttft)
                ));
            }
            found.push(Finding {
                rule: String::from("queueing_ttft"),
                title: format!(
                    "requests wait in the queue for {} of their time to first token",
                    percent(queue_ns, ttft_ns)
                ),
                stake: Stake::Ns(queue_ns),
                evidence,
                link: queued.first().and_then(|(id, _, _)| row("requests", id)),
            });
        }
    } else if any_queue {
        notes.push(format!(
            "queueing_ttft: {} request(s) with a TTFT and a place on the time axis, the rule needs {MIN_REQUESTS}",
            queued.len()
        ));
    }

    for usage in doc.resources().kinds {
        let kind = &usage.resource_kind;
        let refused = usage.deferrals + usage.rejections;
        if refused > 0 {
            let mut evidence = Vec::new();
            match (&usage.peak, usage.capacity) {
                (Some(peak), Some(capacity)) => evidence.push(format!(
                    "peak {} of {capacity} in use{}",
                    peak.level,
                    percent_of(peak.level, capacity)
                )),
                (Some(peak), None) => evidence.push(format!("peak {} in use", peak.level)),
                _ => {}
            }
            for r in &usage.reasons {
                evidence.push(format!("{} × {}: {}", r.count, r.action, r.reason));
            }
            let waited: Vec<&str> = usage
                .holders
                .iter()
                .filter(|h| h.deferrals + h.rejections > 0)
                .map(|h| h.holder.as_str())
                .collect();
            evidence.push(format!(
                "{} request(s) waited or were refused: {}",
                waited.len(),
                waited
                    .iter()
                    .take(EVIDENCE_LINES)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            found.push(Finding {
                rule: String::from("kv_pressure"),
                title: format!(
                    "{kind}: {} deferral(s) and {} rejection(s) for want of capacity",
                    usage.deferrals, usage.rejections
                ),
                stake: Stake::Count(refused),
                evidence,
                link: row("resources", kind),
            });
        }
        let errors = usage.underflows.len() as u64 + usage.leaks.len() as u64;
        if errors > 0 {
            let mut evidence = Vec::new();
            for u in usage.underflows.iter().take(EVIDENCE_LINES) {
                evidence.push(format!(
                    "line {}: {} went {} below 0 ({})",
                    u.line, u.holder, u.amount, u.kind
                ));
            }
            for l in usage.leaks.iter().take(EVIDENCE_LINES) {
                evidence.push(format!("{} still holds {} at the end", l.holder, l.held));
            }
            found.push(Finding {
                rule: String::from("resource_accounting"),
                title: format!(
                    "{kind}: {} underflow(s) and {} reservation(s) never released",
                    usage.underflows.len(),
                    usage.leaks.len()
                ),
                stake: Stake::Count(errors),
                evidence,
                link: row("resources", kind),
            });
        }
    }
}

/// The key of a batched forward's row in the iterations table: `engine/iteration`.
pub fn iteration_key(engine: &str, iteration: u64) -> String {
    format!("{engine}/{iteration}")
}

/// ` (N%)` of `part` in `whole`, rounded down; nothing when `whole` is not positive.
fn percent_of(part: i64, whole: i64) -> String {
    if whole <= 0 {
        return String::new();
    }
    format!(" ({}%)", i128::from(part) * 100 / i128::from(whole))
}

/// `shape.prompt_tokens` of the request's first event that has it.
fn prompt_tokens(doc: &ProfileDocument, request_id: &str) -> Option<u64> {
    doc.records
        .iter()
        .filter(|r| r.event.request_id.as_deref() == Some(request_id))
        .find_map(|r| r.event.shape.get("prompt_tokens").and_then(|v| v.as_u64()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn backward_against_forward() {
        // 100 forward, 400 backward: 400 > 3 × 100, at stake 400 − 300 = 100.
        let d = doc(100, 400);
        let f = trace_findings(&[&d]);
        assert_eq!(rules(&f), [("backward_long", Stake::Ns(100))]);
        assert_eq!(
            f.findings[0].title,
            "backward takes 400% of the forward time, more than 3×"
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

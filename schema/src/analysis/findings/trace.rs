//! The findings of one or several trace files: gradients, phases, the dominant module, outlier
//! steps, the memory peak (the rules are the [parent module](super)'s).

use crate::analysis::sort;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use hashbrown::HashMap;

use crate::analysis::gradients::{gradient_groups, GradientFlow, GradientGroup};
use crate::analysis::modules::{level_ends, module_rows, ModuleGrouping, ModulePaths};
use crate::analysis::phases::phase_breakdown;
use crate::analysis::steps::StepSet;
use crate::analysis::units::{format_bytes, format_ns};
use crate::format::document::TraceDocument;
use crate::format::events::{MemoryAction, Pass, TensorCategory};

use super::{percent, row, Finding, Findings, Link, Stake, EVIDENCE_LINES};

fn span_link(doc: &TraceDocument, i: usize) -> Option<Link> {
    doc.spans.get(i).map(|s| Link::Span {
        id: s.id.to_string(),
        line: s.line,
    })
}

/// When the forward last entered a span of each of `modules` (its `module` field, the
/// weights' name a gradient's key starts with), in one pass over the spans; a module it ran in
/// no span of its own is absent.
fn last_forward_starts<'a>(
    doc: &TraceDocument,
    modules: impl Iterator<Item = &'a str>,
) -> HashMap<&'a str, u64> {
    let mut wanted: HashMap<&'a str, Option<u64>> = modules.map(|m| (m, None)).collect();
    if wanted.is_empty() {
        return HashMap::new();
    }
    for s in &doc.spans {
        if s.pass != Some(Pass::Forward) {
            continue;
        }
        if let Some(last) = s.module.as_deref().and_then(|m| wanted.get_mut(m)) {
            *last = Some(last.map_or(s.start_ns, |t| t.max(s.start_ns)));
        }
    }
    wanted
        .into_iter()
        .filter_map(|(m, t)| Some((m, t?)))
        .collect()
}

/// Findings of one or several trace files (several: the steps of one run; the single-file
/// rules read the first step in capture order).
pub fn trace_findings(docs: &[&TraceDocument]) -> Findings {
    let mut found = Vec::new();
    let mut notes = Vec::new();
    // The steps' spread is read only for an outlier among several steps: one document is its
    // own first step, and its `StepSet` (every module path's shapes) was most of the work.
    let set = (docs.len() > 1).then(|| StepSet::of(docs));
    let first = match &set {
        Some(set) => set.steps.first().and_then(|s| docs.get(s.input)),
        None => docs.first(),
    };
    let Some(first) = first else {
        return Findings::default();
    };
    let doc: &TraceDocument = first;
    let breakdown = phase_breakdown(doc);

    // Gradients that never arrive.
    let groups = gradient_groups(&doc.gradients);
    let missing_in = groups
        .iter()
        .filter(|g| g.flow != GradientFlow::NoneMissing);
    let last_run = last_forward_starts(doc, missing_in.clone().map(|g| g.module.as_str()));
    let mut stopped: Vec<_> = missing_in
        .map(|g| (g, last_run.get(g.module.as_str()).copied()))
        .collect();
    // Nearest the loss first: the modules the forward ran, the last one first; then those it
    // ran in no span of theirs, in file order (the sort is stable).
    sort::by_key(&mut stopped, |g| core::cmp::Reverse(g.1));
    if doc.gradients.is_empty() {
        notes.push(String::from(
            "gradients_missing: the trace has no gradient records",
        ));
    } else if let Some(&(first_stop, last_run)) = stopped.first() {
        let missing: u64 = stopped.iter().map(|(g, _)| g.counts.missing).sum();
        let module = |g: &GradientGroup| group_name(&groups, g);
        let mut title = format!(
            "{missing} parameter(s) in {} module(s) get no gradient",
            stopped.len()
        );
        if last_run.is_some() {
            title.push_str(&format!(
                "; the last of them in the forward: {}",
                module(first_stop)
            ));
        }
        found.push(Finding {
            rule: String::from("gradients_missing"),
            title,
            stake: Stake::Count(missing),
            evidence: {
                let mut lines: Vec<String> = stopped
                    .iter()
                    .take(EVIDENCE_LINES)
                    .map(|(g, _)| {
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

    // Gradients that arrive but cannot train: all zero, or NaN or infinite.
    let unusable = |g: &GradientGroup| g.counts.zero + g.counts.non_finite;
    let bad_in = groups.iter().filter(|g| unusable(g) > 0);
    let last_run = last_forward_starts(doc, bad_in.clone().map(|g| g.module.as_str()));
    let mut bad: Vec<_> = bad_in
        .map(|g| (g, last_run.get(g.module.as_str()).copied()))
        .collect();
    // Non-finite first (one NaN spreads to every parameter at the next update), then nearest
    // the loss, as for missing gradients (the sorts are stable).
    sort::by_key(&mut bad, |g| core::cmp::Reverse(g.1));
    sort::by_key(&mut bad, |g| core::cmp::Reverse(g.0.counts.non_finite > 0));
    if let Some(&(first, _)) = bad.first() {
        let zero: u64 = bad.iter().map(|(g, _)| g.counts.zero).sum();
        let non_finite: u64 = bad.iter().map(|(g, _)| g.counts.non_finite).sum();
        let kinds = match (zero, non_finite) {
            (_, 0) => String::from("an all-zero gradient"),
            (0, _) => String::from("a NaN or infinite gradient"),
            (z, n) => format!("an unusable gradient ({z} all zero, {n} NaN or infinite)"),
        };
        let mut evidence: Vec<String> = bad
            .iter()
            .take(EVIDENCE_LINES)
            .map(|(g, _)| {
                let parts: Vec<String> = [
                    (g.counts.non_finite, "NaN or infinite"),
                    (g.counts.zero, "all zero"),
                ]
                .iter()
                .filter(|(k, _)| *k > 0)
                .map(|(k, what)| format!("{k} {what}"))
                .collect();
                format!(
                    "{}: {} of {} parameter(s)",
                    group_name(&groups, g),
                    parts.join(", "),
                    g.params
                )
            })
            .collect();
        if bad.len() > EVIDENCE_LINES {
            evidence.push(format!("and {} more module(s)", bad.len() - EVIDENCE_LINES));
        }
        found.push(Finding {
            rule: String::from("gradients_unusable"),
            title: format!(
                "{} parameter(s) in {} module(s) get {kinds}; first: {}",
                zero + non_finite,
                bad.len(),
                group_name(&groups, first)
            ),
            stake: Stake::Count(zero + non_finite),
            evidence,
            link: row("gradients", &first.module),
        });
    }

    // Backward against forward.
    match &breakdown {
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
                    // As a multiple: "2416% of the forward time" reads worse than 24.2×.
                    title: format!(
                        "backward takes {:.1}× the forward time, more than 3×",
                        b.backward_ns as f64 / b.forward_ns as f64
                    ),
                    stake: Stake::Ns(b.backward_ns - b.forward_ns.saturating_mul(3)),
                    evidence,
                    link,
                });
            }
        }
    }

    // One phase taking most of the step.
    if let Some(b) = breakdown.filter(|b| b.region_ns > 0) {
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
    if let Some(set) = &set {
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
        let pass = m.peak_timestamp_ns.and_then(|ts| pass_at(doc, ts));
        let phase = pass.map(|(p, _)| pass_name(p));
        // The bytes the open pass allocated and freed before it ended: its temporaries, not
        // what its category keeps (activations for backward, gradients, optimizer state).
        let temporaries = match (pass, m.peak_timestamp_ns) {
            (Some((p, end_ns)), Some(ts)) => freed_by(doc, category_of(p), ts, end_ns),
            _ => 0,
        };
        let mut held: Vec<(Holder, u64)> = TensorCategory::ALL
            .iter()
            .zip(m.peak_by_category)
            .flat_map(|(c, b)| match pass {
                Some((p, _)) if category_of(p) == *c => {
                    let t = temporaries.min(b);
                    [(Holder::Kept(*c), b - t), (Holder::Temporaries(p), t)]
                }
                _ => [(Holder::Kept(*c), b), (Holder::Kept(*c), 0)],
            })
            .filter(|(_, b)| *b > 0)
            .collect();
        sort::by_key(&mut held, |h| core::cmp::Reverse(h.1));
        let held_by = held.first().map_or("nothing recorded", |(h, _)| h.text());
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
                .map(|(h, b)| {
                    format!(
                        "{}: {} ({})",
                        h.text(),
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

/// A gradient group's module as the gradients tab and every other table name it; only where
/// the parameters come from several roots (a `VarMap` each) does a name say its root.
fn group_name(groups: &[GradientGroup], g: &GradientGroup) -> String {
    let several_roots = groups.iter().any(|x| x.root != g.root);
    match (several_roots, g.module.is_empty()) {
        (false, false) => g.module.clone(),
        (false, true) => String::from("(top level)"),
        (true, false) => format!("{}.{}", g.root, g.module),
        (true, true) => format!("{} (top level)", g.root),
    }
}

/// What holds bytes live at the memory peak, as the `memory_peak` finding names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// Bytes of a category kept past the pass that allocated them (or any, for a category
    /// the pass open at the peak did not allocate).
    Kept(TensorCategory),
    /// Bytes the pass open at the peak allocated and freed before it ended.
    Temporaries(Pass),
}

impl Holder {
    fn text(self) -> &'static str {
        match self {
            Holder::Kept(TensorCategory::Activation) => "activations (kept for backward)",
            Holder::Kept(TensorCategory::Optimizer) => "optimizer state",
            Holder::Kept(TensorCategory::Gradient) => "gradients",
            Holder::Kept(TensorCategory::Parameter) => "parameters",
            Holder::Kept(TensorCategory::Other) => "other",
            Holder::Temporaries(Pass::Forward) => {
                "the forward's temporaries (freed before it ended)"
            }
            Holder::Temporaries(Pass::Backward) => {
                "the backward's temporaries (freed before it ended)"
            }
            Holder::Temporaries(Pass::Optimizer) => {
                "the optimizer step's temporaries (freed before it ended)"
            }
        }
    }
}

/// The category of the memory a pass allocates (capture's rule, SCHEMA.md §4).
fn category_of(pass: Pass) -> TensorCategory {
    match pass {
        Pass::Forward => TensorCategory::Activation,
        Pass::Backward => TensorCategory::Gradient,
        Pass::Optimizer => TensorCategory::Optimizer,
    }
}

/// A pass's name in a finding.
fn pass_name(pass: Pass) -> &'static str {
    match pass {
        Pass::Forward => "forward",
        Pass::Backward => "backward",
        Pass::Optimizer => "optimizer",
    }
}

/// The step (`forward` …) of the outermost stepped span open at `ts` and that span's end, or
/// `None`.
fn pass_at(doc: &TraceDocument, ts: u64) -> Option<(Pass, u64)> {
    doc.spans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.pass.is_some() && s.start_ns <= ts && ts < s.end_ns())
        .min_by_key(|(i, _)| doc.tree.depth.get(*i).copied().unwrap_or(u32::MAX))
        .and_then(|(_, s)| Some((s.pass?, s.end_ns())))
}

/// The bytes of the allocations of `category` live at the peak (`peak_ns`) that are freed
/// after it and no later than `end_ns`.
fn freed_by(doc: &TraceDocument, category: TensorCategory, peak_ns: u64, end_ns: u64) -> u64 {
    let m = &doc.memory_profile;
    let Some(device) = m.peak_device.as_deref() else {
        return 0;
    };
    let mut live: HashMap<&str, u64> = m
        .live_at_peak
        .iter()
        .filter(|a| a.category == category)
        .map(|a| (a.tensor_id.as_str(), a.bytes))
        .collect();
    let mut freed = 0u64;
    for r in doc.memory.iter() {
        if r.action == MemoryAction::Free
            && r.device == device
            && peak_ns < r.timestamp_ns
            && r.timestamp_ns <= end_ns
        {
            if let Some(bytes) = live.remove(r.tensor_id) {
                freed = freed.saturating_add(bytes);
            }
        }
    }
    freed
}

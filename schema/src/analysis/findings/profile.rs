//! The findings of an inference profile: TTFT tail and ITL drift, and for batched serving under-
//! filled batches, queueing against TTFT, KV-cache pressure and resource accounting (the rules
//! are the [parent module](super)'s).

use crate::analysis::sort;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::analysis::units::format_ns;
use crate::format::profile::ProfileDocument;

use super::{percent, row, Finding, Findings, Stake, EVIDENCE_LINES, MIN_ITERATIONS, MIN_REQUESTS};

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
                sort::by(&mut slow, |a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
                let first = first_request(doc);
                let mut evidence = alloc::vec![format!(
                    "TTFT p50 {} µs, p90 {} µs, p99 {} µs over {} request(s)",
                    p.p50, p.p90, p.p99, p.count
                )];
                for (id, t, prompt) in &slow {
                    evidence.push(format!(
                        "{id}: TTFT {t} µs, prompt {}{}",
                        prompt.map_or_else(
                            || String::from("length unknown"),
                            |n| format!("{n} tokens")
                        ),
                        if first == Some(*id) {
                            "; the profile's first request (what the server set up on its first \
                             request counts in its TTFT)"
                        } else {
                            ""
                        }
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
                        "TTFT p99 ({} µs) is {:.1}× the p50 ({} µs){}",
                        p.p99,
                        p.p99 as f64 / p.p50.max(1) as f64,
                        p.p50,
                        if slow.first().map(|s| s.0) == first && first.is_some() {
                            "; the slowest is the profile's first request"
                        } else {
                            ""
                        }
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
            sort::by(&mut queued, |a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
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
/// The request whose earliest event is the profile's earliest (the first in the file among
/// equals); engines' events are no request's.
fn first_request(doc: &ProfileDocument) -> Option<&str> {
    let mut first: Option<(i64, &str)> = None;
    for r in &doc.records {
        let (Some(id), Some(ts)) = (r.event.request_id.as_deref(), r.event.ts_unix_nanos) else {
            continue;
        };
        if crate::format::profile::engine_of(r).is_none() && first.is_none_or(|(t, _)| ts < t) {
            first = Some((ts, id));
        }
    }
    first.map(|(_, id)| id)
}

fn prompt_tokens(doc: &ProfileDocument, request_id: &str) -> Option<u64> {
    doc.records
        .iter()
        .filter(|r| r.event.request_id.as_deref() == Some(request_id))
        .find_map(|r| r.event.shape.get("prompt_tokens").and_then(|v| v.as_u64()))
}

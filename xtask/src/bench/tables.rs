//! The native tables of BENCHMARKS.md: parse, span costs, the captured training update, serving,
//! `summary`, the wasm bundle; each with the goal [`goals`] judges.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::Result;
use serde_json::Value;

use super::goals;
use super::{
    results::find, results::gzip_len, results::modified, results::reused, results::Measured,
    runs::median,
};
use super::{Parts, SUMMARY_MB, SUMMARY_RUNS};

pub(super) fn mb(bytes: f64) -> String {
    if bytes < 1e5 {
        // The floor's trace and its export: 0.0 MB would say nothing.
        format!("{:.1} KB", bytes / 1e3)
    } else {
        format!("{:.1} MB", bytes / 1e6)
    }
}

pub(super) fn ratio_cell(r: Option<f64>) -> String {
    r.map_or("—".into(), |r| format!("{r:.2}×"))
}

pub(super) fn native_tables(
    r: &[(String, String, Measured)],
    paired: &Value,
    run_started: SystemTime,
    parts: Parts,
) -> String {
    let mut md = String::new();
    let ours = find(r, "parse_trace6", "ours_trace_reader");
    let peer = find(r, "parse_trace6", "peer_serde_json_value");
    let _ = writeln!(
        md,
        "### Parse throughput, native, one core (`tests/benches/parse.rs`, 100 MB generated file){}\n",
        reused(ours.and_then(|m| m.at), run_started, parts.parse)
    );
    let _ = writeln!(md, "| ours: read + validate + summarise | peer: `serde_json::Value` per line | ratio | goal | met? |\n| ---: | ---: | ---: | --- | --- |");
    let rate = |m: Option<&Measured>| m.and_then(|m| Some(m.bytes? / m.ns * 1e3));
    let (ours_rate, peer_rate) = (rate(ours), rate(peer));
    let parse_ratio = goals::ratio_of(ours_rate, peer_rate);
    let verdict = goals::Verdict::all([
        goals::at_least(ours_rate, goals::PARSE_MB_S),
        goals::at_least(parse_ratio, goals::PARSE_VS_PEER),
    ]);
    let _ = writeln!(
        md,
        "| {} | {} | {} | ≥ {} MB/s and ≥ {}× | {} |\n",
        ours_rate.map_or("not measured".into(), |v| format!("{v:.0} MB/s")),
        peer_rate.map_or("not measured".into(), |v| format!("{v:.0} MB/s")),
        ratio_cell(parse_ratio),
        goals::PARSE_MB_S,
        goals::PARSE_VS_PEER,
        verdict.cell()
    );

    let group = "3 nested spans";
    let per_span = |f: &str| find(r, group, f).map(|m| m.ns / 3.0);
    let puffin = per_span("puffin::profile_scope!, on");
    let idle = per_span(IDLE_SUBSCRIBER);
    let spans_at = r
        .iter()
        .filter(|(g, _, _)| g == group)
        .filter_map(|(_, _, m)| m.at)
        .min();
    let _ = writeln!(md, "### Capture cost per span (`capture/benches/spans.rs`, 3 nested spans per iteration, criterion median){}\n",
        reused(spans_at, run_started, parts.spans));
    let _ = writeln!(
        md,
        "| variant | ns per span | vs puffin | goal | met? |\n| --- | ---: | ---: | --- | --- |"
    );
    let mut rows: Vec<(&String, f64)> = r
        .iter()
        .filter(|(g, _, _)| g == group)
        .map(|(_, f, m)| (f, m.ns / 3.0))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    for (f, ns) in rows {
        let vs_puffin = goals::ratio_of(Some(ns), puffin);
        let (goal, verdict) = span_goal(f, ns, vs_puffin, idle);
        let _ = writeln!(
            md,
            "| {f} | {ns:.2} | {} | {goal} | {} |",
            ratio_cell(vs_puffin),
            verdict.map_or(String::new(), |v| v.cell())
        );
    }
    md.push('\n');

    let off = find(r, "llama_update", "uncaptured");
    let on = find(r, "llama_update", "captured");
    md.push_str(&train_table(
        off.map(|m| m.ns),
        on.map(|m| m.ns),
        paired,
        on.and_then(|m| m.at),
        run_started,
        parts.train,
    ));
    md
}

/// The captured-update table: criterion's medians (ns) of each side, and the paired rounds
/// (`train.json`, written by the bench), on which the goal is judged: criterion measures all
/// uncaptured updates, then all captured ones, a minute apart, and a 2-core VM's speed drifts
/// more than the overhead over that time; each paired round times both sides back to back.
pub(super) fn train_table(
    off_ns: Option<f64>,
    on_ns: Option<f64>,
    paired: &Value,
    at: Option<SystemTime>,
    run_started: SystemTime,
    ran: bool,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "### A captured training update (`capture/benches/train_step.rs`, the `train_llama` example's candle-transformers Llama update){}\n",
        reused(at, run_started, ran));
    let _ = writeln!(md, "The goal is judged on the paired rounds: in each, 10 updates uncaptured then 10 captured, back to back; the overhead is the median of the rounds' ratios (their quartiles in brackets), the times each side's median. Criterion's medians are beside them: it times every uncaptured update first, then every captured one, so the machine's drift between the two falls on the overhead.\n");
    let _ = writeln!(
        md,
        "| measure | uncaptured | captured | overhead | goal | met? |\n| --- | ---: | ---: | ---: | --- | --- |"
    );
    let us = |v: Option<f64>| v.map_or("not measured".into(), |v| format!("{v:.1} µs"));
    let pct = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:+.1}%"));
    let overhead = paired["overhead_pct"].as_f64();
    let quartiles = match (paired["q1_pct"].as_f64(), paired["q3_pct"].as_f64()) {
        (Some(q1), Some(q3)) => format!(" ({q1:+.1}% to {q3:+.1}%)"),
        _ => String::new(),
    };
    let rounds = match (paired["rounds"].as_u64(), paired["per_round"].as_u64()) {
        (Some(r), Some(n)) => format!("{r} paired rounds of {n}"),
        _ => "paired rounds".into(),
    };
    let _ = writeln!(
        md,
        "| {rounds} | {} | {} | {}{quartiles} | ≤ {}% | {} |",
        us(paired["uncaptured_us"].as_f64()),
        us(paired["captured_us"].as_f64()),
        pct(overhead),
        goals::TRAIN_OVERHEAD_PCT,
        goals::at_most(overhead, goals::TRAIN_OVERHEAD_PCT).cell()
    );
    let criterion = goals::ratio_of(on_ns, off_ns).map(|r| (r - 1.0) * 100.0);
    let _ = writeln!(
        md,
        "| criterion medians | {} | {} | {} | (context) |  |\n",
        us(off_ns.map(|ns| ns / 1e3)),
        us(on_ns.map(|ns| ns / 1e3)),
        pct(criterion),
    );
    md
}

/// The serving table (`serve.json`, written by `capture/benches/serve.rs`): a module span's cost
/// on the serving thread, and served requests captured beside uncaptured in paired rounds, on
/// whose wall-clock median ratio the goal is judged (the process's CPU time beside it).
pub(super) fn serve_table(
    v: &Value,
    at: Option<SystemTime>,
    run_started: SystemTime,
    ran: bool,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "### Serving (`capture/benches/serve.rs`: a module span at detail `latency`, and the examples' tiny Llama serving requests on several threads){}\n",
        reused(at, run_started, ran)
    );
    let span = &v["module_span"];
    let _ = writeln!(md, "A module span: a forward call of {} `tracing` spans (no work inside) through `decode_step` of a recorded request, beside the same call uncaptured and a captured call of no span; the cost per span is the median over {} paired rounds of ((captured − captured with no span) − (uncaptured − uncaptured with no span)) / spans, quartiles in brackets. The serving thread only queues what it measured; the lines are made on the writer thread (its work is in the served-requests figure, not here).\n",
        span["spans_per_forward"].as_u64().map_or("–".into(), |n| n.to_string()),
        span["rounds"].as_u64().map_or("–".into(), |n| n.to_string()));
    let _ = writeln!(
        md,
        "| measure | value | goal | met? |\n| --- | ---: | --- | --- |"
    );
    let ns = span["ns_per_span"].as_f64();
    let quartiles = match (span["q1_ns"].as_f64(), span["q3_ns"].as_f64()) {
        (Some(a), Some(b)) => format!(" ({a:.0} to {b:.0})"),
        _ => String::new(),
    };
    let _ = writeln!(
        md,
        "| ns per module span, serving thread | {}{quartiles} | ≤ {} ns | {} |",
        ns.map_or("not measured".into(), |v| format!("{v:.0}")),
        goals::MODULE_SPAN_NS,
        goals::at_most(ns, goals::MODULE_SPAN_NS).cell()
    );
    let _ = writeln!(
        md,
        "| decode_step around the call, beyond the spans | {} ns | (context) |  |\n",
        span["decode_step_ns"]
            .as_f64()
            .map_or("–".into(), |v| format!("{v:.0}"))
    );
    let _ = writeln!(md, "Served requests, in two ways: **batched**, the `serve_batched` example (the demo's profile): two engines, each on a thread of its own, serving its requests in waves with a KV-cache budget through `Engine::forward` (54 forwards in all, batches of 1 to 3); and **one request per thread**: {THREADS_ONE} threads each serving 2 requests one after the other (prefill, then 8 decode steps, through `InferenceProfiler::request`, `prefill_step` and `decode_step`). In each paired round the threads serve uncaptured (detail `off`) and then captured (detail `latency`: module spans, host memory, token timing, written by the profiler's writer thread), each from a common start to the last thread's end; profilers and threads live for the whole run, as a server's do. The overhead is the median of the rounds' ratios (quartiles in brackets); what the writer has left at a round's end is written before the next round, and the process's CPU time (every thread, the writer's included) is beside it, with the writer thread's part (its CPU time in the captured round, the flush after it included, as a share of the paired uncaptured round's CPU time): on this 2-core machine the model's threads fill both cores, so the writer's time is taken from them. The tiny model's forward is 0.1–0.5 ms for 30 module spans, so the share of capture is far larger than on a real model.\n");
    let _ = writeln!(
        md,
        "| scenario | measure | uncaptured | captured | overhead | goal | met? |\n| --- | --- | ---: | ---: | ---: | --- | --- |"
    );
    let ms = |x: Option<f64>| x.map_or("not measured".into(), |v| format!("{v:.2} ms"));
    let pct = |x: Option<f64>| x.map_or("—".into(), |v| format!("{v:+.1}%"));
    let range = |o: &Value| match (o["q1_pct"].as_f64(), o["q3_pct"].as_f64()) {
        (Some(a), Some(b)) => format!(" ({a:+.1}% to {b:+.1}%)"),
        _ => String::new(),
    };
    for (key, name) in [
        ("batched", "batched (2 engines)"),
        ("one_per_thread", "one request per thread"),
    ] {
        let serving = &v[key];
        let overhead = serving["overhead_pct"].as_f64();
        let _ = writeln!(
            md,
            "| {name} | {} paired rounds, wall clock | {} | {} | {}{} | ≤ {}% | {} |",
            serving["rounds"]
                .as_u64()
                .map_or("–".into(), |n| n.to_string()),
            ms(serving["uncaptured_ms"].as_f64()),
            ms(serving["captured_ms"].as_f64()),
            pct(overhead),
            range(serving),
            goals::SERVE_OVERHEAD_PCT,
            goals::at_most(overhead, goals::SERVE_OVERHEAD_PCT).cell()
        );
        let cpu = &serving["cpu"];
        let _ = writeln!(
            md,
            "| {name} | the same rounds, CPU time of the process | {} | {} | {}{} | (context) |  |",
            ms(cpu["uncaptured_ms"].as_f64()),
            ms(cpu["captured_ms"].as_f64()),
            pct(cpu["overhead_pct"].as_f64()),
            range(cpu),
        );
        if let Some(writer) = cpu["writer_ms"].as_f64() {
            let share = match (cpu["writer_q1_pct"].as_f64(), cpu["writer_q3_pct"].as_f64()) {
                (Some(a), Some(b)) => format!(" ({a:+.1}% to {b:+.1}%)"),
                _ => String::new(),
            };
            let _ = writeln!(
                md,
                "| {name} | of that, the profile's writer thread | – | {writer:.2} ms | {}{share} | (context) |  |",
                pct(cpu["writer_pct"].as_f64()),
            );
        }
    }
    md.push('\n');
    md
}

/// Threads of the serve bench's one-request-per-thread scenario (`capture/benches/serve.rs`).
const THREADS_ONE: usize = 3;

/// The span-cost row of tracing's dispatch to a subscriber that does nothing.
pub(super) const IDLE_SUBSCRIBER: &str = "tracing + a subscriber doing nothing, built spans";

/// The goal of one span-cost row and its verdict; the rows without a goal are context.
/// `idle` is the ns per span of [`IDLE_SUBSCRIBER`]: a `tracing` span costs at least that
/// whatever the subscriber does, so the recording-off goal of our subscriber is on what it
/// adds above it.
pub(super) fn span_goal(
    variant: &str,
    ns: f64,
    vs_puffin: Option<f64>,
    idle: Option<f64>,
) -> (String, Option<goals::Verdict>) {
    let ours = variant.starts_with("candle-trace") || variant.contains("CaptureSubscriber");
    if !ours {
        return (String::new(), None);
    }
    if variant.contains("recording off") && variant.starts_with("tracing") {
        let added = idle.map(|idle| ns - idle);
        (
            format!(
                "≤ {} ns over the subscriber doing nothing{}",
                goals::SPAN_OFF_NS,
                added.map_or(String::new(), |a| format!(" ({a:+.2} ns)"))
            ),
            Some(goals::at_most(added, goals::SPAN_OFF_NS)),
        )
    } else if variant.contains("recording off") {
        (
            format!("≤ {} ns", goals::SPAN_OFF_NS),
            Some(goals::at_most(Some(ns), goals::SPAN_OFF_NS)),
        )
    } else if variant.starts_with("candle-trace") && variant.contains("recording on") {
        (
            format!("≤ {}× puffin", goals::SPAN_VS_PUFFIN),
            Some(goals::at_most(vs_puffin, goals::SPAN_VS_PUFFIN)),
        )
    } else {
        (String::new(), None)
    }
}

pub(super) fn summary_table(
    s: &Value,
    at: Option<SystemTime>,
    run_started: SystemTime,
    ran: bool,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "### CLI `summary` on a {SUMMARY_MB} MB trace (release `candle-trace summary FILE` under `/usr/bin/time`, file in the page cache, median of {SUMMARY_RUNS}){}\n",
        reused(at, run_started, ran));
    let _ = writeln!(md, "The goal is judged on the wall time, what a user waits for; beside it, the CPU time in the reader itself (user) and in the kernel for it (system: the file's reads and the zeroing of each page the reader touches first, which varies from run to run on a VM), medians of the same runs.\n");
    let _ = writeln!(md, "| file | wall | MB/s | user + system | peak RSS | / file size | goal | met? |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |");
    let bytes = s["trace_bytes"].as_f64();
    let runs = s["runs"].as_array().cloned().unwrap_or_default();
    let wall = median(runs.iter().filter_map(|r| r["wall_s"].as_f64()).collect());
    let user = median(runs.iter().filter_map(|r| r["user_s"].as_f64()).collect());
    let sys = median(runs.iter().filter_map(|r| r["sys_s"].as_f64()).collect());
    let rss = median(
        runs.iter()
            .filter_map(|r| r["max_rss_bytes"].as_f64())
            .collect(),
    );
    let rate = goals::ratio_of(bytes.map(|b| b / 1e6), wall);
    let rss_ratio = goals::ratio_of(rss, bytes);
    let verdict = goals::Verdict::all([
        goals::at_least(rate, goals::SUMMARY_MB_S),
        goals::at_most(rss_ratio, goals::SUMMARY_RSS_VS_FILE),
    ]);
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} | {} | ≥ {} MB/s and ≤ {}× RSS | {} |\n",
        bytes.map_or("not measured".into(), |b| format!(
            "{SUMMARY_MB} MB trace/6 ({})",
            mb(b)
        )),
        wall.map_or("—".into(), |w| format!("{w:.2} s")),
        rate.map_or("—".into(), |r| format!("{r:.0}")),
        match (user, sys) {
            (Some(u), Some(s)) => format!("{u:.2} s + {s:.2} s"),
            _ => "—".into(),
        },
        rss.map_or("—".into(), mb),
        ratio_cell(rss_ratio),
        goals::SUMMARY_MB_S,
        goals::SUMMARY_RSS_VS_FILE,
        verdict.cell()
    );
    md
}

/// The page's own wasm, the one loaded before its first frame (the parsing worker's loads in
/// its worker beside it).
const PAGE_WASM: &str = "candle-trace-viewer_bg.wasm";

pub(super) fn wasm_table(wasms: &[PathBuf], run_started: SystemTime, ran: bool) -> Result<String> {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "### Wasm bundle (`web/dist`, built by `cargo xtask page`){}\n",
        reused(
            wasms.iter().filter_map(|w| modified(w)).max(),
            run_started,
            ran
        )
    );
    let _ = writeln!(
        md,
        "The page's wasm is loaded before its first frame; the parsing worker's loads in the worker, beside it, and has no goal of its own.\n"
    );
    let _ = writeln!(
        md,
        "| file | raw | gzip -9 | goal | met? |\n| --- | ---: | ---: | --- | --- |"
    );
    let goal = format!("≤ {:.0} KB gzip", goals::WASM_GZIP_BYTES / 1e3);
    if !wasms.iter().any(|w| w.ends_with(PAGE_WASM)) {
        let _ = writeln!(
            md,
            "| no {PAGE_WASM} in web/dist | — | — | {goal} | {} |",
            goals::Verdict::NotMeasured("no page built".into()).cell()
        );
    }
    for wasm in wasms {
        let raw = std::fs::metadata(wasm)?.len() as f64;
        let gz = gzip_len(wasm)? as f64;
        let name = wasm
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (goal, met) = if name == PAGE_WASM {
            (
                goal.clone(),
                goals::at_most(Some(gz), goals::WASM_GZIP_BYTES).cell(),
            )
        } else {
            ("(none: the worker's)".to_string(), String::new())
        };
        let _ = writeln!(
            md,
            "| {name} | {:.0} KB | {:.0} KB | {goal} | {met} |",
            raw / 1e3,
            gz / 1e3,
        );
    }
    md.push('\n');
    Ok(md)
}

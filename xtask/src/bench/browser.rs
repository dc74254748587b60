//! The browser tables of BENCHMARKS.md: open time and memory beside speedscope, the worker's
//! parse throughput, frame intervals while panning and zooming.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::goals;
use super::{tables::mb, tables::ratio_cell, FLOOR_TRACE};

pub(super) fn browser_tables(b: &Value, reused_note: String) -> String {
    let mut md = String::new();
    let runs = b["runs"].as_u64().unwrap_or(0);
    let _ = writeln!(
        md,
        "### Open time in the browser (`tests/e2e/bench.mjs`, {} headless, navigation → first painted timeline, median of {runs} alternating runs){reused_note}\n",
        b["chromium"].as_str().map_or("Chromium".into(), |v| format!("Chromium {v}"))
    );
    let _ = writeln!(md, "Each tool's time counts from navigation: the page, its scripts and (ours) the wasm load are included, and the file is chosen as soon as the page can take it; in brackets, the part after the file was chosen. The end is taken inside the page: the first frame painted once the document is shown (ours: the timeline is up, the panels below it come after; speedscope: its title names the profile), found by a check in every animation frame, as `performance.now()` since navigation began. Results measured before 2026-12-05 16:00 were timed from outside the page (the condition polled every 50 ms, then two animation frames awaited), which added up to the polling interval and a frame or two; results before 2026-12-04 19:00 counted from the file chosen only.\n");
    let _ = writeln!(md, "The first row is each page's floor: a 17 KB trace (`{FLOOR_TRACE}`, one training step of a two-layer MLP), whose open is nearly all fixed cost (the page and its scripts, ours its wasm and a worker, the first layout and paint). It has no goal; where a ratio goal is missed and our floor alone is over the time the goal allows (speedscope's time / the ratio), the verdict says so: no reader can then meet the goal, only a page that starts faster.\n");
    let _ = writeln!(md, "Memory is taken once the document is whole (ours: with the panels below the timeline, built one task each after its first frame), after a garbage collection: JS heap in use + ArrayBuffer backing stores + the viewer's wasm memory (which V8 does not count among the backing stores; speedscope has none). Renderer RSS (the tab and its workers, this run's processes only) is shown beside it. Both pages are driven through the DevTools protocol alone, so no harness code sits in their heaps (results before 2026-12-05 20:10 counted Playwright's selector engine, which its selector calls inject into the page: about 1.2 MB of JS heap in either tool). A speedscope that did not open within the time limit gives a lower bound on the ratio, which meets a ratio goal only when the bound does; a speedscope that failed otherwise is an error of the run.\n");
    let _ = writeln!(md, "| trace/6 file | ours | speedscope 1.25.0, same content as Chrome JSON | ratio (speedscope / ours) | goal | met? | ours: JS heap + buffers + wasm memory | / file size | goal, met? | speedscope: JS heap + buffers | renderer RSS, ours / speedscope |\n| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | --- | ---: | ---: |");
    let ms = |v: &Value| {
        v.as_f64()
            .map_or("—".into(), |m| format!("{:.2} s", m / 1e3))
    };
    if b["open"].as_array().is_none_or(|a| a.is_empty()) {
        let _ = writeln!(md, "| not measured | | | | | | | | | | |");
    }
    let is_floor = |row: &Value| {
        row["trace_bytes"]
            .as_f64()
            .is_some_and(|b| b <= goals::FLOOR_MAX_BYTES)
    };
    // Our median open of the floor's trace, in this run.
    let floor_ms = b["open"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|row| is_floor(row))
        .and_then(|row| match goals::Open::of(&row["ours"]) {
            goals::Open::Opened(ms) => Some(ms),
            _ => None,
        });
    for row in b["open"].as_array().into_iter().flatten() {
        let (ours, peer) = (&row["ours"], &row["speedscope"]);
        let size = row["trace_bytes"].as_f64().unwrap_or(0.0);
        let shown = |s: &Value| {
            if s["opened"].as_bool() == Some(true) {
                match s["median_chosen_ms"].as_f64() {
                    Some(_) => format!("{} ({})", ms(&s["median_ms"]), ms(&s["median_chosen_ms"])),
                    None => ms(&s["median_ms"]),
                }
            } else {
                format!("did not open ({})", s["reason"].as_str().unwrap_or("?"))
            }
        };
        let goal = goals::OpenGoal::for_size(size);
        let peer_open = goals::Open::of(peer);
        let (ratio, verdict) = goals::open_verdict(&goals::Open::of(ours), &peer_open, goal);
        let verdict = match goals::floor_note(&verdict, goal, &peer_open, floor_ms) {
            Some(note) => format!("{} ({note})", verdict.cell()),
            None => verdict.cell(),
        };
        let heap = ours["median_heap"].as_f64();
        let heap_ratio = goals::ratio_of(heap, Some(size));
        // The floor's trace is far smaller than the page itself: no memory goal.
        let heap_goal = if is_floor(row) {
            "(none at this size)".to_string()
        } else {
            format!(
                "≤ {}× {}",
                goals::VIEWER_MEMORY_VS_FILE,
                goals::at_most(heap_ratio, goals::VIEWER_MEMORY_VS_FILE).cell()
            )
        };
        let _ = writeln!(
            md,
            "| {} ({}; Chrome JSON {}){} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} |",
            Path::new(row["trace"].as_str().unwrap_or(""))
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            mb(size),
            mb(row["chrome_bytes"].as_f64().unwrap_or(0.0)),
            match row["runs"].as_u64() {
                Some(1) if runs > 1 => ", one attempt each",
                _ => "",
            },
            shown(ours),
            shown(peer),
            ratio,
            goal.cell(),
            verdict,
            heap.map_or("—".into(), mb),
            if is_floor(row) {
                "—".into()
            } else {
                ratio_cell(heap_ratio)
            },
            heap_goal,
            peer["median_heap"].as_f64().map_or("—".into(), mb),
            ours["median_rss"].as_f64().map_or("—".into(), mb),
            peer["median_rss"].as_f64().map_or("—".into(), mb),
        );
    }
    md.push('\n');
    let _ = writeln!(
        md,
        "### Parse throughput in the browser (the viewer's worker, timed inside it; median){reused_note}\n"
    );
    let _ = writeln!(md, "Parse = reading every line + the whole-file analysis (cross-record checks, span tree, memory profile), the same work as the native figure. The rest of opening is shown beside it: starting the worker (0 when a spare one was ready), handing the document to the page (encoded in the worker and decoded on the page in chunks that overlap; a trace's record tables cross while the worker analyses, the rest after: timed from the analysis's end to the last byte decoded; the encoding of both stages beside it) and the page's layout.\n");
    let _ = writeln!(md, "| file | in a worker | read | analyse | parse MB/s | goal | met? | worker start | hand-over after the analysis (encoding; bytes) | layout |\n| --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: |");
    for row in b["open"].as_array().into_iter().flatten() {
        let ours = &row["ours"];
        let size = row["trace_bytes"].as_f64().unwrap_or(0.0);
        let rate = goals::ratio_of(
            Some(size / 1e6),
            ours["median_parse_ms"].as_f64().map(|p| p / 1e3),
        );
        let (goal, verdict) = if size >= goals::WORKER_PARSE_FROM_BYTES {
            (
                format!("≥ {} MB/s", goals::WORKER_PARSE_MB_S),
                goals::at_least(rate, goals::WORKER_PARSE_MB_S).cell(),
            )
        } else {
            ("(none at this size)".into(), String::new())
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {goal} | {verdict} | {} | {} ({}; {}) | {} |",
            mb(size),
            if ours["in_worker"].as_bool() == Some(true) {
                "yes"
            } else {
                "no"
            },
            ms(&ours["median_read_ms"]),
            ms(&ours["median_analyse_ms"]),
            rate.map_or("—".into(), |r| format!("{r:.0}")),
            ms(&ours["median_start_ms"]),
            ms(&ours["median_handover_ms"]),
            ms(&ours["median_encode_ms"]),
            ours["median_transfer_bytes"]
                .as_f64()
                .map_or("—".into(), mb),
            ms(&ours["median_layout_ms"]),
        );
    }
    md.push('\n');
    let _ = writeln!(
        md,
        "### Frame times while zooming and panning (whole trace in view at the start; 360 frames, one input step per frame){reused_note}\n"
    );
    let _ = writeln!(md, "Unpaced: Chromium with `--disable-frame-rate-limit --disable-gpu-vsync`, so each interval between animation frames is the time one frame took. At 60 Hz: the same run paced by the display, where no interval can be under 16.7 ms; a frame over 25 ms is one a 60 Hz display drops. The peer: speedscope 1.25.0 does not open the 1M-span file within the time limit, so both tools run again, unpaced, on the 100 MB file (ours on trace/6, speedscope on the same content as Chrome JSON) with the same 360 input steps (its flame chart zooms on ctrl+wheel, so the wheel carries ctrl and the deltaY that zooms by the same factor per step, e^0.2); it draws with WebGL, which headless Chromium without a GPU runs on SwiftShader, where ours draws on a 2D canvas.\n");
    let _ = writeln!(md, "| run | spans | frames | p50 | p95 | max | over 25 ms | goal | met? |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |");
    let frames = b["frames"].as_object();
    if frames.is_none() {
        let _ = writeln!(
            md,
            "| unpaced | not measured | | | | | | p95 ≤ {} ms | {} |",
            goals::FRAME_P95_MS,
            goals::Verdict::NotMeasured("no frame run".into()).cell()
        );
    }
    let peer = frames.and_then(|f| f.get("peer"));
    let peer_file = |key: &str| {
        peer.and_then(|p| p[key].as_str())
            .and_then(|f| Path::new(f).file_name())
            .map_or(String::new(), |n| n.to_string_lossy().into_owned())
    };
    let rows = [
        (
            "unpaced".to_string(),
            frames.and_then(|f| f.get("unthrottled")),
            true,
        ),
        (
            "at 60 Hz".to_string(),
            frames.and_then(|f| f.get("display")),
            false,
        ),
        (
            format!("ours, unpaced, on {}", peer_file("trace")),
            peer.map(|p| &p["ours"]),
            false,
        ),
        (
            format!("speedscope, unpaced, on {}", peer_file("chrome")),
            peer.map(|p| &p["speedscope"]),
            false,
        ),
    ];
    for (label, row, judged) in rows {
        let Some(r) = row.and_then(Value::as_object) else {
            continue;
        };
        if r.get("opened").and_then(Value::as_bool) == Some(false) {
            let _ = writeln!(
                md,
                "| {label} | did not open ({}) | | | | | | (peer) | |",
                r.get("reason").and_then(Value::as_str).unwrap_or("?")
            );
            continue;
        }
        let g = |k: &str| r.get(k).and_then(Value::as_f64);
        let cell = |k: &str, unit: &str| g(k).map_or("—".into(), |v| format!("{v:.1}{unit}"));
        let (goal, ok) = if judged {
            (
                format!("p95 ≤ {} ms", goals::FRAME_P95_MS),
                goals::at_most(g("p95"), goals::FRAME_P95_MS).cell(),
            )
        } else if label.starts_with("at 60") {
            ("(paced: see the unpaced row)".into(), String::new())
        } else {
            (
                "(peer comparison: same content, same steps)".into(),
                String::new(),
            )
        };
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} | {} | {} | {goal} | {ok} |",
            g("spans")
                .or_else(|| {
                    // speedscope opened the same content: its span count is ours.
                    peer.and_then(|p| p["ours"]["spans"].as_f64())
                })
                .map_or("—".into(), |v| format!("{v:.0}")),
            g("frames").map_or("—".into(), |v| format!("{v:.0}")),
            cell("p50", " ms"),
            cell("p95", " ms"),
            cell("max", " ms"),
            g("late").map_or("—".into(), |v| format!("{v:.0}")),
        );
    }
    md.push('\n');
    md
}

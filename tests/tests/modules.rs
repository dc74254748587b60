//! Module keys and the module tree (with and without module names), coverage, gradient groups,
//! capture sources, inference-profile module spans, compare and the exports' names through the
//! `candle-trace` CLI, on the fixtures of `tests/fixtures/modules/` (made by its `make.py`;
//! every expected number below is worked out by hand from that script).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_cli::run;
use candle_trace_tests::fixtures_dir;
use serde_json::{json, Value};

fn fixture(name: &str) -> String {
    fixtures_dir()
        .join("modules")
        .join(name)
        .to_string_lossy()
        .to_string()
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut argv = vec!["candle-trace"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn json_of(args: &[&str]) -> Value {
    let (code, out, err) = cli(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

const TRACE: &str = "llama_modules.trace6.jsonl";
const PROFILE: &str = "module_spans.profile.jsonl";

#[test]
fn modules_without_names_are_a_tree_of_nesting_paths() {
    let trace = fixture(TRACE);
    let v = json_of(&[
        "query", &trace, "--kind", "modules", "--limit", "100", "--json",
    ]);
    assert_eq!((&v["by"], &v["names"]), (&json!("tree"), &json!(false)));
    let nodes = v["modules"].as_array().unwrap();
    // 30 module spans, 30 places, every one measured.
    assert_eq!((nodes.len(), &v["node_count"]), (30, &json!(30)));
    assert!(nodes.iter().all(|n| n["measured"] == true));
    // block[0]: 1000 ns; self = 1000 − (50 + 500 + 50 + 300) = 100 (its children run one
    // after another, so that is also the time none of them covers: see
    // `sibling_spans_run_one_after_another`); share 1000 / 10000 (the measured `update`). Ties
    // with block[1] are broken by key. Its four children: rms-norm[0], attn, rms-norm[1], mlp.
    // No gradient matches a nesting path; the allocator and the graph were not captured.
    assert_eq!(
        nodes[0],
        json!({"key": "block[0]", "label": "block[0]", "depth": 0, "parent": null,
               "children": 4, "measured": true, "calls": 1, "total_ns": 1000, "self_ns": 100,
               "share": 0.1, "alloc_bytes": 0, "graph_bytes": 0, "param_bytes": null,
               "gradients": {"present": 0, "missing": 0, "zero": 0, "non_finite": 0},
               "grad_norm": null})
    );
    // Children by total: attn (500) first, a child of node 0.
    assert_eq!(
        (&nodes[1]["key"], &nodes[1]["label"], &nodes[1]["parent"]),
        (&json!("block[0]/attn"), &json!("attn"), &json!(0))
    );
    let keys: Vec<&str> = nodes.iter().map(|r| r["key"].as_str().unwrap()).collect();
    for p in [
        "block[1]/rms-norm[1]",
        "block[1]/attn/linear[3]",
        "block[0]/attn/attn-rot[1]",
        "block[0]/mlp/linear[2]",
        "rms-norm",
        "linear",
    ] {
        assert!(keys.contains(&p), "{p} in {keys:?}");
    }
    assert_eq!(v["alloc_note"], "not captured (allocator off)");
    // No forward span (`forward` has no step): no coverage.
    assert_eq!(v["coverage"]["forwards"], json!([]));
    assert_eq!(v["coverage"]["overall"]["percent"], Value::Null);

    // By name, `linear`: per block 4 × 40 + 3 × 90 = 430, two blocks 860, plus the head's 110
    // = 970 ns in 15 calls, mean 64 (integer), share 0.097.
    let v = json_of(&[
        "query", &trace, "--kind", "modules", "--by", "name", "--json",
    ]);
    let linear = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "linear")
        .unwrap()
        .clone();
    assert_eq!(
        linear,
        json!({"name": "linear", "calls": 15, "total_ns": 970, "self_ns": 970, "mean_ns": 64,
               "share": 0.097})
    );

    // The table says the same, and how much it shows.
    let (code, text, _) = cli(&["query", &trace, "--kind", "modules", "--limit", "3"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("30 module(s) in a tree of 30 node(s), keyed by nesting path"),
        "{text}"
    );
    assert!(
        text.contains("showing the first 3 of 30 node(s) in tree order (`--limit 30` shows all)"),
        "{text}"
    );
    let line = |start: &str| {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?} in {text}"))
    };
    assert!(line("block[0] ").contains("measured"), "{text}");
    assert!(line("block[0] ").contains("10.0%"), "{text}");
    assert!(line("    linear[0] ").contains("40 ns"), "{text}");

    // `--by shape` is for ops only; `--by` on another kind is refused.
    assert_eq!(
        cli(&["query", &trace, "--kind", "modules", "--by", "shape"]).0,
        2
    );
    assert_eq!(
        cli(&["query", &trace, "--kind", "slowest", "--by", "name"]).0,
        2
    );
}

/// `llama_modules`' spans by id (`s0`, `s1`, … in make.py's order), as the CLI reads them:
/// `[start, end)`.
fn span_times() -> std::collections::HashMap<String, (u64, u64)> {
    let v = json_of(&[
        "query",
        &fixture(TRACE),
        "--kind",
        "slowest",
        "--limit",
        "100",
        "--json",
    ]);
    v["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let start = s["start_ns"].as_u64().unwrap();
            let end = start + s["duration_ns"].as_u64().unwrap();
            (s["id"].as_str().unwrap().to_string(), (start, end))
        })
        .collect()
}

#[test]
fn sibling_spans_run_one_after_another() {
    // make.py's `trace()` starts a span 10 ns after its parent's start, or after its previous
    // sibling's end, as a real capture's calls run (nested, never overlapping). By hand:
    // update s0 [0, 10000), forward s1 at 0 + 10, block[0] s2 at 10 + 10 for 1000 ns; in it
    // rms-norm s3 at 30 (50 ns, to 80), attn s4 at 80 + 10 (500 ns, to 590); in attn three
    // 40 ns linears (100–140, 150–190, 200–240), two 20 ns attn-rots (250–270, 280–300), then
    // the linear s10 holding the matmul at 310; after attn, rms-norm s11 at 600 (to 650), mlp
    // s12 at 660 (300 ns), its linears at 670, 770 and 870 (90 ns each), the last ending with
    // mlp at 960. block[1] s16 starts 10 ns after block[0]'s end: 1030; the head's rms-norm
    // s30 10 ns after block[1]'s end (2030): 2040 (70 ns), its linear s31 at 2120 (110 ns).
    let at = span_times();
    assert_eq!(at.len(), 32);
    for (id, want) in [
        ("s0", (0, 10000)),
        ("s1", (10, 9010)),
        ("s2", (20, 1020)),
        ("s3", (30, 80)),
        ("s4", (90, 590)),
        ("s7", (200, 240)),
        ("s9", (280, 300)),
        ("s10", (310, 350)),
        ("s11", (600, 650)),
        ("s12", (660, 960)),
        ("s15", (870, 960)),
        ("s16", (1030, 2030)),
        ("s30", (2040, 2110)),
        ("s31", (2120, 2230)),
    ] {
        assert_eq!(at[id], want, "{id}");
    }
    // Every span lies in its parent (`parent_id` read from the file) and no two siblings
    // overlap.
    let text = std::fs::read_to_string(fixture(TRACE)).unwrap();
    let mut children: std::collections::HashMap<String, Vec<(u64, u64)>> = Default::default();
    for line in text.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        if let (Some("span_start"), Some(parent)) = (e["kind"].as_str(), e["parent_id"].as_str()) {
            let (start, end) = at[e["id"].as_str().unwrap()];
            let (p_start, p_end) = at[parent];
            assert!(p_start <= start && end <= p_end, "{e}");
            children
                .entry(parent.to_string())
                .or_default()
                .push((start, end));
        }
    }
    for (parent, mut spans) in children {
        spans.sort_unstable();
        assert!(
            spans.windows(2).all(|w| w[0].1 <= w[1].0),
            "{parent}'s children overlap: {spans:?}"
        );
    }
}

#[test]
fn ops_by_module_path() {
    let v = json_of(&[
        "query",
        &fixture(TRACE),
        "--kind",
        "ops",
        "--by",
        "path",
        "--json",
    ]);
    // One 30 ns matmul in each block's last attn linear (f32 [2, 8]: 2 × 8 × 4 = 64 B).
    assert_eq!(
        v["groups"],
        json!([
            {"path": "block[0]/attn/linear[3]", "count": 1, "total_ns": 30, "mean_ns": 30,
             "max_ns": 30, "output_bytes": 64, "output_unknown": 0},
            {"path": "block[1]/attn/linear[3]", "count": 1, "total_ns": 30, "mean_ns": 30,
             "max_ns": 30, "output_bytes": 64, "output_unknown": 0},
        ])
    );
}

#[test]
fn gradient_groups_and_finding() {
    let trace = fixture(TRACE);
    let v = json_of(&[
        "query",
        &trace,
        "--kind",
        "gradients",
        "--limit",
        "50",
        "--json",
    ]);
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 21);
    assert_eq!(
        groups[0],
        json!({"root": "varmap", "module": "lm_head", "params": 1, "present": 1, "missing": 0,
               "zero": 0, "non_finite": 0, "flow": "none_missing"})
    );
    assert_eq!(groups[20]["module"], "model.norm");
    assert_eq!(groups[20]["flow"], "all_missing");
    let finding = "20 of 21 parameters have no gradient; only lm_head receives gradients; \
                   no gradient reaches 20 modules under model: model.embed_tokens, \
                   model.layers.0.input_layernorm, model.layers.0.mlp.down_proj, … and model.norm";
    assert_eq!(v["finding"], finding);
    // Existing fields are unchanged.
    assert_eq!(v["counts"]["missing"], 20);
    assert_eq!(v["gradients"].as_array().unwrap().len(), 21);

    let (code, text, _) = cli(&["query", &trace, "--kind", "gradients"]);
    assert_eq!(code, 0);
    assert!(text.contains(&format!("finding: {finding}")), "{text}");
    assert!(text.contains("by module (file order):"), "{text}");
    assert!(text.find("by module").unwrap() < text.find("parameters, problems first").unwrap());
}

#[test]
fn summary_says_what_was_captured() {
    let trace = fixture(TRACE);
    let (code, text, _) = cli(&["summary", &trace]);
    assert_eq!(code, 0);
    assert!(
        text.contains(
            "captured: tracing on (60 events), layer_ops on (2 events), allocator off, \
             gradients on (21 events)"
        ),
        "{text}"
    );
    assert!(
        text.contains("capture warning: only lm_head received a gradient"),
        "{text}"
    );
    assert!(text.contains("not captured (allocator off)"), "{text}");
    assert!(!text.contains("0 B"), "{text}");

    let v = json_of(&["summary", "--json", &trace]);
    assert_eq!(v["peak_bytes"], 0);
    assert_eq!(
        v["extra"]["capture_sources"]["sources"][2],
        json!({"source": "allocator", "on": false, "events": 0})
    );
    assert_eq!(
        v["extra"]["capture_sources"]["warnings"],
        json!(["only lm_head received a gradient"])
    );

    // The warning is a diagnostic of the file at the capture_sources line (the last, 89).
    let v = json_of(&["validate", "--json", &trace]);
    assert_eq!(
        v["diagnostics"],
        json!([{"line": 89, "severity": "warning", "category": "capture",
                "message": "capture: only lm_head received a gradient"}])
    );
}

#[test]
fn profile_module_spans() {
    let profile = fixture(PROFILE);
    assert_eq!(cli(&["validate", &profile]).0, 0);
    // r1: prefill + 1 decode step, r2: prefill; each call: `forward` (function) → block,
    // block (4000 ns each, a 3000 ns linear inside each), lm_head 1000 ns.
    let v = json_of(&["query", &profile, "--kind", "modules", "--json"]);
    let node = |n: &Value| {
        (
            n["key"].as_str().unwrap().to_string(),
            n["depth"].as_u64().unwrap(),
            n["calls"].as_u64().unwrap(),
            n["total_ns"].as_u64().unwrap(),
            n["self_ns"].as_u64().unwrap(),
        )
    };
    let nodes: Vec<_> = v["modules"].as_array().unwrap().iter().map(node).collect();
    // Three calls of each; a block's self is 4000 − 3000 = 1000 a call.
    let row = |k: &str, depth: u64, calls: u64, total: u64, self_ns: u64| {
        (k.to_string(), depth, calls, total, self_ns)
    };
    assert_eq!(
        nodes,
        [
            row("block[0]", 0, 3, 12000, 3000),
            row("block[0]/linear", 1, 3, 9000, 9000),
            row("block[1]", 0, 3, 12000, 3000),
            row("block[1]/linear", 1, 3, 9000, 9000),
            row("lm_head", 0, 3, 3000, 3000),
        ]
    );
    // Each call: the blocks cover [100, 8100) and lm_head [9000, 10000) of the call's
    // extent [0, 10000) (the profile has no prefill or decode span): 9000 of 10000, 90%.
    let cov = json!({"forward_ns": 10000, "covered_ns": 9000, "unattributed_ns": 1000,
                     "percent": 90});
    assert_eq!(v["requests"][0]["forward_calls"][1]["coverage"], cov);
    assert_eq!(
        v["coverage"],
        json!({"forward_ns": 30000, "covered_ns": 27000, "unattributed_ns": 3000,
               "percent": 90})
    );
    assert_eq!(v["requests"][0]["request_id"], "r1");
    assert_eq!(
        v["requests"][0]["forward_calls"].as_array().unwrap().len(),
        2
    );
    assert_eq!(v["requests"][0]["modules"][0]["total_ns"], 8000);
    assert_eq!(
        v["requests"][1]["forward_calls"].as_array().unwrap().len(),
        1
    );

    let v = json_of(&[
        "query", &profile, "--kind", "modules", "--by", "name", "--json",
    ]);
    let names: Vec<(String, u64, u64)> = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["calls"].as_u64().unwrap(),
                r["total_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("block".to_string(), 6, 24000),
            ("linear".to_string(), 6, 18000),
            ("lm_head".to_string(), 3, 3000)
        ]
    );

    // Module events are no request phase.
    let v = json_of(&["query", &profile, "--kind", "requests", "--json"]);
    assert_eq!(v["requests"][0]["phases"], json!(["request"]));
    assert_eq!(v["requests"][0]["duration_us"], 50);

    let (code, text, _) = cli(&["query", &profile, "--kind", "modules"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("2 request(s), 3 forward call(s); keyed by nesting path"),
        "{text}"
    );
    assert!(
        text.contains(
            "request r1 (2 forward call(s)): modules cover 90% of forward (18.0 µs of 20.0 µs; \
             2.00 µs unattributed)"
        ),
        "{text}"
    );
    assert!(
        text.contains("  decode 1: modules cover 90% of forward"),
        "{text}"
    );
}

const NAMES: &str = "mistral_names.trace6.jsonl";
const NAMES_SLOW: &str = "mistral_names_slow.trace6.jsonl";
const NAMES_PROFILE: &str = "names.profile.jsonl";

/// The fields of a tree node worth comparing: (key, measured, calls, total, self, alloc,
/// graph, params, (present, missing, zero)).
type NodeRow = (
    String,
    bool,
    u64,
    u64,
    u64,
    u64,
    u64,
    Option<u64>,
    (u64, u64, u64),
);

fn node_row(n: &Value) -> NodeRow {
    let g = &n["gradients"];
    (
        n["key"].as_str().unwrap().to_string(),
        n["measured"].as_bool().unwrap(),
        n["calls"].as_u64().unwrap(),
        n["total_ns"].as_u64().unwrap(),
        n["self_ns"].as_u64().unwrap(),
        n["alloc_bytes"].as_u64().unwrap(),
        n["graph_bytes"].as_u64().unwrap(),
        n["param_bytes"].as_u64(),
        (
            g["present"].as_u64().unwrap(),
            g["missing"].as_u64().unwrap(),
            g["zero"].as_u64().unwrap(),
        ),
    )
}

/// `mistral_names.trace6.jsonl` (make.py `mistral()`): a 2-layer Mistral's step whose 20 flat
/// `linear`/`rms-norm` spans carry their module names. Per layer, durations (layer 1: each
/// 10 ns more) rms-norm 40, q 100, k 60, v 60, o 80, rms-norm 40, gate 120, up 120, down 140
/// (sum 760; layer 1 850), 20 ns apart from 120 ns on inside the forward [100, 2500); then
/// model.norm 50 and lm_head 200. Layer 1's q_proj holds a 30 ns `matmul` op span where 4096
/// bytes are allocated; layer 0's down_proj allocates 1024, backward 2048; a 2 × 64 f32
/// activation (512 B) is seen in layer 0's gate_proj. Parameters: q/k/v/o 16384 B, gate/up/
/// down 32768 B, norms 256 B, embed_tokens and lm_head 25600 B; norms 1.0, except layer 1's
/// q (3.0) and k (4.0), its down_proj missing and embed_tokens zero (0.0).
#[test]
fn module_names_make_one_tree_of_time_memory_and_gradients() {
    let trace = fixture(NAMES);
    let v = json_of(&[
        "query", &trace, "--kind", "modules", "--limit", "100", "--json",
    ]);
    assert_eq!(v["names"], true);
    // Covered: 760 + 850 + 50 + 200 = 1860 of the 2400 ns forward, 77% (77.5 rounded down).
    assert_eq!(
        v["coverage"]["overall"],
        json!({"forward_ns": 2400, "covered_ns": 1860, "unattributed_ns": 540, "percent": 77})
    );
    assert_eq!(v["coverage"]["backward_unsplit"], true);
    assert_eq!(v["outside_alloc_bytes"], 2048);
    let nodes: Vec<NodeRow> = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(node_row)
        .collect();
    let find = |k: &str| nodes.iter().find(|n| n.0 == k).unwrap().clone();
    // Tree order at the top: model (group, 760 + 850 + 50 = 1660 ns) then lm_head (200);
    // in model: layers.1 (850), layers.0 (760), norm (50), embed_tokens (a gradient only).
    let tops: Vec<&str> = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["depth"].as_u64().unwrap() <= 1)
        .map(|n| n["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        tops,
        [
            "model",
            "model.layers.1",
            "model.layers.0",
            "model.norm",
            "model.embed_tokens",
            "lm_head"
        ]
    );
    // A layer's parameters: 4 × 16384 + 3 × 32768 + 2 × 256 = 164352 B. model adds both
    // layers, norm (256) and embed_tokens (25600): 354560 B; of its 20 parameters one is
    // missing, one zero; alloc 4096 + 1024; graph 512. A group: no calls, no self time.
    assert_eq!(
        find("model"),
        (
            "model".into(),
            false,
            0,
            1660,
            0,
            5120,
            512,
            Some(354_560),
            (18, 1, 1)
        )
    );
    assert_eq!(
        find("model.layers.1.self_attn.q_proj"),
        (
            "model.layers.1.self_attn.q_proj".into(),
            true,
            1,
            110,
            80,
            4096,
            0,
            Some(16384),
            (1, 0, 0)
        )
    );
    // Layer 1's self_attn, a group: 110 + 70 + 70 + 90 = 340 ns and no calls of its own; its
    // norm √(9 + 16 + 1 + 1).
    let attn = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["key"] == "model.layers.1.self_attn")
        .unwrap();
    assert_eq!(
        (&attn["calls"], &attn["total_ns"]),
        (&json!(0), &json!(340))
    );
    assert!((attn["grad_norm"].as_f64().unwrap() - 27f64.sqrt()).abs() < 1e-12);
    // embed_tokens ran no span; lm_head is measured and holds its 25600 parameter bytes.
    assert_eq!(
        find("model.embed_tokens"),
        (
            "model.embed_tokens".into(),
            false,
            0,
            0,
            0,
            0,
            0,
            Some(25600),
            (0, 0, 1)
        )
    );
    assert_eq!(find("lm_head").3, 200);

    // The table marks groups and nodes without spans.
    let (code, text, _) = cli(&["query", &trace, "--kind", "modules", "--limit", "100"]);
    assert_eq!(code, 0);
    let line = |start: &str| text.lines().find(|l| l.starts_with(start)).unwrap();
    assert!(line("model ").contains("Σ children"), "{text}");
    // No span ran embed_tokens: its calls, time, self time and share were not measured, so
    // they are `–`, not 0.
    let cells: Vec<&str> = line("  embed_tokens ").split_whitespace().collect();
    assert_eq!(
        cells[..7],
        ["embed_tokens", "no", "span", "–", "–", "–", "–"],
        "{text}"
    );
    assert!(line("      q_proj ").contains("measured"), "{text}");
    assert!(
        text.contains("keyed by module names (from the weights)"),
        "{text}"
    );

    // Ops and phases use the same keys.
    let v = json_of(&["query", &trace, "--kind", "ops", "--by", "path", "--json"]);
    assert_eq!(v["groups"][0]["path"], "model.layers.1.self_attn.q_proj");
    let v = json_of(&[
        "query", &trace, "--kind", "phases", "--json", "--limit", "1",
    ]);
    assert_eq!(
        v["module_pairs"][0],
        json!({"path": "lm_head", "forward_count": 1, "forward_ns": 200, "backward_count": 0,
               "backward_ns": 0})
    );
    // `--by name` still groups by span name: 15 linears, 2 × (100 + 60 + 60 + 80 + 120 + 120
    // + 140) + 7 × 10 + 200 = 1360 + 70 + 200 = 1630 ns.
    let v = json_of(&[
        "query", &trace, "--kind", "modules", "--by", "name", "--json",
    ]);
    let linear = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "linear")
        .unwrap();
    assert_eq!(
        (&linear["calls"], &linear["total_ns"]),
        (&json!(15), &json!(1630))
    );
}

#[test]
fn summary_says_how_much_the_modules_cover_and_whether_names_were_captured() {
    let (code, text, _) = cli(&["summary", &fixture(NAMES)]);
    assert_eq!(code, 0);
    for line in [
        "module_names on (20 events)",
        "modules cover 77% of forward (1.86 µs of 2.40 µs; 540 ns unattributed)",
        "backward is one span with no per-module split (candle's backward opens no spans)",
        "module names: 20 span(s) named by their weights",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    let v = json_of(&["summary", "--json", &fixture(NAMES)]);
    assert_eq!(
        v["extra"]["module_coverage"],
        json!({"forward_ns": 2400, "covered_ns": 1860, "unattributed_ns": 540, "percent": 77,
               "forwards": 1, "backward_unsplit": true})
    );

    // A trace without names says so, and how to get them.
    let (_, text, _) = cli(&["summary", &fixture(TRACE)]);
    assert!(
        text.contains(
            "module names: not captured — wrap the VarBuilder with \
             `candle_trace_capture::nn::name_modules(vb)` before building the model, or build \
             candle-nn layers through `candle_trace_capture::nn::{linear, conv2d, embedding, \
             layer_norm, rms_norm, …}` (candle-nn's own layers open no spans)"
        ),
        "{text}"
    );
    // Its `forward` has no step, so there is no forward to cover, and no backward span.
    assert!(!text.contains("modules cover"), "{text}");
    assert!(!text.contains("backward is one span"), "{text}");
}

#[test]
fn compare_matches_modules_by_name() {
    // The candidate's layer-1 q_proj takes 100 ns more: 110 → 210 ns.
    let v = json_of(&["compare", &fixture(NAMES), &fixture(NAMES_SLOW), "--json"]);
    assert_eq!(
        v["modules"][0],
        json!({"path": "model.layers.1.self_attn.q_proj", "base_count": 1, "cand_count": 1,
               "base_ns": 110, "cand_ns": 210, "delta_ns": 100, "percent": 100.0 / 110.0 * 100.0,
               "presence": "both"})
    );
    assert_eq!(v["modules"][1]["delta_ns"], 0);
    let (code, text, _) = cli(&["compare", &fixture(NAMES), &fixture(NAMES_SLOW)]);
    assert_eq!(code, 0);
    assert!(
        text.contains("\nmodules — largest |delta| first\n"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("model.layers.1.self_attn.q_proj") && l.contains("+100 ns")),
        "{text}"
    );
}

#[test]
fn exports_carry_the_module_names() {
    use candle_trace_schema::analysis::otlp::{request_spans, AttributeValue};
    use candle_trace_schema::format::chrome::ChromeReader;

    // Chrome: each named span's `args.module`, read back by the import.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("names.chrome.json");
    let (code, _, err) = cli(&[
        "export",
        &fixture(NAMES),
        "--format",
        "chrome",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let named: Vec<(&str, &str)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?, e["args"]["module"].as_str()?)))
        .collect();
    assert_eq!(named.len(), 20);
    assert!(named.contains(&("linear", "model.layers.1.self_attn.q_proj")));
    assert!(named.contains(&("rms-norm", "model.norm")));
    let mut reader = ChromeReader::new();
    reader.push(text.as_bytes());
    let back = reader.finish();
    let modules: Vec<&str> = back
        .spans
        .iter()
        .filter_map(|s| s.module.as_deref())
        .collect();
    assert_eq!(modules.len(), 20);
    assert!(modules.contains(&"lm_head"));

    // OTLP: module spans with a name carry `candle_trace.module`.
    let bytes = std::fs::read(fixture(NAMES_PROFILE)).unwrap();
    let doc = candle_trace_schema::format::profile::read_profile(&bytes);
    let spans = request_spans(&doc);
    let modules: Vec<(&str, &AttributeValue)> = spans
        .iter()
        .filter_map(|s| {
            let (_, v) = s
                .attributes
                .iter()
                .find(|(k, _)| k == "candle_trace.module")?;
            Some((s.name.as_str(), v))
        })
        .collect();
    // Two forward calls of four named linears each; the `forward` spans have no name.
    assert_eq!(modules.len(), 8);
    assert_eq!(
        modules[0],
        (
            "linear",
            &AttributeValue::String("model.layers.0.q_proj".into())
        )
    );
    let (code, otlp, _) = cli(&["export", &fixture(NAMES_PROFILE), "--format", "otlp"]);
    assert_eq!(code, 0);
    assert!(
        otlp.contains(r#""key":"candle_trace.module","value":{"stringValue":"lm_head"}"#),
        "{otlp}"
    );
}

/// `names.profile.jsonl` (make.py `names_profile()`): request q's prefill (times × 2, its
/// `prefill` span 200 µs) and decode step 1 (× 1, its `decode` span 120 µs); each call a
/// `forward` span [0, 100) µs holding `model.layers.0.q_proj` [10, 30), `model.layers.1.q_proj`
/// [40, 60), `lm_head` [70, 80) and `model.layers.0.q_proj` again [85, 90).
#[test]
fn profile_module_trees_use_the_names() {
    let v = json_of(&[
        "query",
        &fixture(NAMES_PROFILE),
        "--kind",
        "modules",
        "--json",
    ]);
    assert_eq!(v["names"], true);
    let nodes: Vec<(String, bool, u64, u64)> = v["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["key"].as_str().unwrap().to_string(),
                n["measured"].as_bool().unwrap(),
                n["calls"].as_u64().unwrap(),
                n["total_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    // Layer 0's q_proj: 2 calls a forward call, (20 + 5) µs × (2 + 1) = 75 µs; layer 1's
    // 20 µs × 3 = 60; lm_head 10 × 3 = 30; model groups the layers: 135 µs (a group has no
    // calls of its own).
    let row = |k: &str, m: bool, calls: u64, us: u64| (k.to_string(), m, calls, us * 1000);
    assert_eq!(
        nodes,
        [
            row("model", false, 0, 135),
            row("model.layers.0", false, 0, 75),
            row("model.layers.0.q_proj", true, 4, 75),
            row("model.layers.1", false, 0, 60),
            row("model.layers.1.q_proj", true, 2, 60),
            row("lm_head", true, 2, 30),
        ]
    );
    // Covered: 55 µs × k of the prefill's 200 µs and the decode step's 120 µs.
    let calls = &v["requests"][0]["forward_calls"];
    assert_eq!(
        calls[0]["coverage"],
        json!({"forward_ns": 200_000, "covered_ns": 110_000, "unattributed_ns": 90_000,
               "percent": 55})
    );
    assert_eq!(calls[1]["coverage"]["percent"], 45);
    // 165 of 320 µs: 51% (51.6 rounded down).
    assert_eq!(v["coverage"]["percent"], 51);
    let (code, text, _) = cli(&["query", &fixture(NAMES_PROFILE), "--kind", "modules"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("modules cover 51% of forward (165 µs of 320 µs; 155 µs unattributed)"),
        "{text}"
    );
    assert!(
        text.contains("  prefill 0: modules cover 55% of forward"),
        "{text}"
    );
}

#[test]
fn summary_says_why_no_span_was_named() {
    let dir = tempfile::tempdir().unwrap();
    for (on, why) in [
        (
            true,
            "not captured (no span was named) — wrap the VarBuilder",
        ),
        (
            false,
            "not captured (module_names off) — wrap the VarBuilder",
        ),
    ] {
        let text = [
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            r#"{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
            r#"{"kind":"span_end","id":"s","duration_ns":10}"#,
            &format!(
                r#"{{"kind":"capture_sources","sources":[{{"source":"module_names","on":{on},"events":0}}],"events_dropped":0,"warnings":[]}}"#
            ),
        ]
        .join("\n");
        let path = dir.path().join(format!("{on}.trace6.jsonl"));
        std::fs::write(&path, text + "\n").unwrap();
        let (code, out, _) = cli(&["summary", path.to_str().unwrap()]);
        assert_eq!(code, 0);
        assert!(out.contains(&format!("module names: {why}")), "{out}");
    }
}

#[test]
fn span_queries_name_each_span_by_its_module() {
    let trace = fixture("mistral_names.trace6.jsonl");
    let v = json_of(&[
        "query", &trace, "--kind", "slowest", "--limit", "6", "--json",
    ]);
    let spans = v["spans"].as_array().unwrap();
    // make.py: update 7000, backward 3000, forward 2400, optimizer 1000 ns, then the slowest
    // module spans: lm_head 200 ns, layer 1's down_proj 140 + 10 = 150 ns.
    let durations: Vec<u64> = spans
        .iter()
        .map(|s| s["duration_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(durations, [7000, 3000, 2400, 1000, 200, 150]);
    assert_eq!(
        (&spans[0]["name"], &spans[0]["module"]),
        (&json!("update"), &Value::Null)
    );
    assert_eq!(
        (&spans[4]["name"], &spans[4]["module"]),
        (&json!("linear"), &json!("lm_head"))
    );
    assert_eq!(spans[5]["module"], json!("model.layers.1.mlp.down_proj"));
    // The table has a module column beside the nesting path.
    let (code, text, err) = cli(&["query", &trace, "--kind", "self", "--limit", "20"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.lines().next().unwrap().contains("module"), "{text}");
    let q_proj = text
        .lines()
        .find(|l| l.contains("model.layers.1.self_attn.q_proj"))
        .unwrap_or_else(|| panic!("no q_proj row in {text}"));
    // Layer 1's q_proj: 100 + 10 = 110 ns, of them 30 ns in its matmul: 80 ns self.
    assert!(q_proj.starts_with("update/forward/linear "), "{q_proj}");
    assert!(q_proj.contains("80 ns"), "{q_proj}");
    // Its matmul op span (30 ns) ran in it: the same module.
    let (_, text, _) = cli(&["query", &trace, "--kind", "self", "--limit", "40"]);
    let matmul = text
        .lines()
        .find(|l| l.starts_with("update/forward/linear/matmul "))
        .unwrap_or_else(|| panic!("no matmul row in {text}"));
    assert!(
        matmul.contains(" model.layers.1.self_attn.q_proj "),
        "{matmul}"
    );

    // The allocations live at the peak say which module made them: m1 (4096 B) in that
    // matmul, m3 (2048 B) in backward (no module), m2 (1024 B) in layer 0's down_proj.
    let v = json_of(&["query", &trace, "--kind", "memory", "--json"]);
    let live: Vec<(&str, &Value)> = v["live_at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["tensor_id"].as_str().unwrap(), &a["module"]))
        .collect();
    assert_eq!(
        live,
        [
            ("m1", &json!("model.layers.1.self_attn.q_proj")),
            ("m3", &Value::Null),
            ("m2", &json!("model.layers.0.mlp.down_proj")),
        ]
    );
    let (_, text, _) = cli(&["query", &trace, "--kind", "memory"]);
    let m2 = text
        .lines()
        .find(|l| l.starts_with("m2 "))
        .unwrap_or_else(|| panic!("no m2 row in {text}"));
    assert!(
        m2.contains(" linear ") && m2.contains(" model.layers.0.mlp.down_proj "),
        "{m2}"
    );

    // A trace without names has no module column.
    let plain = fixtures_dir().join("train_step.trace6.jsonl");
    let (_, text, _) = cli(&["query", &plain.to_string_lossy(), "--kind", "slowest"]);
    assert!(!text.lines().next().unwrap().contains("module"), "{text}");
    let (_, text, _) = cli(&["query", &plain.to_string_lossy(), "--kind", "memory"]);
    let header = text
        .lines()
        .find(|l| l.starts_with("tensor "))
        .unwrap_or_else(|| panic!("no live table in {text}"));
    assert!(!header.contains("module"), "{text}");
}

#[test]
fn span_queries_key_a_weightless_module_span_by_what_it_holds() {
    // A Llama-style layer: `block` > (`attn` > q_proj, k_proj), `mlp` > up_proj, down_proj; only
    // the linears own weights. block is keyed `model.layers.3` (the common prefix, by whole
    // segments, of its linears), attn `model.layers.3.self_attn`, mlp `model.layers.3.mlp`.
    let span = |id: &str, parent: &str, name: &str, start: u64, module: Option<&str>| {
        let module = module.map_or(String::new(), |m| format!(r#","module":"{m}""#));
        format!(
            r#"{{"kind":"span_start","id":"{id}","name":"{name}","start_ns":{start},"span_kind":"module","parent_id":"{parent}","step":"forward"{module}}}"#
        )
    };
    let end = |id: &str, d: u64| format!(r#"{{"kind":"span_end","id":"{id}","duration_ns":{d}}}"#);
    let lines = [
        String::from(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
        ),
        String::from(
            r#"{"kind":"span_start","id":"f","name":"forward","start_ns":0,"span_kind":"function","step":"forward","measured":true}"#,
        ),
        span("b", "f", "block", 10, None),
        span("a", "b", "attn", 20, None),
        span(
            "q",
            "a",
            "linear",
            30,
            Some("model.layers.3.self_attn.q_proj"),
        ),
        span(
            "k",
            "a",
            "linear",
            60,
            Some("model.layers.3.self_attn.k_proj"),
        ),
        span("m", "b", "mlp", 100, None),
        span("u", "m", "linear", 105, Some("model.layers.3.mlp.up_proj")),
        span(
            "d",
            "m",
            "linear",
            120,
            Some("model.layers.3.mlp.down_proj"),
        ),
        end("d", 40),
        end("u", 10),
        end("m", 60),
        end("k", 20),
        end("q", 20),
        end("a", 70),
        end("b", 900),
        end("f", 1000),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("block.trace6.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let trace = path.to_string_lossy();
    let v = json_of(&["query", &trace, "--kind", "slowest", "--json"]);
    let module: Vec<(&str, Value)> = v["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["module"].clone()))
        .collect();
    // Slowest first: forward 1000 (no module: a function span), block 900, attn 70, mlp 60,
    // down_proj 40, then q_proj and k_proj (20 each, by start), up_proj 10.
    assert_eq!(
        module,
        [
            ("forward", Value::Null),
            ("block", json!("model.layers.3")),
            ("attn", json!("model.layers.3.self_attn")),
            ("mlp", json!("model.layers.3.mlp")),
            ("linear", json!("model.layers.3.mlp.down_proj")),
            ("linear", json!("model.layers.3.self_attn.q_proj")),
            ("linear", json!("model.layers.3.self_attn.k_proj")),
            ("linear", json!("model.layers.3.mlp.up_proj")),
        ]
    );
    // The table shows the same keys, `–` only for the function span.
    let (code, text, err) = cli(&["query", &trace, "--kind", "self"]);
    assert_eq!(code, 0, "{err}");
    let row = |first: &str| {
        text.lines()
            .find(|l| l.starts_with(first))
            .unwrap_or_else(|| panic!("no {first} row in {text}"))
            .to_string()
    };
    // block's self: 900 − 70 − 60 = 770 ns.
    let block = row("forward/block ");
    assert!(
        block.contains(" model.layers.3 ") && block.contains("770 ns"),
        "{block}"
    );
    assert!(row("forward ").contains(" – "), "{text}");
}

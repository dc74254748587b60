//! `--format markdown` of `summary`, `findings`, `compare` and the gate against Markdown
//! written by hand, for two fixtures:
//!
//! - `findings_train.trace6.jsonl` (what it holds: `make_findings_fixtures.py`): the measured
//!   step `s` lasts 1 000 000 ns = 1.00 ms; five spans (s, f, a, b, o), one root, `a` two levels
//!   down; two allocs (4096 B at 100 ns, 1024 B at 900 000 ns) and one free (the 4096 B at
//!   800 000 ns), so the peak is 4096 B = 4.00 KiB on cpu at 100 ns; no op records and no
//!   `capture_sources` line; three gradient records. Its findings (worked out in
//!   `tests/findings.rs`): backward 100 µs against forward 700 µs (14 %, 600 µs at stake),
//!   `attn` 550 µs of 1.00 ms (55 %), forward 700 µs of the 1.00 ms step (70 %; at stake
//!   700 − 300 = 400 µs; backward 10 %, optimizer 50 µs = 5 %, other 1000 − 850 = 150 µs = 15 %),
//!   the 4.00 KiB peak in forward, two missing gradients of `mlp.fc` (root `model`). Its module
//!   coverage: `attn` (50 ns to 550 050 ns) lies inside forward (0 to 700 000 ns), so 550 µs of
//!   700 µs are covered, 150 µs unattributed, ⌊550 × 100 / 700⌋ = 78 %; backward holds no
//!   module span; no span has a module name and the file states no capture sources.
//! - the compare pair `compare/base` → `compare/cand`: totals 100 µs → 80 µs (−20 µs, −20.0 %);
//!   spans 6 → 7 (+16.7 %); the peak 2048 B (w1 512 + x 1024 + g 512 at 50 000 ns) → 1536 B
//!   (w1 + x at 3000 ns, g allocated after x's free), −512 B, −25.0 %, the gradient category's
//!   512 B gone (−100.0 %), activation and parameter unchanged; span paths by |delta|: `step`
//!   −20 µs, `step/forward/linear` 35 → 22 µs (−13 µs, −37.1 %), `step/forward` −10 µs (−25.0
//!   %), `step/optimizer` 6 µs vanished, then `step/backward` −5 µs, `fused_gelu` +4 µs new,
//!   `sgd` +1.5 µs new (cut by `--limit 4`); modules (the two unnamed `linear` module spans
//!   under forward, keyed by occurrence): `linear[0]` 20 → 12 µs (−8 µs, −40.0 %), `linear[1]`
//!   15 → 10 µs (−5 µs, −33.3 %); the `fused_gelu` span is an op, not a module; ops: matmul [8, 16] f32 21 → 13 µs (−38.1 %), gelu
//!   bf16 new 2 µs, relu f32 vanished 1 µs; gradients: `m.new` absent → present, `m.w` present
//!   → non_finite (by key).
//! - the gate on `steps_base` → `steps_cand_slow` (values from `cli/tests/gate_cli.rs`):
//!   medians 1000 → 1200 µs (+20.0 %, noise 3 × 40 µs = 120 µs), peaks 1 000 000 → 1 150 000
//!   bytes (+15.0 %, MADs 0).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use candle_trace_cli::markdown::BUDGET_BYTES;
use candle_trace_cli::run;

/// Run the CLI in this package's folder (paths in the output as given): (code, stdout).
fn cli(args: &[&str]) -> (i32, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut argv = vec!["candle-trace"];
    argv.extend_from_slice(args);
    let code = run(argv, &mut out, &mut err);
    (code, String::from_utf8(out).expect("stdout is UTF-8"))
}

#[test]
fn summary_of_a_trace() {
    let (code, out) = cli(&[
        "summary",
        "fixtures/findings_train.trace6.jsonl",
        "--format",
        "markdown",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "### `fixtures/findings_train.trace6.jsonl` — candle-graph/trace/6

`train::step` · train · cpu · timing host · step 2 after 1 warm-up

| metric | value | exact |
| --- | ---: | ---: |
| total (measured) | 1.00 ms | 1000000 ns |
| ops | not captured |  |
| spans | 5 |  |
| root spans | 1 |  |
| max depth | 2 |  |
| allocs | 2 |  |
| frees | 1 |  |
| peak memory | 4.00 KiB on cpu at 100 ns | 4096 B |
| gradients | 3 |  |

**captured:** not stated (the file has no capture\\_sources line)

modules cover 78% of forward (550 µs of 700 µs; 150 µs unattributed)<br>backward is one span with no per-module split (candle's backward opens no spans)<br>module names: not captured — wrap the VarBuilder with \\`candle\\_trace\\_capture::nn::name\\_modules(vb)\\` before building the model, or build candle-nn layers through \\`candle\\_trace\\_capture::nn::{linear, conv2d, embedding, layer\\_norm, rms\\_norm, …}\\` (candle-nn's own layers open no spans)

no diagnostics
"
    );
}

#[test]
fn findings_of_a_trace() {
    let (code, out) = cli(&[
        "findings",
        "fixtures/findings_train.trace6.jsonl",
        "--format",
        "markdown",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "### Findings — `fixtures/findings_train.trace6.jsonl`

1. **backward takes 14% of the forward time: gradients reach few parameters** — `backward_short` · at stake 600 µs
   - forward 700 µs
   - backward 100 µs
   - shows at: span `s` (line 2)
2. **attn takes 55% of the step** — `dominant_module` · at stake 550 µs
   - attn: 550 µs in 1 call(s)
   - measured total 1.00 ms
   - shows at: modules row `attn`
3. **forward takes 70% of the step** — `dominant_phase` · at stake 400 µs
   - forward 700 µs (70%)
   - backward 100 µs (10%)
   - optimizer 50.0 µs (5%)
   - other 150 µs (15%)
   - measured step 1.00 ms
   - shows at: phases row `forward`
4. **memory peaks at 4.00 KiB in forward, held mostly by activations (kept for backward)** — `memory_peak` · at stake 4.00 KiB
   - activations (kept for backward): 4.00 KiB (100%)
   - shows at: memory row `peak`
5. **2 parameter(s) in 1 module(s) get no gradient** — `gradients_missing` · at stake 2 parameter(s)
   - mlp.fc: 2 of 2 parameter(s) missing
   - shows at: gradients row `mlp.fc`
"
    );
    // `--json` stays a synonym of `--format json`; giving both is refused.
    let (code, json) = cli(&["findings", "fixtures/findings_train.trace6.jsonl", "--json"]);
    assert_eq!(code, 0);
    let (_, format_json) = cli(&[
        "findings",
        "fixtures/findings_train.trace6.jsonl",
        "--format",
        "json",
    ]);
    assert_eq!(json, format_json);
    let (code, _) = cli(&[
        "findings",
        "fixtures/findings_train.trace6.jsonl",
        "--json",
        "--format",
        "markdown",
    ]);
    assert_eq!(code, 2);
}

#[test]
fn compare_of_two_traces_cut_to_the_limit() {
    let (code, out) = cli(&[
        "compare",
        "fixtures/compare/base.trace6.jsonl",
        "fixtures/compare/cand.trace6.jsonl",
        "--format",
        "markdown",
        "--limit",
        "4",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "### Compare `fixtures/compare/base.trace6.jsonl` → `fixtures/compare/cand.trace6.jsonl`

entrypoint `train::step` · device cpu

#### summary

| metric | baseline | candidate | delta | % |
| --- | ---: | ---: | ---: | ---: |
| op_count | 3 | 3 | 0 | 0.0% |
| total_ns | 100 µs | 80.0 µs | -20.0 µs | -20.0% |
| span_count | 6 | 7 | +1 | +16.7% |
| root_span_count | 1 | 1 | 0 | 0.0% |
| max_depth | 2 | 2 | 0 | 0.0% |
| alloc_count | 3 | 3 | 0 | 0.0% |
| free_count | 1 | 1 | 0 | 0.0% |
| peak_bytes | 2.00 KiB | 1.50 KiB | -512 B | -25.0% |

#### span paths — largest \\|delta\\| first

| path | n base | n cand | baseline | candidate | delta | % |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
| `step` | 1 | 1 | 100 µs | 80.0 µs | -20.0 µs | -20.0% |
| `step/forward/linear` | 2 | 2 | 35.0 µs | 22.0 µs | -13.0 µs | -37.1% |
| `step/forward` | 1 | 1 | 40.0 µs | 30.0 µs | -10.0 µs | -25.0% |
| `step/optimizer` | 1 | 0 | 6.00 µs | 0 ns | -6.00 µs | vanished |

*4 of 7 rows shown (`--limit 4`).*

#### modules — largest \\|delta\\| first

| module | calls base | calls cand | baseline | candidate | delta | % |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
| `linear[0]` | 1 | 1 | 20.0 µs | 12.0 µs | -8.00 µs | -40.0% |
| `linear[1]` | 1 | 1 | 15.0 µs | 10.0 µs | -5.00 µs | -33.3% |

#### ops by (name, shape, dtype) — largest \\|delta\\| first

| op | shape | dtype | n base | n cand | baseline | candidate | delta | % |
| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |
| `matmul` | \\[8, 16\\] | `f32` | 2 | 2 | 21.0 µs | 13.0 µs | -8.00 µs | -38.1% |
| `gelu` | \\[8, 16\\] | `bf16` | 0 | 1 | 0 ns | 2.00 µs | +2.00 µs | new |
| `relu` | \\[8, 16\\] | `f32` | 1 | 0 | 1.00 µs | 0 ns | -1.00 µs | vanished |

#### memory at the peak

|  | baseline | candidate | delta | % |
| --- | ---: | ---: | ---: | ---: |
| peak | 2.00 KiB | 1.50 KiB | -512 B | -25.0% |
| ↳ `gradient` | 512 B | 0 B | -512 B | -100.0% |
| ↳ `activation` | 1.00 KiB | 1.00 KiB | 0 B | 0.0% |
| ↳ `parameter` | 512 B | 512 B | 0 B | 0.0% |

#### gradient state changes

| parameter | baseline | candidate |
| --- | --- | --- |
| `m.new` | (absent) | present |
| `m.w` | present | non_finite |
"
    );
}

#[test]
fn a_refused_comparison_says_why_in_markdown() {
    let (code, out) = cli(&[
        "compare",
        "fixtures/compare/base.trace6.jsonl",
        "fixtures/compare/other_device.trace6.jsonl",
        "--format",
        "markdown",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "### Not compared: `fixtures/compare/base.trace6.jsonl` and `fixtures/compare/other_device.trace6.jsonl`

- device differs: baseline `cpu`, candidate `cuda:0`

Pass `--force` to compare anyway.
"
    );
}

#[test]
fn the_gate_in_markdown_lists_breached_rules_first() {
    let (code, out) = cli(&[
        "compare",
        "fixtures/steps_base",
        "fixtures/steps_cand_slow",
        "--fail-if",
        "op_count>1000000",
        "--fail-if",
        "total>+5%",
        "--fail-if",
        "peak_bytes>+10%",
        "--format",
        "markdown",
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "### ❌ Regression gate failed: 2 of 3 rule(s) breached

baseline `fixtures/steps_base` (5 step files) · candidate `fixtures/steps_cand_slow` (3 step files)

| result | rule | baseline | candidate | change | noise (3×MAD) | steps |
| --- | --- | ---: | ---: | ---: | ---: | ---: |
| ❌ FAIL | `total>+5%` | 1000000 ns | 1200000 ns | +20.0% | 120000 ns | 5 / 3 |
| ❌ FAIL | `peak_bytes>+10%` | 1000000 bytes | 1150000 bytes | +15.0% | 0 bytes | 5 / 3 |
| ✅ ok | `op_count>1000000` | 0 | 0 | (baseline 0) | – | 5 / 3 |

Values are the medians of each side's steps; a relative rule is breached only beyond the noise, 3 × the larger MAD.
"
    );
    let (code, out) = cli(&[
        "compare",
        "fixtures/steps_base",
        "fixtures/steps_cand_noisy",
        "--fail-if",
        "total>+5%",
        "--format",
        "markdown",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("### ✅ Regression gate passed: 0 of 1 rule(s) breached\n"),
        "{out}"
    );
}

/// A span name with a pipe, a newline, a backtick and HTML stays one cell of one row, and
/// 30 000 distinct paths with `--limit` far above them are cut at 1 MiB with a note.
#[test]
fn hostile_names_stay_in_their_cell_and_the_output_stays_under_1_mib() {
    let dir = tempfile::tempdir().unwrap();
    let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00Z","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#;
    let mut text = format!(
        "{meta}\n{}\n",
        r#"{"kind":"span_start","id":"root","name":"step","start_ns":0,"span_kind":"function","measured":true}"#
    );
    text.push_str(
        r#"{"kind":"span_start","id":"evil","parent_id":"root","name":"a|b\n<img src=x>`c","start_ns":0,"span_kind":"module"}"#,
    );
    text.push('\n');
    text.push_str(r#"{"kind":"span_end","id":"evil","duration_ns":7}"#);
    text.push('\n');
    for i in 0..30_000 {
        text.push_str(&format!(
            "{{\"kind\":\"span_start\",\"id\":\"s{i}\",\"parent_id\":\"root\",\"name\":\"module_with_a_long_name_{i:05}\",\"start_ns\":{i},\"span_kind\":\"module\"}}\n{{\"kind\":\"span_end\",\"id\":\"s{i}\",\"duration_ns\":{}}}\n",
            i + 1
        ));
    }
    text.push_str(r#"{"kind":"span_end","id":"root","duration_ns":100000}"#);
    text.push('\n');
    let base = dir.path().join("base.trace6.jsonl");
    std::fs::write(&base, &text).unwrap();
    let cand = dir.path().join("cand.trace6.jsonl");
    std::fs::write(
        &cand,
        text.replace("\"duration_ns\":7}", "\"duration_ns\":9}"),
    )
    .unwrap();
    let (b, c) = (base.to_str().unwrap(), cand.to_str().unwrap());

    let (code, out) = cli(&["compare", b, c, "--format", "markdown", "--limit", "1"]);
    assert_eq!(code, 0);
    // The only changed path comes first (|delta| 2 ns), its name escaped in one cell.
    assert!(
        out.contains("\n| ``step/a\\|b <img src=x>`c`` | 1 | 1 | 7 ns | 9 ns | +2 ns | +28.6% |\n\n*1 of 30002 rows shown (`--limit 1`).*\n"),
        "{out}"
    );

    let (code, out) = cli(&[
        "compare", b, c, "--format", "markdown", "--limit", "1000000",
    ]);
    assert_eq!(code, 0);
    assert!(out.len() <= BUDGET_BYTES, "{} bytes", out.len());
    assert!(
        out.ends_with(
            "\n**Output cut at 1 MiB** (GitHub's step-summary limit): pass a smaller `--limit`.\n"
        ),
        "{}",
        &out[out.len() - 300..]
    );
}

//! Trace/6 lines for the unit tests: a meta line, span starts and ends, a document read from
//! lines (one place, so that every test writes them the same way).

use alloc::format;
use alloc::string::String;

use crate::format::document::TraceDocument;

/// A meta line: capture step 2 after one warm-up step, host timing.
pub(crate) const META: &str = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{}}"#;

/// A `span_start` of kind `function` named `n<id>`.
pub(crate) fn start(id: &str, parent: Option<&str>, start_ns: u64, measured: bool) -> String {
    let parent = parent
        .map(|p| format!(r#""parent_id":"{p}","#))
        .unwrap_or_default();
    format!(
        r#"{{"kind":"span_start","id":"{id}",{parent}"name":"n{id}","start_ns":{start_ns},"span_kind":"function","measured":{measured}}}"#
    )
}

/// A `span_start` at 0 ns with its name, kind and `step` (a pass); a span without a parent is
/// the measured root.
pub(crate) fn start_named(
    id: &str,
    parent: Option<&str>,
    name: &str,
    kind: &str,
    step: Option<&str>,
) -> String {
    let mut s = format!(
        r#"{{"kind":"span_start","id":"{id}","name":"{name}","start_ns":0,"span_kind":"{kind}""#
    );
    match parent {
        Some(p) => s.push_str(&format!(r#","parent_id":"{p}""#)),
        None => s.push_str(r#","measured":true"#),
    }
    if let Some(st) = step {
        s.push_str(&format!(r#","step":"{st}""#));
    }
    s.push('}');
    s
}

/// A `span_end`.
pub(crate) fn end(id: &str, duration_ns: u64) -> String {
    format!(r#"{{"kind":"span_end","id":"{id}","duration_ns":{duration_ns}}}"#)
}

/// Four spans: `root` [0, 100) measured; `a` [10, 50) under it; `b` [20, 30) under `a`; `c`
/// [60, 90) under `root`. Self times root 100 − 40 − 30 = 30, a 40 − 10 = 30, b 10, c 30.
pub(crate) fn four_spans() -> TraceDocument {
    read(&[
        String::from(META),
        start("root", None, 0, true),
        start("a", Some("root"), 10, false),
        start("b", Some("a"), 20, false),
        end("b", 10),
        end("a", 40),
        start("c", Some("root"), 60, false),
        end("c", 30),
        end("root", 100),
    ])
}

/// The document of `lines`, each ended by a newline.
pub(crate) fn read(lines: &[impl AsRef<str>]) -> TraceDocument {
    let mut text = String::new();
    for l in lines {
        text.push_str(l.as_ref());
        text.push('\n');
    }
    TraceDocument::from_bytes(text.as_bytes())
}

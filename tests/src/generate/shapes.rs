//! Synthetic shapes for the reader's limits and the benchmarks: a deep chain, a wide fan-out,
//! a long flat profile of blocks, a memory-heavy trace.

use std::io::{self, Write};

use candle_trace_schema::format::events::{
    Pass, SpanEnd, SpanKind, SpanStart, TensorCategory, TraceEvent,
};

use super::memory::Alloc;
use super::ops::OpLine;
use super::{Gen, GenStats, BATCH, HEADS, HIDDEN, INTERMEDIATE, SEQ};

/// A meta line for the synthetic span-only traces.
fn simple_meta<W: Write>(g: &mut Gen<'_, W>) -> io::Result<()> {
    g.meta(1)
}

/// Write `depth` op-kind spans, each the only child of the one before (the first is the
/// measured root): all open first, then all closed, innermost first. `max_depth` is
/// `depth - 1`. Span `i` starts at `i` ns and lasts `2 × (depth − i)` ns.
pub fn write_deep_chain(depth: u64, out: &mut impl Write) -> io::Result<GenStats> {
    let mut g = Gen::new(out, 0, 1);
    simple_meta(&mut g)?;
    for i in 0..depth {
        let start = SpanStart {
            id: format!("s{i}").into(),
            parent_id: i.checked_sub(1).map(|p| format!("s{p}").into()),
            name: "op".into(),
            start_ns: i,
            span_kind: SpanKind::Op,
            measured: i == 0,
            pass: None,
            module: None,
        };
        g.emit(&TraceEvent::SpanStart(start))?;
        g.stats.max_depth = i;
    }
    for i in (0..depth).rev() {
        let duration_ns = 2 * (depth - i);
        if i == 0 {
            g.stats.total_ns = duration_ns;
        }
        g.emit(&TraceEvent::SpanEnd(SpanEnd {
            id: format!("s{i}").into(),
            duration_ns,
        }))?;
    }
    Ok(g.finish())
}

/// Write `spans` op-kind spans: a measured root followed by `spans − 1` direct children, each
/// closed right after it opens (child `i` starts at `2i − 1` ns and lasts 1 ns). `max_depth` is
/// 1 (0 for a single span).
pub fn write_wide(spans: u64, out: &mut impl Write) -> io::Result<GenStats> {
    let mut g = Gen::new(out, 0, 1);
    simple_meta(&mut g)?;
    if spans == 0 {
        return Ok(g.finish());
    }
    g.emit(&TraceEvent::SpanStart(SpanStart {
        id: "s0".into(),
        parent_id: None,
        name: "wide".into(),
        start_ns: 0,
        span_kind: SpanKind::Op,
        measured: true,
        pass: None,
        module: None,
    }))?;
    for i in 1..spans {
        g.emit(&TraceEvent::SpanStart(SpanStart {
            id: format!("s{i}").into(),
            parent_id: Some("s0".into()),
            name: "op".into(),
            start_ns: 2 * i - 1,
            span_kind: SpanKind::Op,
            measured: false,
            pass: None,
            module: None,
        }))?;
        g.emit(&TraceEvent::SpanEnd(SpanEnd {
            id: format!("s{i}").into(),
            duration_ns: 1,
        }))?;
        g.stats.max_depth = 1;
    }
    let duration_ns = 2 * spans;
    g.stats.total_ns = duration_ns;
    g.emit(&TraceEvent::SpanEnd(SpanEnd {
        id: "s0".into(),
        duration_ns,
    }))?;
    Ok(g.finish())
}

/// A trace of exactly `spans` spans shaped like a long flat profile: one measured root and
/// blocks of a `module` span with 99 `op` children (7 distinct op names), the first third of
/// the blocks in the forward step, then backward, then optimizer. It is what the browser
/// benchmarks and the large-trace browser test pan across (the same shape as
/// `tests/e2e/viewer.test.mjs`'s `writeBigTrace`).
pub fn write_blocks(spans: u64, out: &mut impl Write) -> io::Result<GenStats> {
    let mut g = Gen::new(out, 0, 1);
    simple_meta(&mut g)?;
    if spans == 0 {
        return Ok(g.finish());
    }
    g.emit(&TraceEvent::SpanStart(SpanStart {
        id: "r".into(),
        parent_id: None,
        name: "step".into(),
        start_ns: 0,
        span_kind: SpanKind::Function,
        measured: true,
        pass: None,
        module: None,
    }))?;
    let blocks = (spans - 1).div_ceil(100);
    let (mut made, mut t) = (1u64, 0u64);
    for b in 0..blocks {
        let pass = [Pass::Forward, Pass::Backward, Pass::Optimizer][(b * 3 / blocks) as usize];
        let block_start = t;
        g.emit(&TraceEvent::SpanStart(SpanStart {
            id: format!("b{b}").into(),
            parent_id: Some("r".into()),
            name: format!("block_{b}").into(),
            start_ns: block_start,
            span_kind: SpanKind::Module,
            measured: false,
            pass: Some(pass),
            module: None,
        }))?;
        made += 1;
        g.stats.max_depth = g.stats.max_depth.max(1);
        let mut i = 0;
        while i < 99 && made < spans {
            g.emit(&TraceEvent::SpanStart(SpanStart {
                id: format!("b{b}o{i}").into(),
                parent_id: Some(format!("b{b}").into()),
                name: format!("op_{}", i % 7).into(),
                start_ns: t,
                span_kind: SpanKind::Op,
                measured: false,
                pass: Some(pass),
                module: None,
            }))?;
            g.emit(&TraceEvent::SpanEnd(SpanEnd {
                id: format!("b{b}o{i}").into(),
                duration_ns: 80 + (i % 5) * 10,
            }))?;
            g.stats.max_depth = 2;
            t += 150;
            i += 1;
            made += 1;
        }
        g.emit(&TraceEvent::SpanEnd(SpanEnd {
            id: format!("b{b}").into(),
            duration_ns: t - block_start + 50,
        }))?;
        t += 100;
    }
    g.stats.total_ns = t + 10;
    g.emit(&TraceEvent::SpanEnd(SpanEnd {
        id: "r".into(),
        duration_ns: t + 10,
    }))?;
    Ok(g.finish())
}

/// The ops of each block of [`write_memory_heavy`]: name, output shape, dtype.
const HEAVY_OPS: [(&str, &[u64], &str); 6] = [
    ("matmul", &[BATCH, SEQ, HIDDEN], "bf16"),
    ("add", &[BATCH, SEQ, HIDDEN], "bf16"),
    ("silu", &[BATCH, SEQ, INTERMEDIATE], "bf16"),
    ("mul", &[BATCH, SEQ, INTERMEDIATE], "bf16"),
    ("softmax", &[BATCH, HEADS, SEQ, SEQ], "f32"),
    ("to_dtype", &[BATCH, SEQ, HIDDEN], "f32"),
];

/// A trace of about `target_bytes` whose mix is memory- and op-heavy, unlike
/// [`write_trace`](crate::generate::write_trace)'s: per block, one `module` span (2 span lines) holding 6 ops, each
/// allocating its output, and the 6 frees of the block before (12 memory lines): the 4 800
/// span, 14 400 op and 28 800 memory lines per 10 MB of issue #40's held-out files, in
/// proportion. One device (`cuda:0`), a measured root; every allocation is freed by the end.
pub fn write_memory_heavy(target_bytes: u64, out: &mut impl Write) -> io::Result<GenStats> {
    let mut g = Gen::new(out, 0x4ea7, 2);
    g.meta(1)?;
    g.pass = Some(Pass::Forward);
    g.open("train_step", SpanKind::Function, true)?;
    let mut held: Vec<Alloc> = Vec::new();
    let mut block = 0u64;
    while g.stats.bytes < target_bytes {
        g.open(&format!("layers.{}", block % 32), SpanKind::Module, false)?;
        let mut made = Vec::with_capacity(HEAVY_OPS.len());
        for (i, (name, shape, dtype)) in HEAVY_OPS.iter().enumerate() {
            // The output is allocated while the op runs; its line follows.
            let output = g.alloc(
                1,
                shape.to_vec(),
                dtype,
                TensorCategory::Activation,
                Some(name),
            )?;
            let input = held.get(i).map(|a| a.tensor_id.as_str());
            let duration_ns = g.rng.range(2_000, 90_000);
            g.op(OpLine {
                op_name: name,
                inputs: input.as_slice(),
                output: Some(&output.tensor_id),
                shape,
                dtype,
                device: 1,
                duration_ns,
            })?;
            made.push(output);
        }
        for a in held.drain(..) {
            g.free(&a)?;
        }
        held = made;
        g.close()?;
        block += 1;
    }
    for a in held.drain(..) {
        g.free(&a)?;
    }
    g.close()?;
    Ok(g.finish())
}

//! What each step of opening a file costs natively, as the page splits it: the worker's read
//! and analysis, the transfer encoding, the page's frame-by-frame decoding (with its longest
//! single frame) and the view-model steps the page runs one task each.
//!
//! `cargo run --release -p candle-trace-viewer --example transfer_cost -- FILE`

use std::time::{Duration, Instant};

use candle_trace_viewer::model::spans::SpanIndex;
use candle_trace_viewer::model::TraceModel;
use candle_trace_viewer::schema::format::detect::{AnyDocument, AnyReader};
use candle_trace_viewer::timeline::lanes::{extents_of, Lanes};
use candle_trace_viewer::transfer::{encode_all, Decoder, Stepped};

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let out = f();
    (out, started.elapsed())
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: transfer_cost FILE");
        std::process::exit(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    let (doc, read) = timed(|| {
        let mut r = AnyReader::new();
        for c in bytes.chunks(1 << 20) {
            r.push(c);
        }
        r.finish()
    });
    let (encoded, encode_t) = timed(|| encode_all(&doc));
    drop(doc);
    let mut decoder = Decoder::new();
    let mut longest = Duration::ZERO;
    let mut frames = 0;
    let started = Instant::now();
    for chunk in &encoded {
        let (pushed, t) = timed(|| decoder.push(chunk));
        longest = longest.max(t);
        if let Err(e) = pushed {
            eprintln!("{e}");
            std::process::exit(1);
        }
        loop {
            let (step, t) = timed(|| decoder.step());
            longest = longest.max(t);
            frames += 1;
            match step {
                Ok(Stepped::More) => {}
                Ok(_) => break,
                Err(e) => {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            }
        }
    }
    let decode_t = started.elapsed();
    let Ok(AnyDocument::Trace(doc)) = decoder.finish() else {
        println!("not a trace: read {read:?}, encode {encode_t:?}, decode {decode_t:?}");
        return;
    };
    let (extents, extents_t) = timed(|| extents_of(&doc));
    let (lanes, lanes_t) = timed(|| Lanes::build(&extents));
    // Built by the page only when a span is selected; timed here for its cost.
    let (_index, index_t) = timed(|| SpanIndex::of(&doc));
    let spans = doc.spans.len();
    let (findings, findings_t) =
        timed(|| candle_trace_viewer::schema::analysis::findings::trace_findings(&[&*doc]));
    let (_model, rest_t) = timed(|| TraceModel::with_layout(*doc, extents, lanes, &findings));
    println!("{path}: {} MB, {spans} spans", bytes.len() / 1_000_000);
    println!(
        "  worker: read + analyse {read:?}, encode {encode_t:?} ({} MB in {} chunks)",
        encoded.iter().map(Vec::len).sum::<usize>() / 1_000_000,
        encoded.len()
    );
    println!("  page:   decode {decode_t:?} in {frames} frames (longest {longest:?})");
    println!(
        "  page:   extents {extents_t:?}, lanes {lanes_t:?}, index (on selection) {index_t:?}, findings {findings_t:?}, rest {rest_t:?}"
    );
}

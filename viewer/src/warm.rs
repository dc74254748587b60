//! Warming the engine while the user picks a file.
//!
//! V8 runs a wasm function in its baseline tier until the function has run enough to be
//! compiled by its optimizing tier, and the optimized code is then shared by every instance of
//! the module in the page, the parsing workers included. So the first file a page opens runs
//! mostly in the baseline tier, and opens much slower than the same file opened again in the
//! same page (BENCHMARKS.md has the measurement). The page's first worker therefore reads, analyses and encodes a small trace
//! built in (`SAMPLE`) from the moment it starts (a thread of its own that would otherwise wait
//! for a file), and when nothing has been opened [`IDLE_MS`] after the page could take a file,
//! the page decodes its encoding and builds its view models (later, so that the page's first
//! paint and input come first): each a round a task, at most [`ROUNDS`] rounds, until a file is
//! chosen. A file waits for at most the round under way.

use std::cell::Cell;
use std::future::Future;

use candle_trace_schema::format::detect::{AnyDocument, AnyReader};

use crate::model::TraceModel;

/// A small trace that the warm-up reads: one training step of a two-layer MLP, every record
/// kind (`tests/fixtures/train_step.trace6.jsonl`, 17 KB).
const SAMPLE: &[u8] = include_bytes!("../../tests/fixtures/train_step.trace6.jsonl");

/// How long after the page could take a file the page starts warming (ms).
pub const IDLE_MS: i32 = 300;

/// Most rounds of a warm-up, on the page and in the worker alike.
pub const ROUNDS: usize = 150;

/// The name the page gives its first worker: the one that warms itself.
pub const WARM_WORKER: &str = "warm";

thread_local! {
    /// A file has been chosen (on the page) or has come (in a worker): warming stops.
    static STOPPED: Cell<bool> = const { Cell::new(false) };
}

/// Stop warming (a file is being opened); it does not start again.
pub fn stop() {
    STOPPED.with(|s| s.set(true));
}

/// Whether warming has stopped.
pub fn stopped() -> bool {
    STOPPED.with(Cell::get)
}

/// One round of the worker's part: read, analyse and encode the sample, in the stages a file
/// goes through (its records encoded before the analysis, the rest after).
pub fn worker_round() {
    let mut reader = AnyReader::new();
    reader.push(SAMPLE);
    let read = reader.end_input();
    let sink = |chunk: Vec<u8>| {
        std::hint::black_box(chunk);
    };
    let staged = read
        .records()
        .map(|records| crate::transfer::encode_records(records, sink));
    if let (Some(staged), AnyDocument::Trace(t)) = (staged, read.finish()) {
        staged.encode_rest(&t, sink);
    }
}

/// The sample's encoding ([`crate::transfer::encode`]: one chunk), as the page receives a
/// trace from its worker. Kept as a file because the page's wasm holds no reader or encoder
/// to make it; a test checks it is the encoder's output (`UPDATE_GOLDEN=1` rewrites it).
const SAMPLE_ENCODED: &[u8] = include_bytes!("warm_sample.bin");

/// The sample's encoding, as the page receives a trace from its worker.
pub fn page_input() -> Vec<Vec<u8>> {
    vec![SAMPLE_ENCODED.to_vec()]
}

/// One round of the page's part: decode `chunks` ([`page_input`]) and build the view models,
/// the panels' included; `false` when they did not decode to a trace.
pub fn page_round(chunks: &[Vec<u8>]) -> bool {
    let Ok(AnyDocument::Trace(trace)) = crate::transfer::decode(chunks) else {
        return false;
    };
    let model = TraceModel::new(*trace);
    std::hint::black_box((
        model.memory(),
        model.memory_charts(),
        model.phases(),
        model.efficiency(),
        model.gradient_table(),
        model.modules(),
        model.index(),
    ));
    true
}

/// Run `round` at most [`ROUNDS`] times, awaiting `pause()` after each, until [`stop`]; returns
/// how many rounds ran.
pub async fn run<F: Future<Output = ()>>(
    mut round: impl FnMut(),
    mut pause: impl FnMut() -> F,
) -> usize {
    let mut ran = 0;
    while ran < ROUNDS && !stopped() {
        round();
        ran += 1;
        pause().await;
    }
    ran
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample read and analysed, as the worker does with a file.
    fn sample_document() -> AnyDocument {
        let mut reader = AnyReader::new();
        reader.push(SAMPLE);
        reader.finish()
    }

    /// Poll `f` once: the futures here are ready at once.
    fn now<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the warm-up waited on a ready pause"),
        }
    }

    #[test]
    fn the_sample_is_a_clean_trace_of_every_record_kind() {
        let AnyDocument::Trace(doc) = sample_document() else {
            panic!("the sample is not a trace");
        };
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        assert!(!doc.spans.is_empty() && !doc.ops.is_empty() && !doc.tensors.is_empty());
        assert!(!doc.memory.is_empty() && !doc.gradients.is_empty() && !doc.edges.is_empty());
        assert!(!doc.device_memory.is_empty());
        assert!(page_round(&page_input()));
    }

    #[test]
    fn the_page_input_is_the_samples_encoding() {
        let mut doc = sample_document();
        // The span id index is seeded per document: encode the sample with the index the file
        // holds (taken only if it is an index of the sample's spans), so the bytes can agree.
        if let (Ok(AnyDocument::Trace(kept)), AnyDocument::Trace(t)) =
            (crate::transfer::decode(&page_input()), &mut doc)
        {
            t.take_span_index(kept.span_index_parts());
        }
        let chunks = crate::transfer::encode_all(&doc);
        assert_eq!(chunks.len(), 1, "the sample no longer fits one chunk");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/warm_sample.bin");
            if let Err(e) = std::fs::write(path, &chunks[0]) {
                panic!("cannot write {path}: {e}");
            }
            return;
        }
        assert!(
            page_input() == chunks,
            "src/warm_sample.bin is not the sample's encoding: rerun with UPDATE_GOLDEN=1"
        );
    }

    #[test]
    fn warming_stops_when_a_file_comes() {
        let rounds = Cell::new(0);
        let ran = now(run(
            || rounds.set(rounds.get() + 1),
            || {
                if rounds.get() == 3 {
                    stop();
                }
                std::future::ready(())
            },
        ));
        assert_eq!((ran, rounds.get()), (3, 3));
        assert!(stopped());
        // Once stopped, it never starts again.
        let again = now(run(|| {}, || std::future::ready(())));
        assert_eq!(again, 0);
    }
}

//! What capturing costs a training update: `train_mlp`'s update (forward, backward, AdamW on a
//! small MLP, every op timed, every tensor and gradient recorded) with the recorder recording,
//! beside the same instrumented update with the recorder off (what every uncaptured update
//! pays), in one run.
//!
//! ```text
//! cargo bench -p candle-trace-capture --features candle --bench train_step
//! ```
//!
//! Each timed iteration is one update. A fresh recorder (writing to `io::sink()`, its writer
//! thread running concurrently as in training) is built before and finished after each update,
//! outside the timed part, so that every captured iteration is a real first capture. After
//! criterion, a best-of-5 loop prints both and the overhead in percent.

use std::io;
use std::time::{Duration, Instant};

use candle_trace_capture::Recorder;
use criterion::Criterion;

#[path = "../examples/train_mlp.rs"]
#[allow(dead_code, unreachable_pub)]
mod train_mlp;

use train_mlp::{Capture, Trainer};

fn capture(recording: bool) -> Capture {
    let recorder = Recorder::builder("bench::train_step")
        .warmup_steps(0)
        .capture_step(if recording { 1 } else { 2 })
        .writer(io::sink())
        .build()
        .unwrap_or_else(|e| panic!("recorder: {e}"));
    Capture::new(recorder)
}

/// Time `iters` updates, each with its own recorder built and finished untimed.
fn timed_updates(trainer: &mut Trainer, recording: bool, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let cap = capture(recording);
        let step = cap.recorder().begin_step();
        assert_eq!(step.is_captured(), recording);
        let started = Instant::now();
        let loss = trainer
            .update(&cap)
            .unwrap_or_else(|e| panic!("update: {e}"));
        total += started.elapsed();
        std::hint::black_box(loss);
        let report = cap
            .recorder()
            .finish()
            .unwrap_or_else(|e| panic!("finish: {e}"));
        assert_eq!(
            report.events_dropped, 0,
            "the bench must not overflow the queue"
        );
    }
    total
}

fn main() {
    let mut trainer = Trainer::new().unwrap_or_else(|e| panic!("model: {e}"));
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("train_update");
    group.bench_function("recording_off", |b| {
        b.iter_custom(|iters| timed_updates(&mut trainer, false, iters))
    });
    group.bench_function("recording_on", |b| {
        b.iter_custom(|iters| timed_updates(&mut trainer, true, iters))
    });
    group.finish();
    c.final_summary();

    // Best of 5 rounds of 200 updates each, alternating, for the one-line summary.
    let mut best = [f64::MAX; 2];
    for _ in 0..5 {
        for (i, recording) in [false, true].into_iter().enumerate() {
            let t = timed_updates(&mut trainer, recording, 200);
            best[i] = best[i].min(t.as_secs_f64() * 1e6 / 200.0);
        }
    }
    println!(
        "train_mlp update: recording off {:.1} µs, recording on {:.1} µs, overhead {:+.1}%",
        best[0],
        best[1],
        (best[1] / best[0] - 1.0) * 100.0
    );
}

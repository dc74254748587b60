//! What a span costs the instrumented thread: candle-trace's guards with recording on and off,
//! `tracing` spans through [`TraceLayer`], `tracing-chrome`'s layer and `puffin::profile_scope!`,
//! all doing the same 3-level nesting in one run.
//!
//! ```text
//! cargo bench -p candle-trace-capture --bench spans -- --quick
//! ```
//!
//! Every iteration opens and closes 3 nested spans. Recording variants run in chunks of
//! 10 000 iterations; between chunks (untimed) the candle-trace writer is flushed so that its
//! per-thread ring never overflows and every span is really written, and puffin starts a new
//! frame. The writer threads (candle-trace, tracing-chrome) write to `io::sink()` and run
//! concurrently with the timed loop, as they would in a training run. After criterion, a
//! plain best-of-5 loop prints ns per span and the ratios to tracing-chrome and puffin (both
//! always run, whatever the name filter).

use std::hint::black_box;
use std::io;
use std::time::{Duration, Instant};

use candle_trace_capture::{Recorder, SpanKind, TraceLayer};
use criterion::Criterion;
use tracing_subscriber::layer::SubscriberExt;

const CHUNK: u64 = 10_000;

/// A `tracing` subscriber whose enter and exit do nothing: what tracing's dispatch alone costs.
struct IdleSubscriber;

impl tracing::Subscriber for IdleSubscriber {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Three nested candle-trace spans.
#[inline(never)]
fn nested_recorder(rec: &Recorder) {
    let _a = rec.span("a", SpanKind::Function);
    let _b = rec.module("b");
    let _c = rec.op_span("c");
}

/// Three nested tracing spans.
#[inline(never)]
fn nested_tracing() {
    let _a = tracing::info_span!("a").entered();
    let _b = tracing::info_span!("b").entered();
    let _c = tracing::info_span!("c").entered();
}

/// Three nested entries of spans built beforehand.
#[inline(never)]
fn nested_entered(spans: &[tracing::Span; 3]) {
    let _a = spans[0].enter();
    let _b = spans[1].enter();
    let _c = spans[2].enter();
}

/// Three nested puffin scopes.
#[inline(never)]
fn nested_puffin() {
    puffin::profile_scope!("a");
    {
        puffin::profile_scope!("b");
        {
            puffin::profile_scope!("c");
            black_box(());
        }
    }
}

fn recorder(capture: bool) -> Recorder {
    let rec = Recorder::builder("bench")
        .capture_step(if capture { 1 } else { 2 })
        .writer(io::sink())
        .build()
        .unwrap_or_else(|e| panic!("recorder: {e}"));
    // Begin step 1 and keep it open for the whole benchmark (forgetting the token leaves
    // recording on when step 1 is the capture step, off otherwise).
    std::mem::forget(rec.begin_step());
    rec
}

/// Run `iters` iterations of `f` in chunks, calling `between` untimed after each chunk.
fn chunked(iters: u64, mut f: impl FnMut(), mut between: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        total += t.elapsed();
        between();
        left -= n;
    }
    total
}

/// One variant: a name and a function timing `iters` iterations.
struct Variant {
    name: &'static str,
    time: Box<dyn FnMut(u64) -> Duration>,
}

fn variants() -> Vec<Variant> {
    let mut v: Vec<Variant> = Vec::new();

    let off = recorder(false);
    v.push(Variant {
        name: "candle-trace guards, recording off",
        time: Box::new(move |iters| {
            let t = Instant::now();
            for _ in 0..iters {
                nested_recorder(black_box(&off));
            }
            t.elapsed()
        }),
    });

    let on = recorder(true);
    v.push(Variant {
        name: "candle-trace guards, recording on",
        time: Box::new(move |iters| {
            chunked(
                iters,
                || nested_recorder(black_box(&on)),
                || {
                    on.flush(Duration::from_secs(60));
                },
            )
        }),
    });

    for (name, capture) in [
        ("tracing + TraceLayer, recording off", false),
        ("tracing + TraceLayer, recording on", true),
    ] {
        let rec = recorder(capture);
        let dispatch = tracing::Dispatch::new(
            tracing_subscriber::registry().with(TraceLayer::new(rec.clone())),
        );
        v.push(Variant {
            name,
            time: Box::new(move |iters| {
                tracing::dispatcher::with_default(&dispatch, || {
                    chunked(iters, nested_tracing, || {
                        rec.flush(Duration::from_secs(60));
                    })
                })
            }),
        });
    }

    // Spans built once and entered on every call, as candle-transformers' layers are (built in
    // `load`, entered in `forward`): the global CaptureSubscriber that `install()` sets, beside
    // TraceLayer in a registry. Each timing call builds (untimed) a recorder routed to the
    // subscriber and ends its step afterwards, so a recording-on run never leaves the
    // subscriber's slow path on for a recording-off one.
    let prebuilt = |dispatch: &tracing::Dispatch| {
        tracing::dispatcher::with_default(dispatch, || {
            [
                tracing::info_span!("a"),
                tracing::info_span!("b"),
                tracing::info_span!("c"),
            ]
        })
    };
    // The global subscriber, as a program gets it: no scoped dispatcher in the way.
    candle_trace_capture::install().unwrap_or_else(|e| panic!("install: {e}"));
    for (name, capture) in [
        (
            "tracing + CaptureSubscriber, built spans, recording off",
            false,
        ),
        (
            "tracing + CaptureSubscriber, built spans, recording on",
            true,
        ),
    ] {
        let spans = [
            tracing::info_span!("a"),
            tracing::info_span!("b"),
            tracing::info_span!("c"),
        ];
        v.push(Variant {
            name,
            time: Box::new(move |iters| {
                let rec = Recorder::builder("bench")
                    .capture_step(if capture { 1 } else { 2 })
                    .writer(io::sink())
                    .build()
                    .unwrap_or_else(|e| panic!("recorder: {e}"));
                rec.install().unwrap_or_else(|e| panic!("install: {e}"));
                let step = rec.begin_step();
                let d = chunked(
                    iters,
                    || nested_entered(black_box(&spans)),
                    || {
                        rec.flush(Duration::from_secs(60));
                    },
                );
                drop(step);
                let _ = rec.finish();
                d
            }),
        });
    }
    // The floor under every built-span row: tracing's own dispatch to a subscriber whose
    // enter and exit do nothing.
    let idle_dispatch = tracing::Dispatch::new(IdleSubscriber);
    let idle_spans = prebuilt(&idle_dispatch);
    v.push(Variant {
        name: "tracing + a subscriber doing nothing, built spans",
        time: Box::new(move |iters| {
            chunked(iters, || nested_entered(black_box(&idle_spans)), || {})
        }),
    });
    let registry = |rec: &Recorder| {
        tracing::Dispatch::new(tracing_subscriber::registry().with(TraceLayer::new(rec.clone())))
    };
    let layer_rec = recorder(false);
    let layer_dispatch = registry(&layer_rec);
    let layer_spans = prebuilt(&layer_dispatch);
    v.push(Variant {
        name: "tracing + TraceLayer, built spans, recording off",
        time: Box::new(move |iters| {
            tracing::dispatcher::with_default(&layer_dispatch, || {
                chunked(iters, || nested_entered(black_box(&layer_spans)), || {})
            })
        }),
    });

    let (chrome, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .writer(io::sink())
        .build();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(chrome));
    v.push(Variant {
        name: "tracing + tracing-chrome layer",
        time: Box::new(move |iters| {
            let _keep = &guard;
            tracing::dispatcher::with_default(&dispatch, || chunked(iters, nested_tracing, || {}))
        }),
    });

    v.push(Variant {
        name: "puffin::profile_scope!, on",
        time: Box::new(|iters| {
            puffin::set_scopes_on(true);
            let d = chunked(iters, nested_puffin, || {
                puffin::GlobalProfiler::lock().new_frame();
            });
            puffin::set_scopes_on(false);
            d
        }),
    });
    v
}

fn criterion_runs(c: &mut Criterion, variants: &mut [Variant]) {
    let mut group = c.benchmark_group("3 nested spans");
    for variant in variants.iter_mut() {
        group.bench_function(variant.name, |b| {
            b.iter_custom(|iters| (variant.time)(iters))
        });
    }
    group.finish();
}

/// ns per span (one enter + exit): best of 5 runs of `iters` iterations of 3 nested spans.
fn ns_per_span(variant: &mut Variant, iters: u64) -> f64 {
    (0..5)
        .map(|_| (variant.time)(iters).as_nanos() as f64 / (iters * 3) as f64)
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let mut variants = variants();
    let mut c = Criterion::default().configure_from_args();
    criterion_runs(&mut c, &mut variants);
    c.final_summary();
    // Criterion's profiling and listing modes measure nothing: no table either.
    if std::env::args().any(|a| a == "--profile-time" || a == "--list" || a == "--test") {
        return;
    }

    // The same name filter as criterion's: the first argument that is not a flag.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let iters = 200_000;
    let results: Vec<(&str, f64)> = variants
        .iter_mut()
        .filter(|v| {
            v.name.contains(filter.as_str())
                || v.name.contains("tracing-chrome")
                || v.name.contains("puffin")
        })
        .map(|v| (v.name, ns_per_span(v, iters)))
        .collect();
    let peer = |name: &str| {
        results
            .iter()
            .find(|(n, _)| n.contains(name))
            .map_or(f64::NAN, |(_, ns)| *ns)
    };
    let (chrome, puffin) = (peer("tracing-chrome"), peer("puffin"));
    println!("\nns per span enter+exit (3-level nesting, best of 5 × {iters} iterations):");
    println!(
        "{:<56} {:>10} {:>18} {:>10}",
        "variant", "ns/span", "vs tracing-chrome", "vs puffin"
    );
    for (name, ns) in &results {
        println!(
            "{name:<56} {ns:>10.2} {:>17.2}x {:>9.2}x",
            ns / chrome,
            ns / puffin
        );
    }
}

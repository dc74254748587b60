//! Run a few candle-nn ops inside `tracing` spans and write them with the real `tracing-chrome`
//! layer, the way candle's examples do behind `--tracing`; candle-trace then imports the file.
//!
//! ```sh
//! cargo run -p candle-trace-capture --features candle --example chrome_tracing -- --out trace.json
//! cargo trace summary trace.json
//! ```
//!
//! The model is a two-layer MLP whose layers wrap `candle_nn::Linear` in a `tracing` span, as
//! candle-transformers' `with_tracing::Linear` does. The main thread runs three forward passes
//! (`forward` → `fc1`, `gelu`, `fc2`, then a `softmax`), logs one `tracing` event per pass
//! (an instant in the Chrome file); a second thread, `worker`, runs one `matmul` span. The
//! fixture `tests/fixtures/candle_tracing.chrome.json` is this example's output (see
//! tests/fixtures/README.md, checked in `tests/tests/chrome.rs`); `capture/tests/chrome_tracing.rs`
//! runs it in-process and imports what it wrote.

use std::path::PathBuf;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder, VarMap};
use tracing_chrome::ChromeLayerBuilder;
use tracing_subscriber::prelude::*;

const BATCH: usize = 4;
const IN: usize = 16;
const HIDDEN: usize = 32;
const OUT: usize = 8;
const PASSES: usize = 3;

/// `candle_nn::Linear` with a `tracing` span around `forward`, like candle-transformers'
/// `with_tracing::Linear`.
struct TracedLinear {
    inner: Linear,
    span: tracing::Span,
}

impl TracedLinear {
    fn new(
        vb: VarBuilder<'_>,
        name: &'static str,
        i: usize,
        o: usize,
    ) -> candle_core::Result<Self> {
        let inner = candle_nn::linear(i, o, vb.pp(name))?;
        let span = tracing::span!(tracing::Level::TRACE, "linear", layer = name);
        Ok(TracedLinear { inner, span })
    }
}

impl Module for TracedLinear {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let _enter = self.span.enter();
        self.inner.forward(x)
    }
}

struct Mlp {
    fc1: TracedLinear,
    fc2: TracedLinear,
}

impl Mlp {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let _span = tracing::span!(tracing::Level::TRACE, "forward").entered();
        let h = self.fc1.forward(x)?;
        let h = {
            let _span = tracing::span!(tracing::Level::TRACE, "gelu").entered();
            h.gelu()?
        };
        let y = self.fc2.forward(&h)?;
        let _span = tracing::span!(tracing::Level::TRACE, "softmax").entered();
        candle_nn::ops::softmax_last_dim(&y)
    }
}

/// The instrumented work: three forward passes on this thread, one `matmul` on a `worker`
/// thread (which joins this thread's `tracing` dispatcher, as a global subscriber would give it).
fn run() -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::Cpu;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
    let model = Mlp {
        fc1: TracedLinear::new(vb.clone(), "fc1", IN, HIDDEN)?,
        fc2: TracedLinear::new(vb, "fc2", HIDDEN, OUT)?,
    };
    let x = Tensor::randn(0f32, 1.0, (BATCH, IN), &device)?;
    for pass in 0..PASSES {
        let y = model.forward(&x)?;
        let sum = y.sum_all()?.to_scalar::<f32>()?;
        tracing::info!(pass, sum, "forward done");
    }
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    let worker = std::thread::Builder::new().name("worker".into()).spawn(
        move || -> candle_core::Result<()> {
            tracing::dispatcher::with_default(&dispatch, || {
                let _span = tracing::span!(tracing::Level::TRACE, "matmul").entered();
                let a = Tensor::ones((64, 64), DType::F32, &Device::Cpu)?;
                a.matmul(&a)?.sum_all()?.to_scalar::<f32>()?;
                Ok(())
            })
        },
    )?;
    worker.join().map_err(|_| "worker thread panicked")??;
    Ok(())
}

/// Write the Chrome trace of [`run`] to `out` with `tracing-chrome`'s layer (set as the
/// default subscriber of this thread only, so a test can call this too).
pub fn write_trace(out: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let (chrome_layer, guard) = ChromeLayerBuilder::new().file(out).build();
    let subscriber = tracing_subscriber::registry().with(chrome_layer);
    tracing::subscriber::with_default(subscriber, run)?;
    // Dropping the guard flushes the file and writes the closing `]`.
    drop(guard);
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut out = PathBuf::from("trace.chrome.json");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = args.next().ok_or("--out needs a path")?.into(),
            "-h" | "--help" => {
                println!("usage: chrome_tracing [--out PATH]");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    write_trace(&out)?;
    println!("wrote {}", out.display());
    Ok(())
}

//! Capturing several consecutive steps: [`RecorderBuilder::capture_steps`] → [`StepRecorders`],
//! one [`Recorder`] per step, each writing its own trace/6 file.
//!
//! Layout (SCHEMA.md §4, "Several steps"): `DIR/step-<N>.trace6.jsonl` for every N of the
//! range, each a complete trace/6 file whose meta has `capture_step` N and `warmup_steps`
//! N − 1, all sharing one `run_id` and `correlation_id` (the builder's, or one generated id for
//! both). Every trace/6 reader reads each file; `candle-trace steps DIR`, `findings DIR` and
//! `compare BASE_DIR CAND_DIR --fail-if …` read the set.
//!
//! The program drives the set like one recorder: [`StepRecorders::begin_step`] begins the step
//! on every recorder (so each counts steps), and [`StepRecorders::recorder`] is the recorder of
//! the step running now, the one to open spans on. After [`StepRecorders::install`], the
//! program's `tracing` spans go to the recorder of each captured step as it begins.
//!
//! ```no_run
//! use candle_trace_capture::{Pass, Recorder};
//!
//! let dir = std::env::temp_dir().join("steps");
//! std::fs::create_dir_all(&dir)?;
//! let steps = Recorder::builder("train::step").capture_steps(2..=4, &dir)?;
//! for _ in 0..5 {
//!     let _step = steps.begin_step();
//!     let rec = steps.recorder();
//!     let _total = rec.measured("train_step");
//!     let _forward = rec.pass(Pass::Forward);
//! }
//! let reports = steps.finish()?; // step-2, step-3 and step-4.trace6.jsonl
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io;
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::{CaptureError, CaptureReport, Recorder, RecorderBuilder, StepToken};

impl RecorderBuilder {
    /// Capture every step of `steps` (one-based, e.g. `2..=9`), each into
    /// `dir/step-<N>.trace6.jsonl` (the directory must exist), with the settings of this
    /// builder and one shared run id and correlation id. Errors as [`build`](Self::build),
    /// and `InvalidInput` for an empty range, a step 0, or a builder given a
    /// [`writer`](Self::writer).
    pub fn capture_steps(
        self,
        steps: RangeInclusive<u64>,
        dir: impl AsRef<Path>,
    ) -> io::Result<StepRecorders> {
        let first_step = *steps.start();
        let recorders = self
            .step_builders(steps, dir.as_ref())?
            .into_iter()
            .map(RecorderBuilder::build)
            .collect::<io::Result<Vec<Recorder>>>()?;
        Ok(StepRecorders {
            recorders,
            first_step,
            begun: AtomicU64::new(0),
            installed: AtomicBool::new(false),
            in_update: AtomicBool::new(false),
        })
    }
}

/// One recorder per captured step (see the module docs).
#[derive(Debug)]
pub struct StepRecorders {
    /// The recorder of step `first_step + i` at `i`; never empty.
    recorders: Vec<Recorder>,
    first_step: u64,
    begun: AtomicU64,
    installed: AtomicBool,
    /// Whether a training update begun by [`StepRecorders::forward`] is running.
    #[cfg_attr(not(feature = "candle"), allow(dead_code))] // only the candle helpers drive it
    in_update: AtomicBool,
}

/// The tokens of one step on every recorder: dropping it ends the step.
#[derive(Debug)]
#[must_use = "the step ends when the token is dropped"]
pub struct StepTokens<'r> {
    tokens: Vec<StepToken<'r>>,
    step: u64,
}

impl StepTokens<'_> {
    /// The one-based step number.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Whether one of the recorders captures this step.
    pub fn is_captured(&self) -> bool {
        self.tokens.iter().any(StepToken::is_captured)
    }
}

impl StepRecorders {
    fn index(&self, step: u64) -> Option<usize> {
        let i = usize::try_from(step.checked_sub(self.first_step)?).ok()?;
        (i < self.recorders.len()).then_some(i)
    }

    /// Route the program's `tracing` spans to the recorder of each captured step (see
    /// [`Recorder::install`]; call it before building the model).
    pub fn install(&self) -> Result<(), CaptureError> {
        self.installed.store(true, Ordering::Relaxed);
        let next = self.begun.load(Ordering::Relaxed) + 1;
        let i = self.index(next).unwrap_or(0);
        self.recorders[i].install()
    }

    /// Begin the next step on every recorder; the recorder whose step it is records until the
    /// returned token is dropped.
    pub fn begin_step(&self) -> StepTokens<'_> {
        let step = self.begun.fetch_add(1, Ordering::Relaxed) + 1;
        self.route(step);
        StepTokens {
            tokens: self.recorders.iter().map(Recorder::begin_step).collect(),
            step,
        }
    }

    /// The recorder of the step running now (the first one outside the captured range, which
    /// records nothing then).
    pub fn recorder(&self) -> &Recorder {
        let i = self.index(self.begun.load(Ordering::Relaxed)).unwrap_or(0);
        &self.recorders[i]
    }

    /// Every recorder, in step order.
    pub fn recorders(&self) -> &[Recorder] {
        &self.recorders
    }

    /// True once the last captured step has ended.
    pub fn capture_done(&self) -> bool {
        self.recorders.iter().all(Recorder::capture_done)
    }

    /// Route tracing to the recorder of `step` (when installed) and return its index.
    fn route(&self, step: u64) -> Option<usize> {
        let i = self.index(step);
        if let (true, Some(i)) = (self.installed.load(Ordering::Relaxed), i) {
            // Routing was installed once already, so this only moves the route; an error
            // here would have surfaced from `install`.
            let _ = self.recorders[i].install();
        }
        i
    }

    /// Finish every recorder (see [`Recorder::finish`]): the reports in step order, or the
    /// first error (every recorder is finished either way).
    pub fn finish(&self) -> Result<Vec<CaptureReport>, CaptureError> {
        let results: Vec<_> = self.recorders.iter().map(Recorder::finish).collect();
        results.into_iter().collect()
    }
}

#[cfg(feature = "candle")]
impl StepRecorders {
    /// [`Recorder::forward`] on the recorder of the update it begins: the first call of an
    /// update begins it on every recorder (the others only count it). One update runs from
    /// its first `forward` to [`optimizer_step`](Self::optimizer_step).
    pub fn forward<T>(&self, f: impl FnOnce() -> candle_core::Result<T>) -> candle_core::Result<T> {
        if !self.in_update.swap(true, Ordering::AcqRel) {
            let step = self.begun.fetch_add(1, Ordering::Relaxed) + 1;
            let current = self.route(step).unwrap_or(0);
            for (i, r) in self.recorders.iter().enumerate() {
                if i != current {
                    // Not this recorder's captured step: beginning it only counts it.
                    drop(r.begin_step());
                }
            }
        }
        self.recorder().forward(f)
    }

    /// [`Recorder::backward`] on the recorder of the running update.
    pub fn backward(
        &self,
        loss: &candle_core::Tensor,
    ) -> candle_core::Result<candle_core::backprop::GradStore> {
        self.recorder().backward(loss)
    }

    /// [`Recorder::optimizer_step`] on the recorder of the running update; ends the update.
    pub fn optimizer_step<O: candle_nn::Optimizer>(
        &self,
        optimizer: &mut O,
        grads: &candle_core::backprop::GradStore,
        varmap: &candle_nn::VarMap,
    ) -> candle_core::Result<()> {
        let result = self.recorder().optimizer_step(optimizer, grads, varmap);
        self.in_update.store(false, Ordering::Release);
        result
    }
}

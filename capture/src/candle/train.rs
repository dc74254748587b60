//! The training-step API on [`Recorder`]: `forward`, `backward`, `optimizer_step`; and
//! [`DeviceSync`] for candle's `Device`.

use std::sync::atomic::Ordering;

use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor};
use candle_nn::{Optimizer, VarMap};
use candle_trace_schema::format::events::Pass;

use super::gradients::record_varmap_gradients;
use super::graph::record_graph_in;
use crate::sink::Sink;
use crate::state::{Inner, TrainStep};
use crate::sync::{note_sync_error, DeviceSync};
use crate::Recorder;

fn lock_train(inner: &Inner) -> std::sync::MutexGuard<'_, Option<TrainStep>> {
    inner
        .train
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One training update in three calls: [`forward`](Recorder::forward),
/// [`backward`](Recorder::backward), [`optimizer_step`](Recorder::optimizer_step).
///
/// `forward` begins the next step (the first call is step 1) unless one is running, so a loop
/// needs no [`begin_step`](Recorder::begin_step) of its own (do not mix the two); in the
/// captured step it also opens the measured region `train_step`, which `optimizer_step` closes.
/// A `forward` or `backward` that returns an error ends the step there (measured region
/// closed, capturing over when it was the captured step), so a loop that skips a failed batch
/// starts the next update as the next step. Each call is a training-step span (`forward` /
/// `backward` / `optimizer`) with a `device_memory` checkpoint at both edges (see
/// [`Recorder::pass`]).
///
/// ```
/// use candle_core::{DType, Device, Tensor};
/// use candle_nn::{Module, Optimizer, VarBuilder, VarMap, SGD};
/// use candle_trace_capture::Recorder;
///
/// let recorder = Recorder::builder("train::step").writer(std::io::sink()).build()?;
/// let varmap = VarMap::new();
/// let model = candle_nn::linear(4, 1, VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu))?;
/// let mut opt = SGD::new(varmap.all_vars(), 0.1)?;
/// let x = Tensor::ones((8, 4), DType::F32, &Device::Cpu)?;
/// for _ in 0..3 {
///     let loss = recorder.forward(|| model.forward(&x)?.sqr()?.mean_all())?;
///     let grads = recorder.backward(&loss)?;
///     recorder.optimizer_step(&mut opt, &grads, &varmap)?;
/// }
/// assert!(recorder.capture_done());
/// recorder.finish()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl Recorder {
    /// Run the forward pass `f` as the `forward` span, beginning the next training step when
    /// none is running (see the [type-level docs](#impl-Recorder-1)).
    pub fn forward<T>(&self, f: impl FnOnce() -> candle_core::Result<T>) -> candle_core::Result<T> {
        let inner = &self.inner;
        {
            let mut train = lock_train(inner);
            if train.is_none() {
                let (_, captured) = inner.begin_step();
                let measured = (captured && !inner.measured_used.swap(true, Ordering::AcqRel))
                    .then(|| {
                        inner.open_span(
                            std::borrow::Cow::Borrowed("train_step"),
                            None,
                            candle_trace_schema::format::events::SpanKind::Function,
                            true,
                            None,
                            None,
                            inner.measured_sync(),
                        )
                    });
                *train = Some(TrainStep { captured, measured });
            }
        }
        let forward = self.pass(Pass::Forward);
        let first = forward.number().and_then(|_| inner.tensor_clock());
        let result = f();
        // Tensors made in forward outside any traced layer belong to the forward span.
        if let (Some(span), Some(first), Some(end)) =
            (forward.number(), first, inner.tensor_clock())
        {
            inner.tensor_range(span, first, end);
        }
        drop(forward);
        if result.is_err() {
            self.abandon_train_step();
        }
        result
    }

    /// A forward or backward that failed ends its training step there (a loop that skips the
    /// batch and goes on would otherwise run its next update inside this step, recording on).
    fn abandon_train_step(&self) {
        let train = lock_train(&self.inner).take();
        self.close_measured(train);
        self.end_capture(train);
    }

    /// Close the measured region `train_step` that `forward` opened for `train`, if any.
    fn close_measured(&self, train: Option<TrainStep>) {
        let inner = &self.inner;
        if let Some(TrainStep {
            measured: Some((id, start_ns)),
            ..
        }) = train
        {
            inner.close_span_timed(id, start_ns, inner.measured_sync(), None);
        }
    }

    /// When `train` was the captured step, stop capturing.
    fn end_capture(&self, train: Option<TrainStep>) {
        if train.is_some_and(|t| t.captured) {
            let inner = &self.inner;
            inner.end_captured_step();
            inner
                .tensor_ranges
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clear();
        }
    }

    /// `loss.backward()` as the `backward` span. In the captured step, the autograd graph's
    /// tensors are first recorded in it ([`record_graph`](super::graph::record_graph)).
    pub fn backward(&self, loss: &Tensor) -> candle_core::Result<GradStore> {
        let backward = self.pass(Pass::Backward);
        if self.is_recording() {
            let counts = &self.inner.counts;
            counts.graph_on.store(true, Ordering::Relaxed);
            // Each tensor in the layer span that created it, when one did.
            let n = record_graph_in(self, loss, |id| self.inner.span_of_tensor(id));
            counts.graph_tensors.fetch_add(n as u64, Ordering::Relaxed);
        }
        let grads = loss.backward();
        drop(backward);
        if grads.is_err() {
            self.abandon_train_step();
        }
        grads
    }

    /// `optimizer.step(grads)` as the `optimizer` span; then closes the measured region, records
    /// one `gradient` event per variable of `varmap` ([`record_varmap_gradients`], root
    /// `varmap`) and ends the training step.
    pub fn optimizer_step<O: Optimizer>(
        &self,
        optimizer: &mut O,
        grads: &GradStore,
        varmap: &VarMap,
    ) -> candle_core::Result<()> {
        let stepped = {
            let _optimizer = self.pass(Pass::Optimizer);
            optimizer.step(grads)
        };
        let inner = &self.inner;
        let train = lock_train(inner).take();
        self.close_measured(train);
        let recorded = if self.is_recording() {
            let counts = &inner.counts;
            counts.gradients_on.store(true, Ordering::Relaxed);
            record_varmap_gradients(self, "varmap", varmap, grads).map(|tally| {
                counts.gradients.fetch_add(tally.total(), Ordering::Relaxed);
            })
        } else {
            Ok(())
        };
        self.end_capture(train);
        stepped.and(recorded)
    }
}

/// `Device::synchronize`; a failure is counted ([`crate::sync::sync_error_count`]), never raised.
impl DeviceSync for Device {
    fn synchronize(&self) {
        if Device::synchronize(self).is_err() {
            note_sync_error();
        }
    }
}

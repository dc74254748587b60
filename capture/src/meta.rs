//! [`RecorderBuilder`]: what goes into the trace's `meta` line, and where the trace is written.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use candle_trace_schema::format::events::{Meta, Phase, TimingMode, TraceEvent, TRACE_SCHEMA};

use crate::error::CaptureError;
use crate::record::HostBlocks;
use crate::recorder::Recorder;
use crate::state::{Inner, InnerParts};
use crate::sync::{DeviceSync, SpanTimer};
use crate::wallclock;
use crate::writer::{Framing, Target, Writer, DEFAULT_QUEUE_CAPACITY};

/// Configures a [`Recorder`]: the meta line's fields, the capture step, the timing mode and the
/// output. Made by [`Recorder::builder`].
///
/// Defaults: phase `train`, device `cpu`, no tags, run id generated from the time and the
/// process id, correlation id equal to the run id, capture step 2 (one warm-up step), timing
/// mode `host`, no device sync, a queue of 65 536 events. An output
/// ([`path`](RecorderBuilder::path) or [`writer`](RecorderBuilder::writer)) is required.
#[must_use]
pub struct RecorderBuilder {
    entrypoint: String,
    phase: Phase,
    device: String,
    tags: BTreeMap<String, String>,
    correlation_id: Option<String>,
    run_id: Option<String>,
    capture_step: u64,
    timing_mode: TimingMode,
    candle_version: Option<String>,
    sync: Option<Arc<dyn DeviceSync>>,
    timer: Option<Arc<dyn SpanTimer>>,
    path: Option<PathBuf>,
    atomic: bool,
    writer: Option<Box<dyn io::Write + Send>>,
    queue_capacity: usize,
    host_threshold_bytes: u64,
}

/// Host allocations of at least this many bytes are written one by one by default (a candle
/// tensor of 256 `f32`s); see [`RecorderBuilder::alloc_threshold_bytes`].
pub const DEFAULT_ALLOC_THRESHOLD_BYTES: u64 = 1024;

impl std::fmt::Debug for RecorderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecorderBuilder")
            .field("entrypoint", &self.entrypoint)
            .field("phase", &self.phase)
            .field("device", &self.device)
            .field("capture_step", &self.capture_step)
            .field("timing_mode", &self.timing_mode)
            .field("path", &self.path)
            .field("atomic", &self.atomic)
            .finish_non_exhaustive()
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message.into())
}

/// A run id unique enough without a UUID crate: the wall time in ns, the process id and a
/// per-process counter, in hex.
fn generated_run_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    format!(
        "{:x}-{:x}-{:x}",
        wallclock::unix_nanos_now(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

impl Recorder {
    /// A builder for a recorder of `entrypoint` (`train::step`, `Model::forward` ...).
    pub fn builder(entrypoint: impl Into<String>) -> RecorderBuilder {
        RecorderBuilder::new(entrypoint)
    }
}

impl RecorderBuilder {
    pub(crate) fn new(entrypoint: impl Into<String>) -> Self {
        RecorderBuilder {
            entrypoint: entrypoint.into(),
            phase: Phase::Train,
            device: String::from("cpu"),
            tags: BTreeMap::new(),
            correlation_id: None,
            run_id: None,
            capture_step: 2,
            timing_mode: TimingMode::Host,
            candle_version: None,
            sync: None,
            timer: None,
            path: None,
            atomic: false,
            writer: None,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            host_threshold_bytes: DEFAULT_ALLOC_THRESHOLD_BYTES,
        }
    }

    /// With [`TrackingAllocator`](crate::alloc::TrackingAllocator) installed, every host
    /// allocation of at least `bytes` made during the captured step, on a thread with an open
    /// span, is written as a `memory` `alloc` in that span (and its free as a `free`, whenever
    /// it happens before the next step begins). Smaller allocations are not written one by
    /// one: they are counted in the live bytes of the `device_memory` checkpoints. Default
    /// [`DEFAULT_ALLOC_THRESHOLD_BYTES`]; `u64::MAX` turns per-allocation events off.
    pub fn alloc_threshold_bytes(mut self, bytes: u64) -> Self {
        self.host_threshold_bytes = bytes.max(1);
        self
    }

    /// [`build`](RecorderBuilder::build) the recorder and [`install`](Recorder::install) it:
    /// the program's `tracing` spans (candle-transformers' layers) are recorded from now on.
    /// Call it before building the model.
    pub fn install(self) -> Result<Recorder, crate::CaptureError> {
        let recorder = self.build().map_err(crate::CaptureError::Build)?;
        recorder.install()?;
        Ok(recorder)
    }

    /// `train` (the default) or `infer`.
    pub fn phase(mut self, phase: Phase) -> Self {
        self.phase = phase;
        self
    }

    /// The device requested by the caller: `cpu` (the default), `cuda:0`, `metal:0` ...
    pub fn device(mut self, device: impl Into<String>) -> Self {
        self.device = device.into();
        self
    }

    /// Add one provenance tag (batch size, git revision ...); a repeated key keeps the last.
    pub fn tag(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(key.into(), value.into());
        self
    }

    /// Add several tags.
    pub fn tags<K: Into<String>, V: Into<String>>(
        mut self,
        tags: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.tags
            .extend(tags.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The caller-owned key shared with NVTX range labels and other artifacts (default: the
    /// run id).
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// A stable id for this run (default: generated from the time and the process id).
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }

    /// Capture the step after `warmup_steps` completed ones (capture step = warm-up + 1).
    pub fn warmup_steps(mut self, warmup_steps: u64) -> Self {
        self.capture_step = warmup_steps.saturating_add(1);
        self
    }

    /// Capture the one-based step `step` (warm-up = step − 1); must be at least 1.
    pub fn capture_step(mut self, step: u64) -> Self {
        self.capture_step = step;
        self
    }

    /// How nested spans are timed: `host` (the default) or `device_synchronized`, which needs a
    /// [`device_sync`](RecorderBuilder::device_sync) hook.
    pub fn timing_mode(mut self, mode: TimingMode) -> Self {
        self.timing_mode = mode;
        self
    }

    /// The hook that waits for the device. With it, the measured region is bounded by device
    /// synchronizations (the meta says `measured_region_device_synchronized: true`); in
    /// `device_synchronized` mode every span calls it at both edges.
    pub fn device_sync(mut self, sync: impl DeviceSync + 'static) -> Self {
        self.sync = Some(Arc::new(sync));
        self
    }

    /// Time nested spans on the device with `timer` (CUDA events: `cuda::CudaEventTimer`,
    /// feature `cuda`): each span's duration is the device time between an event recorded at
    /// its open and one at its close (closing waits for the device to reach its event), not the
    /// host's. Sets the timing mode to `device_synchronized`; the measured region keeps the
    /// host clock, bounded by [`device_sync`](RecorderBuilder::device_sync) when given.
    pub fn span_timer(mut self, timer: impl SpanTimer + 'static) -> Self {
        self.timer = Some(Arc::new(timer));
        self.timing_mode = TimingMode::DeviceSynchronized;
        self
    }

    /// The candle version of the captured binary (filled in by the candle integration).
    pub fn candle_version(mut self, version: impl Into<String>) -> Self {
        self.candle_version = Some(version.into());
        self
    }

    /// Write the trace to the file `path` (buffered; replaces any [`writer`]).
    ///
    /// [`writer`]: RecorderBuilder::writer
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self.writer = None;
        self
    }

    /// With a [`path`](RecorderBuilder::path) `P`: write `P.tmp` and rename it to `P` only in a
    /// successful `finish()`, so that `P` never holds a partial trace.
    pub fn atomic(mut self, atomic: bool) -> Self {
        self.atomic = atomic;
        self
    }

    /// Write the trace to `writer` (replaces any [`path`](RecorderBuilder::path)).
    pub fn writer(mut self, writer: impl io::Write + Send + 'static) -> Self {
        self.writer = Some(Box::new(writer));
        self.path = None;
        self
    }

    /// How many of one thread's events may wait for the writer thread before that thread's
    /// new ones are dropped (default 65 536). Each recording thread gets a ring of this many
    /// 64-byte slots at its first event; the operating system backs only the pages it uses.
    pub fn queue_capacity(mut self, events: usize) -> Self {
        self.queue_capacity = events;
        self
    }

    /// One builder per step of `steps`, each writing `dir/step-<N>.trace6.jsonl` and capturing
    /// step N, sharing one run id and correlation id (see [`crate::steps`]).
    pub(crate) fn step_builders(
        self,
        steps: std::ops::RangeInclusive<u64>,
        dir: &std::path::Path,
    ) -> io::Result<Vec<RecorderBuilder>> {
        if self.writer.is_some() {
            return Err(invalid(
                "capture_steps writes one file per step into a directory: use it without .writer(W)",
            ));
        }
        if steps.is_empty() || *steps.start() == 0 {
            return Err(invalid(
                "capture_steps needs a non-empty range of one-based steps, e.g. 2..=9",
            ));
        }
        let run_id = self.run_id.clone().unwrap_or_else(generated_run_id);
        let correlation_id = self
            .correlation_id
            .clone()
            .unwrap_or_else(|| run_id.clone());
        Ok(steps
            .map(|n| RecorderBuilder {
                entrypoint: self.entrypoint.clone(),
                phase: self.phase,
                device: self.device.clone(),
                tags: self.tags.clone(),
                correlation_id: Some(correlation_id.clone()),
                run_id: Some(run_id.clone()),
                capture_step: n,
                timing_mode: self.timing_mode,
                candle_version: self.candle_version.clone(),
                sync: self.sync.clone(),
                timer: self.timer.clone(),
                path: Some(dir.join(format!("step-{n}.trace6.jsonl"))),
                atomic: self.atomic,
                writer: None,
                queue_capacity: self.queue_capacity,
                host_threshold_bytes: self.host_threshold_bytes,
            })
            .collect())
    }

    /// The meta line this builder would write, with `timestamp` as given.
    fn meta(&self, run_id: &str, timestamp: String) -> Meta {
        Meta {
            schema: String::from(TRACE_SCHEMA),
            run_id: run_id.to_string(),
            correlation_id: self
                .correlation_id
                .clone()
                .unwrap_or_else(|| run_id.to_string()),
            entrypoint: self.entrypoint.clone(),
            phase: self.phase,
            timestamp,
            capture_step: self.capture_step,
            warmup_steps: self.capture_step.saturating_sub(1),
            device: self.device.clone(),
            measured_region_device_synchronized: self.sync.is_some(),
            timing_mode: self.timing_mode,
            tags: self.tags.clone(),
            candle_version: self.candle_version.clone(),
        }
    }

    /// Open the output, write the meta line and start the writer thread.
    ///
    /// Errors (`InvalidInput`): no output, a capture step of 0, `device_synchronized` timing
    /// without a device sync hook, `atomic` without a path. Other errors come from creating the
    /// file.
    pub fn build(self) -> io::Result<Recorder> {
        if self.capture_step == 0 {
            return Err(invalid(
                "the capture step is one-based: it must be at least 1",
            ));
        }
        if self.timing_mode == TimingMode::DeviceSynchronized
            && self.sync.is_none()
            && self.timer.is_none()
        {
            return Err(invalid(
                "timing mode device_synchronized needs a device_sync hook or a span timer",
            ));
        }
        if self.atomic && self.path.is_none() {
            return Err(invalid("atomic(true) needs a path"));
        }
        let run_id = self.run_id.clone().unwrap_or_else(generated_run_id);
        let meta = self.meta(
            &run_id,
            wallclock::rfc3339_from_unix_nanos(wallclock::unix_nanos_now()),
        );
        let mut this = self;
        let target = match (this.path.take(), this.writer.take()) {
            (Some(path), _) => Target::Path {
                path,
                atomic: this.atomic,
            },
            (None, Some(writer)) => Target::Writer(writer),
            (None, None) => {
                return Err(invalid(
                    "no output: call .path(P) or .writer(W) on the builder",
                ))
            }
        };
        let closing = Arc::default();
        let names = crate::intern::NameTable::shared();
        let framing = Framing {
            header: Some(TraceEvent::Meta(meta).to_json_line().into_bytes()),
            closing: Arc::clone(&closing),
            trailer: capture_stats_line,
        };
        let writer = Writer::spawn_with(
            vec![target],
            this.queue_capacity,
            framing,
            "candle-trace-writer",
            HostBlocks::for_device(&this.device, Arc::clone(&names)),
        )
        .map_err(into_io)?;
        writer.make_ring();
        Ok(Recorder {
            inner: Arc::new(Inner::new(InnerParts {
                run_id,
                device: this.device,
                capture_step: this.capture_step,
                timing_mode: this.timing_mode,
                sync: this.sync,
                timer: this.timer,
                writer,
                host_threshold_bytes: this.host_threshold_bytes,
                closing,
                names,
                #[cfg(feature = "candle")]
                tensor_clock: Some(crate::candle::graph::tensor_clock),
                #[cfg(not(feature = "candle"))]
                tensor_clock: None,
            })),
        })
    }
}

/// The last line of a trace whose writer dropped events, and only then:
/// `{"kind":"capture_stats","events_dropped":N,"events_written":M}`.
///
/// SCHEMA.md has no kind for this, and that is the point: readers skip a line of unknown kind
/// with a warning, so a trace that lost events says so in every reader's diagnostics, while a
/// complete trace has no extra line at all. `events_written` counts the lines before this one.
fn capture_stats_line(dropped: u64, written: u64) -> Option<Vec<u8>> {
    (dropped > 0).then(|| {
        format!(
            r#"{{"kind":"capture_stats","events_dropped":{dropped},"events_written":{written}}}"#
        )
        .into_bytes()
    })
}

fn into_io(e: CaptureError) -> io::Error {
    let kind = match &e {
        CaptureError::Open { source, .. } | CaptureError::Write { source, .. } => source.kind(),
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_and_capture_step_are_one_setting() {
        let b = Recorder::builder("e").warmup_steps(3);
        let m = b.meta("r", String::new());
        assert_eq!((m.capture_step, m.warmup_steps), (4, 3));
        let m = Recorder::builder("e")
            .capture_step(1)
            .meta("r", String::new());
        assert_eq!((m.capture_step, m.warmup_steps), (1, 0));
        let m = Recorder::builder("e").meta("r", String::new());
        assert_eq!((m.capture_step, m.warmup_steps), (2, 1));
        assert_eq!(m.correlation_id, "r");
        assert!(!m.measured_region_device_synchronized);
    }

    #[test]
    fn bad_configurations_are_refused() {
        let err = |b: RecorderBuilder| b.build().unwrap_err().kind();
        assert_eq!(
            err(Recorder::builder("e").writer(io::sink()).capture_step(0)),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(err(Recorder::builder("e")), io::ErrorKind::InvalidInput);
        assert_eq!(
            err(Recorder::builder("e")
                .writer(io::sink())
                .timing_mode(TimingMode::DeviceSynchronized)),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            err(Recorder::builder("e").writer(io::sink()).atomic(true)),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            err(Recorder::builder("e").path("/nonexistent-dir/x/trace.jsonl")),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn generated_run_ids_differ() {
        assert_ne!(generated_run_id(), generated_run_id());
    }

    #[test]
    fn capture_stats_only_when_something_was_dropped() {
        assert_eq!(capture_stats_line(0, 10), None);
        let line = capture_stats_line(3, 10).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["kind"], "capture_stats");
        assert_eq!(v["events_dropped"], 3);
    }
}

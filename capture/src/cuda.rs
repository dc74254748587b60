//! CUDA extras (feature `cuda`): driver memory checkpoints, CUDA-event timing, NVTX ranges.
//!
//! Everything goes through cudarc's driver API, loaded at run time, so a binary built with this
//! feature starts and runs on machines without a GPU or a CUDA driver: [`driver_available`] is
//! then false, the fallible functions return [`CudaError::DriverUnavailable`], NVTX ranges do
//! nothing, and nothing panics. (cudarc itself panics when asked to load a library that is not
//! there, so every entry point here checks first.)
//!
//! - [`CudaMemoryProbe`] / [`record_cuda_memory`]: a `device_memory` checkpoint from
//!   `cuMemGetInfo` (`used_bytes` = total − free). This is device-wide: other processes and
//!   candle's caching count as used.
//! - [`DeviceTimer`]: two CUDA events recorded on a stream around a region; the elapsed time is
//!   the device's, not the host's. Use candle's stream
//!   (`candle_core::cuda_backend::CudaDevice::cuda_stream()`, available when the program enables
//!   `candle-core/cuda`) so the events are ordered with candle's kernels; candle's streams do
//!   not synchronize with the legacy default stream.
//! - [`NvtxRange`]: an NVTX push/pop range named like the span, so Nsight Systems shows the
//!   trace's spans on its timeline (with feature `nvtx`; a no-op without it). Names with NUL
//!   bytes are cut at the first NUL.

use std::sync::{Arc, OnceLock};

use candle_trace_schema::format::events::{DeviceMemory, TraceEvent};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream, DriverError};

use crate::sink::Sink;
use crate::sync::{note_sync_error, DeviceSync};

/// Why a CUDA helper could not do its work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaError {
    /// No CUDA driver library (`libcuda`) could be loaded on this machine.
    DriverUnavailable,
    /// The driver returned an error.
    Driver(DriverError),
}

impl std::fmt::Display for CudaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CudaError::DriverUnavailable => f.write_str("no CUDA driver library could be loaded"),
            CudaError::Driver(err) => write!(f, "CUDA driver error: {err}"),
        }
    }
}

impl std::error::Error for CudaError {}

impl From<DriverError> for CudaError {
    fn from(err: DriverError) -> Self {
        CudaError::Driver(err)
    }
}

/// Whether a shared library named `name` can be loaded under one of the names cudarc also
/// tries (`{prefix}{name}{suffix}` and `….1`), so a `true` here means cudarc's loader finds it.
fn library_loadable(names: &[&str]) -> bool {
    use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
    names.iter().any(|name| {
        [
            format!("{DLL_PREFIX}{name}{DLL_SUFFIX}"),
            format!("{DLL_PREFIX}{name}{DLL_SUFFIX}.1"),
        ]
        .iter()
        .any(|file| {
            // SAFETY: loading a system library runs its initialisers; these are the CUDA driver
            // and NVTX libraries that cudarc would load for the very next call anyway. The
            // handle is closed again at once and no symbol is used through it.
            #[allow(unsafe_code)]
            let loaded = unsafe { libloading::Library::new(file) };
            loaded.is_ok()
        })
    })
}

/// Whether the CUDA driver library can be loaded (checked once per process).
pub fn driver_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| library_loadable(&["cuda", "nvcuda"]))
}

/// Whether NVTX ranges are emitted: the crate was built with feature `nvtx` and the NVTX
/// library (`libnvToolsExt`) can be loaded (checked once per process).
pub fn nvtx_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    cfg!(feature = "nvtx") && *AVAILABLE.get_or_init(|| library_loadable(&["nvToolsExt"]))
}

/// Number of CUDA devices the driver reports.
pub fn device_count() -> Result<usize, CudaError> {
    if !driver_available() {
        return Err(CudaError::DriverUnavailable);
    }
    Ok(usize::try_from(CudaContext::device_count()?).unwrap_or(0))
}

/// The primary context of device `ordinal` (the one candle uses), for the helpers below.
pub fn context(ordinal: usize) -> Result<Arc<CudaContext>, CudaError> {
    if !driver_available() {
        return Err(CudaError::DriverUnavailable);
    }
    Ok(CudaContext::new(ordinal)?)
}

/// Reads device memory from the driver for `device_memory` checkpoints of one GPU.
#[derive(Debug, Clone)]
pub struct CudaMemoryProbe {
    ctx: Arc<CudaContext>,
    device: String,
}

/// One reading of a device's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemoryInfo {
    /// Bytes in use on the device (total − free), by every process.
    pub used_bytes: u64,
    /// Bytes free on the device.
    pub free_bytes: u64,
}

impl CudaMemoryProbe {
    /// A probe for device `ordinal` (events name it `cuda:ORDINAL`).
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        Ok(CudaMemoryProbe {
            ctx: context(ordinal)?,
            device: format!("cuda:{ordinal}"),
        })
    }

    /// The trace device name, `cuda:N`.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// Read used and free bytes (`cuMemGetInfo`).
    pub fn read(&self) -> Result<DeviceMemoryInfo, CudaError> {
        let (free, total) = self.ctx.mem_get_info()?;
        Ok(DeviceMemoryInfo {
            used_bytes: total.saturating_sub(free) as u64,
            free_bytes: free as u64,
        })
    }

    /// Emit a `device_memory` checkpoint. Does nothing (and returns `Ok`) when the sink is not
    /// recording; a failed read emits nothing and returns the error.
    pub fn record<S: Sink + ?Sized>(&self, sink: &S) -> Result<(), CudaError> {
        if !sink.is_recording() {
            return Ok(());
        }
        let info = self.read()?;
        sink.emit(TraceEvent::DeviceMemory(DeviceMemory {
            timestamp_ns: sink.now_ns(),
            device: self.device.clone(),
            used_bytes: info.used_bytes,
            free_bytes: info.free_bytes,
            reserved_bytes: None,
        }));
        Ok(())
    }
}

/// Emit one `device_memory` checkpoint for device `ordinal` (see [`CudaMemoryProbe`], which
/// keeps the context between checkpoints).
pub fn record_cuda_memory<S: Sink + ?Sized>(sink: &S, ordinal: usize) -> Result<(), CudaError> {
    if !sink.is_recording() {
        return Ok(());
    }
    CudaMemoryProbe::new(ordinal)?.record(sink)
}

/// Device-side timing of a region: a CUDA event recorded on a stream at [`start`] and another
/// at [`stop`]; the elapsed time is measured by the GPU between the two points in the stream.
///
/// [`start`]: DeviceTimer::start
/// [`stop`]: DeviceTimer::stop
#[derive(Debug)]
pub struct DeviceTimer {
    stream: Arc<CudaStream>,
    start: CudaEvent,
}

impl DeviceTimer {
    /// Record the start event on `stream` (queued after all work already on it).
    pub fn start(stream: &Arc<CudaStream>) -> Result<Self, CudaError> {
        if !driver_available() {
            return Err(CudaError::DriverUnavailable);
        }
        // CU_EVENT_DEFAULT: cudarc's default disables timing.
        let start = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        Ok(DeviceTimer {
            stream: Arc::clone(stream),
            start,
        })
    }

    /// Record the end event and wait for it; returns the device time between the two events in
    /// nanoseconds (CUDA events resolve about 0.5 µs).
    pub fn stop(self) -> Result<u64, CudaError> {
        let end = self
            .stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        let ms = self.start.elapsed_ms(&end)?;
        Ok(ms_to_ns(ms))
    }
}

/// Times spans with CUDA events on `stream`: give it to
/// [`RecorderBuilder::span_timer`](crate::RecorderBuilder::span_timer) and every nested span's
/// duration is the GPU time between an event recorded when it opened and one when it closed
/// ([`DeviceTimer`]), so a span measures the device work queued inside it, not its launch.
/// Closing a span waits for its end event. Without a driver every span keeps its host time.
#[derive(Debug)]
pub struct CudaEventTimer {
    stream: Arc<CudaStream>,
}

impl CudaEventTimer {
    /// Time spans on `stream` (candle's `CudaDevice::cuda_stream()` with `candle-core/cuda`).
    pub fn new(stream: Arc<CudaStream>) -> Self {
        CudaEventTimer { stream }
    }
}

impl crate::sync::SpanTimer for CudaEventTimer {
    fn start(&self) -> Option<crate::sync::TimerMark> {
        DeviceTimer::start(&self.stream)
            .ok()
            .map(crate::sync::TimerMark::new)
    }

    fn elapsed_ns(&self, mark: crate::sync::TimerMark) -> Option<u64> {
        mark.into_inner::<DeviceTimer>()?.stop().ok()
    }
}

fn ms_to_ns(ms: f32) -> u64 {
    if ms.is_finite() && ms > 0.0 {
        // `as` saturates for floats, and the value is finite and positive.
        (f64::from(ms) * 1_000_000.0).round() as u64
    } else {
        0
    }
}

/// An NVTX range on the calling thread, pushed on creation and popped on drop.
///
/// Does nothing when the NVTX library is not available. Ranges are per thread: drop the guard
/// on the thread that made it (it is not `Send`).
#[derive(Debug)]
pub struct NvtxRange {
    pushed: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl NvtxRange {
    /// Push a range named `name` (cut at the first NUL byte).
    pub fn push(name: &str) -> Self {
        let pushed = nvtx_push(name);
        NvtxRange {
            pushed,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Whether a range was actually pushed (NVTX is available).
    pub fn is_active(&self) -> bool {
        self.pushed
    }
}

impl Drop for NvtxRange {
    fn drop(&mut self) {
        if self.pushed {
            nvtx_pop();
        }
    }
}

/// The part of `name` before its first NUL byte (NVTX takes C strings).
#[cfg(any(feature = "nvtx", test))]
fn nvtx_name(name: &str) -> &str {
    name.split('\0').next().unwrap_or_default()
}

/// Push an NVTX range named `name` on this thread; false (and nothing pushed) without NVTX.
/// Pair each `true` with one [`nvtx_pop`].
pub fn nvtx_push(name: &str) -> bool {
    if !nvtx_available() {
        return false;
    }
    #[cfg(feature = "nvtx")]
    {
        // The name has no NUL byte, so cudarc's CString conversion cannot fail.
        cudarc::nvtx::result::range_push(nvtx_name(name));
        true
    }
    #[cfg(not(feature = "nvtx"))]
    {
        let _ = name;
        false
    }
}

/// Pop the innermost NVTX range of this thread (does nothing without NVTX).
pub fn nvtx_pop() {
    #[cfg(feature = "nvtx")]
    if nvtx_available() {
        cudarc::nvtx::result::range_pop();
    }
}

/// `cuStreamSynchronize`; a failure is counted ([`crate::sync::sync_error_count`]).
impl DeviceSync for CudaStream {
    fn synchronize(&self) {
        if CudaStream::synchronize(self).is_err() {
            note_sync_error();
        }
    }
}

/// `cuCtxSynchronize`; a failure is counted ([`crate::sync::sync_error_count`]).
impl DeviceSync for CudaContext {
    fn synchronize(&self) {
        if CudaContext::synchronize(self).is_err() {
            note_sync_error();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::VecSink;

    /// Skip a runtime test with a clear message when there is no CUDA driver or GPU.
    fn gpu_or_skip(test: &str) -> Option<Arc<CudaContext>> {
        match device_count() {
            Ok(n) if n > 0 => match context(0) {
                Ok(ctx) => Some(ctx),
                Err(err) => {
                    println!("SKIPPED {test}: cannot open CUDA device 0: {err}");
                    None
                }
            },
            Ok(_) => {
                println!("SKIPPED {test}: the CUDA driver reports no device");
                None
            }
            Err(err) => {
                println!("SKIPPED {test}: {err}");
                None
            }
        }
    }

    #[test]
    fn no_driver_means_errors_not_panics() {
        if driver_available() {
            println!("SKIPPED no_driver_means_errors_not_panics: a CUDA driver is present");
            return;
        }
        assert_eq!(device_count(), Err(CudaError::DriverUnavailable));
        assert!(CudaMemoryProbe::new(0).is_err());
        let sink = VecSink::new("cuda:0");
        assert_eq!(
            record_cuda_memory(&sink, 0),
            Err(CudaError::DriverUnavailable)
        );
        assert!(sink.events().is_empty());
        assert_eq!(
            CudaError::DriverUnavailable.to_string(),
            "no CUDA driver library could be loaded"
        );
    }

    #[test]
    fn nvtx_ranges_are_safe_without_nvtx() {
        let range = NvtxRange::push("forward\0ignored");
        assert_eq!(range.is_active(), nvtx_available());
        drop(range);
        assert_eq!(nvtx_name("a\0b"), "a");
        assert_eq!(nvtx_name("span"), "span");
        assert_eq!(nvtx_name(""), "");
    }

    #[test]
    fn ms_conversion() {
        assert_eq!(ms_to_ns(1.5), 1_500_000);
        assert_eq!(ms_to_ns(0.0), 0);
        assert_eq!(ms_to_ns(-1.0), 0);
        assert_eq!(ms_to_ns(f32::NAN), 0);
    }

    #[test]
    fn memory_checkpoint_on_a_gpu() {
        let Some(_ctx) = gpu_or_skip("memory_checkpoint_on_a_gpu") else {
            return;
        };
        let probe = CudaMemoryProbe::new(0).expect("probe");
        let sink = VecSink::new("cuda:0");
        probe.record(&sink).expect("record");
        match sink.events().as_slice() {
            [TraceEvent::DeviceMemory(m)] => {
                assert_eq!(m.device, "cuda:0");
                assert!(m.used_bytes + m.free_bytes > 0);
            }
            other => panic!("expected one device_memory event, got {other:?}"),
        }
    }

    #[test]
    fn device_timer_on_a_gpu() {
        let Some(ctx) = gpu_or_skip("device_timer_on_a_gpu") else {
            return;
        };
        let stream = ctx.new_stream().expect("stream");
        let timer = DeviceTimer::start(&stream).expect("start");
        let buf = stream.alloc_zeros::<f32>(1 << 20).expect("alloc");
        drop(buf);
        let ns = timer.stop().expect("stop");
        assert!(ns < 10_000_000_000, "{ns} ns");
        DeviceSync::synchronize(&*stream);
        DeviceSync::synchronize(&*ctx);
        let _range = NvtxRange::push("device_timer_on_a_gpu");
    }
}

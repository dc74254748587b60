//! Host memory: an opt-in counting global allocator, per-span attribution, and helpers that
//! write `memory` and `device_memory` events.
//!
//! [`TrackingAllocator`] wraps another allocator (the system one by default) and keeps two
//! process-wide numbers, live and peak host bytes. It is opt-in: a binary installs it with
//!
//! ```
//! use candle_trace_capture::alloc::TrackingAllocator;
//!
//! #[global_allocator]
//! static ALLOC: TrackingAllocator = TrackingAllocator::system();
//! # fn main() {}
//! ```
//!
//! Without it installed, [`live_bytes`] and [`peak_bytes`] stay 0 and attribution scopes
//! report zeros.
//!
//! **Counting without a shared counter.** Each of the first 63 threads that allocate counts in
//! a slot of its own (bytes allocated minus freed, allocations, frees), with a plain load and
//! store on a cache line no other thread writes; later threads share one slot, with locked
//! instructions. Live bytes are the slots summed, exactly. The peak is sampled: a thread
//! sums the slots each time it has allocated [`PEAK_SAMPLE_BYTES`] since its last sample and
//! at every block of at least that size, so [`peak_bytes`] is below the true peak by less
//! than that much per allocating thread.
//!
//! **Per-span host blocks.** During a recorder's captured step (see
//! [`RecorderBuilder::alloc_threshold_bytes`](crate::RecorderBuilder::alloc_threshold_bytes)),
//! every block of at least the threshold allocated on a thread with an open span is handed to
//! the recorder as a `memory` `alloc` of that span, and its free (on any thread, until the next
//! step begins) as a `free`. Below the threshold, one relaxed load per allocation decides.
//!
//! **Attribution scopes.** While an [`AttributionScope`] is open on a thread, that thread's
//! allocations and frees are also counted in thread-local counters, and
//! [`AttributionScope::finish`] returns what happened between open and finish: bytes allocated
//! and freed, counts, and the peak net growth. Scopes nest (a parent's numbers include its
//! children's). Frees are counted on the thread that frees, whoever allocated. Nothing in this
//! crate opens one; they are for callers that want a region's numbers in code.
//!
//! **Safety of the hot path.** `alloc`/`dealloc` only touch atomics and const-initialised
//! thread-locals of `Copy` types (no destructor to register, so touching them never
//! allocates); a block handed to the recorder takes a read lock that is never waited for
//! (`try_read`: a block seen while the recorder is being attached is not written) and a slot
//! of the thread's ring; a thread-local re-entrancy flag makes a nested call skip attribution
//! and the recorder; nothing in them can panic (`try_with` is used, so a thread being torn
//! down is simply not attributed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use candle_trace_schema::format::events::{
    DeviceMemory, MemoryAction, MemoryEvent, Pass, TensorCategory, TraceEvent,
};

use crate::routed::{Cache, Routed};
use crate::sink::Sink;

/// Counter slots: each of the first `SLOTS - 1` threads that allocate counts its allocations
/// and frees in a slot of its own, with a plain load and store (no other thread writes it);
/// later threads share the last slot, with locked instructions. A slot stays with its thread
/// for the process's life (the allocator cannot register a thread-exit hook without
/// allocating), so a program that starts many short-lived threads ends up counting in the
/// shared slot, as one counter did for every thread.
const SLOTS: usize = 64;
/// The slot that threads past the first `SLOTS - 1` share.
const SHARED: usize = SLOTS - 1;

/// A thread samples the process's live bytes for the peak each time it has allocated this many
/// bytes since its last sample, and at every block at least this large: the peak is exact to
/// within this much per allocating thread.
pub const PEAK_SAMPLE_BYTES: u64 = 16 * 1024;

/// One slot's counters, on a cache-line pair of its own.
#[repr(C, align(128))]
struct Slot {
    /// Bytes allocated minus bytes freed by the slot's threads, wrapping: a thread may free
    /// what another allocated, so only the sum over the slots is live bytes.
    net: AtomicU64,
    allocs: AtomicU64,
    frees: AtomicU64,
}

static SLOT: [Slot; SLOTS] = [const {
    Slot {
        net: AtomicU64::new(0),
        allocs: AtomicU64::new(0),
        frees: AtomicU64::new(0),
    }
}; SLOTS];
/// Slots owned so far (the next thread takes this one, until [`SHARED`]).
static SLOTS_TAKEN: AtomicUsize = AtomicUsize::new(0);
/// The largest live bytes sampled since start or the last [`reset_peak`].
static PEAK: Peak = Peak(AtomicU64::new(0));

/// On a cache-line pair of its own: written only when the peak rises.
#[repr(C, align(128))]
struct Peak(AtomicU64);

/// The slots in use (the shared one always).
fn used_slots() -> impl Iterator<Item = &'static Slot> {
    let owned = SLOTS_TAKEN.load(Ordering::Relaxed).min(SHARED);
    SLOT[..owned].iter().chain(std::iter::once(&SLOT[SHARED]))
}

impl Slot {
    fn count_alloc(&self, bytes: u64, owned: bool) {
        Slot::add(&self.net, bytes, owned);
        Slot::add(&self.allocs, 1, owned);
    }

    fn count_free(&self, bytes: u64, owned: bool) {
        Slot::add(&self.net, bytes.wrapping_neg(), owned);
        Slot::add(&self.frees, 1, owned);
    }

    /// Add `n` to `counter` (wrapping): a plain load and store in a slot of the thread's own,
    /// a locked instruction in the shared one.
    fn add(counter: &AtomicU64, n: u64, owned: bool) {
        if owned {
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(n),
                Ordering::Relaxed,
            );
        } else {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Live bytes now: the slots' nets summed. A sum read while other threads count can be off by
/// what they count meanwhile (a block allocated in one slot and freed in another between the
/// two reads), so one below zero reads as 0.
fn sum_live() -> u64 {
    let live = used_slots().fold(0u64, |sum, slot| {
        sum.wrapping_add(slot.net.load(Ordering::Relaxed))
    });
    if live > i64::MAX as u64 {
        0
    } else {
        live
    }
}

/// Raise the peak to the live bytes now, if they are above it.
fn sample_peak() {
    let live = sum_live();
    // Most samples do not raise the peak: a plain load spares them a locked instruction.
    if live > PEAK.0.load(Ordering::Relaxed) {
        PEAK.0.fetch_max(live, Ordering::Relaxed);
    }
}

/// The allocator's view of a recorder: host blocks of at least the threshold.
pub(crate) trait HostSink: Send + Sync {
    fn key(&self) -> u64;
    fn threshold_bytes(&self) -> u64;
    fn host_alloc(&self, ptr: u64, bytes: u64, span: u64, pass: Option<Pass>);
    fn host_free(&self, ptr: u64, span: u64);
}

/// The recorder that host blocks of at least its threshold go to, during its captured step.
static HOST_SINK: Routed<dyn HostSink> = Routed::new();
/// The host sink's key and threshold: read on every allocation and span push, written only
/// when a recorder attaches or detaches, so on lines of their own.
#[repr(C, align(128))]
struct HostRoute {
    /// Its recorder key (0 = none): span pushes of other recorders do not touch `span`.
    key: AtomicU64,
    /// Its threshold (`u64::MAX` = none attached): one relaxed load per allocation decides.
    threshold: AtomicU64,
}

static HOST: HostRoute = HostRoute {
    key: AtomicU64::new(0),
    threshold: AtomicU64::new(u64::MAX),
};

/// Per-thread attribution state; all `Copy`, const-initialised, no destructor.
struct ThreadCounters {
    /// Innermost open span of the host sink's recorder on this thread (0 = none).
    span: Cell<u64>,
    /// Its training step.
    pass: Cell<Option<Pass>>,
    /// Open attribution scopes on this thread (0 = attribution off).
    depth: Cell<u32>,
    /// This thread's counter slot, plus one (0 = none taken yet).
    slot: Cell<usize>,
    /// Bytes this thread allocated since it last sampled the peak.
    unsampled: Cell<u64>,
    /// Set while this thread is inside the allocator's bookkeeping.
    busy: Cell<bool>,
    allocated_bytes: Cell<u64>,
    freed_bytes: Cell<u64>,
    alloc_count: Cell<u64>,
    free_count: Cell<u64>,
    /// allocated − freed on this thread (wrapping; only differences are used).
    net_bytes: Cell<i64>,
    /// Largest `net_bytes` since the innermost scope opened.
    high_water: Cell<i64>,
}

thread_local! {
    static THREAD: ThreadCounters = const {
        ThreadCounters {
            span: Cell::new(0),
            pass: Cell::new(None),
            depth: Cell::new(0),
            slot: Cell::new(0),
            unsampled: Cell::new(0),
            busy: Cell::new(false),
            allocated_bytes: Cell::new(0),
            freed_bytes: Cell::new(0),
            alloc_count: Cell::new(0),
            free_count: Cell::new(0),
            net_bytes: Cell::new(0),
            high_water: Cell::new(0),
        }
    };
    /// This thread's copy of [`HOST_SINK`] (see [`crate::routed`]).
    static CACHED_SINK: Cache<dyn HostSink> = const { RefCell::new(None) };
}

/// Hand a block of at least the threshold to the host sink: on the allocating thread, only
/// inside a span; frees on any thread. The `busy` flag keeps the sink's own allocations (and a
/// free inside them) out, so the allocator never re-enters itself.
#[cold]
fn to_host_sink(ptr: u64, bytes: u64, alloc: bool) {
    let _ = THREAD.try_with(|t| {
        if t.busy.get() || (alloc && t.span.get() == 0) {
            return;
        }
        t.busy.set(true);
        let (span, pass) = (t.span.get(), t.pass.get());
        // Never waiting for the lock: nothing may block inside the allocator.
        HOST_SINK.with(&CACHED_SINK, false, |sink| match sink {
            Some(sink) if alloc => sink.host_alloc(ptr, bytes, span, pass),
            Some(sink) => sink.host_free(ptr, span),
            None => {}
        });
        t.busy.set(false);
    });
}

/// This thread's slot, whether it owns it, and whether the peak is due for a sample after
/// `allocated` more bytes (while the thread is torn down: the shared slot, and always).
fn slot(allocated: u64) -> (&'static Slot, bool, bool) {
    THREAD
        .try_with(|t| {
            let mut index = t.slot.get();
            if index == 0 {
                index = take_slot(&SLOTS_TAKEN) + 1;
                t.slot.set(index);
            }
            let (unsampled, due) = peak_due(t.unsampled.get(), allocated);
            t.unsampled.set(unsampled);
            (&SLOT[index - 1], index - 1 != SHARED, due)
        })
        .unwrap_or((&SLOT[SHARED], false, allocated > 0))
}

/// The slot a thread takes, once, given `taken` (the owned slots handed out so far): the next
/// owned one, or [`SHARED`] once they are all taken (the count then stops growing).
fn take_slot(taken: &AtomicUsize) -> usize {
    taken
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < SHARED).then_some(n + 1)
        })
        .unwrap_or(SHARED)
}

/// A thread's bytes allocated since its last peak sample, after `allocated` more: the new
/// count, and whether a sample is due (the count then restarts from 0).
fn peak_due(unsampled: u64, allocated: u64) -> (u64, bool) {
    let unsampled = unsampled.saturating_add(allocated);
    if unsampled >= PEAK_SAMPLE_BYTES {
        (0, true)
    } else {
        (unsampled, false)
    }
}

fn on_alloc(ptr: u64, bytes: u64) {
    let (slot, owned, due) = slot(bytes);
    slot.count_alloc(bytes, owned);
    if due {
        sample_peak();
    }
    if bytes >= HOST.threshold.load(Ordering::Relaxed) {
        to_host_sink(ptr, bytes, true);
    }
    let _ = THREAD.try_with(|t| {
        if t.depth.get() == 0 || t.busy.get() {
            return;
        }
        t.busy.set(true);
        t.allocated_bytes
            .set(t.allocated_bytes.get().wrapping_add(bytes));
        t.alloc_count.set(t.alloc_count.get().wrapping_add(1));
        let net = t.net_bytes.get().wrapping_add(bytes as i64);
        t.net_bytes.set(net);
        if net > t.high_water.get() {
            t.high_water.set(net);
        }
        t.busy.set(false);
    });
}

fn on_free(ptr: u64, bytes: u64) {
    let (slot, owned, _) = slot(0);
    slot.count_free(bytes, owned);
    if bytes >= HOST.threshold.load(Ordering::Relaxed) {
        to_host_sink(ptr, bytes, false);
    }
    let _ = THREAD.try_with(|t| {
        if t.depth.get() == 0 || t.busy.get() {
            return;
        }
        t.busy.set(true);
        t.freed_bytes.set(t.freed_bytes.get().wrapping_add(bytes));
        t.free_count.set(t.free_count.get().wrapping_add(1));
        t.net_bytes
            .set(t.net_bytes.get().wrapping_sub(bytes as i64));
        t.busy.set(false);
    });
}

/// A global allocator that counts live and peak host bytes, then delegates to `A`.
///
/// The counters are process-wide statics (there is only one global allocator), kept per
/// thread as the [module](self) describes and read with [`live_bytes`], [`peak_bytes`] and
/// [`allocation_counts`].
#[derive(Debug, Default, Clone, Copy)]
pub struct TrackingAllocator<A = System> {
    inner: A,
}

impl TrackingAllocator<System> {
    /// Track the system allocator.
    pub const fn system() -> Self {
        TrackingAllocator { inner: System }
    }
}

impl<A> TrackingAllocator<A> {
    /// Track `inner` (e.g. a jemalloc or mimalloc allocator).
    pub const fn new(inner: A) -> Self {
        TrackingAllocator { inner }
    }
}

// SAFETY: every method forwards to `inner` with the caller's arguments unchanged, so `inner`'s
// GlobalAlloc contract is upheld exactly; the bookkeeping around the calls touches only atomics
// and thread-locals, never allocates, and cannot panic or unwind.
#[allow(unsafe_code)]
unsafe impl<A: GlobalAlloc> GlobalAlloc for TrackingAllocator<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged (see the impl comment).
        let ptr = unsafe { self.inner.alloc(layout) };
        if !ptr.is_null() {
            on_alloc(ptr as usize as u64, layout.size() as u64);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let ptr = unsafe { self.inner.alloc_zeroed(layout) };
        if !ptr.is_null() {
            on_alloc(ptr as usize as u64, layout.size() as u64);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { self.inner.dealloc(ptr, layout) };
        on_free(ptr as usize as u64, layout.size() as u64);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let new_ptr = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            // A realloc is a free of the old block and an alloc of the new one.
            on_free(ptr as usize as u64, layout.size() as u64);
            on_alloc(new_ptr as usize as u64, new_size as u64);
        }
        new_ptr
    }
}

/// Whether [`TrackingAllocator`] is the global allocator (it has counted an allocation; any
/// Rust program allocates before `main`).
pub fn installed() -> bool {
    used_slots().any(|slot| slot.allocs.load(Ordering::Relaxed) > 0)
}

/// Run `f` with this thread's allocator hooks quiet: what `f` allocates or frees is counted,
/// never handed to the host sink (so a lock `f` holds is never wanted by the allocator).
pub(crate) fn quietly<R>(f: impl FnOnce() -> R) -> R {
    let was = THREAD.try_with(|t| t.busy.replace(true)).unwrap_or(true);
    let result = f();
    let _ = THREAD.try_with(|t| t.busy.set(was));
    result
}

/// Send host blocks of at least `sink.threshold_bytes()` to `sink` (a recorder's captured
/// step), replacing any sink attached before.
pub(crate) fn attach_host_sink(sink: Arc<dyn HostSink>) {
    let key = sink.key();
    let threshold = sink.threshold_bytes();
    let old = quietly(|| {
        HOST_SINK.update(|slot| {
            HOST.key.store(key, Ordering::Release);
            HOST.threshold.store(threshold, Ordering::Release);
            slot.replace(sink)
        })
    });
    quietly(|| drop(old));
}

/// Stop sending host blocks to the recorder `key`, if it is the one attached.
pub(crate) fn detach_host_sink(key: u64) {
    let old = quietly(|| {
        HOST_SINK.update(|slot| {
            if HOST.key.load(Ordering::Acquire) != key {
                return None;
            }
            HOST.threshold.store(u64::MAX, Ordering::Release);
            HOST.key.store(0, Ordering::Release);
            slot.take()
        })
    });
    quietly(|| drop(old));
}

/// The span stack of recorder `key` on this thread changed: its innermost span is now `span`
/// (0 = none) in `step`. Only the host sink's recorder is followed.
pub(crate) fn set_current_span(key: u64, span: u64, pass: Option<Pass>) {
    if HOST.key.load(Ordering::Relaxed) != key {
        return;
    }
    let _ = THREAD.try_with(|t| {
        t.span.set(span);
        t.pass.set(pass);
    });
}

/// `/proc/meminfo` kept open, read again from offset 0 at each call: the kernel writes the
/// file afresh for every read that starts at 0, and a read on an open file costs less than
/// opening, reading and closing it (CHANGELOG.md has the measurement).
/// The writer thread keeps one per recorder for its `device_memory` checkpoints; a reading
/// less than [`MemInfo::REUSE`] old is given again (the checkpoints at the edges of a short
/// step come within microseconds of each other, and each read costs several).
#[derive(Debug, Default)]
pub(crate) struct MemInfo {
    /// `None` until the first read; `Some(None)` where the file cannot be opened.
    file: Option<Option<std::fs::File>>,
    text: Vec<u8>,
    /// The last reading and when it was taken.
    last: Option<(std::time::Instant, Option<u64>)>,
}

impl MemInfo {
    /// `MemAvailable` now, in bytes; `None` where unknown (as [`host_available_bytes`]).
    #[cfg(not(unix))]
    pub(crate) fn available_bytes(&mut self) -> Option<u64> {
        host_available_bytes()
    }

    /// How long a reading is given again.
    pub(crate) const REUSE: std::time::Duration = std::time::Duration::from_millis(1);

    /// `MemAvailable` now (read at most [`MemInfo::REUSE`] ago), in bytes; `None` where
    /// unknown (as [`host_available_bytes`]).
    #[cfg(unix)]
    pub(crate) fn available_bytes(&mut self) -> Option<u64> {
        if let Some((at, bytes)) = self.last {
            if at.elapsed() < Self::REUSE {
                return bytes;
            }
        }
        let bytes = self
            .read()
            .and_then(|text| std::str::from_utf8(text).ok())
            .and_then(parse_mem_available);
        self.last = Some((std::time::Instant::now(), bytes));
        bytes
    }

    #[cfg(unix)]
    fn read(&mut self) -> Option<&[u8]> {
        use std::os::unix::fs::FileExt;
        let file = self
            .file
            .get_or_insert_with(|| std::fs::File::open("/proc/meminfo").ok())
            .as_ref()?;
        self.text.clear();
        self.text.resize(self.text.capacity().max(4096), 0);
        let mut len = 0;
        loop {
            if len == self.text.len() {
                self.text.resize(len * 2, 0);
            }
            let buf = self.text.get_mut(len..)?;
            match file.read_at(buf, len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        self.text.get(..len)
    }
}

/// Host bytes currently allocated through [`TrackingAllocator`] (0 when it is not installed).
pub fn live_bytes() -> u64 {
    sum_live()
}

/// The largest [`live_bytes`] seen since start or the last [`reset_peak`]: sampled, so below
/// the true peak by less than [`PEAK_SAMPLE_BYTES`] per allocating thread (see the
/// [module](self)); never below [`live_bytes`] now.
pub fn peak_bytes() -> u64 {
    PEAK.0.load(Ordering::Relaxed).max(sum_live())
}

/// Restart peak tracking from the current live bytes (e.g. at the start of the captured step).
pub fn reset_peak() {
    PEAK.0.store(sum_live(), Ordering::Relaxed);
}

/// Process-wide `(allocations, frees)` counted by [`TrackingAllocator`].
pub fn allocation_counts() -> (u64, u64) {
    (
        used_slots()
            .map(|slot| slot.allocs.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add),
        used_slots()
            .map(|slot| slot.frees.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add),
    )
}

/// What one thread allocated and freed while an [`AttributionScope`] was open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpanAllocation {
    /// Bytes allocated (reallocs count their new size).
    pub allocated_bytes: u64,
    /// Bytes freed (reallocs count their old size).
    pub freed_bytes: u64,
    /// Number of allocations.
    pub alloc_count: u64,
    /// Number of frees.
    pub free_count: u64,
    /// Largest net growth (allocated − freed) reached inside the scope, 0 if it never grew.
    pub peak_growth_bytes: u64,
}

impl SpanAllocation {
    /// allocated − freed, negative when the scope released more than it took.
    pub fn net_bytes(&self) -> i64 {
        (self.allocated_bytes as i64).wrapping_sub(self.freed_bytes as i64)
    }
}

/// Attribution of this thread's allocations to one span; open with [`AttributionScope::open`].
///
/// Close scopes in reverse order of opening (a span guard's drop order does this); dropping a
/// scope without [`finish`](AttributionScope::finish) closes it too. Not `Send`: it must close
/// on the thread that opened it.
#[derive(Debug)]
pub struct AttributionScope {
    start: SpanAllocationSnapshot,
    outer_high_water: i64,
    closed: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

#[derive(Debug, Clone, Copy, Default)]
struct SpanAllocationSnapshot {
    allocated_bytes: u64,
    freed_bytes: u64,
    alloc_count: u64,
    free_count: u64,
    net_bytes: i64,
}

fn snapshot(t: &ThreadCounters) -> SpanAllocationSnapshot {
    SpanAllocationSnapshot {
        allocated_bytes: t.allocated_bytes.get(),
        freed_bytes: t.freed_bytes.get(),
        alloc_count: t.alloc_count.get(),
        free_count: t.free_count.get(),
        net_bytes: t.net_bytes.get(),
    }
}

impl AttributionScope {
    /// Start attributing this thread's allocations to a new (innermost) scope.
    pub fn open() -> Self {
        let (start, outer_high_water) = THREAD
            .try_with(|t| {
                t.depth.set(t.depth.get().saturating_add(1));
                let start = snapshot(t);
                let outer = t.high_water.get();
                t.high_water.set(start.net_bytes);
                (start, outer)
            })
            .unwrap_or_default();
        AttributionScope {
            start,
            outer_high_water,
            closed: false,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Stop attributing to this scope and return what it saw.
    pub fn finish(mut self) -> SpanAllocation {
        self.close()
    }

    fn close(&mut self) -> SpanAllocation {
        if self.closed {
            return SpanAllocation::default();
        }
        self.closed = true;
        let start = self.start;
        let outer_high_water = self.outer_high_water;
        THREAD
            .try_with(|t| {
                let end = snapshot(t);
                let high_water = t.high_water.get();
                // The parent's high water is the larger of its own and this child's.
                t.high_water.set(outer_high_water.max(high_water));
                t.depth.set(t.depth.get().saturating_sub(1));
                SpanAllocation {
                    allocated_bytes: end.allocated_bytes.wrapping_sub(start.allocated_bytes),
                    freed_bytes: end.freed_bytes.wrapping_sub(start.freed_bytes),
                    alloc_count: end.alloc_count.wrapping_sub(start.alloc_count),
                    free_count: end.free_count.wrapping_sub(start.free_count),
                    peak_growth_bytes: u64::try_from(high_water.wrapping_sub(start.net_bytes))
                        .unwrap_or(0),
                }
            })
            .unwrap_or_default()
    }
}

impl Drop for AttributionScope {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Free host memory as the OS reports it (`MemAvailable` of `/proc/meminfo`), `None` where
/// unknown (not Linux).
pub fn host_available_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| parse_mem_available(&text))
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    parse_kib_field(meminfo, "MemAvailable:")
}

/// The value of a `Name:   N kB` line of a `/proc` file, in bytes.
fn parse_kib_field(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// This process's resident memory as the OS reports it (`VmRSS` of `/proc/self/status`),
/// `None` where unknown (not Linux).
pub fn process_resident_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| parse_kib_field(&text, "VmRSS:"))
}

/// Emit a `device_memory` checkpoint for the host: device `cpu`, `used_bytes` = [`live_bytes`],
/// `free_bytes` = [`host_available_bytes`]. Does nothing when the sink is not recording, or
/// where the OS does not say how much is free (a 0 there would be a number nobody measured).
pub fn record_host_memory<S: Sink + ?Sized>(sink: &S) {
    if !sink.is_recording() {
        return;
    }
    let Some(free_bytes) = host_available_bytes() else {
        return;
    };
    sink.emit(TraceEvent::DeviceMemory(DeviceMemory {
        timestamp_ns: sink.now_ns(),
        device: "cpu".to_string(),
        used_bytes: live_bytes(),
        free_bytes,
        reserved_bytes: None,
    }));
}

fn memory_event<S: Sink + ?Sized>(
    sink: &S,
    action: MemoryAction,
    tensor_id: &str,
    bytes: u64,
    category: TensorCategory,
    op_name: Option<&str>,
) -> TraceEvent {
    TraceEvent::Memory(MemoryEvent {
        timestamp_ns: sink.now_ns(),
        tensor_id: tensor_id.into(),
        span_id: sink.current_span_id().unwrap_or_default().into(),
        op_name: op_name.map(Into::into),
        device: sink.device().into(),
        bytes,
        action,
        shape: Vec::new(),
        dtype: String::new().into(),
        category,
    })
}

/// Emit a `memory` `alloc` of `bytes` for `tensor_id` on the sink's device, in the current span.
/// (With candle tensors, `candle::events::record_tensor_alloc` also fills shape, dtype and device.)
pub fn record_alloc<S: Sink + ?Sized>(
    sink: &S,
    tensor_id: &str,
    bytes: u64,
    category: TensorCategory,
    op_name: Option<&str>,
) {
    record(
        sink,
        MemoryAction::Alloc,
        tensor_id,
        bytes,
        category,
        op_name,
    );
}

/// Emit a `memory` `free` of `bytes` for `tensor_id` on the sink's device, in the current span.
pub fn record_free<S: Sink + ?Sized>(
    sink: &S,
    tensor_id: &str,
    bytes: u64,
    category: TensorCategory,
    op_name: Option<&str>,
) {
    record(
        sink,
        MemoryAction::Free,
        tensor_id,
        bytes,
        category,
        op_name,
    );
}

fn record<S: Sink + ?Sized>(
    sink: &S,
    action: MemoryAction,
    tensor_id: &str,
    bytes: u64,
    category: TensorCategory,
    op_name: Option<&str>,
) {
    if sink.is_recording() {
        sink.emit(memory_event(
            sink, action, tensor_id, bytes, category, op_name,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::VecSink;

    // The unit-test binary installs the tracking allocator so the counters move.
    #[global_allocator]
    static ALLOC: TrackingAllocator = TrackingAllocator::system();

    #[test]
    fn live_bytes_grow_by_at_least_a_vec() {
        const N: usize = 4 << 20;
        let before = live_bytes();
        let v: Vec<u8> = vec![1u8; N];
        let during = live_bytes();
        // Other test threads allocate and free concurrently, but they cannot free our Vec.
        assert!(during >= N as u64, "live {during} < {N} (before: {before})");
        // Every live value was at most the peak (only this test resets the peak).
        assert!(peak_bytes() >= during);
        std::hint::black_box(&v);
        drop(v);
        let (allocs, frees) = allocation_counts();
        assert!(allocs >= 1 && frees >= 1);
    }

    /// The first 63 threads own a slot each, in order; every later one shares the last.
    #[test]
    fn threads_past_the_owned_slots_share_the_last() {
        let taken = AtomicUsize::new(0);
        let slots: Vec<usize> = (0..SLOTS + 5).map(|_| take_slot(&taken)).collect();
        let owned: Vec<usize> = (0..SHARED).collect();
        assert_eq!(slots[..SHARED], owned[..]);
        assert!(slots[SHARED..].iter().all(|&s| s == SHARED));
        assert_eq!(taken.load(Ordering::Relaxed), SHARED);
    }

    /// A sample is due once a thread has allocated 16 KiB since its last, and at any block of
    /// 16 KiB or more.
    #[test]
    fn the_peak_is_sampled_every_16_kib_a_thread_allocates() {
        let k = 1024;
        assert_eq!(peak_due(0, 16 * k - 1), (16 * k - 1, false));
        assert_eq!(peak_due(16 * k - 1, 1), (0, true));
        assert_eq!(peak_due(10 * k, 7 * k), (0, true));
        assert_eq!(peak_due(0, 16 * k), (0, true));
        assert_eq!(peak_due(0, 1 << 30), (0, true));
        assert_eq!(peak_due(u64::MAX, 1), (0, true));
        // 16 KiB in 1,024 blocks of 16 bytes: one sample, at the last block.
        let (mut unsampled, mut samples) = (0, 0);
        for _ in 0..1024 {
            let (u, due) = peak_due(unsampled, 16);
            unsampled = u;
            samples += usize::from(due);
        }
        assert_eq!((unsampled, samples), (0, 1));
    }

    /// A slot counts in wrapping arithmetic, owned (plain store) or shared (locked), alike: a
    /// free of a block allocated elsewhere leaves it below zero until the sum is taken.
    #[test]
    fn a_slot_counts_blocks_and_bytes() {
        for owned in [true, false] {
            let a = Slot {
                net: AtomicU64::new(0),
                allocs: AtomicU64::new(0),
                frees: AtomicU64::new(0),
            };
            let b = Slot {
                net: AtomicU64::new(0),
                allocs: AtomicU64::new(0),
                frees: AtomicU64::new(0),
            };
            a.count_alloc(100, owned);
            a.count_alloc(28, owned);
            a.count_free(50, owned);
            b.count_free(28, owned);
            let net = |s: &Slot| s.net.load(Ordering::Relaxed);
            assert_eq!(net(&a), 78);
            assert_eq!(net(&b) as i64, -28);
            assert_eq!(net(&a).wrapping_add(net(&b)), 50);
            assert_eq!(a.allocs.load(Ordering::Relaxed), 2);
            assert_eq!(
                a.frees.load(Ordering::Relaxed) + b.frees.load(Ordering::Relaxed),
                2
            );
        }
    }

    /// 80 threads (more than there are owned slots) each hold 1 MiB at once: live and peak
    /// bytes see all of them, whichever slot each thread counts in.
    #[test]
    fn live_and_peak_bytes_sum_every_threads_slot() {
        const THREADS: usize = 80;
        const BLOCK: usize = 1 << 20;
        let held = std::sync::Barrier::new(THREADS + 1);
        let release = std::sync::Barrier::new(THREADS + 1);
        let (allocs_before, _) = allocation_counts();
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    let v = vec![1u8; BLOCK];
                    held.wait();
                    release.wait();
                    std::hint::black_box(&v);
                });
            }
            held.wait();
            let live = live_bytes();
            // Other test threads allocate and free meanwhile, but none frees these blocks.
            assert!(live >= (THREADS * BLOCK) as u64, "live {live}");
            assert!(peak_bytes() >= live);
            release.wait();
        });
        let (allocs_after, _) = allocation_counts();
        assert!(allocs_after - allocs_before >= THREADS as u64);
    }

    #[test]
    fn scopes_attribute_this_threads_allocations() {
        const N: usize = 1 << 20;
        let outer = AttributionScope::open();
        let inner = AttributionScope::open();
        let v: Vec<u8> = vec![0u8; N];
        std::hint::black_box(&v);
        drop(v);
        let inner_seen = inner.finish();
        let w: Vec<u8> = Vec::with_capacity(N / 2);
        std::hint::black_box(&w);
        let outer_seen = outer.finish();
        drop(w);

        assert!(inner_seen.allocated_bytes >= N as u64);
        assert!(inner_seen.freed_bytes >= N as u64);
        assert!(inner_seen.alloc_count >= 1 && inner_seen.free_count >= 1);
        assert!(inner_seen.peak_growth_bytes >= N as u64);
        // The outer scope includes the inner one and the still-live `w`.
        assert!(outer_seen.allocated_bytes >= inner_seen.allocated_bytes + (N / 2) as u64);
        assert!(outer_seen.peak_growth_bytes >= N as u64);
        assert!(outer_seen.net_bytes() >= (N / 2) as i64);
        // Closed: this thread no longer attributes.
        let idle = THREAD.with(|t| t.depth.get());
        assert_eq!(idle, 0);
    }

    #[test]
    fn dropping_a_scope_closes_it() {
        {
            let _scope = AttributionScope::open();
        }
        assert_eq!(THREAD.with(|t| t.depth.get()), 0);
    }

    #[test]
    fn alloc_free_and_checkpoint_events() {
        let sink = VecSink::new("cuda:0");
        sink.set_current_span(Some("backward".into()));
        record_alloc(&sink, "t1", 4096, TensorCategory::Gradient, Some("matmul"));
        record_free(&sink, "t1", 4096, TensorCategory::Gradient, None);
        record_host_memory(&sink);
        let events = sink.events();
        assert_eq!(events.len(), 3);
        match &events[0] {
            TraceEvent::Memory(m) => {
                assert_eq!(m.action, MemoryAction::Alloc);
                assert_eq!(m.device, "cuda:0");
                assert_eq!(m.span_id, "backward");
                assert_eq!(m.bytes, 4096);
                assert_eq!(m.op_name.as_deref(), Some("matmul"));
                assert_eq!(m.category, TensorCategory::Gradient);
            }
            other => panic!("expected memory, got {other:?}"),
        }
        match &events[1] {
            TraceEvent::Memory(m) => assert_eq!(m.action, MemoryAction::Free),
            other => panic!("expected memory, got {other:?}"),
        }
        match &events[2] {
            TraceEvent::DeviceMemory(d) => {
                assert_eq!(d.device, "cpu");
                assert!(d.used_bytes > 0, "the test allocator is installed");
            }
            other => panic!("expected device_memory, got {other:?}"),
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn meminfo_kept_open_reads_afresh() {
        let mut meminfo = MemInfo::default();
        let first = meminfo.available_bytes().unwrap();
        let again = meminfo.available_bytes().unwrap();
        let fresh = host_available_bytes().unwrap();
        assert!(first > 0 && again > 0, "{first} {again}");
        // The same field as a fresh open: equal up to what the machine did meanwhile.
        let diff = again.abs_diff(fresh);
        assert!(diff < fresh / 4, "{again} vs {fresh}");
    }

    #[test]
    fn meminfo_parsing() {
        let text = "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(parse_mem_available(text), Some(2048 * 1024));
        assert_eq!(parse_mem_available("nothing"), None);
        assert_eq!(parse_mem_available("MemAvailable: x kB"), None);
        let status = "Name:\tx\nVmPeak:\t  5000 kB\nVmRSS:\t  1234 kB\n";
        assert_eq!(parse_kib_field(status, "VmRSS:"), Some(1234 * 1024));
    }
}

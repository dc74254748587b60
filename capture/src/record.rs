//! The records the recorder queues for the writer thread ([`Record`]) and how the writer thread
//! turns each into trace/6 lines ([`Encode`]): spans by number and interned name, host
//! blocks, checkpoints, any other event.

use std::borrow::Cow;
use std::sync::Arc;

use std::collections::HashMap;

use candle_trace_schema::format::events::line::{self, MemoryLine, OpLine, SpanStartLine, Text};
use candle_trace_schema::format::events::{
    MemoryAction, Pass, SpanKind, TensorCategory, TraceEvent,
};

use crate::intern::{NameId, NameTable, Names};
use crate::writer::Encode;

/// What the recorder queues for the writer thread: at most 32 bytes (checked below), so that
/// a span's two records fill one 64-byte cache line of the thread's ring. Spans are kept as
/// numbers and an interned name ([`NameId`]), so opening and closing a span allocates nothing on
/// the caller's thread; the writer thread turns them into the same lines serde would write.
pub(crate) enum Record {
    /// A `span_start` whose name (and module) is in the recorder's [`NameTable`].
    SpanStart {
        id: u64,
        /// The parent's number; 0 when the span has none (span numbers start at 1).
        parent: u64,
        start_ns: u64,
        name: NameId,
        kind: SpanKind,
        measured: bool,
        pass: Option<Pass>,
    },
    SpanEnd {
        id: u64,
        duration_ns: u64,
    },
    /// A `span_start` whose name is an owned string (not interned): boxed.
    NamedSpanStart(Box<NamedSpanStart>),
    /// Boxed so that the queue's slots stay small.
    Event(Box<TraceEvent>),
    /// A host allocation of at least the allocator threshold, on a thread whose innermost open
    /// span was `span` (see [`crate::alloc`]). Written as a `memory` `alloc` of tensor
    /// `host-N` (N counts the allocations of this trace).
    HostAlloc {
        ptr: u64,
        bytes: u64,
        at_ns: u64,
        /// The span's number, when it fits 32 bits (else [`Record::WideHostAlloc`]).
        span: u32,
        category: TensorCategory,
    },
    /// A [`Record::HostAlloc`] whose span number does not fit 32 bits: boxed.
    WideHostAlloc(Box<WideHostAlloc>),
    /// A leaf layer's `op` row (see [`Inner::leaf_op`]); kept as numbers and an interned name
    /// so that the captured layer allocates nothing, its output bytes filled in by the writer.
    LeafOp {
        span: u64,
        name: NameId,
        start_ns: u64,
        end_ns: u64,
    },
    /// A host `device_memory` checkpoint taken at `at_ns`: `used_bytes` = the counting
    /// allocator's live bytes, else the process's resident set, and `free_bytes` the OS's
    /// available memory, both read by the writer thread when it first sees the record (see
    /// [`Checkpoint`]).
    HostCheckpoint(Checkpoint),
    /// The free of a block recorded by [`Record::HostAlloc`]; written only when that alloc
    /// was (a block allocated before the captured step is not in the trace).
    HostFree {
        ptr: u64,
        span: u64,
        at_ns: u64,
    },
}

// A ring slot is one `Record`: keep a span (two records) within one cache line.
const _: () = assert!(std::mem::size_of::<Record>() <= 32);

/// A host checkpoint's numbers: `used_bytes` known at once when the counting allocator is
/// installed; the `/proc` readings (the resident set without the allocator, `MemAvailable`)
/// taken by the writer thread when it first sees the record: when it samples it in a held
/// ring ([`Encode::sample`]) or, when nothing is held, as it writes it (both within a poll
/// interval of `at_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub(crate) at_ns: u64,
    /// [`Checkpoint::UNREAD`] until read; [`Checkpoint::UNREADABLE`] when the resident set
    /// could not be read (nothing is written then).
    used_bytes: u64,
    /// [`Checkpoint::UNREAD`] until read; [`Checkpoint::UNREADABLE`] where the OS does not say
    /// how much memory is available (nothing is written then: a 0 would be no measurement).
    free_bytes: u64,
}

impl Checkpoint {
    /// Not read yet (no machine has this many bytes).
    const UNREAD: u64 = u64::MAX;
    /// The reading failed.
    const UNREADABLE: u64 = u64::MAX - 1;

    /// A checkpoint at `at_ns` whose used bytes are `live_bytes` when the allocator counts them.
    pub(crate) fn new(at_ns: u64, live_bytes: Option<u64>) -> Self {
        Checkpoint {
            at_ns,
            // A count this large is not a count: read the resident set instead.
            used_bytes: live_bytes
                .filter(|&b| b < Self::UNREADABLE)
                .unwrap_or(Self::UNREAD),
            free_bytes: Self::UNREAD,
        }
    }

    /// Take the readings not taken yet (see the type's docs).
    pub(crate) fn sample(&mut self, meminfo: &mut crate::alloc::MemInfo) {
        if self.used_bytes == Self::UNREAD {
            self.used_bytes = crate::alloc::process_resident_bytes()
                .filter(|&b| b < Self::UNREADABLE)
                .unwrap_or(Self::UNREADABLE);
        }
        if self.free_bytes == Self::UNREAD {
            self.free_bytes = meminfo
                .available_bytes()
                .filter(|&b| b < Self::UNREADABLE)
                .unwrap_or(Self::UNREADABLE);
        }
    }

    /// The `device_memory` event, `None` when the used or the free bytes could not be read.
    pub(crate) fn event(mut self, meminfo: &mut crate::alloc::MemInfo) -> Option<TraceEvent> {
        self.sample(meminfo);
        (self.used_bytes != Self::UNREADABLE && self.free_bytes != Self::UNREADABLE).then(|| {
            TraceEvent::DeviceMemory(candle_trace_schema::format::events::DeviceMemory {
                timestamp_ns: self.at_ns,
                device: "cpu".to_string(),
                used_bytes: self.used_bytes,
                free_bytes: self.free_bytes,
                reserved_bytes: None,
            })
        })
    }
}

/// A `span_start` with an owned name (see [`Record::NamedSpanStart`]).
pub(crate) struct NamedSpanStart {
    pub(crate) id: u64,
    pub(crate) parent: Option<u64>,
    pub(crate) name: Cow<'static, str>,
    pub(crate) module: Option<&'static str>,
    pub(crate) start_ns: u64,
    pub(crate) kind: SpanKind,
    pub(crate) measured: bool,
    pub(crate) pass: Option<Pass>,
}

/// A host allocation with a span number above `u32::MAX` (see [`Record::WideHostAlloc`]).
pub(crate) struct WideHostAlloc {
    pub(crate) ptr: u64,
    pub(crate) bytes: u64,
    pub(crate) span: u64,
    pub(crate) at_ns: u64,
    pub(crate) category: TensorCategory,
}

/// A host block written as allocated and not yet freed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LiveBlock {
    /// Its trace id (`host-{id}`).
    id: u64,
    bytes: u64,
    span: u64,
    category: TensorCategory,
    /// When it was allocated.
    at_ns: u64,
    /// The pass over the rings ([`Encode::pass_done`]) that saw it displaced, for
    /// [`HostBlocks::displaced`].
    pass: u64,
}

/// A free seen before its block's alloc.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EarlyFree {
    span: u64,
    at_ns: u64,
    /// The pass over the rings that saw it.
    pass: u64,
}

/// What the writer thread remembers between records: the host blocks written as allocated and
/// not yet freed (by address).
///
/// The writer reads the threads' rings one after another, so when a block moves between
/// threads its alloc (in one ring) and its free (in another) can come in either order, and a
/// block allocated at a freed block's address can come before that free. A free whose alloc
/// has not come waits in [`early_frees`](Self::early_frees), and a block replaced at its
/// address by one allocated later waits in [`displaced`](Self::displaced), each for the rest
/// of its pass over the rings and the next: whatever another thread pushed before this
/// thread's record is in its ring by then.
#[derive(Default)]
pub(crate) struct HostBlocks {
    pub(crate) live: HashMap<u64, LiveBlock>,
    /// Blocks whose address a later-allocated block took before their free came.
    displaced: HashMap<u64, LiveBlock>,
    /// Frees whose alloc has not come yet.
    early_frees: HashMap<u64, EarlyFree>,
    /// Passes over the rings so far.
    pass: u64,
    /// Lines written by the last record beyond its first (see [`Encode::extra_lines`]).
    extra_lines: u64,
    /// Live bytes of the blocks each span allocated.
    pub(crate) by_span: HashMap<u64, u64>,
    pub(crate) next: u64,
    /// The recorder's device, for leaf-layer op rows.
    pub(crate) device: String,
    /// The recorder's span names, and the writer thread's copy of them.
    pub(crate) name_table: Arc<NameTable>,
    pub(crate) names: Names,
    /// `/proc/meminfo`, kept open for the host checkpoints' `free_bytes`.
    pub(crate) meminfo: crate::alloc::MemInfo,
}

impl HostBlocks {
    /// The state of a recorder on `device` whose spans intern their names in `name_table`.
    pub(crate) fn for_device(device: &str, name_table: Arc<NameTable>) -> Self {
        HostBlocks {
            device: device.to_string(),
            name_table,
            ..HostBlocks::default()
        }
    }

    pub(crate) fn add(&mut self, span: u64, bytes: u64) {
        *self.by_span.entry(span).or_default() += bytes;
    }

    pub(crate) fn remove(&mut self, span: u64, bytes: u64) {
        if let Some(live) = self.by_span.get_mut(&span) {
            *live = live.saturating_sub(bytes);
        }
    }
}

/// The `memory` line of host block `host-{id}` by hand: the same bytes serde writes for the
/// `TraceEvent::Memory` of [`host_memory_event`] (checked by a test in `recorder.rs`), without
/// building the event's strings on the writer thread.
pub(crate) fn host_memory_line(
    out: &mut Vec<u8>,
    id: u64,
    span: u64,
    at_ns: u64,
    bytes: u64,
    action: MemoryAction,
    category: TensorCategory,
) {
    line::memory(
        out,
        &MemoryLine {
            timestamp_ns: at_ns,
            tensor_id: Text::Numbered("host-", id),
            span_id: Text::Numbered("s", span),
            op_name: None,
            device: "cpu",
            bytes,
            action,
            shape: &[],
            dtype: "u8",
            category,
        },
    );
}

/// The event [`host_memory_line`] writes.
#[cfg(test)]
pub(crate) fn host_memory_event(
    id: u64,
    span: u64,
    at_ns: u64,
    bytes: u64,
    action: MemoryAction,
    category: TensorCategory,
) -> TraceEvent {
    TraceEvent::Memory(candle_trace_schema::format::events::MemoryEvent {
        timestamp_ns: at_ns,
        tensor_id: format!("host-{id}").into(),
        span_id: crate::stack::span_id(span).into(),
        op_name: None,
        device: "cpu".into(),
        bytes,
        action,
        shape: Vec::new(),
        dtype: "u8".into(),
        category,
    })
}

/// Write a `span_start` line with schema's line writer (byte for byte serde's; checked by a
/// test in `recorder.rs` too).
#[allow(clippy::too_many_arguments)] // the fields of one line
fn span_start_line(
    out: &mut Vec<u8>,
    id: u64,
    parent: Option<u64>,
    name: &str,
    start_ns: u64,
    kind: SpanKind,
    measured: bool,
    pass: Option<Pass>,
    module: Option<&str>,
) {
    line::span_start(
        out,
        &SpanStartLine {
            id: Text::Numbered("s", id),
            parent_id: parent.map(|p| Text::Numbered("s", p)),
            name,
            start_ns,
            span_kind: kind,
            measured,
            pass,
            module,
        },
    );
}

/// The `memory` `alloc` line of a host block, remembered as live until its free.
fn host_alloc_line(
    out: &mut Vec<u8>,
    host: &mut HostBlocks,
    ptr: u64,
    bytes: u64,
    span: u64,
    at_ns: u64,
    category: TensorCategory,
) {
    host.next += 1;
    let block = LiveBlock {
        id: host.next,
        bytes,
        span,
        category,
        at_ns,
        pass: host.pass,
    };
    host_memory_line(
        out,
        block.id,
        span,
        at_ns,
        bytes,
        MemoryAction::Alloc,
        category,
    );
    // Its free came first (from another thread's ring): written now.
    if let Some(free) = host.early_frees.remove(&ptr) {
        if free.at_ns >= at_ns {
            let span = if free.span == 0 { span } else { free.span };
            out.push(b'\n');
            host.extra_lines += 1;
            host_memory_line(
                out,
                block.id,
                span,
                free.at_ns,
                bytes,
                MemoryAction::Free,
                category,
            );
            return;
        }
        // A free from before this block: of an earlier one this trace never saw.
    }
    match host.live.get(&ptr).copied() {
        // A block allocated later is live at this address already: this one came late and
        // waits for its own free beside it.
        Some(later) if later.at_ns > at_ns => {
            host.displaced.insert(ptr, block);
        }
        older => {
            // A block still live at this address was freed, and its free is yet to come (or
            // was never seen): it waits beside the new one, off its span's live bytes.
            if let Some(old) = older {
                host.remove(old.span, old.bytes);
                host.displaced.insert(
                    ptr,
                    LiveBlock {
                        pass: host.pass,
                        ..old
                    },
                );
            }
            host.add(span, bytes);
            host.live.insert(ptr, block);
        }
    }
}

/// A block freed at `ptr`: the live one, or the one displaced from there when the live one is
/// younger than the free; a free of neither waits for its alloc.
fn host_free_line(out: &mut Vec<u8>, host: &mut HostBlocks, ptr: u64, span: u64, at_ns: u64) {
    let live = host.live.get(&ptr).copied();
    let block = match live {
        Some(b) if b.at_ns <= at_ns => {
            host.live.remove(&ptr);
            host.remove(b.span, b.bytes);
            Some(b)
        }
        _ => match host.displaced.get(&ptr) {
            Some(b) if b.at_ns <= at_ns => host.displaced.remove(&ptr),
            _ => None,
        },
    };
    match block {
        Some(b) => {
            let span = if span == 0 { b.span } else { span };
            host_memory_line(
                out,
                b.id,
                span,
                at_ns,
                b.bytes,
                MemoryAction::Free,
                b.category,
            );
        }
        None => {
            let pass = host.pass;
            host.early_frees
                .insert(ptr, EarlyFree { span, at_ns, pass });
        }
    }
}

impl Encode for Record {
    type State = HostBlocks;
    crate::writer::local_rings!(Record);

    /// Span lines are written by hand (the same bytes serde would produce for
    /// `TraceEvent::SpanStart`/`SpanEnd`, checked by a test); other events go through serde.
    fn encode(&self, out: &mut Vec<u8>, host: &mut HostBlocks) {
        match self {
            Record::SpanStart {
                id,
                parent,
                name,
                start_ns,
                kind,
                measured,
                pass,
            } => {
                let label = host.names.label(*name, &host.name_table);
                let parent = (*parent != 0).then_some(*parent);
                span_start_line(
                    out,
                    *id,
                    parent,
                    label.name,
                    *start_ns,
                    *kind,
                    *measured,
                    *pass,
                    label.module,
                );
            }
            Record::NamedSpanStart(s) => span_start_line(
                out, s.id, s.parent, &s.name, s.start_ns, s.kind, s.measured, s.pass, s.module,
            ),
            Record::SpanEnd { id, duration_ns } => {
                line::span_end(out, Text::Numbered("s", *id), *duration_ns);
            }
            Record::Event(event) => {
                if !line::event(out, event) {
                    // Serializing these plain structs into a Vec<u8> cannot fail.
                    let _ = serde_json::to_writer(&mut *out, event.as_ref());
                }
            }
            Record::HostAlloc {
                ptr,
                bytes,
                at_ns,
                span,
                category,
            } => host_alloc_line(out, host, *ptr, *bytes, u64::from(*span), *at_ns, *category),
            Record::WideHostAlloc(a) => {
                host_alloc_line(out, host, a.ptr, a.bytes, a.span, a.at_ns, a.category)
            }
            Record::LeafOp {
                span: id,
                name,
                start_ns,
                end_ns,
            } => {
                let name = host.names.get(*name, &host.name_table);
                // Host blocks the layer allocated and had not freed when it closed: its
                // output (and anything else it kept). Absent when none was seen.
                let storage_bytes = host.by_span.remove(id).filter(|&b| b > 0);
                line::op(
                    out,
                    &OpLine::<&str> {
                        span_id: Text::Numbered("s", *id),
                        op_name: name,
                        inputs: &[],
                        output: None,
                        shape: &[],
                        dtype: "",
                        device: &host.device,
                        duration_ns: end_ns.saturating_sub(*start_ns),
                        timestamp_ns: *start_ns,
                        storage_bytes,
                        input_storage_bytes: 0,
                    },
                );
            }
            Record::HostCheckpoint(checkpoint) => {
                if let Some(event) = checkpoint.event(&mut host.meminfo) {
                    let _ = serde_json::to_writer(&mut *out, &event);
                }
            }
            Record::HostFree { ptr, span, at_ns } => host_free_line(out, host, *ptr, *span, *at_ns),
        }
    }

    /// A host checkpoint left in a held ring takes its `/proc` readings now, close to its
    /// time; every other record holds all it needs.
    fn sample(&mut self, host: &mut HostBlocks) {
        if let Record::HostCheckpoint(checkpoint) = self {
            checkpoint.sample(&mut host.meminfo);
        }
    }

    /// Early frees and displaced blocks wait out this pass and the next: after that, a free
    /// had no alloc in this trace (a block allocated before the captured step) and a
    /// displaced block's free was never seen.
    fn extra_lines(host: &mut HostBlocks) -> u64 {
        std::mem::take(&mut host.extra_lines)
    }

    fn pass_done(host: &mut HostBlocks) {
        let pass = host.pass;
        host.early_frees.retain(|_, f| f.pass == pass);
        host.displaced.retain(|_, b| b.pass == pass);
        host.pass += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::MemInfo;

    fn device_memory(event: Option<TraceEvent>) -> (u64, u64, u64) {
        match event {
            Some(TraceEvent::DeviceMemory(d)) => (d.timestamp_ns, d.used_bytes, d.free_bytes),
            other => panic!("expected device_memory, got {other:?}"),
        }
    }

    #[test]
    fn a_sampled_checkpoint_keeps_its_readings_until_it_is_written() {
        let mut meminfo = MemInfo::default();
        let mut sampled = Checkpoint::new(7, Some(4096));
        sampled.sample(&mut meminfo);
        // What the sample read is what is written, whatever the OS says at write time.
        sampled.free_bytes = 12_345;
        let mut again = sampled;
        again.sample(&mut meminfo);
        assert_eq!(device_memory(again.event(&mut meminfo)), (7, 4096, 12_345));
        // Unsampled, it reads at write time; the allocator's count is kept as given.
        if cfg!(target_os = "linux") {
            let (at, used, free) = device_memory(Checkpoint::new(9, Some(1)).event(&mut meminfo));
            assert_eq!((at, used), (9, 1));
            assert!(free > 0, "MemAvailable is read");
        }
        // Where the OS does not say what is free, nothing is written (not a 0).
        let mut unknown = Checkpoint::new(11, Some(1));
        unknown.free_bytes = Checkpoint::UNREADABLE;
        assert_eq!(unknown.event(&mut meminfo), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn without_the_allocator_a_checkpoint_reads_the_resident_set() {
        let mut meminfo = MemInfo::default();
        let (_, used, _) = device_memory(Checkpoint::new(1, None).event(&mut meminfo));
        assert!(used > 0, "VmRSS is read");
        // A record is one ring slot: checkpoint numbers live inline.
        assert!(std::mem::size_of::<Record>() <= 32);
    }
}

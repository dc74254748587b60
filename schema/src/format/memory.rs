//! The memory profile a trace document carries: live bytes per device over time, the peak and
//! what was live at it. Every reader fills it at end of file with
//! [`analysis::memory`](crate::analysis::memory), which replays the `memory` records.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::format::events::TensorCategory;

/// One allocation live at the peak.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveAllocation {
    /// Index into `TraceDocument::memory` of the `alloc` record.
    pub memory_index: usize,
    /// Tensor id.
    pub tensor_id: String,
    /// Bytes recorded by the alloc.
    pub bytes: u64,
    /// Category of the alloc.
    pub category: TensorCategory,
    /// Span the alloc happened in.
    pub span_id: String,
    /// Op that allocated, if recorded.
    pub op_name: Option<String>,
    /// When it was allocated.
    pub timestamp_ns: u64,
    /// Line of the alloc record.
    pub line: u64,
}

/// Per-device memory numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemoryProfile {
    /// Device name.
    pub device: String,
    /// Largest live total on this device.
    pub peak_bytes: u64,
    /// When that peak was first reached (`None` without memory events on this device).
    pub peak_timestamp_ns: Option<u64>,
    /// Live bytes after the last event.
    pub final_live_bytes: u64,
    /// Largest `used_bytes + free_bytes` of this device's checkpoints.
    pub capacity_bytes: Option<u64>,
    /// Number of `alloc` events on this device.
    pub alloc_count: u64,
    /// Number of `free` events on this device.
    pub free_count: u64,
}

/// One point of a device's live-bytes curve: the state right after a memory event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySample {
    /// Event time.
    pub timestamp_ns: u64,
    /// Index into [`MemoryProfile::devices`].
    pub device: u32,
    /// Device live total after the event.
    pub live_bytes: u64,
    /// Per-category live bytes on that device after the event (indexed by
    /// [`TensorCategory::index`]).
    pub by_category: [u64; 5],
}

/// The memory profile of a trace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryProfile {
    /// Largest per-device live total (0 without memory events).
    pub peak_bytes: u64,
    /// When the peak was reached.
    pub peak_timestamp_ns: Option<u64>,
    /// Device of the peak.
    pub peak_device: Option<String>,
    /// Live bytes per category on the peak device at the peak ([`TensorCategory::index`]).
    pub peak_by_category: [u64; 5],
    /// Allocations live on the peak device at the peak, largest first (ties by tensor id).
    pub live_at_peak: Vec<LiveAllocation>,
    /// Per-device numbers, devices in order of first appearance (memory events, then checkpoints).
    pub devices: Vec<DeviceMemoryProfile>,
    /// The live-bytes curve: one sample per memory event, in replay order.
    pub samples: Vec<MemorySample>,
    /// Number of `alloc` events.
    pub alloc_count: u64,
    /// Number of `free` events.
    pub free_count: u64,
}

impl MemoryProfile {
    /// The device profile with this name.
    pub fn device(&self, name: &str) -> Option<&DeviceMemoryProfile> {
        self.devices.iter().find(|d| d.device == name)
    }
}

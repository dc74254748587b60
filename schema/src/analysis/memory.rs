//! The memory replay: live bytes per device over time, the peak and what was live at it, as
//! a [`MemoryProfile`] (the type a document carries; every reader computes it at end of file).
//!
//! SCHEMA.md's rules, plus these choices where it is silent:
//! - Events are replayed in (`timestamp_ns`, `alloc` before `free`, `tensor_id`, file order).
//! - Live allocations are kept per (device, tensor id) as a stack: an `alloc` of a tensor that is
//!   already live is a warning, adds its bytes, and shadows the earlier allocation (which stays
//!   live); a `free` releases the most recent live allocation of that tensor on that device.
//! - A `free` with nothing live is a warning and subtracts its own bytes from the device total
//!   and from its own category, each saturating at 0.
//! - The peak is the largest per-device live total after any event; ties keep the earliest.
//!   Live bytes by category and live allocations "at the peak" are those of the peak device.
//! - A device's capacity is the largest `used_bytes + free_bytes` of its `device_memory` lines.

use crate::analysis::sort;
use alloc::format;
use alloc::string::String;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

use hashbrown::HashMap;

use crate::format::diagnostics::{Category, Diagnostic};
use crate::format::events::{DeviceMemory, MemoryAction, TensorCategory};
use crate::format::memory::{DeviceMemoryProfile, LiveAllocation, MemoryProfile, MemorySample};
use crate::format::records::{Lined, MemoryFacts, MemoryRecord, MemoryRecords};
use crate::format::table::MemoryTable;

#[derive(Clone, Copy)]
struct Slot {
    memory_index: usize,
    bytes: u64,
    category: TensorCategory,
    device: u32,
    shadowed: Option<usize>,
    /// Replay position of the `alloc`.
    alloc_pos: usize,
    /// Replay position of the `free` that released it, if any.
    freed_pos: Option<usize>,
}

impl Slot {
    /// Whether the allocation was live right after the event at replay position `pos`.
    fn live_after(&self, pos: usize) -> bool {
        self.alloc_pos <= pos && self.freed_pos.is_none_or(|f| f > pos)
    }
}

impl<'a> MemoryRecord<'a> for &'a MemoryFacts {
    fn line(&self) -> u64 {
        self.line
    }
    fn timestamp_ns(&self) -> u64 {
        self.timestamp_ns
    }
    fn tensor_id(&self) -> &'a str {
        &self.tensor_id
    }
    fn device(&self) -> &'a str {
        &self.device
    }
    fn bytes(&self) -> u64 {
        self.bytes
    }
    fn action(&self) -> MemoryAction {
        self.action
    }
    fn category(&self) -> TensorCategory {
        self.category
    }
    fn span_id(&self) -> &'a str {
        ""
    }
    fn op_name(&self) -> Option<&'a str> {
        None
    }
}

impl<'a> MemoryRecords<'a> for &'a [MemoryFacts] {
    type Record = &'a MemoryFacts;
    fn len(self) -> usize {
        <[MemoryFacts]>::len(self)
    }
    fn at(self, i: usize) -> &'a MemoryFacts {
        &self[i]
    }
}

/// Whether [`replay`] keeps the live-bytes curve (`samples`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Curve {
    /// One sample per memory event.
    Kept,
    /// No samples (a summary shows none).
    Dropped,
}

/// Replay state: live totals and live allocations.
struct Live<'a, R> {
    events: R,
    totals: Vec<u64>,
    by_category: Vec<[u64; 5]>,
    slots: Vec<Slot>,
    top: HashMap<(u32, &'a str), usize>,
}

impl<'a, R: MemoryRecords<'a>> Live<'a, R> {
    /// Replay state for `events`, `allocs` of which are `alloc`s (one slot each).
    fn new(events: R, devices: usize, allocs: usize) -> Self {
        Live {
            events,
            totals: vec![0; devices],
            by_category: vec![[0; 5]; devices],
            slots: Vec::with_capacity(allocs),
            top: HashMap::new(),
        }
    }

    /// Apply event `i` on device `d` at replay position `pos`; returns a warning message when
    /// the event is suspicious.
    fn apply(&mut self, i: usize, d: u32, pos: usize) -> Option<String> {
        let e = self.events.at(i);
        let du = d as usize;
        let key = (d, e.tensor_id());
        match e.action() {
            MemoryAction::Alloc => {
                let shadowed = self.top.get(&key).copied();
                self.slots.push(Slot {
                    memory_index: i,
                    bytes: e.bytes(),
                    category: e.category(),
                    device: d,
                    shadowed,
                    alloc_pos: pos,
                    freed_pos: None,
                });
                self.top.insert(key, self.slots.len() - 1);
                self.totals[du] = self.totals[du].saturating_add(e.bytes());
                let c = &mut self.by_category[du][e.category().index()];
                *c = c.saturating_add(e.bytes());
                shadowed.map(|s| {
                    format!(
                        "alloc of tensor `{}` on {}, which is already live (allocated at line {})",
                        e.tensor_id(),
                        e.device(),
                        self.events.at(self.slots[s].memory_index).line()
                    )
                })
            }
            MemoryAction::Free => match self.top.get(&key).copied() {
                Some(s) => {
                    let slot = &mut self.slots[s];
                    slot.freed_pos = Some(pos);
                    let (bytes, category, shadowed) = (slot.bytes, slot.category, slot.shadowed);
                    match shadowed {
                        Some(prev) => self.top.insert(key, prev),
                        None => self.top.remove(&key),
                    };
                    self.totals[du] = self.totals[du].saturating_sub(bytes);
                    take_off(&mut self.by_category[du], category, bytes);
                    None
                }
                None => {
                    self.totals[du] = self.totals[du].saturating_sub(e.bytes());
                    take_off(&mut self.by_category[du], e.category(), e.bytes());
                    Some(format!(
                        "free of tensor `{}` on {} with no live alloc",
                        e.tensor_id(),
                        e.device()
                    ))
                }
            },
        }
    }
}

/// Take a free's `bytes` off a device's live bytes by category: off its own `category` first,
/// then off the others in [`TensorCategory::ALL`] order, so that the categories always sum to
/// the device's total. A free with no live alloc can take more than its category holds;
/// taken off that category alone (saturating), it left the categories summing above the total
/// (175% of the peak in a findings line). Saturating at 0, as the total does.
fn take_off(by_category: &mut [u64; 5], category: TensorCategory, bytes: u64) {
    let mut left = bytes;
    let others = TensorCategory::ALL.into_iter().filter(|&c| c != category);
    for c in core::iter::once(category).chain(others) {
        let held = &mut by_category[c.index()];
        let taken = (*held).min(left);
        *held -= taken;
        left -= taken;
        if left == 0 {
            break;
        }
    }
}

/// Replay `memory` events and read capacities from `checkpoints`; returns the profile and the
/// memory warnings.
pub fn memory_profile(
    memory: &MemoryTable,
    checkpoints: &[Lined<DeviceMemory>],
) -> (MemoryProfile, Vec<Diagnostic>) {
    replay(memory, checkpoints, Curve::Kept)
}

/// [`memory_profile`] from any kind of memory record; with [`Curve::Dropped`] the profile's
/// `samples` stay empty (everything else is the same).
pub(crate) fn replay<'a, R: MemoryRecords<'a>>(
    memory: R,
    checkpoints: &[Lined<DeviceMemory>],
    curve: Curve,
) -> (MemoryProfile, Vec<Diagnostic>) {
    let mut device_names: Vec<String> = Vec::new();
    let mut device_ids: HashMap<&'a str, u32> = HashMap::new();
    let mut device_of = Vec::with_capacity(memory.len());
    let mut allocs = 0;
    // Consecutive records are nearly always on one device: compared with the last one
    // before hashing.
    let mut last: Option<(&str, u32)> = None;
    for i in 0..memory.len() {
        let m = memory.at(i);
        let d = match last {
            Some((name, d)) if name == m.device() => d,
            _ => {
                let next = device_ids.len() as u32;
                let d = *device_ids.entry(m.device()).or_insert_with(|| {
                    device_names.push(m.device().to_string());
                    next
                });
                last = Some((m.device(), d));
                d
            }
        };
        device_of.push(d);
        allocs += usize::from(m.action() == MemoryAction::Alloc);
    }
    let mut order: Vec<usize> = (0..memory.len()).collect();
    order.sort_by(|&a, &b| {
        let (ea, eb) = (memory.at(a), memory.at(b));
        ea.timestamp_ns()
            .cmp(&eb.timestamp_ns())
            .then(ea.action().cmp(&eb.action()))
            // Lazily: a tensor id is a string looked up in the table.
            .then_with(|| ea.tensor_id().cmp(eb.tensor_id()))
            .then(a.cmp(&b))
    });

    let n_dev = device_names.len();
    let mut devices: Vec<DeviceMemoryProfile> = device_names
        .iter()
        .map(|name| DeviceMemoryProfile {
            device: name.clone(),
            peak_bytes: 0,
            peak_timestamp_ns: None,
            final_live_bytes: 0,
            capacity_bytes: None,
            alloc_count: 0,
            free_count: 0,
        })
        .collect();
    let mut diagnostics = Vec::new();
    let mut samples = match curve {
        Curve::Kept => Vec::with_capacity(order.len()),
        Curve::Dropped => Vec::new(),
    };
    let mut peak_by_category = [0; 5];
    let mut live = Live::new(memory, n_dev, allocs);
    // (position in `order`, device) of the overall peak.
    let mut peak: Option<(usize, u32)> = None;
    let mut peak_bytes = 0u64;
    let (mut alloc_count, mut free_count) = (0, 0);
    for (pos, &i) in order.iter().enumerate() {
        let d = device_of[i];
        if let Some(message) = live.apply(i, d, pos) {
            diagnostics.push(Diagnostic::warning(
                memory.at(i).line(),
                Category::Memory,
                message,
            ));
        }
        let dev = &mut devices[d as usize];
        match memory.at(i).action() {
            MemoryAction::Alloc => {
                alloc_count += 1;
                dev.alloc_count += 1;
            }
            MemoryAction::Free => {
                free_count += 1;
                dev.free_count += 1;
            }
        }
        let total = live.totals[d as usize];
        if dev.peak_timestamp_ns.is_none() || total > dev.peak_bytes {
            dev.peak_bytes = total;
            dev.peak_timestamp_ns = Some(memory.at(i).timestamp_ns());
        }
        if peak.is_none() || total > peak_bytes {
            peak_bytes = total;
            peak = Some((pos, d));
            peak_by_category = live.by_category[d as usize];
        }
        if curve == Curve::Kept {
            samples.push(MemorySample {
                timestamp_ns: memory.at(i).timestamp_ns(),
                device: d,
                live_bytes: total,
                by_category: live.by_category[d as usize],
            });
        }
    }
    for (dev, total) in devices.iter_mut().zip(&live.totals) {
        dev.final_live_bytes = *total;
    }

    for c in checkpoints {
        let capacity = c.used_bytes.saturating_add(c.free_bytes);
        let dev = match devices.iter_mut().position(|d| d.device == c.device) {
            Some(p) => &mut devices[p],
            None => {
                devices.push(DeviceMemoryProfile {
                    device: c.device.clone(),
                    peak_bytes: 0,
                    peak_timestamp_ns: None,
                    final_live_bytes: 0,
                    capacity_bytes: None,
                    alloc_count: 0,
                    free_count: 0,
                });
                let last = devices.len() - 1;
                &mut devices[last]
            }
        };
        dev.capacity_bytes = Some(dev.capacity_bytes.map_or(capacity, |c| c.max(capacity)));
    }

    let mut profile = MemoryProfile {
        peak_bytes,
        devices,
        samples,
        alloc_count,
        free_count,
        ..MemoryProfile::default()
    };
    if let Some((peak_pos, peak_dev)) = peak {
        // What was live at the peak: the allocations made up to it and not yet freed
        // there (the replay up to the peak is a prefix of the whole replay).
        let peak_event = memory.at(order[peak_pos]);
        profile.peak_timestamp_ns = Some(peak_event.timestamp_ns());
        profile.peak_device = Some(peak_event.device().to_string());
        profile.peak_by_category = peak_by_category;
        let mut live_at_peak: Vec<LiveAllocation> = live
            .slots
            .iter()
            .filter(|s| s.device == peak_dev && s.live_after(peak_pos))
            .map(|s| {
                let m = memory.at(s.memory_index);
                LiveAllocation {
                    memory_index: s.memory_index,
                    tensor_id: m.tensor_id().to_string(),
                    bytes: s.bytes,
                    category: s.category,
                    span_id: m.span_id().to_string(),
                    op_name: m.op_name().map(String::from),
                    timestamp_ns: m.timestamp_ns(),
                    line: m.line(),
                }
            })
            .collect();
        sort::by(&mut live_at_peak, |a, b| {
            b.bytes.cmp(&a.bytes).then(a.tensor_id.cmp(&b.tensor_id))
        });
        profile.live_at_peak = live_at_peak;
    }
    (profile, diagnostics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::MemoryEvent;
    use alloc::vec;

    fn event(t: u64, device: &str, tensor: &str, alloc: bool, bytes: u64, c: usize) -> MemoryEvent {
        MemoryEvent {
            timestamp_ns: t,
            tensor_id: tensor.into(),
            span_id: "s".into(),
            op_name: None,
            device: device.into(),
            bytes,
            action: if alloc {
                MemoryAction::Alloc
            } else {
                MemoryAction::Free
            },
            shape: vec![],
            dtype: "f32".into(),
            category: TensorCategory::ALL[c],
        }
    }

    proptest::proptest! {
        /// What is live at the peak, read off the one replay, equals a second replay stopped
        /// at the peak (what `memory_profile` did before): shadowed allocations, frees before and after
        /// the peak, frees of nothing, ties in time.
        #[test]
        fn live_at_the_peak_equals_a_replay_stopped_there(
            raw in proptest::collection::vec((0u64..6, 0usize..2, 0usize..4, proptest::bool::weighted(0.6), 1u64..100, 0usize..5), 0..40),
        ) {
            let devices = ["cpu", "cuda:0"];
            let tensors = ["t0", "t1", "t2", "t3"];
            let memory: MemoryTable = raw
                .iter()
                .enumerate()
                .map(|(i, &(t, d, k, alloc, bytes, c))| {
                    Lined::new(i as u64 + 1, event(t, devices[d], tensors[k], alloc, bytes, c))
                })
                .collect();
            let (profile, _) = memory_profile(&memory, &[]);

            // Device numbers by first appearance, the replay order, as `replay` has them.
            let mut names: Vec<&str> = Vec::new();
            let dev: Vec<u32> = memory
                .iter()
                .map(|m| match names.iter().position(|n| *n == m.device) {
                    Some(p) => p as u32,
                    None => {
                        names.push(m.device);
                        names.len() as u32 - 1
                    }
                })
                .collect();
            let mut order: Vec<usize> = (0..memory.len()).collect();
            order.sort_by(|&a, &b| {
                let (ea, eb) = (memory.row(a), memory.row(b));
                (ea.timestamp_ns, ea.action, ea.tensor_id, a).cmp(&(eb.timestamp_ns, eb.action, eb.tensor_id, b))
            });
            let mut full = Live::new(&memory, names.len(), 0);
            let mut peak: Option<(usize, u64, u32)> = None;
            for (pos, &i) in order.iter().enumerate() {
                full.apply(i, dev[i], pos);
                let total = full.totals[dev[i] as usize];
                if peak.is_none_or(|(_, best, _)| total > best) {
                    peak = Some((pos, total, dev[i]));
                }
            }
            let Some((peak_pos, peak_bytes, d)) = peak else {
                proptest::prop_assert!(profile.live_at_peak.is_empty());
                return Ok(());
            };
            let mut prefix = Live::new(&memory, names.len(), 0);
            for (pos, &i) in order[..=peak_pos].iter().enumerate() {
                prefix.apply(i, dev[i], pos);
            }
            let mut want: Vec<(usize, u64)> = prefix
                .slots
                .iter()
                .filter(|s| s.freed_pos.is_none() && s.device == d)
                .map(|s| (s.memory_index, s.bytes))
                .collect();
            want.sort();
            let mut got: Vec<(usize, u64)> =
                profile.live_at_peak.iter().map(|l| (l.memory_index, l.bytes)).collect();
            got.sort();
            proptest::prop_assert_eq!(profile.peak_bytes, peak_bytes);
            proptest::prop_assert_eq!(got, want);
            proptest::prop_assert_eq!(profile.peak_by_category, prefix.by_category[d as usize]);
            // The categories at the peak add up to it, frees of nothing included.
            proptest::prop_assert_eq!(profile.peak_by_category.iter().sum::<u64>(), peak_bytes);
        }
    }
}

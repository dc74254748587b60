//! Memory reconciliation: device checkpoints (`device_memory`) against the allocator's live
//! bytes (`memory` replay), i.e. the memory no recorded allocation explains.
//!
//! Rules (SCHEMA.md defines both series but not their comparison):
//! - Checkpoints are taken in (`timestamp_ns`, file order).
//! - The allocator's live bytes on a device at time `t` are those after the last `memory`
//!   event of that device with `timestamp_ns ≤ t` in the memory profile's replay order (events
//!   at `t` itself count), 0 before the first one.
//! - `unexplained_bytes` = `used_bytes` − live, saturating at 0; `overcount_bytes` = live −
//!   `used_bytes`, saturating at 0 (more recorded than the device says is used: a capture bug
//!   or a different accounting).
//! - The largest unexplained gap is the largest `unexplained_bytes`, the earliest on ties.

use crate::analysis::sort;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::format::document::TraceDocument;
use crate::format::memory::MemorySample;

/// One checkpoint with the allocator's view at the same moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointGap {
    /// Checkpoint time.
    pub timestamp_ns: u64,
    /// Device.
    pub device: String,
    /// `used_bytes` of the checkpoint.
    pub used_bytes: u64,
    /// `free_bytes` of the checkpoint.
    pub free_bytes: u64,
    /// `reserved_bytes`, when written.
    pub reserved_bytes: Option<u64>,
    /// Allocator live bytes on the device at that time.
    pub live_bytes: u64,
    /// used − live, saturating.
    pub unexplained_bytes: u64,
    /// live − used, saturating.
    pub overcount_bytes: u64,
    /// Line of the checkpoint.
    pub line: u64,
}

/// Every checkpoint reconciled, and the largest gap.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconciliation {
    /// In (`timestamp_ns`, file order).
    pub points: Vec<CheckpointGap>,
    /// Index into `points` of the largest `unexplained_bytes` (earliest on ties); `None`
    /// without checkpoints.
    pub max_unexplained: Option<usize>,
}

/// Reconcile `doc`'s checkpoints with its memory profile.
pub fn reconcile(doc: &TraceDocument) -> Reconciliation {
    reconcile_with(doc, &doc.memory_profile.samples)
}

/// [`reconcile`] with the memory profile's samples given apart (a viewer that took them out
/// of the document).
pub fn reconcile_with(doc: &TraceDocument, samples: &[MemorySample]) -> Reconciliation {
    let profile = &doc.memory_profile;
    let mut order: Vec<usize> = (0..doc.device_memory.len()).collect();
    // Stable: ties in file order.
    sort::by_key(&mut order, |&i| doc.device_memory[i].timestamp_ns);
    let points: Vec<CheckpointGap> = order
        .into_iter()
        .map(|i| {
            let c = &doc.device_memory[i];
            let device = profile.devices.iter().position(|d| d.device == c.device);
            // Samples are in replay order, so timestamps are non-decreasing.
            let live_bytes = device.map_or(0, |d| {
                let upto = samples.partition_point(|s| s.timestamp_ns <= c.timestamp_ns);
                samples[..upto]
                    .iter()
                    .rev()
                    .find(|s| s.device as usize == d)
                    .map_or(0, |s| s.live_bytes)
            });
            CheckpointGap {
                timestamp_ns: c.timestamp_ns,
                device: c.device.clone(),
                used_bytes: c.used_bytes,
                free_bytes: c.free_bytes,
                reserved_bytes: c.reserved_bytes,
                live_bytes,
                unexplained_bytes: c.used_bytes.saturating_sub(live_bytes),
                overcount_bytes: live_bytes.saturating_sub(c.used_bytes),
                line: c.line,
            }
        })
        .collect();
    let mut max_unexplained: Option<usize> = None;
    for (i, p) in points.iter().enumerate() {
        if max_unexplained.is_none_or(|m| p.unexplained_bytes > points[m].unexplained_bytes) {
            max_unexplained = Some(i);
        }
    }
    Reconciliation {
        points,
        max_unexplained,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_use_live_bytes_at_or_before_the_checkpoint() {
        let text = concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"s","name":"s","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"device_memory","timestamp_ns":30,"device":"cpu","used_bytes":1000,"free_bytes":9000}"#,
            "\n",
            r#"{"kind":"memory","timestamp_ns":10,"tensor_id":"a","span_id":"s","device":"cpu","bytes":400,"action":"alloc","dtype":"f32"}"#,
            "\n",
            r#"{"kind":"memory","timestamp_ns":30,"tensor_id":"b","span_id":"s","device":"cpu","bytes":100,"action":"alloc","dtype":"f32"}"#,
            "\n",
            r#"{"kind":"memory","timestamp_ns":40,"tensor_id":"c","span_id":"s","device":"gpu","bytes":100,"action":"alloc","dtype":"f32"}"#,
            "\n",
            r#"{"kind":"device_memory","timestamp_ns":5,"device":"cpu","used_bytes":200,"free_bytes":9800}"#,
            "\n",
            r#"{"kind":"device_memory","timestamp_ns":50,"device":"gpu","used_bytes":50,"free_bytes":950}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":100}"#,
            "\n",
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        let r = reconcile(&doc);
        let view: Vec<(u64, &str, u64, u64, u64)> = r
            .points
            .iter()
            .map(|p| {
                (
                    p.timestamp_ns,
                    p.device.as_str(),
                    p.live_bytes,
                    p.unexplained_bytes,
                    p.overcount_bytes,
                )
            })
            .collect();
        assert_eq!(
            view,
            alloc::vec![
                (5, "cpu", 0, 200, 0),
                (30, "cpu", 500, 500, 0),
                (50, "gpu", 100, 0, 50)
            ]
        );
        assert_eq!(r.max_unexplained, Some(1));
        // The same with the samples given apart from a document that no longer holds them.
        let mut bare = doc.clone();
        let samples = core::mem::take(&mut bare.memory_profile.samples);
        assert_eq!(reconcile_with(&bare, &samples), r);
        // Without any samples nothing is live: each checkpoint is unexplained in full.
        let none: Vec<u64> = reconcile(&bare)
            .points
            .iter()
            .map(|p| p.live_bytes)
            .collect();
        assert_eq!(none, alloc::vec![0, 0, 0]);
    }
}

//! The memory families: tensor ids, `alloc` and `free` lines on each device, and the
//! live-bytes bookkeeping behind the device checkpoints.

use std::io::{self, Write};

use candle_trace_schema::format::events::{
    derived_storage_bytes, MemoryAction, MemoryEvent, TensorCategory, TraceEvent,
};

use super::Gen;

/// A live allocation the generator must free later.
#[derive(Debug, Clone)]
pub(super) struct Alloc {
    pub(super) tensor_id: String,
    pub(super) device: usize,
    pub(super) bytes: u64,
    pub(super) shape: Vec<u64>,
    pub(super) dtype: &'static str,
    pub(super) category: TensorCategory,
    pub(super) op_name: Option<String>,
}

impl<W: Write> Gen<'_, W> {
    pub(super) fn new_tensor_id(&mut self) -> String {
        let id = format!("t{}", self.next_tensor);
        self.next_tensor += 1;
        id
    }

    /// `storage_bytes` written on about half the lines (readers derive it otherwise).
    pub(super) fn maybe_storage(&mut self, shape: &[u64], dtype: &str) -> Option<u64> {
        self.rng
            .chance(50)
            .then(|| derived_storage_bytes(shape, dtype))
    }

    pub(super) fn alloc(
        &mut self,
        device: usize,
        shape: Vec<u64>,
        dtype: &'static str,
        category: TensorCategory,
        op_name: Option<&str>,
    ) -> io::Result<Alloc> {
        let a = Alloc {
            tensor_id: self.new_tensor_id(),
            device,
            bytes: derived_storage_bytes(&shape, dtype),
            shape,
            dtype,
            category,
            op_name: op_name.map(String::from),
        };
        self.memory(&a, MemoryAction::Alloc)?;
        Ok(a)
    }

    pub(super) fn free(&mut self, a: &Alloc) -> io::Result<()> {
        self.memory(a, MemoryAction::Free)
    }

    pub(super) fn memory(&mut self, a: &Alloc, action: MemoryAction) -> io::Result<()> {
        let d = a.device;
        let peak = &mut self.stats.device_peaks[d];
        match action {
            MemoryAction::Alloc => {
                self.live[d] += a.bytes;
                peak.peak_bytes = peak.peak_bytes.max(self.live[d]);
                peak.alloc_count += 1;
            }
            MemoryAction::Free => {
                self.live[d] -= a.bytes;
                peak.free_count += 1;
            }
        }
        let event = TraceEvent::Memory(MemoryEvent {
            timestamp_ns: self.now,
            tensor_id: a.tensor_id.clone().into(),
            span_id: self.current_span(),
            op_name: a.op_name.as_deref().map(Into::into),
            device: self.devices[d].clone().into(),
            bytes: a.bytes,
            action,
            shape: a.shape.clone(),
            dtype: a.dtype.into(),
            category: a.category,
        });
        self.emit(&event)?;
        // Strictly increasing memory timestamps: replay order is file order.
        self.tick(1);
        Ok(())
    }
}

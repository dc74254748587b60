//! The spellings candle values take in events: tensor ids, dtypes, devices, storage bytes,
//! shapes, and the candle version of the `meta` line.

use candle_core::{DType, Device, DeviceLocation, Tensor};

/// The resolved `candle-core` version this crate was built against (e.g. `0.11.1`), for the
/// `candle_version` field of the trace's `meta` line.
///
/// The build script reads it from the build's `Cargo.lock` (the nearest one above this crate's
/// manifest or the build's `OUT_DIR`); when no lock file can be found it is the semver series
/// of the dependency requirement, `0.11`.
pub fn candle_version() -> &'static str {
    env!("CANDLE_TRACE_CANDLE_CORE_VERSION")
}

/// The trace spelling of a tensor's id: the number in candle's `TensorId` (`"17"`).
///
/// candle exposes `TensorId` only through `Debug` (`TensorId(17)`); should that text ever
/// change shape, the whole `Debug` text is used, which is still unique per tensor.
pub fn tensor_id(tensor: &Tensor) -> String {
    let debug = format!("{:?}", tensor.id());
    match debug
        .strip_prefix("TensorId(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        Some(number) => number.to_string(),
        None => debug,
    }
}

/// The trace spelling of a candle dtype (see the module docs).
pub fn dtype_name(dtype: DType) -> &'static str {
    dtype.as_str()
}

/// The trace spelling of a candle device: `cpu`, `cuda:N` or `metal:N`.
pub fn device_name(device: &Device) -> String {
    match device.location() {
        DeviceLocation::Cpu => "cpu".to_string(),
        DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

/// Bytes of one dense tensor: element count × element size. Sub-byte formats (`f4`, `f6…`)
/// count their bits, rounded up to whole bytes. Saturates instead of overflowing.
pub fn storage_bytes(tensor: &Tensor) -> u64 {
    let elements = tensor.elem_count() as u64;
    let dtype = tensor.dtype();
    match dtype.size_in_bytes() {
        0 => {
            let bits: u64 = match dtype {
                DType::F4 => 4,
                DType::F6E2M3 | DType::F6E3M2 => 6,
                _ => 0,
            };
            elements.saturating_mul(bits).div_ceil(8)
        }
        size => elements.saturating_mul(size as u64),
    }
}

/// A tensor's shape as trace `shape` values.
pub fn shape_of(tensor: &Tensor) -> Vec<u64> {
    tensor.dims().iter().map(|&d| d as u64).collect()
}

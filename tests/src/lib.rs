//! Workspace-level test support for candle-trace: the trace generator used by benchmarks and
//! large-input tests, and helpers to locate `tests/fixtures`.

use std::path::PathBuf;

pub mod generate;

/// The `tests/fixtures` folder of this workspace.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

//! # candle-trace-capture
//!
//! Writes candle-trace files from training and inference binaries. Behind the `cli` feature it
//! also holds the `candle-trace` command-line tool ([`cli`]).

#[cfg(feature = "cli")]
pub mod cli;

pub mod alloc;
#[cfg(feature = "candle")]
pub mod candle;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod sink;
pub mod sync;

//! `candle-trace`: read, validate, summarise and query candle-trace files.
fn main() {}

//! The `candle-trace` command-line tool.

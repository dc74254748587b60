//! Every number the CLI and the viewer show, computed from the documents of
//! [`format`](crate::format): trace summaries, phases, module keys, the module tree and its
//! coverage of the forward, ops and FLOPs, gradients, memory reconciliation, numbers for a time
//! range, several steps, findings, comparison and the regression gate; and for the inference
//! profile, requests and latencies, module spans, waterfalls and the OTLP export.

pub mod compare;
pub mod coverage;
pub mod findings;
pub mod finish;
pub mod flops;
pub mod gate;
pub mod gradients;
pub mod histogram;
pub mod iterations;
pub mod memory;
pub mod module_tree;
pub mod modules;
pub mod ops;
pub mod otlp;
pub mod percentiles;
pub mod phases;
pub mod profile_modules;
pub mod range;
pub mod reconcile;
pub mod request_axis;
pub mod requests;
pub mod resources;
pub mod sort;
pub mod spans;
pub mod steps;
pub mod summary;
pub mod units;
pub mod waterfall;

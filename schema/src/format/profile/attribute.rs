//! The `attributes` keys that cross a layer, each spelled once: written by capture or derived
//! by this crate, read by the analyses, the CLI and the viewer (SCHEMA.md §2 and §4).

/// Time to first token, µs (derived from the token commits).
pub const TTFT_US: &str = "ttft_us";
/// Inter-token latencies, ns (derived).
pub const ITL_NANOS: &str = "itl_nanos";
/// How many inter-token latencies there are (derived).
pub const ITL_INTERVAL_COUNT: &str = "itl_interval_count";
/// Mean inter-token latency, µs (derived).
pub const ITL_US_AVG: &str = "itl_us_avg";
/// Where the inter-token latencies come from (derived).
pub const ITL_SOURCE: &str = "itl_source";
/// How many tokens the engine committed (derived).
pub const ENGINE_TOKEN_COMMIT_COUNT: &str = "engine_token_commit_count";
/// Each token commit, ns since the request started.
pub const ENGINE_TOKEN_COMMIT_NANOS_SINCE_REQUEST_START: &str =
    "engine_token_commit_nanos_since_request_start";
/// The clock the token commits were read from.
pub const ENGINE_TOKEN_CLOCK_SOURCE: &str = "engine_token_clock_source";
/// The Unix ns of the token clock's zero.
pub const ENGINE_TOKEN_WALL_ANCHOR_UNIX_NANOS: &str = "engine_token_wall_anchor_unix_nanos";
/// The wall anchor's largest error, ns.
pub const CLOCK_CONVERSION_MAX_ERROR_NANOS: &str = "clock_conversion_max_error_nanos";
/// That error relative to the decode's wall time, ppm.
pub const CLOCK_CONVERSION_ERROR_PPM: &str = "clock_conversion_error_ppm";
/// The decode stages, each `{stage, start_…, end_…}` (the keys below).
pub const ENGINE_DECODE_STAGE_INTERVALS: &str = "engine_decode_stage_intervals";
/// How many decode stage intervals there are.
pub const ENGINE_DECODE_STAGE_INTERVAL_COUNT: &str = "engine_decode_stage_interval_count";
/// When the decode was ready, ns since the request started.
pub const ENGINE_DECODE_READY_NANOS_SINCE_REQUEST_START: &str =
    "engine_decode_ready_nanos_since_request_start";
/// The decode's wall time, ns.
pub const ENGINE_DECODE_WALL_NANOS: &str = "engine_decode_wall_nanos";
/// Whether the decode's wall time could be measured.
pub const DECODE_WALL_TIMING_ELIGIBLE: &str = "decode_wall_timing_eligible";
/// Why it could not.
pub const DECODE_WALL_TIMING_UNAVAILABLE_REASON: &str = "decode_wall_timing_unavailable_reason";
/// A decode stage interval's stage.
pub const STAGE: &str = "stage";
/// A start, ns since the request started (a stage interval's, a module span's).
pub const START_NANOS_SINCE_REQUEST_START: &str = "start_nanos_since_request_start";
/// A stage interval's end, ns since the request started.
pub const END_NANOS_SINCE_REQUEST_START: &str = "end_nanos_since_request_start";
/// The profile's detail level (a `request_open` event's).
pub const DETAIL_LEVEL: &str = "detail_level";
/// The profile's sample rate (a `request_open` event's).
pub const SAMPLE_RATE: &str = "sample_rate";
/// A module span's number within its request.
pub const SPAN_ID: &str = "span_id";
/// The number of a module span's parent.
pub const PARENT_SPAN_ID: &str = "parent_span_id";
/// A module span's name.
pub const NAME: &str = "name";
/// A module span's kind (`module`, `op`, `function`).
pub const SPAN_KIND: &str = "span_kind";
/// The module a module span runs, named by its weights.
pub const MODULE: &str = "module";
/// A module span's forward call: `prefill` or `decode`.
pub const FORWARD: &str = "forward";
/// A module span's forward call's number (0 for the prefill, n for the n-th decode).
pub const FORWARD_INDEX: &str = "forward_index";
/// A module span's duration, ns (also a batched forward's).
pub const DURATION_NANOS: &str = "duration_nanos";
/// The engine an event belongs to (its id, also the event's `request_id`): an event
/// with it is the engine's, not a request's.
pub const ENGINE: &str = "engine";
/// A batched forward's number within its engine (its event's, its module spans').
pub const ITERATION: &str = "iteration";
/// A batched forward's module span's start, ns since the forward started.
pub const START_NANOS_SINCE_ITERATION_START: &str = "start_nanos_since_iteration_start";
/// Requests in a batched forward.
pub const BATCH_SIZE: &str = "batch_size";
/// Prompt tokens a forward ran (in all, or for one request).
pub const PREFILL_TOKENS: &str = "prefill_tokens";
/// Decode tokens a forward ran (in all, or for one request).
pub const DECODE_TOKENS: &str = "decode_tokens";
/// Tokens a forward committed (in all, or for one request).
pub const COMMITTED_TOKENS: &str = "committed_tokens";
/// A batched forward's requests, each `{request_id, prefill_tokens, decode_tokens,
/// committed_tokens}`.
pub const REQUESTS: &str = "requests";
/// A batched forward's request entry's id.
pub const REQUEST_ID: &str = "request_id";
/// The thread that ran a forward or opened a request (its name, else its id).
pub const THREAD: &str = "thread";
/// How forwards were timed: `host` or `device_synchronized` (a `request_open` event's).
pub const TIMING_MODE: &str = "timing_mode";
/// Why a request was preempted (a `preempted` event's).
pub const REASON: &str = "reason";
/// A decode wave's number within its request.
pub const WAVE: &str = "wave";

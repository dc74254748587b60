//! Chrome Trace Event JSON (SCHEMA.md §3): import into a [`TraceDocument`], and export of
//! trace/6 documents and inference profiles ([`export`]).
//!
//! # Import
//!
//! [`ChromeReader`] is push-based like the JSONL readers: chunks of any size, never the whole
//! file as one string (the array is framed element by element, see `scan`). The result is an
//! ordinary [`TraceDocument`] — so every analysis, the CLI and the viewer work on it unchanged —
//! whose [`TraceDocument::chrome`] holds what only Chrome files have ([`ChromeImport`]: tracks
//! and their names, instants, counters, skipped phases).
//!
//! Where SCHEMA.md is silent, the importer chooses (tests/fixtures/README.md says the same):
//! - **Time.** `ts`/`dur` are µs (`displayTimeUnit` only affects display), JSON numbers or
//!   strings holding one (`"200.5"`, as Chrome and Perfetto accept; the rule is in `micros`;
//!   any other string is a wrong-type error). Each value becomes
//!   ns as `round(µs × 1000)` in f64, half away from zero (exact to the ns below 2^53 ns ≈ 104
//!   days). All times are then rebased so that the earliest kept event (span start, instant or
//!   counter) is at 0 ns. A `B`/`E` span lasts `ns(E.ts) − ns(B.ts)`.
//! - **Elements.** Every array element counts for the ordinal (1-based, broken ones too); a
//!   span's id is `e<ordinal>` of its `X` or `B` element and its line is the line where that
//!   element starts. An element that is not JSON, not an object, has no string `ph`, or lacks a
//!   field its phase needs (`X`: `name`, `ts`, `dur`; `B`: `name`, `ts`; `E`: `ts`; `i`/`I`/`C`:
//!   `name`, `ts`; `M`: `name`) or has one of the wrong type is one error at its line and is
//!   dropped. `pid`/`tid` are integers or strings, 0 when absent. `X` with `dur` < 0 is an error,
//!   dropped.
//! - **B/E.** An `E` closes the most recent open `B` of the same (pid, tid) (names are not
//!   compared, as in Chrome). An `E` with no open `B`: error at the `E`, ignored. An `E` earlier
//!   than its `B`: error at the `E`, the span lasts 0. A `B` never closed: warning at the `B`;
//!   like an unclosed trace/6 span it lasts 0 in every number, but for nesting it stays open to
//!   the end of the file.
//! - **Nesting** (per (pid, tid), by time containment): spans sorted by (start, end descending,
//!   ordinal); a stack of open spans is popped while its top ends before the span ends; the top
//!   left is the parent. A span that starts inside a popped span but ends after it partially
//!   overlaps it: a warning at the span, which is nested under the next enclosing span instead.
//!   Equal intervals: the earlier element is the parent.
//! - **Tracks.** `M` `process_name` / `thread_name` (from `args.name`) label the pid / (pid,
//!   tid); other `M` names are accepted and ignored. Tracks are listed in order of first
//!   appearance.
//! - **Instants** (`i`, `I`; `s` scope `g`/`p`/`t`, default `t`) and **counters** (`C`: one
//!   [`CounterSample`] per numeric entry of `args` — a number or a string holding one, by the
//!   rule for `ts` — the key naming the series; other entries are ignored; the track is (pid, 0), counters belong to processes) are kept in
//!   [`ChromeImport`].
//! - **Other phases** (async `b`/`e`/`n`, flows `s`/`t`/`f`, objects `N`/`O`/`D`, samples `P`,
//!   marks `R`, clock sync `c`, context `(`/`)` and any unknown `ph`) are counted: one warning
//!   per phase at the line of its first element, saying how many were skipped.
//! - **Meta.** Chrome JSON has no meta, so one is synthesised: schema trace/6, run_id
//!   `chrome-import`, correlation_id empty, entrypoint the first `process_name` (else
//!   `chrome-trace`), phase `infer` (candle's `--tracing` flag lives in its inference
//!   examples), timestamp empty (unknown), capture_step 1, warmup_steps 0, device `unknown`,
//!   timing_mode `host` (Chrome timestamps are a host clock), tags `source=chrome` and
//!   `chrome_form=array|object`. It sits at line 1 and is not an error. When the object form
//!   carries `metadata.candle_trace.meta` (what [`export`] writes), that meta is used instead.
//! - **Measured region.** When some imported span has `args.measured = true` (what [`export`]
//!   writes), those spans are the measured region. Otherwise a synthetic root span `(trace)`, id
//!   `root`, line 1, measured, is added: it starts at 0 and lasts until the latest end of any
//!   kept event; every span that has no enclosing span on its thread becomes its child. So an
//!   imported file is never untrusted or "without measured span" for lacking them, total_ns is
//!   the file's wall extent, and max_depth counts the synthetic root. A file with no timed event
//!   gets no root (and the usual "no measured span" warning).
//! - `args.span_kind` (`function`/`op`/`module`), `args.step` (`forward`/`backward`/
//!   `optimizer`) and `args.module` (a string) of an `X`/`B` set the span's kind, step and
//!   module name (default: function, none, none).
//! - The file is read without its closing `]` (or `]}`) and without diagnostic; an element cut
//!   off by the end of the file is a truncation warning. Content after the end is a warning.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use hashbrown::HashMap;
use serde::Deserialize;
use serde_json::Value;

use crate::format::diagnostics::{classify_json_error, Category, Diagnostic};
use crate::format::document::TraceDocument;
use crate::format::events::CompactString;
use crate::format::events::{Meta, Pass, Phase, SpanKind, TimingMode, TRACE_SCHEMA};
use crate::format::records::{Lined, Span};

pub mod export;
mod micros;
mod scan;

use crate::format::tracks::{
    ChromeForm, ChromeImport, CounterSample, Instant, SkippedPhase, Track, TrackId,
};
use micros::{parse_micros, Micros};
use scan::{Scanned, Scanner};

/// The id of the synthetic measured root span.
pub const ROOT_SPAN_ID: &str = "root";
/// The name of the synthetic measured root span.
pub const ROOT_SPAN_NAME: &str = "(trace)";

#[derive(Deserialize)]
struct RawEvent {
    #[serde(default)]
    ph: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    ts: Option<Micros>,
    #[serde(default)]
    dur: Option<Micros>,
    #[serde(default)]
    pid: Option<TrackId>,
    #[serde(default)]
    tid: Option<TrackId>,
    #[serde(default)]
    s: Option<String>,
    #[serde(default)]
    args: Option<serde_json::Map<String, Value>>,
}

/// Microseconds → nanoseconds, rounded half away from zero.
pub fn us_to_ns(us: f64) -> i64 {
    // `f64::round` needs std; this is the same rounding with core only. The cast truncates
    // toward zero (saturating; NaN → 0), and `x - t` is exact wherever x has a fraction.
    let x = us * 1000.0;
    let t = x as i64;
    let frac = x - t as f64;
    if frac >= 0.5 {
        t.saturating_add(1)
    } else if frac <= -0.5 {
        t.saturating_sub(1)
    } else {
        t
    }
}

/// An `X`'s duration in ns: its end rounded once, from the same whole µs as its start, so a
/// child and its parent that end at the same 1000.6 ns do not end a nanosecond apart (rounding
/// `ts` and `dur` each gave 0 + 1000 and 900 + 101). With `ts` = i + f (i its integer part):
/// round((f + dur) × 1000) − round(f × 1000), at least 0. `dur` is then exact at any `ts`,
/// where `ts + dur` in µs would lose the nanoseconds of an epoch timestamp (about 1.7e15 µs).
fn x_duration_ns(ts_us: f64, dur_us: f64) -> i64 {
    // Beyond 2^53 µs a float has no fraction.
    let f = if ts_us.abs() < 9_007_199_254_740_992.0 {
        ts_us - (ts_us as i64) as f64
    } else {
        0.0
    };
    us_to_ns(f + dur_us).saturating_sub(us_to_ns(f)).max(0)
}

#[derive(Debug)]
struct RawSpan {
    ordinal: u64,
    line: u64,
    end_line: Option<u64>,
    name: String,
    track: u32,
    start: i64,
    /// `None` while open (and for a `B` never closed).
    duration: Option<i64>,
    measured: bool,
    pass: Option<Pass>,
    kind: SpanKind,
    /// `args.module`.
    module: Option<CompactString>,
}

/// Streaming Chrome JSON reader: push chunks of any size, then [`finish`](ChromeReader::finish).
#[derive(Debug, Default)]
pub struct ChromeReader {
    scanner: Scanner,
    state: ReadState,
}

#[derive(Debug, Default)]
struct ReadState {
    spans: Vec<RawSpan>,
    open: HashMap<u32, Vec<usize>>,
    tracks: Vec<Track>,
    track_index: HashMap<(TrackId, TrackId), u32>,
    process_names: Vec<(TrackId, String)>,
    instants: Vec<(u64, String, u32, i64, String)>,
    counters: Vec<(u64, String, String, u32, i64, f64)>,
    skipped: Vec<SkippedPhase>,
    diagnostics: Vec<Diagnostic>,
    metadata_meta: Option<Meta>,
}

impl ChromeReader {
    /// A reader at the start of a file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes pushed so far.
    pub fn bytes_read(&self) -> u64 {
        self.scanner.bytes_seen()
    }

    /// Feed the next chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        let state = &mut self.state;
        self.scanner.push(chunk, &mut |s| state.scanned(s));
    }

    /// End of file: B/E matching, nesting, the synthetic meta and root, the document with its
    /// span tree laid out ([`ChromeReader::finish`] adds self time).
    pub(crate) fn read_to_end(self) -> TraceDocument {
        let ChromeReader { scanner, mut state } = self;
        let form = scanner.form().unwrap_or(ChromeForm::Array);
        let bytes_read = scanner.bytes_seen();
        let closed = scanner.closed();
        let elements = scanner.elements();
        scanner.finish(&mut |s| state.scanned(s));
        state.assemble(form, closed, elements, bytes_read)
    }
}

impl ReadState {
    fn scanned(&mut self, s: Scanned<'_>) {
        match s {
            Scanned::Problem(d) => self.diagnostics.push(d),
            Scanned::Metadata(bytes) => self.metadata(bytes),
            Scanned::Element {
                ordinal,
                line,
                bytes,
            } => self.element(ordinal, line, bytes),
        }
    }

    fn metadata(&mut self, bytes: &[u8]) {
        #[derive(Deserialize)]
        struct Outer {
            candle_trace: Option<Inner>,
        }
        #[derive(Deserialize)]
        struct Inner {
            meta: Option<Meta>,
        }
        // Foreign metadata objects are none of our business: ignore what does not decode.
        if let Ok(Outer {
            candle_trace: Some(Inner { meta: Some(meta) }),
        }) = serde_json::from_slice::<Outer>(bytes)
        {
            self.metadata_meta = Some(meta);
        }
    }

    fn error(&mut self, line: u64, category: Category, message: String) {
        self.diagnostics
            .push(Diagnostic::error(line, category, message));
    }

    fn track(&mut self, pid: TrackId, tid: TrackId) -> u32 {
        let next = self.tracks.len() as u32;
        let key = (pid, tid);
        if let Some(&i) = self.track_index.get(&key) {
            return i;
        }
        self.tracks.push(Track {
            pid: key.0.clone(),
            tid: key.1.clone(),
            process_name: None,
            thread_name: None,
        });
        self.track_index.insert(key, next);
        next
    }

    fn element(&mut self, ordinal: u64, line: u64, bytes: &[u8]) {
        // Fast path: a well-formed event object decodes straight into `RawEvent`. Anything else
        // takes the slow path, which tells exactly what is wrong (in the documented order).
        let fast = if bytes.first() == Some(&b'{') {
            serde_json::from_slice::<RawEvent>(bytes).ok()
        } else {
            None
        };
        let (ph, raw) = match fast {
            Some(RawEvent { ph: Some(ph), .. }) if !is_supported(&ph) => {
                return self.skip(ph, line)
            }
            Some(raw @ RawEvent { ph: Some(_), .. }) => (raw.ph.clone().unwrap_or_default(), raw),
            _ => match self.decode_slowly(ordinal, line, bytes) {
                Some(decoded) => decoded,
                None => return,
            },
        };
        self.event(ordinal, line, ph, raw);
    }

    fn skip(&mut self, ph: String, line: u64) {
        match self.skipped.iter_mut().find(|s| s.ph == ph) {
            Some(s) => s.count += 1,
            None => self.skipped.push(SkippedPhase {
                ph,
                count: 1,
                first_line: line,
            }),
        }
    }

    /// The element as a JSON value first: syntax, object, `ph`, skipped phase, then field types.
    /// `None` when it was reported (or skipped).
    fn decode_slowly(
        &mut self,
        ordinal: u64,
        line: u64,
        bytes: &[u8],
    ) -> Option<(String, RawEvent)> {
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => {
                let (category, message) = classify_json_error(&e);
                let category = if category == Category::Truncated {
                    Category::Syntax
                } else {
                    category
                };
                self.error(line, category, format!("element {ordinal}: {message}"));
                return None;
            }
        };
        if !value.is_object() {
            self.error(
                line,
                Category::Syntax,
                format!("element {ordinal} is not a JSON object"),
            );
            return None;
        }
        let ph = match value.get("ph") {
            None | Some(Value::Null) => {
                self.error(
                    line,
                    Category::MissingField,
                    format!("element {ordinal} has no `ph` (phase)"),
                );
                return None;
            }
            Some(Value::String(ph)) => ph.clone(),
            Some(_) => {
                self.error(
                    line,
                    Category::WrongType,
                    format!("element {ordinal}: `ph` is not a string"),
                );
                return None;
            }
        };
        if !is_supported(&ph) {
            self.skip(ph, line);
            return None;
        }
        match serde_json::from_value(value) {
            Ok(raw) => Some((ph, raw)),
            Err(e) => {
                let (category, message) = classify_json_error(&e);
                self.error(
                    line,
                    category,
                    format!("`{ph}` element {ordinal}: {message}"),
                );
                None
            }
        }
    }

    /// A decoded event of a supported phase: required fields, then its effect.
    fn event(&mut self, ordinal: u64, line: u64, ph: String, raw: RawEvent) {
        let required: &[&str] = match ph.as_str() {
            "X" => &["name", "ts", "dur"],
            "B" | "i" | "I" | "C" => &["name", "ts"],
            "E" => &["ts"],
            _ => &["name"],
        };
        for field in required {
            let present = match *field {
                "name" => raw.name.is_some(),
                "ts" => raw.ts.is_some(),
                _ => raw.dur.is_some(),
            };
            if !present {
                return self.error(
                    line,
                    Category::MissingField,
                    format!("`{ph}` element {ordinal} has no `{field}`"),
                );
            }
        }
        let pid = raw.pid.clone().unwrap_or_default();
        let tid = raw.tid.clone().unwrap_or_default();
        let ts = raw.ts.map(|t| us_to_ns(t.0)).unwrap_or(0);
        let name = raw.name.clone().unwrap_or_default();
        match ph.as_str() {
            "X" | "B" => {
                let duration = match raw.dur.map(|d| d.0) {
                    Some(d) if us_to_ns(d) < 0 => {
                        return self.error(
                            line,
                            Category::InvalidValue,
                            format!("`X` element {ordinal} (`{name}`) has a negative `dur`"),
                        )
                    }
                    Some(d) => Some(x_duration_ns(raw.ts.map_or(0.0, |t| t.0), d)),
                    None => None,
                };
                let track = self.track(pid, tid);
                let args = raw.args.as_ref();
                let arg_str = |k: &str| args.and_then(|a| a.get(k)).and_then(Value::as_str);
                let span = RawSpan {
                    ordinal,
                    line,
                    end_line: (ph == "X").then_some(line),
                    name,
                    track,
                    start: ts,
                    duration,
                    measured: args.and_then(|a| a.get("measured")) == Some(&Value::Bool(true)),
                    pass: arg_str("step").and_then(parse_pass),
                    kind: arg_str("span_kind")
                        .and_then(parse_kind)
                        .unwrap_or(SpanKind::Function),
                    module: arg_str("module").map(CompactString::from),
                };
                let index = self.spans.len();
                self.spans.push(span);
                if ph == "B" {
                    self.open.entry(track).or_default().push(index);
                }
            }
            "E" => {
                let track = self.track(pid, tid);
                let Some(index) = self.open.get_mut(&track).and_then(Vec::pop) else {
                    let t = &self.tracks[track as usize];
                    let msg = format!(
                        "`E` element {ordinal} on pid {} tid {} closes no open `B`; ignored",
                        t.pid, t.tid
                    );
                    return self.error(line, Category::Reference, msg);
                };
                let span = &mut self.spans[index];
                span.end_line = Some(line);
                if ts < span.start {
                    span.duration = Some(0);
                    let msg = format!(
                        "`E` element {ordinal} is earlier than its `B` (`{}`, line {}); the span lasts 0",
                        span.name, span.line
                    );
                    self.error(line, Category::InvalidValue, msg);
                } else {
                    // Saturating: a `B` and an `E` ±9e18 ns apart do not fit an i64 between them.
                    span.duration = Some(ts.saturating_sub(span.start));
                }
            }
            "i" | "I" => {
                let track = self.track(pid, tid);
                let scope = raw.s.clone().unwrap_or_else(|| String::from("t"));
                self.instants.push((line, name, track, ts, scope));
            }
            "C" => {
                let track = self.track(pid, TrackId::default());
                if let Some(args) = &raw.args {
                    for (key, v) in args {
                        // Numbers, and strings holding one (as Perfetto reads counter args).
                        let number = v.as_f64().or_else(|| v.as_str().and_then(parse_micros));
                        if let Some(x) = number {
                            self.counters
                                .push((line, name.clone(), key.clone(), track, ts, x));
                        }
                    }
                }
            }
            _ => {
                // "M": metadata. Only the two naming records matter here.
                let label = raw
                    .args
                    .as_ref()
                    .and_then(|a| a.get("name"))
                    .and_then(Value::as_str)
                    .map(ToString::to_string);
                match (name.as_str(), label) {
                    ("thread_name", Some(label)) => {
                        let track = self.track(pid, tid);
                        self.tracks[track as usize].thread_name = Some(label);
                    }
                    ("process_name", Some(label)) => {
                        match self.process_names.iter_mut().find(|(p, _)| *p == pid) {
                            Some(entry) => entry.1 = label,
                            None => self.process_names.push((pid, label)),
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn assemble(
        mut self,
        form: ChromeForm,
        closed: bool,
        element_count: u64,
        bytes_read: u64,
    ) -> TraceDocument {
        for s in &self.spans {
            if s.duration.is_none() {
                let t = &self.tracks[s.track as usize];
                self.diagnostics.push(Diagnostic::warning(
                    s.line,
                    Category::Unclosed,
                    format!(
                        "`B` element {} (`{}`) on pid {} tid {} has no matching `E`; its duration counts as 0",
                        s.ordinal, s.name, t.pid, t.tid
                    ),
                ));
            }
        }
        for s in &self.skipped {
            self.diagnostics.push(Diagnostic::warning(
                s.first_line,
                Category::UnknownKind,
                format!(
                    "{} element(s) of phase `{}` ({}) skipped; the first is here",
                    s.count,
                    s.ph,
                    phase_name(&s.ph)
                ),
            ));
        }
        for (pid, label) in &self.process_names {
            for t in self.tracks.iter_mut().filter(|t| t.pid == *pid) {
                t.process_name = Some(label.clone());
            }
        }

        // Rebase: the earliest kept event is at 0.
        let starts = self.spans.iter().map(|s| s.start);
        let origin = starts
            .chain(self.instants.iter().map(|i| i.3))
            .chain(self.counters.iter().map(|c| c.4))
            .min()
            .unwrap_or(0);
        let rel = |t: i64| t.saturating_sub(origin).max(0) as u64;
        let latest = self
            .spans
            .iter()
            .map(|s| s.start.saturating_add(s.duration.unwrap_or(0)))
            .chain(self.instants.iter().map(|i| i.3))
            .chain(self.counters.iter().map(|c| c.4))
            .max();
        let synthetic_root = latest.is_some() && !self.spans.iter().any(|s| s.measured);

        // Nesting by time containment per track.
        let mut parent: Vec<Option<usize>> = alloc::vec![None; self.spans.len()];
        let mut by_track: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, s) in self.spans.iter().enumerate() {
            by_track.entry(s.track).or_default().push(i);
        }
        let end_of = |s: &RawSpan| match s.duration {
            Some(d) => s.start.saturating_add(d),
            None => i64::MAX,
        };
        for (_, mut members) in by_track {
            members.sort_by(|&a, &b| {
                let (sa, sb) = (&self.spans[a], &self.spans[b]);
                sa.start
                    .cmp(&sb.start)
                    .then(end_of(sb).cmp(&end_of(sa)))
                    .then(sa.ordinal.cmp(&sb.ordinal))
            });
            let mut stack: Vec<usize> = Vec::new();
            for i in members {
                let s = &self.spans[i];
                let end = end_of(s);
                let mut overlapped: Option<usize> = None;
                while let Some(&top) = stack.last() {
                    let top_end = end_of(&self.spans[top]);
                    if top_end >= end {
                        break;
                    }
                    if s.start < top_end && overlapped.is_none() {
                        overlapped = Some(top);
                    }
                    stack.pop();
                }
                if let Some(o) = overlapped {
                    let o = &self.spans[o];
                    self.diagnostics.push(Diagnostic::warning(
                        s.line,
                        Category::InvalidValue,
                        format!(
                            "span `{}` starts inside `{}` (line {}) but ends after it; nested under the next enclosing span instead",
                            s.name, o.name, o.line
                        ),
                    ));
                }
                parent[i] = stack.last().copied();
                stack.push(i);
            }
        }

        let meta = self.metadata_meta.take().unwrap_or_else(|| {
            let entrypoint = self
                .process_names
                .first()
                .map(|(_, n)| n.clone())
                .unwrap_or_else(|| String::from("chrome-trace"));
            let mut tags = BTreeMap::new();
            tags.insert(String::from("source"), String::from("chrome"));
            tags.insert(
                String::from("chrome_form"),
                String::from(match form {
                    ChromeForm::Array => "array",
                    ChromeForm::Object => "object",
                }),
            );
            Meta {
                schema: String::from(TRACE_SCHEMA),
                run_id: String::from("chrome-import"),
                correlation_id: String::new(),
                entrypoint,
                phase: Phase::Infer,
                timestamp: String::new(),
                capture_step: 1,
                warmup_steps: 0,
                device: String::from("unknown"),
                measured_region_device_synchronized: false,
                timing_mode: TimingMode::Host,
                tags,
                candle_version: None,
            }
        });

        let mut spans = Vec::with_capacity(self.spans.len() + 1);
        let mut span_tracks = Vec::with_capacity(self.spans.len() + 1);
        let offset = usize::from(synthetic_root);
        if let (true, Some(latest)) = (synthetic_root, latest) {
            spans.push(Span {
                id: CompactString::const_new(ROOT_SPAN_ID),
                parent_id: None,
                name: CompactString::const_new(ROOT_SPAN_NAME),
                start_ns: 0,
                span_kind: SpanKind::Function,
                measured: true,
                pass: None,
                module: None,
                duration_ns: Some(rel(latest)),
                line: 1,
                end_line: Some(1),
            });
            span_tracks.push(None);
        }
        let ids: Vec<CompactString> = self
            .spans
            .iter()
            .map(|s| compact_str::format_compact!("e{}", s.ordinal))
            .collect();
        for (i, s) in self.spans.iter().enumerate() {
            let parent_id = match parent[i] {
                Some(p) => Some(ids[p].clone()),
                None if synthetic_root => Some(CompactString::const_new(ROOT_SPAN_ID)),
                None => None,
            };
            spans.push(Span {
                id: ids[i].clone(),
                parent_id,
                name: s.name.as_str().into(),
                start_ns: rel(s.start),
                span_kind: s.kind,
                measured: s.measured,
                pass: s.pass,
                module: s.module.clone(),
                duration_ns: s.duration.map(|d| d.max(0) as u64),
                line: s.line,
                end_line: s.end_line,
            });
            span_tracks.push(Some(s.track));
        }
        debug_assert_eq!(spans.len(), self.spans.len() + offset);

        let import = ChromeImport {
            form,
            element_count,
            closed,
            tracks: self.tracks,
            span_tracks,
            instants: self
                .instants
                .into_iter()
                .map(|(line, name, track, ts, scope)| {
                    Lined::new(
                        line,
                        Instant {
                            name,
                            track,
                            timestamp_ns: rel(ts),
                            scope,
                        },
                    )
                })
                .collect(),
            counters: self
                .counters
                .into_iter()
                .map(|(line, name, series, track, ts, value)| {
                    Lined::new(
                        line,
                        CounterSample {
                            name,
                            series,
                            track,
                            timestamp_ns: rel(ts),
                            value,
                        },
                    )
                })
                .collect(),
            skipped: self.skipped,
            origin_ns: origin,
            synthetic_root,
        };
        let mut doc = TraceDocument::assemble_layout(Lined::new(1, meta), spans, self.diagnostics);
        doc.bytes_read = bytes_read;
        doc.chrome = Some(Box::new(import));
        doc
    }
}

fn is_supported(ph: &str) -> bool {
    matches!(ph, "X" | "B" | "E" | "i" | "I" | "C" | "M")
}

fn parse_pass(s: &str) -> Option<Pass> {
    match s {
        "forward" => Some(Pass::Forward),
        "backward" => Some(Pass::Backward),
        "optimizer" => Some(Pass::Optimizer),
        _ => None,
    }
}

fn parse_kind(s: &str) -> Option<SpanKind> {
    match s {
        "function" => Some(SpanKind::Function),
        "op" => Some(SpanKind::Op),
        "module" => Some(SpanKind::Module),
        _ => None,
    }
}

/// What a Chrome phase letter means (for the skipped-phase warning).
pub fn phase_name(ph: &str) -> &'static str {
    match ph {
        "X" => "complete",
        "B" => "duration begin",
        "E" => "duration end",
        "i" | "I" => "instant",
        "C" => "counter",
        "M" => "metadata",
        "b" => "async begin",
        "e" => "async end",
        "n" => "async instant",
        "S" | "T" | "p" | "F" => "legacy async",
        "s" => "flow start",
        "t" => "flow step",
        "f" => "flow end",
        "P" => "sample",
        "N" => "object created",
        "O" => "object snapshot",
        "D" => "object destroyed",
        "R" => "mark",
        "c" => "clock sync",
        "(" | ")" => "context",
        "V" | "v" => "memory dump",
        _ => "unknown phase",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::spans::span_path;
    use crate::format::diagnostics::Severity;
    use alloc::vec;

    fn diags(doc: &TraceDocument) -> Vec<(u64, Severity, Category)> {
        doc.diagnostics
            .iter()
            .map(|d| (d.line, d.severity, d.category))
            .collect()
    }

    #[test]
    fn b_e_pairs_and_x_nest_by_time_per_thread() {
        // Thread 1: outer B/E [10, 110) µs with X inner [20, 50); thread 2: X [0.5, 30.5).
        let text = r#"[
{"ph":"B","name":"outer","ts":10,"pid":1,"tid":1},
{"ph":"X","name":"inner","ts":20,"dur":30,"pid":1,"tid":1},
{"ph":"X","name":"other","ts":0.5,"dur":30,"pid":1,"tid":2},
{"ph":"E","ts":110,"pid":1,"tid":1},
{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"worker"}}
]"#;
        for size in [1, 3, 7, 64, 4096] {
            let mut r = ChromeReader::new();
            for c in text.as_bytes().chunks(size) {
                r.push(c);
            }
            let doc = r.finish();
            assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
            assert!(!doc.is_untrusted());
            let s = doc.summary();
            assert_eq!(s.span_count, 4);
            assert_eq!(s.root_span_count, 1);
            assert_eq!(s.max_depth, 2);
            // Extent: from 0.5 µs to 110 µs.
            assert_eq!(s.total_ns, 109_500);
            let outer = doc.span_index("e1").unwrap();
            assert_eq!(doc.spans[outer].start_ns, 9_500);
            assert_eq!(doc.spans[outer].duration_ns, Some(100_000));
            assert_eq!(doc.tree.self_ns[outer], 70_000);
            assert_eq!(
                span_path(&doc, doc.span_index("e2").unwrap()),
                "(trace)/outer/inner"
            );
            let chrome = doc.chrome.as_ref().unwrap();
            assert_eq!(chrome.tracks.len(), 2);
            assert_eq!(chrome.tracks[1].thread_name.as_deref(), Some("worker"));
            assert_eq!(chrome.element_count, 5);
            assert!(chrome.closed);
        }
    }

    #[test]
    fn an_x_end_is_rounded_once() {
        // Both end at 1.0006 µs = 1000.6 ns → 1001. Rounding `ts` and `dur` apart, the parent
        // ended at 0 + 1000 and the child at 900 + 101: after its parent, so not inside it.
        let text = r#"[
{"ph":"X","name":"parent","ts":0.0004,"dur":1.0002,"pid":1,"tid":1},
{"ph":"X","name":"child","ts":0.9,"dur":0.1006,"pid":1,"tid":1}
]"#;
        let doc = TraceDocument::from_chrome(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let (parent, child) = (doc.span_index("e1").unwrap(), doc.span_index("e2").unwrap());
        assert_eq!(doc.spans[parent].duration_ns, Some(1001));
        assert_eq!(doc.spans[child].duration_ns, Some(101));
        assert_eq!(span_path(&doc, child), "(trace)/parent/child");
        assert_eq!(doc.tree.self_ns[parent], 900);
    }

    #[test]
    fn a_b_and_e_further_apart_than_an_i64_saturate() {
        let text = r#"[
{"ph":"B","name":"a","ts":-9000000000000000,"pid":1,"tid":1},
{"ph":"E","ts":9000000000000000,"pid":1,"tid":1}
]"#;
        let doc = TraceDocument::from_chrome(text.as_bytes());
        let a = doc.span_index("e1").unwrap();
        assert_eq!(doc.spans[a].duration_ns, Some(i64::MAX as u64));
    }

    #[test]
    fn problems_have_lines_and_nothing_valid_is_lost() {
        let text = r#"[
{"ph":"E","ts":1,"pid":1,"tid":1},
{"ph":"B","name":"open","ts":2,"pid":1,"tid":1},
{"ph":"X","name":"neg","ts":3,"dur":-1},
{"ph":"b","name":"a","ts":3,"id":1},{"ph":"b","name":"a","ts":4,"id":1},
not json,
{"ph":"X","name":"ok","ts":5,"dur":1},
{"ph":"X","ts":5,"dur":1},
{"ph":"X","name":"ok2","ts":"five","dur":1},
{"ph":"i","name":"mark","ts":6,"s":"g"},
{"ph":"C","name":"mem","ts":7,"args":{"bytes":10,"label":"x"}},
{"name":"noph"},
{"ph":"X","name":"cut","ts":8,"dur":"#;
        let doc = TraceDocument::from_chrome(text.as_bytes());
        assert_eq!(
            diags(&doc),
            vec![
                (2, Severity::Error, Category::Reference),
                (3, Severity::Warning, Category::Unclosed),
                (4, Severity::Error, Category::InvalidValue),
                (5, Severity::Warning, Category::UnknownKind),
                (6, Severity::Error, Category::Syntax),
                (8, Severity::Error, Category::MissingField),
                (9, Severity::Error, Category::WrongType),
                (12, Severity::Error, Category::MissingField),
                (13, Severity::Warning, Category::Truncated),
            ]
        );
        let c = doc.chrome.as_ref().unwrap();
        assert_eq!(
            c.skipped,
            vec![SkippedPhase {
                ph: "b".into(),
                count: 2,
                first_line: 5
            }]
        );
        assert_eq!(c.instants.len(), 1);
        assert_eq!(c.counters.len(), 1);
        assert!(!c.closed);
        // root + open + ok; `ok` nests under the never-closed `open` on the same track? No:
        // `open` is on (1,1), `ok` on (0,0).
        assert_eq!(doc.summary().span_count, 3);
    }

    #[test]
    fn measured_args_replace_the_synthetic_root() {
        let text = r#"{"traceEvents":[
{"ph":"X","name":"step","ts":0,"dur":10,"pid":1,"tid":1,"args":{"measured":true,"step":"forward","span_kind":"module"}},
{"ph":"X","name":"mm","ts":1,"dur":2,"pid":1,"tid":1}
],"displayTimeUnit":"ns"}"#;
        let doc = TraceDocument::from_chrome(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let s = doc.summary();
        assert_eq!((s.span_count, s.total_ns, s.max_depth), (2, 10_000, 1));
        assert_eq!(doc.spans[0].pass, Some(Pass::Forward));
        assert_eq!(doc.spans[0].span_kind, SpanKind::Module);
        assert_eq!(doc.chrome.as_ref().unwrap().form, ChromeForm::Object);
    }

    #[test]
    fn microseconds_round_half_away_from_zero() {
        assert_eq!(us_to_ns(1.0005), 1001);
        assert_eq!(us_to_ns(-1.0005), -1001);
        assert_eq!(us_to_ns(0.0004), 0);
        assert_eq!(us_to_ns(1234.567), 1_234_567);
        assert_eq!(us_to_ns(1.7e15), 1_700_000_000_000_000_000);
        assert_eq!(us_to_ns(f64::NAN), 0);
        assert_eq!(us_to_ns(1e300), i64::MAX);
    }

    #[test]
    fn partial_overlap_is_a_warning() {
        let text =
            r#"[{"ph":"X","name":"a","ts":0,"dur":10},{"ph":"X","name":"b","ts":5,"dur":10}]"#;
        let doc = TraceDocument::from_chrome(text.as_bytes());
        assert_eq!(
            diags(&doc),
            vec![(1, Severity::Warning, Category::InvalidValue)]
        );
        assert_eq!(doc.summary().max_depth, 1);
    }
}

//! What only a Chrome Trace Event JSON import has, kept in
//! [`TraceDocument::chrome`](crate::format::document::TraceDocument::chrome): the file's form, its tracks (`pid`/`tid` and their names),
//! instants, counters and skipped phases. The types live below both the document that holds them
//! and the reader that fills them ([`crate::format::chrome`]), so neither imports the other's module.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde::{Deserialize, Serialize};

use crate::format::records::Lined;

/// The outer shape of a Chrome JSON file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChromeForm {
    /// `[ev, ev, ...]`.
    Array,
    /// `{"traceEvents": [...], ...}`.
    Object,
}

/// A `pid` or `tid`: Chrome writers use integers, some (PyTorch) strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum TrackId {
    /// An integer id.
    Int(i64),
    /// A string id.
    Str(String),
}

impl<'de> Deserialize<'de> for TrackId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = TrackId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string (pid / tid)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<TrackId, E> {
                Ok(TrackId::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<TrackId, E> {
                i64::try_from(v)
                    .map(TrackId::Int)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TrackId, E> {
                Ok(TrackId::Str(String::from(v)))
            }
        }
        d.deserialize_any(V)
    }
}

impl Default for TrackId {
    fn default() -> Self {
        TrackId::Int(0)
    }
}

impl fmt::Display for TrackId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrackId::Int(i) => write!(f, "{i}"),
            TrackId::Str(s) => f.write_str(s),
        }
    }
}

/// One (pid, tid) of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Track {
    /// Process id.
    pub pid: TrackId,
    /// Thread id.
    pub tid: TrackId,
    /// `M` `process_name` of the pid.
    pub process_name: Option<String>,
    /// `M` `thread_name` of the (pid, tid).
    pub thread_name: Option<String>,
}

impl Track {
    /// A human label: the thread name, else `pid P tid T`.
    pub fn label(&self) -> String {
        match &self.thread_name {
            Some(n) => n.clone(),
            None => format!("pid {} tid {}", self.pid, self.tid),
        }
    }
}

/// An instant event (`i` / `I`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instant {
    /// Event name.
    pub name: String,
    /// Index into [`ChromeImport::tracks`].
    pub track: u32,
    /// Time, ns after the earliest kept event.
    pub timestamp_ns: u64,
    /// Scope: `g` (global), `p` (process) or `t` (thread, the default).
    pub scope: String,
}

/// One value of a counter (`C`) event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterSample {
    /// Counter event name.
    pub name: String,
    /// The `args` key the value came from (a counter event may carry several series).
    pub series: String,
    /// Index into [`ChromeImport::tracks`] (Chrome counters belong to the process).
    pub track: u32,
    /// Time, ns after the earliest kept event.
    pub timestamp_ns: u64,
    /// The value.
    pub value: f64,
}

/// Elements of one phase that the importer does not turn into anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedPhase {
    /// The `ph` value.
    pub ph: String,
    /// How many elements had it.
    pub count: u64,
    /// Line of the first of them.
    pub first_line: u64,
}

/// What a Chrome file holds beyond the spans of its [`TraceDocument`](crate::format::document::TraceDocument).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChromeImport {
    /// Array or object form.
    pub form: ChromeForm,
    /// Number of array elements (valid or not).
    pub element_count: u64,
    /// Whether the events array was closed with `]`.
    pub closed: bool,
    /// Every (pid, tid) seen, in order of first appearance.
    pub tracks: Vec<Track>,
    /// For each span of the document (same index), its track; `None` for the synthetic root.
    pub span_tracks: Vec<Option<u32>>,
    /// Instants, in file order.
    pub instants: Vec<Lined<Instant>>,
    /// Counter samples, in file order.
    pub counters: Vec<Lined<CounterSample>>,
    /// Phases counted and skipped, by first appearance.
    pub skipped: Vec<SkippedPhase>,
    /// The ns subtracted from every time (the earliest kept event, in the file's own clock).
    pub origin_ns: i64,
    /// True when the measured region is the synthetic root span.
    pub synthetic_root: bool,
}

impl ChromeImport {
    /// Total number of skipped elements.
    pub fn skipped_count(&self) -> u64 {
        self.skipped.iter().map(|s| s.count).sum()
    }
}

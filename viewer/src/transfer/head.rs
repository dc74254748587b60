//! A trace's head: the counters of what was skipped and read, the meta line and the
//! `capture_sources` line, written and read field by field in one step.

use std::collections::BTreeMap;

use candle_trace_schema::format::document::{TraceDocument, TraceRecords};
use candle_trace_schema::format::events::{CaptureSource, CaptureSources, Meta};
use candle_trace_schema::format::records::Lined;

use super::columns::{code, variant};
use super::wire::{In, Out, Result, Strings, Strs};

/// The head of a trace's records `t` into `out`.
pub(super) fn write<'d>(out: &mut Out, s: &mut Strings<'d>, t: &TraceRecords<'d>) {
    out.u64(t.skipped_unknown);
    out.u64(t.bytes_read);
    out.bool(t.meta.is_some());
    if let Some(m) = t.meta {
        write_meta(out, s, m);
    }
    out.bool(t.capture_sources.is_some());
    if let Some(c) = t.capture_sources {
        write_capture_sources(out, s, c);
    }
}

/// A trace with its head read and nothing else.
#[inline(never)]
pub(super) fn read(r: &mut In<'_>, s: Strs<'_>) -> Result<TraceDocument> {
    let mut d = TraceDocument::default();
    d.skipped_unknown = r.u64()?;
    d.bytes_read = r.u64()?;
    if r.bool()? {
        d.meta = Some(read_meta(r, s)?);
    }
    if r.bool()? {
        d.capture_sources = Some(read_capture_sources(r, s)?);
    }
    Ok(d)
}

fn write_meta<'d>(out: &mut Out, s: &mut Strings<'d>, m: &'d Lined<Meta>) {
    out.u64(m.line);
    let m = &m.event;
    for v in [
        &m.schema,
        &m.run_id,
        &m.correlation_id,
        &m.entrypoint,
        &m.timestamp,
        &m.device,
    ] {
        out.u32(s.id(v));
    }
    out.u8(code(&m.phase));
    out.u64(m.capture_step);
    out.u64(m.warmup_steps);
    out.bool(m.measured_region_device_synchronized);
    out.u8(code(&m.timing_mode));
    out.u64(m.tags.len() as u64);
    for (k, v) in &m.tags {
        out.u32(s.id(k));
        out.u32(s.id(v));
    }
    out.u32(s.opt(m.candle_version.as_deref()));
}

fn string(r: &mut In<'_>, s: Strs<'_>) -> Result<String> {
    Ok(String::from(s.get(r.u32()?)?))
}

fn read_meta(r: &mut In<'_>, s: Strs<'_>) -> Result<Lined<Meta>> {
    let line = r.u64()?;
    let schema = string(r, s)?;
    let run_id = string(r, s)?;
    let correlation_id = string(r, s)?;
    let entrypoint = string(r, s)?;
    let timestamp = string(r, s)?;
    let device = string(r, s)?;
    let phase = variant(r.u8()?)?;
    let capture_step = r.u64()?;
    let warmup_steps = r.u64()?;
    let measured_region_device_synchronized = r.bool()?;
    let timing_mode = variant(r.u8()?)?;
    let mut tags = BTreeMap::new();
    for _ in 0..r.len()? {
        let k = string(r, s)?;
        tags.insert(k, string(r, s)?);
    }
    let candle_version = s.opt(r.u32()?)?.map(String::from);
    Ok(Lined::new(
        line,
        Meta {
            schema,
            run_id,
            correlation_id,
            entrypoint,
            phase,
            timestamp,
            capture_step,
            warmup_steps,
            device,
            measured_region_device_synchronized,
            timing_mode,
            tags,
            candle_version,
        },
    ))
}

fn write_capture_sources<'d>(out: &mut Out, s: &mut Strings<'d>, c: &'d Lined<CaptureSources>) {
    out.u64(c.line);
    out.u64(c.sources.len() as u64);
    for x in &c.sources {
        out.u32(s.id(&x.source));
        out.bool(x.on);
        out.u64(x.events);
        out.opt_u64(x.threshold_bytes);
    }
    out.u64(c.events_dropped);
    out.u64(c.warnings.len() as u64);
    for w in &c.warnings {
        out.u32(s.id(w));
    }
}

fn read_capture_sources(r: &mut In<'_>, s: Strs<'_>) -> Result<Lined<CaptureSources>> {
    let line = r.u64()?;
    let mut c = CaptureSources::default();
    for _ in 0..r.len()? {
        c.sources.push(CaptureSource {
            source: string(r, s)?,
            on: r.bool()?,
            events: r.u64()?,
            threshold_bytes: r.opt_u64()?,
        });
    }
    c.events_dropped = r.u64()?;
    for _ in 0..r.len()? {
        c.warnings.push(string(r, s)?);
    }
    Ok(Lined::new(line, c))
}

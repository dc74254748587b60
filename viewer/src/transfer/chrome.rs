//! The Chrome import part (a Chrome Trace Event file's tracks, instants, counters and skipped
//! phases), present only for a trace read from Chrome JSON; read in one step.

use candle_trace_schema::format::records::Lined;
use candle_trace_schema::format::tracks::ChromeImport;
use candle_trace_schema::format::tracks::{
    ChromeForm, CounterSample, Instant, SkippedPhase, Track, TrackId,
};

use super::columns::{
    code, columns, variant, Column, FixedW, Id, IdR, IdW, OptId, OptU32, Read, Write, F64, I64,
    I64R, U32, U64, U8, U8R,
};
use super::wire::{broken, In, Out, Result, Strings, Strs, Table};

/// A track id, a number or a string: which (`0` or `1`), the number (0 for a string), the
/// string ([`NONE`](super::wire::NONE) for a number).
pub(super) struct TrackIdCol;

/// A [`TrackIdCol`] being written.
pub(super) struct TrackIdW(FixedW, FixedW, IdW);

/// A [`TrackIdCol`] read.
pub(super) struct TrackIdR<'b>(U8R<'b>, I64R<'b>, IdR<'b>);

impl Column for TrackIdCol {
    const COLUMNS: usize = U8::COLUMNS + I64::COLUMNS + OptId::COLUMNS;
    type Writer = TrackIdW;
    type Reader<'b> = TrackIdR<'b>;
    fn writer(n: usize) -> TrackIdW {
        TrackIdW(U8::writer(n), I64::writer(n), OptId::writer(n))
    }
    fn finish(w: TrackIdW, out: &mut Out) {
        U8::finish(w.0, out);
        I64::finish(w.1, out);
        OptId::finish(w.2, out);
    }
    fn reader<'b>(t: &Table, b: &'b [u8], s: Strs<'b>, c: usize) -> Result<TrackIdR<'b>> {
        Ok(TrackIdR(
            U8::reader(t, b, s, c)?,
            I64::reader(t, b, s, c + U8::COLUMNS)?,
            OptId::reader(t, b, s, c + U8::COLUMNS + I64::COLUMNS)?,
        ))
    }
}

impl TrackIdW {
    fn put<'d>(&mut self, s: &mut Strings<'d>, id: &'d TrackId) {
        match id {
            TrackId::Int(i) => {
                self.0.u8(0);
                self.1.i64(*i);
                self.2.opt(s, None);
            }
            TrackId::Str(v) => {
                self.0.u8(1);
                self.1.i64(0);
                self.2.put(s, v);
            }
        }
    }
}

impl TrackIdR<'_> {
    fn get(&self, i: usize) -> Result<TrackId> {
        Ok(match self.0.get(i)? {
            0 => TrackId::Int(self.1.get(i)?),
            1 => TrackId::Str(String::from(self.2.get(i)?)),
            k => return Err(broken(format!("{k} is no track id kind"))),
        })
    }
}

columns! {
    /// A track.
    Tracks {
        pid: TrackIdCol,
        tid: TrackIdCol,
        process_name: OptId,
        thread_name: OptId,
    }
}

columns! {
    /// Each span's track.
    SpanTracks {
        track: OptU32,
    }
}

columns! {
    /// An instant event.
    Instants {
        line: U64,
        name: Id,
        track: U32,
        timestamp_ns: U64,
        scope: Id,
    }
}

columns! {
    /// A counter sample.
    Counters {
        line: U64,
        name: Id,
        series: Id,
        track: U32,
        timestamp_ns: U64,
        value: F64,
    }
}

columns! {
    /// A phase skipped on import.
    Skipped {
        ph: Id,
        count: U64,
        first_line: U64,
    }
}

/// The import into `out`.
pub(super) fn write<'d>(out: &mut Out, s: &mut Strings<'d>, x: &'d ChromeImport) {
    out.u8(code(&x.form));
    out.u64(x.element_count);
    out.bool(x.closed);
    out.i64(x.origin_ns);
    out.bool(x.synthetic_root);
    let n = x.tracks.len();
    let mut c = Tracks::<Write>::new(n);
    for t in &x.tracks {
        c.pid.put(s, &t.pid);
        c.tid.put(s, &t.tid);
        c.process_name.opt(s, t.process_name.as_deref());
        c.thread_name.opt(s, t.thread_name.as_deref());
    }
    c.finish(n, out);
    let n = x.span_tracks.len();
    let mut c = SpanTracks::<Write>::new(n);
    for t in &x.span_tracks {
        c.track.put(*t);
    }
    c.finish(n, out);
    let n = x.instants.len();
    let mut c = Instants::<Write>::new(n);
    for i in &x.instants {
        c.line.u64(i.line);
        c.name.put(s, &i.event.name);
        c.track.u32(i.event.track);
        c.timestamp_ns.u64(i.event.timestamp_ns);
        c.scope.put(s, &i.event.scope);
    }
    c.finish(n, out);
    let n = x.counters.len();
    let mut c = Counters::<Write>::new(n);
    for i in &x.counters {
        c.line.u64(i.line);
        c.name.put(s, &i.event.name);
        c.series.put(s, &i.event.series);
        c.track.u32(i.event.track);
        c.timestamp_ns.u64(i.event.timestamp_ns);
        c.value.f64(i.event.value);
    }
    c.finish(n, out);
    let n = x.skipped.len();
    let mut c = Skipped::<Write>::new(n);
    for p in &x.skipped {
        c.ph.put(s, &p.ph);
        c.count.u64(p.count);
        c.first_line.u64(p.first_line);
    }
    c.finish(n, out);
}

/// The import.
#[inline(never)]
pub(super) fn read(r: &mut In<'_>, b: &[u8], s: Strs<'_>) -> Result<ChromeImport> {
    let form: ChromeForm = variant(r.u8()?)?;
    let element_count = r.u64()?;
    let closed = r.bool()?;
    let origin_ns = r.i64()?;
    let synthetic_root = r.bool()?;
    let t = r.table()?;
    let c = Tracks::<Read<'_>>::from(&t, b, s)?;
    let tracks = (0..t.n)
        .map(|i| {
            Ok(Track {
                pid: c.pid.get(i)?,
                tid: c.tid.get(i)?,
                process_name: c.process_name.opt(i)?.map(String::from),
                thread_name: c.thread_name.opt(i)?.map(String::from),
            })
        })
        .collect::<Result<_>>()?;
    let t = r.table()?;
    let span_tracks = SpanTracks::<Read<'_>>::from(&t, b, s)?
        .track
        .all()
        .collect();
    let t = r.table()?;
    let c = Instants::<Read<'_>>::from(&t, b, s)?;
    let instants = (0..t.n)
        .map(|i| {
            let event = Instant {
                name: String::from(c.name.get(i)?),
                track: c.track.get(i)?,
                timestamp_ns: c.timestamp_ns.get(i)?,
                scope: String::from(c.scope.get(i)?),
            };
            Ok(Lined::new(c.line.get(i)?, event))
        })
        .collect::<Result<_>>()?;
    let t = r.table()?;
    let c = Counters::<Read<'_>>::from(&t, b, s)?;
    let counters = (0..t.n)
        .map(|i| {
            let event = CounterSample {
                name: String::from(c.name.get(i)?),
                series: String::from(c.series.get(i)?),
                track: c.track.get(i)?,
                timestamp_ns: c.timestamp_ns.get(i)?,
                value: c.value.get(i)?,
            };
            Ok(Lined::new(c.line.get(i)?, event))
        })
        .collect::<Result<_>>()?;
    let t = r.table()?;
    let c = Skipped::<Read<'_>>::from(&t, b, s)?;
    let skipped = (0..t.n)
        .map(|i| {
            Ok(SkippedPhase {
                ph: String::from(c.ph.get(i)?),
                count: c.count.get(i)?,
                first_line: c.first_line.get(i)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(ChromeImport {
        form,
        element_count,
        closed,
        tracks,
        span_tracks,
        instants,
        counters,
        skipped,
        origin_ns,
        synthetic_root,
    })
}

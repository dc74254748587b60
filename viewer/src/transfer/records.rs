//! The records part of an inference profile: each event crosses as its JSON line (at most a
//! few thousand lines, with free-form JSON attributes), read back by the schema's own profile
//! reader, with the rules it violates.

use candle_trace_schema::format::profile::{decode_line, ProfileDocument, ProfileRecord};

use super::columns::{columns, Id, IdList, Read, Write, U64};
use super::wire::{broken, Result, Strings, Strs, Table};

columns! {
    /// A profile record's columns.
    Records {
        line: U64,
        json: Id,
        violations: IdList,
    }
}

/// One record, with its JSON line, into the columns.
#[inline]
pub(super) fn write<'d>(
    c: &mut Records<Write>,
    s: &mut Strings<'d>,
    (x, json): &(&'d ProfileRecord, &'d str),
) {
    c.line.u64(x.line);
    c.json.put(s, json);
    c.violations.ids(s, x.violations.iter().map(String::as_str));
}

/// A block of records, appended to `p`.
#[inline(never)]
pub(super) fn read(p: &mut ProfileDocument, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Records::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        let event = decode_line(c.json.get(i)?.as_bytes())
            .map_err(|e| broken(format!("profile record {i}: {e:?}")))?;
        p.records.push(ProfileRecord {
            line: c.line.get(i)?,
            event,
            violations: c
                .violations
                .get(i)?
                .map(|v| v.map(String::from))
                .collect::<Result<_>>()?,
        });
    }
    Ok(())
}

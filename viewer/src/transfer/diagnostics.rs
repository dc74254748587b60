//! The diagnostics part, last in every kind of document.

use candle_trace_schema::format::diagnostics::{Category, Diagnostic, Severity};

use super::columns::{columns, Code, Id, Read, Write, U64};
use super::wire::{Result, Strings, Strs, Table};

columns! {
    /// A diagnostic's columns.
    Diagnostics {
        line: U64,
        severity: Code<Severity>,
        category: Code<Category>,
        message: Id,
    }
}

/// One diagnostic into the columns.
#[inline]
pub(super) fn write<'d>(c: &mut Diagnostics<Write>, s: &mut Strings<'d>, d: &'d Diagnostic) {
    c.line.u64(d.line);
    c.severity.put(&d.severity);
    c.category.put(&d.category);
    c.message.put(s, &d.message);
}

/// A block of diagnostics, appended to `v`.
#[inline(never)]
pub(super) fn read(v: &mut Vec<Diagnostic>, t: &Table, b: &[u8], s: Strs<'_>) -> Result<()> {
    let c = Diagnostics::<Read<'_>>::from(t, b, s)?;
    for i in 0..t.n {
        v.push(Diagnostic {
            line: c.line.get(i)?,
            severity: c.severity.get(i)?,
            category: c.category.get(i)?,
            message: String::from(c.message.get(i)?),
        });
    }
    Ok(())
}

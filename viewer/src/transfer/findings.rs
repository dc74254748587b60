//! A trace's findings from the worker to the page (the worker ranks them after handing the
//! document over): each field in order, strings as [`Out::str`] writes them, so that the page
//! reads them without a JSON reader of their own.

use candle_trace_schema::analysis::findings::{Finding, Findings, Link, Stake};

use super::wire::{broken, In, Out, Result};

/// `findings` as bytes for [`decode_findings`].
pub fn encode_findings(findings: &Findings) -> Vec<u8> {
    let mut out = Out::default();
    out.u64(findings.findings.len() as u64);
    for f in &findings.findings {
        out.str(&f.rule);
        out.str(&f.title);
        let (kind, value) = match f.stake {
            Stake::Ns(v) => (0, v),
            Stake::Bytes(v) => (1, v),
            Stake::Count(v) => (2, v),
        };
        out.u8(kind);
        out.u64(value);
        strings(&mut out, &f.evidence);
        match &f.link {
            None => out.u8(0),
            Some(Link::Span { id, line }) => {
                out.u8(1);
                out.str(id);
                out.u64(*line);
            }
            Some(Link::Row { table, key }) => {
                out.u8(2);
                out.str(table);
                out.str(key);
            }
        }
    }
    out.u64(findings.left_out as u64);
    strings(&mut out, &findings.notes);
    out.buf
}

/// The findings [`encode_findings`] wrote; an error for bytes it did not write.
pub fn decode_findings(bytes: &[u8]) -> Result<Findings> {
    let mut at = In::new(bytes, 0);
    let n = count(&mut at)?;
    let mut findings = Vec::with_capacity(n);
    for _ in 0..n {
        let rule = at.str()?.to_string();
        let title = at.str()?.to_string();
        let stake = match (at.u8()?, at.u64()?) {
            (0, v) => Stake::Ns(v),
            (1, v) => Stake::Bytes(v),
            (2, v) => Stake::Count(v),
            (k, _) => return Err(broken(format!("{k} is not a kind of stake"))),
        };
        let evidence = read_strings(&mut at)?;
        let link = match at.u8()? {
            0 => None,
            1 => Some(Link::Span {
                id: at.str()?.to_string(),
                line: at.u64()?,
            }),
            2 => Some(Link::Row {
                table: at.str()?.to_string(),
                key: at.str()?.to_string(),
            }),
            k => return Err(broken(format!("{k} is not a kind of link"))),
        };
        findings.push(Finding {
            rule,
            title,
            stake,
            evidence,
            link,
        });
    }
    let left_out = at.len()?;
    let notes = read_strings(&mut at)?;
    if at.left() != 0 {
        return Err(broken("bytes after the findings"));
    }
    Ok(Findings {
        findings,
        left_out,
        notes,
    })
}

/// A list of strings: its length, then each.
fn strings(out: &mut Out, list: &[String]) {
    out.u64(list.len() as u64);
    for s in list {
        out.str(s);
    }
}

/// A list [`strings`] wrote.
fn read_strings(at: &mut In<'_>) -> Result<Vec<String>> {
    let n = count(at)?;
    let mut list = Vec::with_capacity(n);
    for _ in 0..n {
        list.push(at.str()?.to_string());
    }
    Ok(list)
}

/// A count of items that each take at least 8 bytes: a larger one is hostile (and would
/// reserve memory for nothing).
fn count(at: &mut In<'_>) -> Result<usize> {
    let n = at.len()?;
    if n > at.left() / 8 {
        return Err(broken(format!("{n} items cannot fit in the bytes left")));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::analysis::findings::trace_findings;
    use candle_trace_schema::format::document::TraceDocument;

    #[test]
    fn every_field_and_kind_crosses() {
        let findings = Findings {
            findings: vec![
                Finding {
                    rule: "backward_short".into(),
                    title: "The backward ran 0.3× the forward — é".into(),
                    stake: Stake::Ns(1_500),
                    evidence: vec!["forward 5.00 µs".into(), String::new()],
                    link: Some(Link::Span {
                        id: "bwd".into(),
                        line: 42,
                    }),
                },
                Finding {
                    rule: "peak".into(),
                    title: "t".into(),
                    stake: Stake::Bytes(u64::MAX),
                    evidence: vec![],
                    link: Some(Link::Row {
                        table: "memory".into(),
                        key: "cuda:0".into(),
                    }),
                },
                Finding {
                    rule: "frozen".into(),
                    title: String::new(),
                    stake: Stake::Count(3),
                    evidence: vec!["a".into()],
                    link: None,
                },
            ],
            left_out: 7,
            notes: vec!["gradients: none captured".into()],
        };
        assert_eq!(decode_findings(&encode_findings(&findings)), Ok(findings));
        let none = Findings::default();
        assert_eq!(decode_findings(&encode_findings(&none)), Ok(none));
    }

    #[test]
    fn the_fixtures_findings_cross_whole() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/findings_train.trace6.jsonl"
        ));
        let findings = trace_findings(&[&doc]);
        assert!(!findings.findings.is_empty());
        assert_eq!(decode_findings(&encode_findings(&findings)), Ok(findings));
    }

    #[test]
    fn bytes_it_did_not_write_are_an_error() {
        let bytes = encode_findings(&Findings {
            findings: vec![Finding {
                rule: "r".into(),
                title: "t".into(),
                stake: Stake::Ns(1),
                evidence: vec![],
                link: None,
            }],
            left_out: 0,
            notes: vec![],
        });
        // Every cut ends early; a byte more is left over.
        for cut in 0..bytes.len() {
            assert!(decode_findings(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_findings(&longer).is_err());
        // A stake kind that is none: byte 8 (count) + 8 + 1 (rule) + 8 + 1 (title).
        let mut bad = bytes.clone();
        bad[26] = 9;
        assert!(decode_findings(&bad).is_err());
        // A string that is not UTF-8.
        let mut bad = bytes;
        bad[16] = 0xff;
        assert!(decode_findings(&bad).is_err());
        // A count far larger than the bytes.
        let mut huge = Vec::new();
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_findings(&huge).is_err());
    }
}

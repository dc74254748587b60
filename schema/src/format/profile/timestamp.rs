//! A strict, hand-written check of RFC 3339 `date-time` strings (no date library in `no_std`).

/// True when `s` is an RFC 3339 `date-time`: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
///
/// `T`/`t` and `Z`/`z` are both accepted (RFC 3339 §5.6 NOTE); a space separator is not. The
/// fraction needs at least one digit. Ranges: month 1–12, day 1 to the length of that month
/// (February has 29 days in Gregorian leap years), hour 0–23, minute 0–59, second 0–60 (a leap
/// second), offset hour 0–23 and minute 0–59.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    // Shortest form: `YYYY-MM-DDTHH:MM:SSZ` (20 bytes).
    if b.len() < 20 {
        return false;
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        digits(&b[0..4]),
        digits(&b[5..7]),
        digits(&b[8..10]),
        digits(&b[11..13]),
        digits(&b[14..16]),
        digits(&b[17..19]),
    ) else {
        return false;
    };
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return false;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return false;
    }
    let mut rest = &b[19..];
    if let [b'.', tail @ ..] = rest {
        let n = tail.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &tail[n..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => matches!(
            (digits(&[*h1, *h2]), digits(&[*m1, *m2])),
            (Some(h), Some(m)) if h <= 23 && m <= 59
        ),
        _ => false,
    }
}

/// The decimal value of `b` when it is all ASCII digits (and not empty).
fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() {
        return None;
    }
    b.iter().try_fold(0u32, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_date_times() {
        for s in [
            "2026-01-01T00:00:00Z",
            "2026-01-01t00:00:00z",
            "2026-12-31T23:59:59.123456789Z",
            "2026-06-30T12:00:00+05:30",
            "2026-06-30T12:00:00.0-23:59",
            "2024-02-29T00:00:00Z",
            "2000-02-29T00:00:00Z",
            "2016-12-31T23:59:60Z",
            "0000-01-01T00:00:00Z",
        ] {
            assert!(is_rfc3339(s), "{s}");
        }
    }

    #[test]
    fn rejects_everything_else() {
        for s in [
            "",
            "2026-01-01",
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00+01",
            "2026-01-01T00:00:00.Z",
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:60:00Z",
            "2026-01-01T00:00:61Z",
            "2026-01-01T00:00:00+24:00",
            "2026-01-01T00:00:00+01:60",
            "2026-01-01T00:00:00ZZ",
            "2026-1-01T00:00:00Z",
            "+2026-01-01T00:00:00Z",
            "2026/01/01T00:00:00Z",
            "2026-01-01T00:00:00.5 Z",
            "２０２６-01-01T00:00:00Z",
        ] {
            assert!(!is_rfc3339(s), "{s}");
        }
    }
}

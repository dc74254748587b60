//! Wall-clock time: Unix nanoseconds and their RFC 3339 spelling, without a date library.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch now; 0 for a clock set before 1970, saturated at
/// `i64::MAX` (the year 2262).
pub(crate) fn unix_nanos_now() -> i64 {
    unix_nanos(SystemTime::now())
}

/// Nanoseconds since the Unix epoch of `t`; 0 before 1970, saturated at `i64::MAX`.
pub(crate) fn unix_nanos(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(_) => 0,
    }
}

/// A wall-clock anchor for a monotonic clock: the Unix time of `instant`, and how far off the
/// pairing can be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallAnchor {
    /// The monotonic reading the anchor belongs to.
    pub(crate) instant: Instant,
    /// Unix nanoseconds at `instant`.
    pub(crate) unix_nanos: i64,
    /// Upper bound of the pairing error: the time between the two monotonic reads that
    /// bracket the wall-clock read.
    pub(crate) max_error_nanos: u64,
}

impl WallAnchor {
    /// Read the monotonic clock, the wall clock, and the monotonic clock again.
    pub(crate) fn now() -> Self {
        let before = Instant::now();
        let wall = SystemTime::now();
        let after = Instant::now();
        let gap = after.duration_since(before);
        WallAnchor {
            // The midpoint is the best guess for when the wall clock was read.
            instant: before + gap / 2,
            unix_nanos: unix_nanos(wall),
            max_error_nanos: u64::try_from(gap.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Unix nanoseconds of a later (or earlier) monotonic reading, on this anchor.
    pub(crate) fn unix_nanos_at(&self, t: Instant) -> i64 {
        let delta = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        match t.checked_duration_since(self.instant) {
            Some(after) => self.unix_nanos.saturating_add(delta(after)),
            None => self
                .unix_nanos
                .saturating_sub(delta(self.instant.duration_since(t))),
        }
    }
}

/// RFC 3339 / ISO-8601 UTC spelling of Unix nanoseconds, with nanosecond precision:
/// `2026-01-01T00:00:00.000000000Z`. Negative values are clamped to the epoch.
pub(crate) fn rfc3339_from_unix_nanos(unix_nanos: i64) -> String {
    let mut out = Vec::with_capacity(30);
    write_rfc3339(&mut out, unix_nanos);
    // Only ASCII digits and separators were written.
    String::from_utf8(out).unwrap_or_default()
}

/// Append [`rfc3339_from_unix_nanos`]'s spelling to `out` (the profile writer's lines).
pub(crate) fn write_rfc3339(out: &mut Vec<u8>, unix_nanos: i64) {
    let nanos = unix_nanos.max(0);
    let secs = nanos / 1_000_000_000;
    let frac = nanos % 1_000_000_000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    // Each value is non-negative and below 10^width, except a year past 9999 (written whole).
    let digits = |out: &mut Vec<u8>, v: i64, width: u32| {
        let start = out.len();
        let mut v = v;
        for _ in 0..width {
            out.push(b'0' + (v % 10) as u8);
            v /= 10;
        }
        while v > 0 {
            out.push(b'0' + (v % 10) as u8);
            v /= 10;
        }
        out[start..].reverse();
    };
    digits(out, year, 4);
    out.push(b'-');
    digits(out, i64::from(month), 2);
    out.push(b'-');
    digits(out, i64::from(day), 2);
    out.push(b'T');
    digits(out, rem / 3600, 2);
    out.push(b':');
    digits(out, (rem % 3600) / 60, 2);
    out.push(b':');
    digits(out, rem % 60, 2);
    out.push(b'.');
    digits(out, frac, 9);
    out.push(b'Z');
}

/// [`write_rfc3339`] for a writer of many lines a second apart at most: the date and time of
/// day are spelled once per second, the nanoseconds per line.
#[derive(Debug, Default)]
pub(crate) struct Rfc3339Cache {
    /// The second spelled in `prefix` (`None` before the first line).
    second: Option<i64>,
    /// `YYYY-MM-DDTHH:MM:SS.` of that second.
    prefix: Vec<u8>,
}

impl Rfc3339Cache {
    /// Append the spelling of `unix_nanos` to `out`, as [`write_rfc3339`] does.
    pub(crate) fn write(&mut self, out: &mut Vec<u8>, unix_nanos: i64) {
        let nanos = unix_nanos.max(0);
        let second = nanos / 1_000_000_000;
        if self.second != Some(second) {
            self.prefix.clear();
            write_rfc3339(&mut self.prefix, second * 1_000_000_000);
            // Keep `…SS.`: drop the nine zeros and the `Z`.
            self.prefix.truncate(self.prefix.len() - 10);
            self.second = Some(second);
        }
        out.extend_from_slice(&self.prefix);
        let mut frac = nanos % 1_000_000_000;
        let mut digits = [b'0'; 10];
        digits[9] = b'Z';
        for d in digits[..9].iter_mut().rev() {
            *d = b'0' + (frac % 10) as u8;
            frac /= 10;
        }
        out.extend_from_slice(&digits);
    }
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), for non-negative day counts.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // `day` is in 1..=31 and `month` in 1..=12 by construction.
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::is_rfc3339;

    #[test]
    fn known_instants_are_spelled_right() {
        assert_eq!(rfc3339_from_unix_nanos(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            rfc3339_from_unix_nanos(1_767_225_600_000_000_000),
            "2026-01-01T00:00:00.000000000Z"
        );
        // 2024-02-29T23:59:59.5Z, a leap day.
        assert_eq!(
            rfc3339_from_unix_nanos(1_709_251_199_500_000_000),
            "2024-02-29T23:59:59.500000000Z"
        );
        assert_eq!(
            rfc3339_from_unix_nanos(951_782_400_000_000_001),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(
            rfc3339_from_unix_nanos(-5),
            "1970-01-01T00:00:00.000000000Z"
        );
    }

    #[test]
    fn every_day_over_decades_is_valid_rfc3339() {
        for day in (0..20_000).step_by(7) {
            let s = rfc3339_from_unix_nanos(day * 86_400_000_000_000 + 12_345);
            assert!(is_rfc3339(&s), "{s}");
        }
        assert!(is_rfc3339(&rfc3339_from_unix_nanos(unix_nanos_now())));
    }

    #[test]
    fn the_byte_writer_spells_as_format_does() {
        let formatted = |nanos: i64| {
            let nanos = nanos.max(0);
            let (secs, frac) = (nanos / 1_000_000_000, nanos % 1_000_000_000);
            let (year, month, day) = civil_from_days(secs / 86_400);
            let rem = secs % 86_400;
            format!(
                "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{frac:09}Z",
                rem / 3600,
                (rem % 3600) / 60,
                rem % 60
            )
        };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let nanos = (x >> 1) as i64;
            assert_eq!(rfc3339_from_unix_nanos(nanos), formatted(nanos));
        }
        assert_eq!(rfc3339_from_unix_nanos(i64::MAX), formatted(i64::MAX));
        // The cache, over times close together and far apart, spells the same.
        let mut cache = Rfc3339Cache::default();
        let mut t: i64 = 1_767_225_599_999_999_990;
        for step in [1, 7, 999_999, 1_000_000_000, 86_400_000_000_000, 3] {
            for _ in 0..40 {
                t += step;
                let mut out = Vec::new();
                cache.write(&mut out, t);
                assert_eq!(String::from_utf8(out).unwrap(), formatted(t));
            }
        }
        let mut out = Vec::new();
        cache.write(&mut out, -1);
        assert_eq!(String::from_utf8(out).unwrap(), formatted(0));
    }

    #[test]
    fn the_anchor_converts_monotonic_readings() {
        let a = WallAnchor::now();
        assert!(a.unix_nanos > 0);
        let later = a.instant + std::time::Duration::from_micros(3);
        assert_eq!(a.unix_nanos_at(later), a.unix_nanos + 3000);
        assert_eq!(a.unix_nanos_at(a.instant), a.unix_nanos);
    }
}

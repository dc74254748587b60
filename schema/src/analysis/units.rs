//! Human units for durations and sizes, shared by the CLI and the viewer.

use alloc::format;
use alloc::string::String;

/// A duration in ns as `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s` (three significant digits).
pub fn format_ns(ns: u64) -> String {
    const UNITS: [(f64, &str); 3] = [(1e9, "s"), (1e6, "ms"), (1e3, "µs")];
    if ns < 1_000 {
        return format!("{ns} ns");
    }
    let v = ns as f64;
    for (scale, unit) in UNITS {
        if v >= scale * 0.9995 {
            return format!("{} {unit}", three_digits(v / scale));
        }
    }
    format!("{ns} ns")
}

/// The output bytes of `count` ops of which `unknown` have no known size and the others add up
/// to `bytes`: `–` when none is known, `≥ ` and the known sum when some are not, else the sum
/// ([`format_bytes`]).
pub fn format_output_bytes(bytes: u64, unknown: u64, count: u64) -> String {
    if unknown == 0 {
        format_bytes(bytes)
    } else if unknown >= count {
        String::from("–")
    } else {
        format!("≥ {}", format_bytes(bytes))
    }
}

/// A size in bytes as `512 B`, `1.50 KiB`, `3.20 MiB`, `1.00 GiB` (binary units).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(f64, &str); 4] = [
        (1024.0 * 1024.0 * 1024.0 * 1024.0, "TiB"),
        (1024.0 * 1024.0 * 1024.0, "GiB"),
        (1024.0 * 1024.0, "MiB"),
        (1024.0, "KiB"),
    ];
    let v = bytes as f64;
    for (scale, unit) in UNITS {
        // From where the unit below would round to 1024 (1023.5 KiB is `1.00 MiB`, not `1024
        // KiB`), as `format_ns` carries at 999.5.
        if v >= scale * (1023.5 / 1024.0) {
            return format!("{} {unit}", three_digits(v / scale));
        }
    }
    format!("{bytes} B")
}

/// Three significant digits: 1.23, 12.3, 123.
fn three_digits(v: f64) -> String {
    if v >= 99.95 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(format_ns(0), "0 ns");
        assert_eq!(format_ns(999), "999 ns");
        assert_eq!(format_ns(1_000), "1.00 µs");
        assert_eq!(format_ns(12_345), "12.3 µs");
        assert_eq!(format_ns(999_999), "1.00 ms");
        assert_eq!(format_ns(4_560_000), "4.56 ms");
        assert_eq!(format_ns(1_234_000_000), "1.23 s");
        assert_eq!(format_ns(3_600_000_000_000), "3600 s");
    }

    #[test]
    fn sizes() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(10 * 1024 * 1024), "10.0 MiB");
        assert_eq!(format_bytes(1 << 30), "1.00 GiB");
        // The carry: 1023.49 KiB still rounds to 1023, 1023.5 KiB and above to the next unit.
        assert_eq!(format_bytes(1_048_063), "1023 KiB");
        assert_eq!(format_bytes(1_048_064), "1.00 MiB");
        assert_eq!(format_bytes(1_048_575), "1.00 MiB");
        assert_eq!(format_bytes(1_073_741_000), "1.00 GiB");
        assert_eq!(format_bytes(1023), "1023 B");
    }

    #[test]
    fn output_sizes_say_what_is_unknown() {
        assert_eq!(format_output_bytes(1536, 0, 3), "1.50 KiB");
        assert_eq!(format_output_bytes(1536, 1, 3), "≥ 1.50 KiB");
        assert_eq!(format_output_bytes(0, 3, 3), "–");
        assert_eq!(format_output_bytes(0, 0, 0), "0 B");
    }
}

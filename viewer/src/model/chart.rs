//! Chart geometry shared by the panels' SVG charts: linear scales, step-area and polyline path
//! strings, and column reduction (at most a few points per pixel column, so a path costs the
//! chart's width, not the event count). SVG user units; y grows downwards.

/// A linear map from a data interval onto a pixel interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// Data value at `px0`.
    pub d0: f64,
    /// Data value at `px1`.
    pub d1: f64,
    /// Pixel of `d0`.
    pub px0: f64,
    /// Pixel of `d1`.
    pub px1: f64,
}

impl Scale {
    /// `[d0, d1] → [px0, px1]`; a zero-width data interval is widened by 1.
    pub fn new(d0: f64, d1: f64, px0: f64, px1: f64) -> Self {
        let d1 = if d1 > d0 { d1 } else { d0 + 1.0 };
        Scale { d0, d1, px0, px1 }
    }

    /// Pixel of data value `v` (not clamped).
    pub fn px(&self, v: f64) -> f64 {
        self.px0 + (v - self.d0) / (self.d1 - self.d0) * (self.px1 - self.px0)
    }

    /// Data value at pixel `p`.
    pub fn value(&self, p: f64) -> f64 {
        self.d0 + (p - self.px0) / (self.px1 - self.px0) * (self.d1 - self.d0)
    }
}

/// A number for an SVG path: one decimal, no trailing `.0`.
pub fn num(v: f64) -> String {
    let mut s = String::new();
    push_num(&mut s, v);
    s
}

/// [`num`] appended to `out`. A path holds a few numbers per pixel column of every chart, and
/// a large trace's memory charts are built before its first frame: digits written straight
/// into the path rather than through `format!`, whose float formatting took 60 of the page's
/// 117 ms of memory views on a 10 MB trace (CHANGELOG).
pub fn push_num(out: &mut String, v: f64) {
    let tenths = (v * 10.0).round();
    // Tenths below 2^53 are exact integers, and one decimal of `tenths / 10` prints them.
    if !tenths.is_finite() || tenths.abs() >= 9.0e15 {
        // Not finite, or beyond any chart: the formatter's text.
        let r = tenths / 10.0;
        if r == r.trunc() {
            out.push_str(&(r as i64).to_string());
        } else {
            out.push_str(&format!("{r:.1}"));
        }
        return;
    }
    // Written back to front into one buffer, then appended at once (a `push` a character
    // was a call each in the page's size-built wasm).
    let t = tenths as i64;
    let mut buf = [0u8; 24];
    let mut at = buf.len();
    let mut n = t.unsigned_abs();
    if n % 10 != 0 {
        at -= 2;
        buf[at] = b'.';
        buf[at + 1] = b'0' + (n % 10) as u8;
    }
    n /= 10;
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if t < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    // ASCII digits, a sign and a point: always UTF-8.
    out.push_str(std::str::from_utf8(&buf[at..]).unwrap_or_default());
}

/// `{command}{x} {y}` appended to a path.
pub fn push_point(out: &mut String, command: char, x: f64, y: f64) {
    out.push(command);
    push_num(out, x);
    out.push(' ');
    push_num(out, y);
}

/// Indices of the points to draw of a series whose x pixels are `xs` (non-decreasing): per
/// pixel column, the first point, the point with the largest `key`, and the last point, in
/// order. Keeps every extreme visible while bounding the output by 3 × columns.
pub fn column_reduce(xs: &[f64], key: impl Fn(usize) -> u64) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < xs.len() {
        let col = xs[i].floor();
        let mut j = i;
        let mut best = i;
        while j < xs.len() && xs[j].floor() == col {
            if key(j) > key(best) {
                best = j;
            }
            j += 1;
        }
        out.push(i);
        if best != i {
            out.push(best);
        }
        if j - 1 != best && j - 1 != i {
            out.push(j - 1);
        }
        i = j;
    }
    out
}

/// Closed SVG path of the area between two step functions over the same points: the value at
/// `xs[i]` holds until `xs[i + 1]` (the last until `x_end`). `top` and `bottom` are y pixels.
pub fn step_band(xs: &[f64], top: &[f64], bottom: &[f64], x_end: f64) -> String {
    if xs.is_empty() {
        return String::new();
    }
    let mut d = String::new();
    push_point(&mut d, 'M', xs[0], bottom[0]);
    for i in 0..xs.len() {
        let next = xs.get(i + 1).copied().unwrap_or(x_end);
        push_point(&mut d, 'L', xs[i], top[i]);
        push_point(&mut d, 'L', next, top[i]);
    }
    for i in (0..xs.len()).rev() {
        let next = xs.get(i + 1).copied().unwrap_or(x_end);
        push_point(&mut d, 'L', next, bottom[i]);
        push_point(&mut d, 'L', xs[i], bottom[i]);
    }
    d.push('Z');
    d
}

/// Open SVG polyline path through the points.
pub fn polyline(points: &[(f64, f64)]) -> String {
    let mut d = String::new();
    for (i, &(x, y)) in points.iter().enumerate() {
        push_point(&mut d, if i == 0 { 'M' } else { 'L' }, x, y);
    }
    d
}

/// `[t - w, t + w]` with `w` = 2 % of `[start, end]` (at least 1 ns), clamped at 0: the range
/// the timeline shows when a chart point at `t` is clicked.
pub fn focus_range(t: u64, start_ns: u64, end_ns: u64) -> (u64, u64) {
    let w = (end_ns.saturating_sub(start_ns) / 50).max(1);
    (t.saturating_sub(w), t.saturating_add(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_round_trips() {
        let s = Scale::new(100.0, 300.0, 0.0, 800.0);
        assert_eq!(s.px(200.0), 400.0);
        assert_eq!(s.value(400.0), 200.0);
        let y = Scale::new(0.0, 0.0, 200.0, 0.0);
        assert_eq!(y.px(0.0), 200.0);
    }

    #[test]
    fn paths() {
        assert_eq!(num(1.25), "1.3");
        assert_eq!(num(2.0), "2");
        assert_eq!(num(0.04), "0");
        assert_eq!(num(-0.04), "0");
        assert_eq!(num(-0.25), "-0.3");
        assert_eq!(num(-12.0), "-12");
        assert_eq!(num(799.95), "800");
        assert_eq!(num(1234567.06), "1234567.1");
        assert_eq!(num(f64::NAN), "NaN");
        assert_eq!(
            step_band(&[0.0, 10.0], &[5.0, 2.0], &[9.0, 9.0], 20.0),
            "M0 9L0 5L10 5L10 2L20 2L20 9L10 9L10 9L0 9Z"
        );
        assert_eq!(polyline(&[(0.0, 1.0), (2.5, 3.0)]), "M0 1L2.5 3");
        assert_eq!(focus_range(500, 0, 1000), (480, 520));
        assert_eq!(focus_range(5, 0, 10), (4, 6));
    }

    /// `num` as it was written before `push_num`: the formatter's rounding of tenths.
    fn num_by_format(v: f64) -> String {
        let r = (v * 10.0).round() / 10.0;
        if r == r.trunc() {
            format!("{}", r as i64)
        } else {
            format!("{r:.1}")
        }
    }

    #[test]
    fn num_writes_what_the_formatter_writes() {
        // Pixel coordinates of every size and sign, halves included, and a few large values.
        let mut v = -2000.0;
        while v < 2000.0 {
            assert_eq!(num(v), num_by_format(v), "{v}");
            v += 0.01;
        }
        for v in [
            0.05,
            0.15,
            0.25,
            -0.05,
            1e9 + 0.35,
            -1e12 - 0.45,
            4.5e14,
            8.9e14 + 0.1,
        ] {
            assert_eq!(num(v), num_by_format(v), "{v}");
        }
    }

    #[test]
    fn reduction_keeps_column_extremes() {
        let xs = [0.1, 0.2, 0.3, 0.9, 1.5, 2.0];
        let keys = [1u64, 9, 2, 3, 4, 4];
        assert_eq!(column_reduce(&xs, |i| keys[i]), vec![0, 1, 3, 4, 5]);
    }
}

//! The flame chart's rectangles rasterised in wasm: a chart zoomed out over a realistic trace
//! paints thousands of small rectangles a frame, and one `fillRect` per rectangle (each also
//! rasterised by the browser) makes a frame cost grow with the rectangles. Filling an RGBA
//! buffer here and handing it over with one `putImageData` makes a frame cost its pixels.
//!
//! Coordinates are CSS pixels; the buffer is in device pixels (`scale` = the device pixel
//! ratio). Left and right edges are anti-aliased by coverage, as a canvas fills a rectangle
//! whose sides fall between pixels; top and bottom snap to the nearest device row (the chart's
//! rows are whole CSS pixels).

/// An RGBA image, not premultiplied (the layout of `ImageData`), that rectangles are filled
/// into. It keeps its allocation across frames.
#[derive(Debug, Clone, Default)]
pub struct Raster {
    width: usize,
    height: usize,
    /// The device row of the whole picture that is this raster's first row (a raster may hold
    /// one horizontal strip of a taller picture).
    top: usize,
    scale: f64,
    data: Vec<u8>,
}

/// A rectangle's device columns: those wholly inside it (`full.0 .. full.1`) and at most two
/// partly covered ones at its edges, with their coverage (`usize::MAX` when there is none).
#[derive(Debug, Clone, Copy)]
struct Columns {
    full: (usize, usize),
    partial: [(usize, f64); 2],
}

/// The red, green and blue of a `#rgb` or `#rrggbb` colour; `None` for other spellings.
pub fn rgb(hex: &str) -> Option<[u8; 3]> {
    let digits = hex.strip_prefix('#')?;
    let nibble = |i: usize| -> Option<u8> {
        let c = *digits.as_bytes().get(i)?;
        char::from(c).to_digit(16).map(|d| d as u8)
    };
    match digits.len() {
        3 => Some([nibble(0)? * 17, nibble(1)? * 17, nibble(2)? * 17]),
        6 => Some([
            nibble(0)? * 16 + nibble(1)?,
            nibble(2)? * 16 + nibble(3)?,
            nibble(4)? * 16 + nibble(5)?,
        ]),
        _ => None,
    }
}

impl Raster {
    /// An empty raster (0 × 0).
    pub fn new() -> Self {
        Raster::default()
    }

    /// Make the raster `width` × `height` device pixels for `scale` device pixels per CSS
    /// pixel, every pixel transparent.
    pub fn reset(&mut self, width: usize, height: usize, scale: f64) {
        self.reset_strip(width, height, scale, 0);
    }

    /// Make the raster the strip of device rows `top .. top + height` of a picture `width`
    /// device pixels wide, every pixel transparent: fills take the whole picture's CSS
    /// coordinates and keep only what falls in the strip. A tall chart is painted strip by
    /// strip, so the buffer stays as small as one strip.
    pub fn reset_strip(&mut self, width: usize, height: usize, scale: f64, top: usize) {
        self.width = width;
        self.height = height;
        self.top = top;
        self.scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
        self.data.clear();
        self.data.resize(width * height * 4, 0);
    }

    /// Width in device pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Height in device pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The picture's device row that is this raster's first row.
    pub fn top(&self) -> usize {
        self.top
    }

    /// The pixels, row by row, 4 bytes (R, G, B, A) each.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The pixel at device `(x, y)` of the raster (row `y` is the picture's row `top + y`),
    /// `None` outside.
    pub fn pixel(&self, x: usize, y: usize) -> Option<[u8; 4]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = (y * self.width + x) * 4;
        Some([
            self.data[i],
            self.data[i + 1],
            self.data[i + 2],
            self.data[i + 3],
        ])
    }

    /// The device rows of CSS `y .. y + h` inside the raster (`None` when none are).
    fn rows(&self, y: f64, h: f64) -> Option<(usize, usize)> {
        let top = self.top as f64;
        let (y0, y1) = (
            (y * self.scale).round() - top,
            ((y + h) * self.scale).round() - top,
        );
        if !(y0.is_finite() && y1.is_finite()) || y1 <= y0 {
            return None;
        }
        let (y0, y1) = (
            y0.max(0.0) as usize,
            y1.min(self.height as f64).max(0.0) as usize,
        );
        (y1 > y0).then_some((y0, y1))
    }

    /// The device columns of CSS `x .. x + w` inside the raster (`None` when none are).
    fn columns(&self, x: f64, w: f64) -> Option<Columns> {
        let (x0, x1) = (x * self.scale, (x + w) * self.scale);
        if !(x0.is_finite() && x1.is_finite()) || x1 <= x0 {
            return None;
        }
        let (x0, x1) = (x0.max(0.0), x1.min(self.width as f64));
        if x1 <= x0 {
            return None;
        }
        let (left, right) = (x0.floor() as usize, x1.floor() as usize);
        let mut c = Columns {
            full: (0, 0),
            partial: [(usize::MAX, 0.0); 2],
        };
        if left == right {
            // Both edges in one column.
            c.partial[0] = (left, x1 - x0);
        } else {
            c.full = (
                x0.ceil() as usize,
                (x1.floor() as usize).max(x0.ceil() as usize),
            );
            if (left as f64) < x0 {
                c.partial[0] = (left, x0.ceil() - x0);
            }
            if (right as f64) < x1 && right < self.width {
                c.partial[1] = (right, x1 - x1.floor());
            }
        }
        Some(c)
    }

    /// Fill `cols` of device row `row` with `colour` at opacity `alpha` (0 < alpha ≤ 1).
    fn fill_row(&mut self, row: usize, cols: &Columns, colour: [u8; 3], alpha: f64) {
        let line = &mut self.data[row * self.width * 4..(row + 1) * self.width * 4];
        let (from, to) = cols.full;
        if to > from {
            let cells = &mut line[from * 4..to * 4];
            if alpha >= 1.0 {
                let [r, g, b] = colour;
                for px in cells.chunks_exact_mut(4) {
                    px.copy_from_slice(&[r, g, b, 255]);
                }
            } else {
                for px in cells.chunks_exact_mut(4) {
                    blend(px, colour, alpha);
                }
            }
        }
        for &(col, cover) in &cols.partial {
            if col < self.width && cover > 0.0 {
                blend(&mut line[col * 4..col * 4 + 4], colour, alpha * cover);
            }
        }
    }

    /// Fill the CSS-pixel rectangle `(x, y, w, h)` with `colour` at opacity `alpha` (0 to 1),
    /// over what is there. Parts outside the raster are dropped; a rectangle with no area, or
    /// any coordinate not finite, fills nothing.
    pub fn fill_rect(&mut self, x: f64, y: f64, w: f64, h: f64, colour: [u8; 3], alpha: f64) {
        if alpha.is_nan() || alpha <= 0.0 {
            return;
        }
        let (Some((y0, y1)), Some(cols)) = (self.rows(y, h), self.columns(x, w)) else {
            return;
        };
        for row in y0..y1 {
            self.fill_row(row, &cols, colour, alpha.min(1.0));
        }
    }

    /// Fill the opaque rectangles `(x, w, colour)` that share the rows `y .. y + h` (a lane of
    /// the chart), in order: the same pixels as one [`Raster::fill_rect`] each. When those
    /// rows are alike before (a lane holds only the axis's vertical rules), the first row is
    /// filled and copied down, so a rectangle costs its width, not its area.
    pub fn fill_band(&mut self, y: f64, h: f64, rects: &[(f64, f64, [u8; 3])]) {
        let Some((y0, y1)) = self.rows(y, h) else {
            return;
        };
        let stride = self.width * 4;
        let first = &self.data[y0 * stride..(y0 + 1) * stride];
        let alike = (y0 + 1..y1).all(|row| &self.data[row * stride..(row + 1) * stride] == first);
        let painted = if alike { y0..y0 + 1 } else { y0..y1 };
        for &(x, w, colour) in rects {
            if let Some(cols) = self.columns(x, w) {
                for row in painted.clone() {
                    self.fill_row(row, &cols, colour, 1.0);
                }
            }
        }
        if alike {
            for row in y0 + 1..y1 {
                self.data
                    .copy_within(y0 * stride..(y0 + 1) * stride, row * stride);
            }
        }
    }

    /// Outline the rectangle `(x, y, w, h)` with an opaque `line_px`-wide line centred on its
    /// edges, as a canvas `strokeRect` does, but with every edge on whole device pixels (the
    /// line at least one pixel wide): four boxes, the top and bottom ones across the corners.
    /// A search can outline thousands of spans a frame, and whole pixels are copies, not
    /// blends.
    pub fn stroke_rect(&mut self, x: f64, y: f64, w: f64, h: f64, line_px: f64, colour: [u8; 3]) {
        let s = self.scale;
        let snap = |v: f64| (v * s).round();
        let line = (line_px * s).round().max(1.0);
        let (x0, x1) = (snap(x - line_px / 2.0), snap(x + w - line_px / 2.0));
        let (y0, y1) = (snap(y - line_px / 2.0), snap(y + h - line_px / 2.0));
        if !(x0.is_finite() && x1.is_finite() && y0.is_finite() && y1.is_finite()) {
            return;
        }
        let (x1, y1) = (x1.max(x0), y1.max(y0));
        self.fill_device(x0, x1 + line, y0, y0 + line, colour);
        self.fill_device(x0, x1 + line, y1, y1 + line, colour);
        self.fill_device(x0, x0 + line, y0 + line, y1, colour);
        self.fill_device(x1, x1 + line, y0 + line, y1, colour);
    }

    /// Fill the whole device pixels `x0 .. x1` × `y0 .. y1` of the picture with opaque
    /// `colour`, clipped to the raster.
    fn fill_device(&mut self, x0: f64, x1: f64, y0: f64, y1: f64, colour: [u8; 3]) {
        let top = self.top as f64;
        let (x0, x1) = (x0.max(0.0), x1.min(self.width as f64));
        let (y0, y1) = ((y0 - top).max(0.0), (y1 - top).min(self.height as f64));
        if x1 <= x0 || y1 <= y0 {
            return;
        }
        let cols = Columns {
            full: (x0 as usize, x1 as usize),
            partial: [(usize::MAX, 0.0); 2],
        };
        for row in y0 as usize..y1 as usize {
            self.fill_row(row, &cols, colour, 1.0);
        }
    }

    /// Draw the polyline `points` (CSS pixels, left to right, as the memory strip's column
    /// centres are) `line_px` thick: each segment as the box from one point's x to the next
    /// one's that spans both y's and half the thickness beyond them, so that a rise or fall
    /// between neighbouring columns is a continuous vertical run. A lone point is a dot one
    /// pixel wide.
    pub fn stroke_steps(&mut self, points: &[(f64, f64)], line_px: f64, colour: [u8; 3]) {
        let half = line_px / 2.0;
        if let [(x, y)] = points {
            self.fill_rect(x - 0.5, y - half, 1.0, line_px, colour, 1.0);
        }
        for pair in points.windows(2) {
            let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
            let (top, bottom) = (y0.min(y1), y0.max(y1));
            self.fill_rect(
                x0.min(x1),
                top - half,
                (x1 - x0).abs().max(1.0),
                bottom - top + line_px,
                colour,
                1.0,
            );
        }
    }
}

/// `colour` at opacity `a` (0 to 1, quantised to 1/255) over the pixel `px` (source-over,
/// not premultiplied). Over a transparent or an opaque pixel, which is nearly every pixel of
/// the chart, it is integer arithmetic.
fn blend(px: &mut [u8], colour: [u8; 3], a: f64) {
    let a8 = (a * 255.0).round().clamp(0.0, 255.0) as u32;
    match (a8, px[3]) {
        (0, _) => {}
        (_, 0) => {
            px[..3].copy_from_slice(&colour);
            px[3] = a8 as u8;
        }
        (_, 255) => {
            for (c, &src) in px[..3].iter_mut().zip(colour.iter()) {
                *c = ((u32::from(src) * a8 + u32::from(*c) * (255 - a8) + 127) / 255) as u8;
            }
        }
        (_, dst_alpha) => {
            let a = f64::from(a8) / 255.0;
            let da = f64::from(dst_alpha) / 255.0;
            let out_a = a + da * (1.0 - a);
            for (c, &src) in px[..3].iter_mut().zip(colour.iter()) {
                let v = (f64::from(src) * a + f64::from(*c) * da * (1.0 - a)) / out_a;
                *c = v.round().clamp(0.0, 255.0) as u8;
            }
            px[3] = (out_a * 255.0).round().clamp(0.0, 255.0) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RED: [u8; 3] = [255, 0, 0];
    const BLUE: [u8; 3] = [0, 0, 255];

    fn raster(w: usize, h: usize, scale: f64) -> Raster {
        let mut r = Raster::new();
        r.reset(w, h, scale);
        r
    }

    #[test]
    fn colours_are_read_from_hex() {
        assert_eq!(rgb("#9cc3f5"), Some([0x9c, 0xc3, 0xf5]));
        assert_eq!(rgb("#888"), Some([0x88, 0x88, 0x88]));
        assert_eq!(rgb("#0B1220"), Some([0x0b, 0x12, 0x20]));
        assert_eq!(rgb("red"), None);
        assert_eq!(rgb("#12345"), None);
        assert_eq!(rgb("#gg0000"), None);
        assert_eq!(rgb("#ééé"), None);
    }

    #[test]
    fn whole_pixel_rects_fill_exactly_their_pixels() {
        let mut r = raster(4, 3, 1.0);
        r.fill_rect(1.0, 1.0, 2.0, 1.0, RED, 1.0);
        for y in 0..3 {
            for x in 0..4 {
                let inside = y == 1 && (1..3).contains(&x);
                let want = if inside { [255, 0, 0, 255] } else { [0; 4] };
                assert_eq!(r.pixel(x, y), Some(want), "({x}, {y})");
            }
        }
        assert_eq!(r.pixel(4, 0), None);
        assert_eq!(r.data().len(), 4 * 3 * 4);
    }

    #[test]
    fn fractional_edges_are_covered_in_part() {
        // x 0.5 .. 2.25: column 0 half covered, column 1 whole, column 2 a quarter.
        let mut r = raster(4, 1, 1.0);
        r.fill_rect(0.5, 0.0, 1.75, 1.0, RED, 1.0);
        // On transparent, coverage c gives the colour at alpha round(255 c).
        assert_eq!(r.pixel(0, 0), Some([255, 0, 0, 128]));
        assert_eq!(r.pixel(1, 0), Some([255, 0, 0, 255]));
        assert_eq!(r.pixel(2, 0), Some([255, 0, 0, 64]));
        assert_eq!(r.pixel(3, 0), Some([0; 4]));
        // Both edges in one column: 2.25 .. 2.75 covers half of it.
        let mut r = raster(4, 1, 1.0);
        r.fill_rect(2.25, 0.0, 0.5, 1.0, RED, 1.0);
        assert_eq!(r.pixel(2, 0), Some([255, 0, 0, 128]));
        assert_eq!(r.pixel(1, 0), Some([0; 4]));
        assert_eq!(r.pixel(3, 0), Some([0; 4]));
    }

    #[test]
    fn translucent_fills_blend_over_what_is_there() {
        let mut r = raster(2, 1, 1.0);
        r.fill_rect(0.0, 0.0, 2.0, 1.0, BLUE, 1.0);
        r.fill_rect(0.0, 0.0, 1.0, 1.0, RED, 0.5);
        // Half red over opaque blue, at 128/255: red (255 × 128 + 127) / 255 = 128, blue
        // (255 × 127 + 127) / 255 = 127 (integer division), still opaque.
        assert_eq!(r.pixel(0, 0), Some([128, 0, 127, 255]));
        assert_eq!(r.pixel(1, 0), Some([0, 0, 255, 255]));
        // A quarter-opaque fill on transparent keeps its colour at alpha 0.25 × 255 → 64.
        let mut r = raster(1, 1, 1.0);
        r.fill_rect(0.0, 0.0, 1.0, 1.0, [85, 91, 102], 0.25);
        assert_eq!(r.pixel(0, 0), Some([85, 91, 102, 64]));
        // An opaque fill replaces it.
        r.fill_rect(0.0, 0.0, 1.0, 1.0, RED, 1.0);
        assert_eq!(r.pixel(0, 0), Some([255, 0, 0, 255]));
    }

    #[test]
    fn device_pixels_scale_the_css_rect_and_rows_snap() {
        // Scale 2: the CSS pixel (1, 1) is device pixels 2..4 × 2..4.
        let mut r = raster(6, 6, 2.0);
        r.fill_rect(1.0, 1.0, 1.0, 1.0, RED, 1.0);
        let filled: Vec<(usize, usize)> = (0..6)
            .flat_map(|y| (0..6).map(move |x| (x, y)))
            .filter(|&(x, y)| r.pixel(x, y) != Some([0; 4]))
            .collect();
        assert_eq!(filled, vec![(2, 2), (3, 2), (2, 3), (3, 3)]);
        // Rows round: y 0.4 .. 1.4 at scale 1 is row 0 only (0.4 → 0, 1.4 → 1).
        let mut r = raster(1, 3, 1.0);
        r.fill_rect(0.0, 0.4, 1.0, 1.0, RED, 1.0);
        assert_eq!(r.pixel(0, 0), Some([255, 0, 0, 255]));
        assert_eq!(r.pixel(0, 1), Some([0; 4]));
    }

    #[test]
    fn what_falls_outside_is_dropped_without_panicking() {
        let mut r = raster(3, 2, 1.0);
        r.fill_rect(-5.0, -5.0, 6.5, 6.0, RED, 1.0);
        // Clipped to x 0 .. 1.5, y 0 .. 1: column 0 whole, column 1 half, row 1 untouched.
        assert_eq!(r.pixel(0, 0), Some([255, 0, 0, 255]));
        assert_eq!(r.pixel(1, 0), Some([255, 0, 0, 128]));
        assert_eq!(r.pixel(0, 1), Some([0; 4]));
        r.fill_rect(2.5, 0.0, 100.0, 100.0, BLUE, 1.0);
        assert_eq!(r.pixel(2, 0), Some([0, 0, 255, 128]));
        assert_eq!(r.pixel(2, 1), Some([0, 0, 255, 128]));
        let before = r.data().to_vec();
        for (x, y, w, h) in [
            (10.0, 0.0, 1.0, 1.0),
            (0.0, 10.0, 1.0, 1.0),
            (0.0, 0.0, 0.0, 1.0),
            (0.0, 0.0, -1.0, 1.0),
            (f64::NAN, 0.0, 1.0, 1.0),
            (0.0, 0.0, f64::INFINITY, 1.0),
        ] {
            r.fill_rect(x, y, w, h, RED, 1.0);
        }
        r.fill_rect(0.0, 0.0, 1.0, 1.0, RED, 0.0);
        assert_eq!(r.data(), &before[..]);
        // A zero-sized raster takes fills too.
        let mut empty = Raster::new();
        empty.fill_rect(0.0, 0.0, 5.0, 5.0, RED, 1.0);
        assert!(empty.data().is_empty());
    }

    #[test]
    fn polylines_are_joined_runs_of_boxes() {
        // Column centres 0.5, 1.5, 2.5 at heights 1, 1, 4, 2 px thick in a 4 × 6 raster.
        let mut r = raster(4, 6, 1.0);
        r.stroke_steps(&[(0.5, 1.0), (1.5, 1.0), (2.5, 4.0)], 2.0, RED);
        let column = |x: usize| -> Vec<usize> {
            (0..6)
                .filter(|&y| r.pixel(x, y).is_some_and(|p| p[3] > 0))
                .collect()
        };
        // Segment one: x 0.5 .. 1.5, y 0 .. 2 (1 ± 1): half of column 0 and of column 1.
        assert_eq!(r.pixel(0, 0), Some([255, 0, 0, 128]));
        assert_eq!(column(0), vec![0, 1]);
        // Segment two: x 1.5 .. 2.5, y 0 .. 5 (from 1 − 1 to 4 + 1); column 1 gets its other
        // half from it on rows 0 and 1: half over the stored 128 is 127.5 + 128 × 0.5 = 191.5
        // → 192.
        assert_eq!(r.pixel(1, 0), Some([255, 0, 0, 192]));
        assert_eq!(r.pixel(1, 4), Some([255, 0, 0, 128]));
        assert_eq!(column(1), vec![0, 1, 2, 3, 4]);
        assert_eq!(column(2), vec![0, 1, 2, 3, 4]);
        assert_eq!(column(3), Vec::<usize>::new());
        // A lone point: a dot one pixel wide, centred.
        let mut r = raster(3, 3, 1.0);
        r.stroke_steps(&[(1.5, 1.5)], 1.0, BLUE);
        assert_eq!(r.pixel(1, 1), Some([0, 0, 255, 255]));
        let lit = (0..3)
            .flat_map(|y| (0..3).map(move |x| (x, y)))
            .filter(|&(x, y)| r.pixel(x, y).is_some_and(|p| p[3] > 0))
            .count();
        assert_eq!(lit, 1);
        // Nothing to draw.
        r.stroke_steps(&[], 1.0, RED);
        assert_eq!(r.pixel(1, 1), Some([0, 0, 255, 255]));
    }

    // proptest is a native-only dev-dependency.
    #[cfg(not(target_arch = "wasm32"))]
    proptest::proptest! {
        /// A band is the same pixels as its rectangles filled one by one, whether its rows
        /// were alike before or not.
        #[test]
        fn bands_paint_what_their_rects_paint(
            scale in proptest::sample::select(vec![1.0, 1.5, 2.0]),
            y in -3.0f64..12.0,
            h in 0.0f64..12.0,
            rects in proptest::collection::vec(
                (-5.0f64..25.0, 0.0f64..8.0, 0u8..4),
                0..12,
            ),
            under in proptest::option::of((0.0f64..20.0, 0.0f64..10.0, 0.0f64..5.0)),
        ) {
            let palette = [[255, 0, 0], [0, 0, 255], [10, 200, 30], [255, 255, 255]];
            let rects: Vec<(f64, f64, [u8; 3])> =
                rects.iter().map(|&(x, w, c)| (x, w, palette[c as usize])).collect();
            let mut a = raster(40, 24, scale);
            // A vertical rule (rows alike) and, sometimes, a box that makes the rows differ.
            a.fill_rect(7.0, 0.0, 1.0, 24.0, [85, 91, 102], 0.25);
            if let Some((x, by, w)) = under {
                a.fill_rect(x, by, w, 2.0, [0, 0, 0], 0.5);
            }
            let mut b = a.clone();
            a.fill_band(y, h, &rects);
            for &(x, w, c) in &rects {
                b.fill_rect(x, y, w, h, c, 1.0);
            }
            proptest::prop_assert_eq!(a.data(), b.data());
        }
    }

    #[test]
    fn strips_hold_their_rows_of_the_picture() {
        // A picture 2 wide and 6 tall at scale 1, painted as strips of 4 and 2 rows: each strip
        // holds the same pixels as the whole picture's rows.
        let fill = |r: &mut Raster| {
            r.fill_rect(0.0, 1.0, 2.0, 3.0, RED, 1.0);
            r.fill_band(3.0, 2.0, &[(0.5, 1.0, BLUE)]);
            r.fill_rect(1.0, 0.0, 1.0, 6.0, [0, 255, 0], 0.25);
        };
        let mut whole = raster(2, 6, 1.0);
        fill(&mut whole);
        for (top, height) in [(0, 4), (4, 2), (3, 3)] {
            let mut strip = Raster::new();
            strip.reset_strip(2, height, 1.0, top);
            fill(&mut strip);
            assert_eq!(strip.top(), top);
            for y in 0..height {
                for x in 0..2 {
                    assert_eq!(
                        strip.pixel(x, y),
                        whole.pixel(x, top + y),
                        "({x}, {top} + {y})"
                    );
                }
            }
        }
        // A strip past the picture's fills takes none.
        let mut below = Raster::new();
        below.reset_strip(2, 2, 1.0, 10);
        fill(&mut below);
        assert_eq!(below.data(), &[0u8; 16][..]);
    }

    #[test]
    fn outlines_are_a_frame_centred_on_the_edges() {
        // A 4 × 3 rectangle at (1, 1), 2 px line: the frame covers x 0 .. 6, y 0 .. 5, with a
        // 2 × 1 hole at x 2 .. 4, y 2 .. 3.
        let mut r = raster(7, 6, 1.0);
        r.stroke_rect(1.0, 1.0, 4.0, 3.0, 2.0, RED);
        let lit: Vec<String> = (0..6)
            .map(|y| {
                (0..7)
                    .map(|x| match r.pixel(x, y) {
                        Some([255, 0, 0, 255]) => '#',
                        Some([0, 0, 0, 0]) => '.',
                        other => panic!("({x}, {y}): {other:?}"),
                    })
                    .collect()
            })
            .collect();
        assert_eq!(
            lit,
            vec!["######.", "######.", "##..##.", "######.", "######.", "......."]
        );
        // Edges between pixels snap to the nearest: (0.6, 0.4, 2.2, 2.2) with a 1.5 px line
        // is the 2 px frame of x 0 .. 4 and y 0 .. 4 (0.6 − 0.75 → 0; 2.8 − 0.75 → 2, + 2;
        // 1.5 → 2 px wide), all opaque.
        let mut r = raster(5, 5, 1.0);
        r.stroke_rect(0.6, 0.4, 2.2, 2.2, 1.5, RED);
        let opaque = (0..5)
            .flat_map(|y| (0..5).map(move |x| (x, y)))
            .filter(|&(x, y)| r.pixel(x, y) == Some([255, 0, 0, 255]))
            .count();
        let any = (0..5)
            .flat_map(|y| (0..5).map(move |x| (x, y)))
            .filter(|&(x, y)| r.pixel(x, y) != Some([0; 4]))
            .count();
        assert_eq!((opaque, any), (16, 16));
        // A frame wholly around the raster, and one at NaN, touch no pixel and do not panic.
        let before = r.data().to_vec();
        r.stroke_rect(-10.0, -10.0, 100.0, 100.0, 3.0, BLUE);
        r.stroke_rect(f64::NAN, 0.0, 1.0, 1.0, 1.0, BLUE);
        assert_eq!(r.data(), &before[..]);
    }

    #[test]
    fn reset_clears_and_resizes() {
        let mut r = raster(2, 2, 1.0);
        r.fill_rect(0.0, 0.0, 2.0, 2.0, RED, 1.0);
        r.reset(3, 1, 1.0);
        assert_eq!((r.width(), r.height()), (3, 1));
        assert_eq!(r.data(), &[0u8; 12][..]);
    }
}

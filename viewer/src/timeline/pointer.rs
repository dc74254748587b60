//! The chart's pointer: a press starts a range drag (Shift, or on the time axis row) or a pan;
//! a move extends the range, pans, or hovers; a release without a drag is a click that selects
//! the span under the pointer.

use super::input::{drag_mode, range_from_drag, Drag, DragMode};
use super::scene::SLOP_PX;
use super::viewport::Viewport;

/// What the pointer is doing on the chart between a press and its release.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pointer {
    /// A pan (or a click, until it moves) from its press.
    pan: Option<Drag>,
    /// A range being dragged: the press's canvas x.
    range_press: Option<f64>,
}

/// What a pointer move does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Moved {
    /// A range drag: the range (axis ns) once the pointer is [`SLOP_PX`] from the press, `None`
    /// before.
    Range(Option<(u64, u64)>),
    /// A pan: the window to show (the tooltip goes).
    Panned(Viewport),
    /// No drag (or a press that has not moved): the tooltip follows the pointer.
    Hover,
}

impl Pointer {
    /// A press of the main button at canvas `(x, y)`, client x `client_x`, on `view`.
    pub fn down(&mut self, shift: bool, x: f64, y: f64, client_x: f64, view: Viewport) -> DragMode {
        let mode = drag_mode(shift, y);
        match mode {
            DragMode::Range => self.range_press = Some(x),
            DragMode::Pan => self.pan = Some(Drag::new(client_x, view)),
        }
        mode
    }

    /// The pointer moved to canvas x `x`, client x `client_x`, `view` showing.
    pub fn moved(&mut self, x: f64, client_x: f64, view: &Viewport) -> Moved {
        if let Some(press) = self.range_press {
            let dragged = (x - press).abs() >= SLOP_PX;
            return Moved::Range(dragged.then(|| range_from_drag(view, press, x)));
        }
        match self.pan.as_mut().and_then(|d| d.to(client_x)) {
            Some(v) => Moved::Panned(v),
            None => Moved::Hover,
        }
    }

    /// A release at canvas x `x`: whether it selects the span under the pointer (a click, or
    /// a Shift+click that did not drag).
    pub fn up(&mut self, x: f64) -> bool {
        if let Some(press) = self.range_press.take() {
            return (x - press).abs() < SLOP_PX;
        }
        self.pan.take().is_some_and(|d| d.is_click())
    }

    /// The pointer left the chart: any drag ends.
    pub fn leave(&mut self) {
        *self = Pointer::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::layout::AXIS_PX;

    /// 1000 ns over 100 px: 10 ns a pixel.
    fn view() -> Viewport {
        Viewport::fit(0, 1000, 100.0)
    }

    #[test]
    fn a_press_that_does_not_move_is_a_click() {
        let mut p = Pointer::default();
        let y = AXIS_PX + 10.0;
        assert_eq!(p.down(false, 50.0, y, 50.0, view()), DragMode::Pan);
        assert_eq!(
            p.moved(50.0 + SLOP_PX / 2.0, 50.0 + SLOP_PX / 2.0, &view()),
            Moved::Hover
        );
        assert!(p.up(51.0));
        // Released: a move hovers, a second release selects nothing.
        assert_eq!(p.moved(80.0, 80.0, &view()), Moved::Hover);
        assert!(!p.up(80.0));
    }

    #[test]
    fn a_pan_moves_the_window_and_does_not_select() {
        // 400 ns to 500 ns over 100 px: 1 ns a pixel.
        let zoomed = view().show_range(400, 500, 0.0);
        assert_eq!((zoomed.start_ns, zoomed.ns_per_px), (400.0, 1.0));
        let mut p = Pointer::default();
        p.down(false, 50.0, AXIS_PX + 10.0, 50.0, zoomed);
        // 20 px to the right: the window starts 20 ns earlier.
        let Moved::Panned(v) = p.moved(70.0, 70.0, &zoomed) else {
            panic!("not a pan")
        };
        assert_eq!(v.start_ns, 380.0);
        // Back where it started, it is still a drag, from the press's window.
        assert_eq!(p.moved(50.0, 50.0, &v), Moved::Panned(zoomed));
        assert!(!p.up(50.0));
    }

    #[test]
    fn shift_drags_a_range_and_a_shift_click_selects() {
        let mut p = Pointer::default();
        assert_eq!(
            p.down(true, 30.0, AXIS_PX + 10.0, 30.0, view()),
            DragMode::Range
        );
        assert_eq!(p.moved(31.0, 31.0, &view()), Moved::Range(None));
        // From 30 px back to 10 px: 100 ns to 300 ns, in order.
        assert_eq!(p.moved(10.0, 10.0, &view()), Moved::Range(Some((100, 300))));
        assert!(!p.up(10.0));
        p.down(true, 30.0, AXIS_PX + 10.0, 30.0, view());
        assert!(p.up(31.0));
    }

    #[test]
    fn a_press_on_the_axis_row_drags_a_range_and_leaving_ends_any_drag() {
        let mut p = Pointer::default();
        assert_eq!(
            p.down(false, 30.0, AXIS_PX - 1.0, 30.0, view()),
            DragMode::Range
        );
        p.leave();
        assert_eq!(p, Pointer::default());
        assert_eq!(p.moved(90.0, 90.0, &view()), Moved::Hover);
    }
}

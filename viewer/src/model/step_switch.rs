//! What the steps view keeps when it shows another step: the range selected on the chart,
//! moved onto the next step. Each step file has its own time origin (a step's recorder counts
//! from its own start), so a range is kept as offsets from its step's start (its earliest
//! span), clipped to the next step's extent; the chart's window moves the same way
//! ([`crate::timeline::viewport::Viewport::carried`]).

use candle_trace_schema::analysis::units::format_ns;

use crate::timeline::lanes::Lanes;

/// A step's extent on the chart's axis: its earliest span start and latest span end (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepExtent {
    /// Earliest span start (ns, the step file's own clock).
    pub start_ns: u64,
    /// Latest span end (ns).
    pub end_ns: u64,
}

impl StepExtent {
    /// The extent of a step laid out as `lanes`.
    pub fn of(lanes: &Lanes) -> Self {
        StepExtent {
            start_ns: lanes.start_ns,
            end_ns: lanes.end_ns,
        }
    }
}

/// A range `[start_ns, end_ns]` of one step on the next step shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarriedRange {
    /// Wholly inside the next step: the same offsets from its start.
    Kept((u64, u64)),
    /// Partly past the next step's end: the part inside it.
    Clipped((u64, u64)),
    /// Wholly past the next step's end: nothing of it is left.
    Outside,
}

impl CarriedRange {
    /// The range to select on the next step (`None` when nothing is left).
    pub fn range(self) -> Option<(u64, u64)> {
        match self {
            CarriedRange::Kept(r) | CarriedRange::Clipped(r) => Some(r),
            CarriedRange::Outside => None,
        }
    }
}

/// `range` of the step spanning `from`, at the same offsets from the start of the step
/// spanning `to`, clipped to it.
pub fn carry_range(range: (u64, u64), from: StepExtent, to: StepExtent) -> CarriedRange {
    let at = |ns: u64| to.start_ns.saturating_add(ns.saturating_sub(from.start_ns));
    let (start, end) = (at(range.0), at(range.1));
    let (clipped_start, clipped_end) = (start.max(to.start_ns), end.min(to.end_ns));
    if clipped_start >= clipped_end {
        CarriedRange::Outside
    } else if (clipped_start, clipped_end) == (start, end) {
        CarriedRange::Kept((start, end))
    } else {
        CarriedRange::Clipped((clipped_start, clipped_end))
    }
}

/// The range bar's note on a range carried onto another step, and the range it speaks of
/// (`None`: the range was cleared); shown while the range is still that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeNote {
    /// The range selected on the next step.
    pub range: Option<(u64, u64)>,
    /// What became of it.
    pub text: String,
}

/// What the range bar says about a range carried onto step `step` spanning `to` (`range` as
/// it was, on the step spanning `from`): nothing when it was kept whole; else the cut or the
/// clearing, in offsets from each step's start as the chart shows them.
pub fn carried_note(
    carried: CarriedRange,
    range: (u64, u64),
    from: StepExtent,
    step: &str,
    to: StepExtent,
) -> Option<RangeNote> {
    let offset = |ns: u64| format_ns(ns.saturating_sub(from.start_ns));
    let length = format_ns(to.end_ns.saturating_sub(to.start_ns));
    let text = match carried {
        CarriedRange::Kept(_) => return None,
        CarriedRange::Clipped(_) => format!("clipped to step {step}'s end: it lasts {length}"),
        CarriedRange::Outside => format!(
            "The range {} – {} was cleared: step {step} lasts {length}",
            offset(range.0),
            offset(range.1)
        ),
    };
    Some(RangeNote {
        range: carried.range(),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn extent(start_ns: u64, end_ns: u64) -> StepExtent {
        StepExtent { start_ns, end_ns }
    }

    #[test]
    fn a_range_inside_the_next_step_keeps_its_offsets() {
        // steps_outlier: step 2 spans 0 – 1 000 000 ns, step 6 0 – 1 600 000 ns.
        let r = carry_range(
            (200_000, 400_000),
            extent(0, 1_000_000),
            extent(0, 1_600_000),
        );
        assert_eq!(r, CarriedRange::Kept((200_000, 400_000)));
        // Steps on their own clocks: step A starts at 5 s, step B at 9 s. 5.0002 s – 5.0004 s
        // on A is 200 µs – 400 µs from its start: 9.0002 s – 9.0004 s on B.
        let r = carry_range(
            (5_000_200_000, 5_000_400_000),
            extent(5_000_000_000, 5_001_000_000),
            extent(9_000_000_000, 9_000_900_000),
        );
        assert_eq!(r, CarriedRange::Kept((9_000_200_000, 9_000_400_000)));
        assert_eq!(r.range(), Some((9_000_200_000, 9_000_400_000)));
    }

    #[test]
    fn a_range_past_the_next_steps_end_is_clipped_or_cleared() {
        // Step 6 (0 – 1 600 000 ns) to step 4 (0 – 1 000 000 ns): 800 µs – 1.2 ms keeps
        // 800 µs – 1 ms; 1.2 ms – 1.5 ms is wholly past its end.
        let (six, four) = (extent(0, 1_600_000), extent(0, 1_000_000));
        assert_eq!(
            carry_range((800_000, 1_200_000), six, four),
            CarriedRange::Clipped((800_000, 1_000_000))
        );
        let gone = carry_range((1_200_000, 1_500_000), six, four);
        assert_eq!(gone, CarriedRange::Outside);
        assert_eq!(gone.range(), None);
        // A range ending exactly at the next step's end is whole; one starting there is gone.
        assert_eq!(
            carry_range((900_000, 1_000_000), six, four),
            CarriedRange::Kept((900_000, 1_000_000))
        );
        assert_eq!(
            carry_range((1_000_000, 1_100_000), six, four),
            CarriedRange::Outside
        );
        // On shifted clocks: A from 2 s, B from 7 s lasting 500 µs; 2.0004 s – 2.0009 s is
        // 400 µs – 900 µs from A's start: 7.0004 s – 7.0005 s on B.
        assert_eq!(
            carry_range(
                (2_000_400_000, 2_000_900_000),
                extent(2_000_000_000, 2_001_000_000),
                extent(7_000_000_000, 7_000_500_000)
            ),
            CarriedRange::Clipped((7_000_400_000, 7_000_500_000))
        );
    }

    #[test]
    fn the_range_bar_says_what_became_of_the_range() {
        let (six, four) = (extent(0, 1_600_000), extent(0, 1_000_000));
        let kept = carry_range((100_000, 200_000), six, four);
        assert_eq!(carried_note(kept, (100_000, 200_000), six, "4", four), None);
        let clipped = carry_range((800_000, 1_200_000), six, four);
        assert_eq!(
            carried_note(clipped, (800_000, 1_200_000), six, "4", four),
            Some(RangeNote {
                range: Some((800_000, 1_000_000)),
                text: "clipped to step 4's end: it lasts 1.00 ms".into()
            })
        );
        // Offsets from step A's start (3 s): 1.2 ms – 1.5 ms.
        let a = extent(3_000_000_000, 3_001_600_000);
        let gone = carry_range((3_001_200_000, 3_001_500_000), a, four);
        assert_eq!(
            carried_note(gone, (3_001_200_000, 3_001_500_000), a, "4", four),
            Some(RangeNote {
                range: None,
                text: "The range 1.20 ms – 1.50 ms was cleared: step 4 lasts 1.00 ms".into()
            })
        );
    }
}

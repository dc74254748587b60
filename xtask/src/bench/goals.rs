//! The goals of BENCHMARKS.md and how a measurement is judged against them.
//!
//! A goal is met only by a number that was measured: a figure that is missing or not a number
//! is "not measured", and a peer that failed for any reason other than running out of time is
//! an error of the run, never a win. A peer that ran out of time gives a lower bound on the
//! ratio (the time limit over our time), which meets a ratio goal only when the bound itself
//! reaches it.

/// Native read + validate + summarise: MB/s on one core.
pub(crate) const PARSE_MB_S: f64 = 400.0;
/// ... and at least this many times the `serde_json::Value` peer's MB/s.
pub(crate) const PARSE_VS_PEER: f64 = 4.0;
/// Span cost, recording on: at most this fraction of puffin's, measured in the same run.
pub(crate) const SPAN_VS_PUFFIN: f64 = 0.7;
/// Span cost, recording off: ns per span.
pub(crate) const SPAN_OFF_NS: f64 = 2.0;
/// A captured training update: at most this many percent over the uncaptured one.
pub(crate) const TRAIN_OVERHEAD_PCT: f64 = 5.0;
/// A module span at detail `latency`: ns on the serving thread.
pub(crate) const MODULE_SPAN_NS: f64 = 300.0;
/// Served requests of the tiny Llama: at most this many percent over uncaptured.
pub(crate) const SERVE_OVERHEAD_PCT: f64 = 10.0;
/// CLI `summary` of the 400 MB trace: MB/s, wall clock.
pub(crate) const SUMMARY_MB_S: f64 = 400.0;
/// ... with a peak resident set of at most this many times the file.
pub(crate) const SUMMARY_RSS_VS_FILE: f64 = 1.2;
/// The viewer's memory after opening (page + worker, after GC): at most this times the file.
pub(crate) const VIEWER_MEMORY_VS_FILE: f64 = 1.2;
/// Parse in the worker: MB/s, for files of at least [`WORKER_PARSE_FROM_BYTES`].
pub(crate) const WORKER_PARSE_MB_S: f64 = 150.0;
/// The worker-parse goal holds for the 100 MB and 1 GB files, not the 10 MB one.
pub(crate) const WORKER_PARSE_FROM_BYTES: f64 = 50e6;
/// Frames at 1M spans, unpaced: p95 in ms.
pub(crate) const FRAME_P95_MS: f64 = 12.0;
/// The page's wasm (loaded before its first frame), gzip -9: bytes (issue #40).
pub(crate) const WASM_GZIP_BYTES: f64 = 600e3;

/// What a measurement says about its goal.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Measured, and the number reaches the goal.
    Met,
    /// Measured, and the number misses the goal.
    NotMet,
    /// No number to judge (not run, reused nothing, or a bound that decides nothing): why.
    NotMeasured(String),
    /// The run failed (ours or the peer), for a reason other than the peer's time limit.
    Error(String),
}

impl Verdict {
    /// The table cell.
    pub(crate) fn cell(&self) -> String {
        match self {
            Verdict::Met => "yes".into(),
            Verdict::NotMet => "**no**".into(),
            Verdict::NotMeasured(why) => format!("not measured ({why})"),
            Verdict::Error(why) => format!("**error**: {why}"),
        }
    }

    /// All of `verdicts` together: an error wins, then a miss, then a missing number; met
    /// only when every part is met.
    pub(crate) fn all(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
        let mut out = Verdict::Met;
        for v in verdicts {
            out = match (out, v) {
                (e @ Verdict::Error(_), _) | (_, e @ Verdict::Error(_)) => e,
                (Verdict::NotMet, _) | (_, Verdict::NotMet) => Verdict::NotMet,
                (n @ Verdict::NotMeasured(_), _) | (_, n @ Verdict::NotMeasured(_)) => n,
                (Verdict::Met, Verdict::Met) => Verdict::Met,
            };
        }
        out
    }
}

/// A finite measured number, or why there is none.
fn measured(value: Option<f64>) -> Result<f64, Verdict> {
    match value {
        Some(v) if v.is_finite() => Ok(v),
        Some(_) => Err(Verdict::NotMeasured("not a number".into())),
        None => Err(Verdict::NotMeasured("no result".into())),
    }
}

/// Goal `value ≥ goal`.
pub(crate) fn at_least(value: Option<f64>, goal: f64) -> Verdict {
    match measured(value) {
        Ok(v) if v >= goal => Verdict::Met,
        Ok(_) => Verdict::NotMet,
        Err(v) => v,
    }
}

/// Goal `value ≤ goal`.
pub(crate) fn at_most(value: Option<f64>, goal: f64) -> Verdict {
    match measured(value) {
        Ok(v) if v <= goal => Verdict::Met,
        Ok(_) => Verdict::NotMet,
        Err(v) => v,
    }
}

/// `a / b` when both are measured and `b` is positive.
pub(crate) fn ratio_of(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

/// How one tool's attempt to open a file ended (`bench.mjs`'s `opened` / `reason` /
/// `median_ms`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Open {
    /// Opened every time: median ms.
    Opened(f64),
    /// Still not open when the harness's limit of this many seconds ran out.
    TimedOut(f64),
    /// Failed otherwise (crashed, refused the file, the page threw): the reason.
    Failed(String),
}

impl Open {
    /// Read one tool's result object.
    pub(crate) fn of(v: &serde_json::Value) -> Open {
        let reason = v["reason"].as_str().unwrap_or("no reason given");
        match (v["opened"].as_bool(), v["median_ms"].as_f64()) {
            (Some(true), Some(ms)) if ms.is_finite() => Open::Opened(ms),
            (Some(true), _) => Open::Failed("opened but no time was recorded".into()),
            _ => match limit_s(reason) {
                Some(s) => Open::TimedOut(s),
                None => Open::Failed(reason.to_string()),
            },
        }
    }
}

/// The limit in seconds of a "not open after N s" reason (the only wording `bench.mjs` uses
/// for its time limit).
fn limit_s(reason: &str) -> Option<f64> {
    reason
        .strip_prefix("not open after ")?
        .strip_suffix(" s")?
        .parse()
        .ok()
}

/// A trace at most this large (the 17 KB fixture) measures each page's floor: what opening
/// costs before the file's size counts (the page and its scripts, the wasm, a worker, the first
/// layout and paint). Its goal is our time alone; it also shows whether a ratio goal at 10 MB
/// can be reached at all ([`floor_note`]).
pub(crate) const FLOOR_MAX_BYTES: f64 = 1e6;

/// The open-time goal of a file of `trace_bytes` (issue #40): ours opens within `seconds`, and
/// where `ratio` is set, speedscope's time is at least that many times ours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OpenGoal {
    pub(crate) seconds: f64,
    pub(crate) ratio: Option<f64>,
    /// Whether speedscope failing to open the file is an error of the run (it is expected to
    /// give up on the 1 GB file).
    pub(crate) peer_must_open: bool,
}

impl OpenGoal {
    /// ≤ 0.25 s up to [`FLOOR_MAX_BYTES`] (the page's floor); ≤ 0.5 s and ≥ 2.5× up to 20 MB;
    /// ≤ 1.5 s and ≥ 25× up to 500 MB; ≤ 10 s above.
    pub(crate) fn for_size(trace_bytes: f64) -> OpenGoal {
        let (seconds, ratio) = if trace_bytes <= FLOOR_MAX_BYTES {
            (0.25, None)
        } else if trace_bytes <= 20e6 {
            (0.5, Some(2.5))
        } else if trace_bytes <= 500e6 {
            (1.5, Some(25.0))
        } else {
            (10.0, None)
        };
        OpenGoal {
            seconds,
            ratio,
            peer_must_open: trace_bytes <= 500e6,
        }
    }

    /// The goal column.
    pub(crate) fn cell(self) -> String {
        match self.ratio {
            Some(r) => format!("ours ≤ {} s and ≥ {r}× speedscope", self.seconds),
            None => format!("ours ≤ {} s", self.seconds),
        }
    }
}

/// The ratio cell (speedscope's time / ours) and the verdict of an open-time row: our time
/// against the goal's seconds and, where it has one, the ratio against its ratio. A peer that
/// failed is an error of the run unless the goal expects it to give up.
pub(crate) fn open_verdict(ours: &Open, peer: &Open, goal: OpenGoal) -> (String, Verdict) {
    let ours_ms = match ours {
        Open::Opened(ms) => *ms,
        Open::TimedOut(s) => {
            return (
                "—".into(),
                Verdict::Error(format!("ours not open after {s} s")),
            )
        }
        Open::Failed(why) => return ("—".into(), Verdict::Error(format!("ours failed: {why}"))),
    };
    let (cell, ratio_verdict) = match peer {
        Open::Opened(peer_ms) => {
            let r = peer_ms / ours_ms;
            let v = goal.ratio.map_or(Verdict::Met, |g| at_least(Some(r), g));
            (format!("{r:.2}×"), v)
        }
        Open::TimedOut(limit_s) => {
            // speedscope took longer than the limit: the ratio is at least limit / ours.
            let bound = limit_s * 1e3 / ours_ms;
            let v = match goal.ratio {
                Some(g) if bound >= g => Verdict::Met,
                Some(_) => Verdict::NotMeasured(format!(
                    "speedscope not open after {limit_s} s: the ratio is only known to be > {bound:.1}×"
                )),
                None => Verdict::Met,
            };
            (
                format!("> {bound:.1}× (speedscope not open after {limit_s} s)"),
                v,
            )
        }
        Open::Failed(why) => (
            format!("error: speedscope {why}"),
            if goal.peer_must_open {
                Verdict::Error(format!("speedscope failed: {why}"))
            } else {
                Verdict::Met
            },
        ),
    };
    let time_verdict = at_most(Some(ours_ms / 1e3), goal.seconds);
    (cell, Verdict::all([time_verdict, ratio_verdict]))
}

/// Why a ratio goal missed by `verdict` cannot be met by any reader, only by a page that starts
/// faster: our floor (`floor_ms`, the same run's median open of the floor's trace, nearly all
/// of it fixed cost) is already over the time the goal allows (`peer_ms / ratio`). `None` when
/// the goal is met, has no ratio, or the floor leaves room.
pub(crate) fn floor_note(
    verdict: &Verdict,
    goal: OpenGoal,
    peer: &Open,
    floor_ms: Option<f64>,
) -> Option<String> {
    let (Some(r), Verdict::NotMet, Open::Opened(peer_ms), Some(floor)) =
        (goal.ratio, verdict, peer, floor_ms)
    else {
        return None;
    };
    let allowed = peer_ms / r;
    (floor.is_finite() && floor > allowed).then(|| {
        format!(
            "below our floor: {r}× needs ≤ {:.2} s, and ours opens the floor's trace in {:.2} s",
            allowed / 1e3,
            floor / 1e3
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_goal_is_met_only_by_a_measured_number() {
        assert_eq!(at_least(Some(400.0), 400.0), Verdict::Met);
        assert_eq!(at_least(Some(399.9), 400.0), Verdict::NotMet);
        assert!(matches!(at_least(None, 400.0), Verdict::NotMeasured(_)));
        assert!(matches!(
            at_least(Some(f64::NAN), 400.0),
            Verdict::NotMeasured(_)
        ));
        assert!(matches!(
            at_most(Some(f64::INFINITY), 2.0),
            Verdict::NotMeasured(_)
        ));
        assert_eq!(at_most(Some(2.0), 2.0), Verdict::Met);
        assert_eq!(at_most(Some(2.01), 2.0), Verdict::NotMet);
        // A missing peer leaves the ratio unmeasured, and a zero peer is no ratio either.
        assert_eq!(ratio_of(Some(1.0), None), None);
        assert_eq!(ratio_of(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio_of(Some(3.0), Some(2.0)), Some(1.5));
    }

    #[test]
    fn all_needs_every_part_met() {
        let nm = || Verdict::NotMeasured("x".into());
        assert_eq!(Verdict::all([Verdict::Met, Verdict::Met]), Verdict::Met);
        assert_eq!(Verdict::all([Verdict::Met, nm()]), nm());
        assert_eq!(Verdict::all([nm(), Verdict::NotMet]), Verdict::NotMet);
        assert_eq!(
            Verdict::all([Verdict::NotMet, Verdict::Error("e".into()), nm()]),
            Verdict::Error("e".into())
        );
        // 450 MB/s but only 3.5× the peer: the two-part parse goal is not met.
        assert_eq!(
            Verdict::all([
                at_least(Some(450.0), PARSE_MB_S),
                at_least(Some(3.5), PARSE_VS_PEER)
            ]),
            Verdict::NotMet
        );
    }

    #[test]
    fn open_results_are_read_by_reason() {
        assert_eq!(
            Open::of(&json!({"opened": true, "median_ms": 900.0})),
            Open::Opened(900.0)
        );
        assert_eq!(
            Open::of(&json!({"opened": false, "reason": "not open after 600 s"})),
            Open::TimedOut(600.0)
        );
        assert_eq!(
            Open::of(&json!({"opened": false, "reason": "speedscope could not import the file"})),
            Open::Failed("speedscope could not import the file".into())
        );
        // Opened without a time is not a measurement.
        assert!(matches!(
            Open::of(&json!({"opened": true, "median_ms": null})),
            Open::Failed(_)
        ));
        assert!(matches!(Open::of(&json!(null)), Open::Failed(_)));
    }

    #[test]
    fn a_peer_that_fails_is_an_error_not_a_win() {
        let goal = OpenGoal::for_size(100e6);
        let (cell, v) = open_verdict(
            &Open::Opened(1000.0),
            &Open::Failed("could not import the file".into()),
            goal,
        );
        assert!(cell.starts_with("error: speedscope"), "{cell}");
        assert!(matches!(v, Verdict::Error(_)));
        // On the floor's trace too, though its goal is our time alone.
        let (_, v) = open_verdict(
            &Open::Opened(200.0),
            &Open::Failed("could not import the file".into()),
            OpenGoal::for_size(17_220.0),
        );
        assert!(matches!(v, Verdict::Error(_)));
    }

    #[test]
    fn a_timed_out_peer_gives_a_lower_bound_that_must_reach_the_goal() {
        let goal = OpenGoal::for_size(100e6);
        // A 60 s limit, ours 1.2 s: speedscope is > 50× slower, which meets ≥ 25×.
        let (cell, v) = open_verdict(&Open::Opened(1200.0), &Open::TimedOut(60.0), goal);
        assert_eq!(v, Verdict::Met);
        assert!(cell.starts_with("> 50.0×"), "{cell}");
        // A 20 s limit and ours 1.2 s: only > 16.7× is known, which decides nothing about ≥ 25×.
        let (cell, v) = open_verdict(&Open::Opened(1200.0), &Open::TimedOut(20.0), goal);
        assert!(matches!(v, Verdict::NotMeasured(_)), "{v:?}");
        assert!(cell.starts_with("> 16.7×"), "{cell}");
    }

    #[test]
    fn open_goals_are_our_time_and_where_set_a_ratio() {
        let (floor, ten, hundred, giga) = (
            OpenGoal::for_size(17_220.0),
            OpenGoal::for_size(10e6),
            OpenGoal::for_size(100e6),
            OpenGoal::for_size(1000e6),
        );
        assert_eq!((floor.seconds, floor.ratio), (0.25, None));
        assert_eq!((ten.seconds, ten.ratio), (0.5, Some(2.5)));
        assert_eq!((hundred.seconds, hundred.ratio), (1.5, Some(25.0)));
        assert_eq!((giga.seconds, giga.ratio), (10.0, None));
        assert_eq!(ten.cell(), "ours ≤ 0.5 s and ≥ 2.5× speedscope");
        assert_eq!(giga.cell(), "ours ≤ 10 s");
        // The floor: 0.33 s is over 0.25 s, whatever the peer (0.55 / 0.33 = 1.67×).
        let (cell, v) = open_verdict(&Open::Opened(330.0), &Open::Opened(550.0), floor);
        assert_eq!((cell.as_str(), v), ("1.67×", Verdict::NotMet));
        assert_eq!(
            open_verdict(&Open::Opened(240.0), &Open::Opened(550.0), floor).1,
            Verdict::Met
        );
        // 10 MB: 0.45 s is within 0.5 s, but 1.0 / 0.45 = 2.22× is under 2.5×.
        let (cell, v) = open_verdict(&Open::Opened(450.0), &Open::Opened(1000.0), ten);
        assert_eq!((cell.as_str(), v), ("2.22×", Verdict::NotMet));
        // 0.85 s against 1.78 s: 2.09×, and over 0.5 s.
        assert_eq!(
            open_verdict(&Open::Opened(850.0), &Open::Opened(1780.0), ten).1,
            Verdict::NotMet
        );
        // 0.4 s against 1.2 s: 3×, within 0.5 s: met.
        assert_eq!(
            open_verdict(&Open::Opened(400.0), &Open::Opened(1200.0), ten).1,
            Verdict::Met
        );
        // 1 GB: our own time, whatever the peer did.
        assert_eq!(
            open_verdict(&Open::Opened(10_500.0), &Open::TimedOut(600.0), giga).1,
            Verdict::NotMet
        );
        assert_eq!(
            open_verdict(
                &Open::Opened(8_530.0),
                &Open::Failed("crashed".into()),
                giga
            )
            .1,
            Verdict::Met
        );
        // Ours failing is an error whatever the peer did.
        assert!(matches!(
            open_verdict(&Open::Failed("load-error".into()), &Open::Opened(1.0), ten).1,
            Verdict::Error(_)
        ));
    }

    #[test]
    fn a_floor_over_what_the_goal_allows_is_named_in_the_verdict() {
        let goal = OpenGoal::for_size(10e6);
        let peer = Open::Opened(700.0);
        // 2.5× of 0.70 s allows 0.28 s; a floor of 0.32 s is over it.
        assert_eq!(
            floor_note(&Verdict::NotMet, goal, &peer, Some(320.0)).as_deref(),
            Some(
                "below our floor: 2.5× needs ≤ 0.28 s, and ours opens the floor's trace in 0.32 s"
            )
        );
        // A floor under the allowance leaves the miss to the reader.
        assert_eq!(floor_note(&Verdict::NotMet, goal, &peer, Some(200.0)), None);
        // Nothing to explain when the goal is met, has no peer time, no floor, or no ratio.
        assert_eq!(floor_note(&Verdict::Met, goal, &peer, Some(320.0)), None);
        assert_eq!(
            floor_note(&Verdict::NotMet, goal, &Open::TimedOut(600.0), Some(320.0)),
            None
        );
        assert_eq!(floor_note(&Verdict::NotMet, goal, &peer, None), None);
        assert_eq!(
            floor_note(
                &Verdict::NotMet,
                OpenGoal::for_size(1000e6),
                &peer,
                Some(320.0)
            ),
            None
        );
    }
}

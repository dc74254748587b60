//! A regression gate for CI: rules such as `total>+5%` evaluated over a baseline and a
//! candidate, each one or several steps ([`Rule::parse`], [`metric_value`], [`evaluate`]).
//!
//! Rule text: `METRIC OP THRESHOLD`, blanks allowed around each part.
//! - `METRIC`: one of [`Metric::ALL`]'s names. Traces: `total` (also `total_ns`: the summary's `total_ns`),
//!   `peak_bytes`, `forward`, `backward`, `optimizer` (the phase breakdown's ns), `op_count`.
//!   Inference profiles: `ttft_p50`, `ttft_p90`, `ttft_p99` (µs), `itl_p50`, `itl_p90`,
//!   `itl_p99` (ns): the profile's nearest-rank percentiles.
//! - `OP` and `THRESHOLD`, relative: `>+X%` (breached when the candidate is more than X % above
//!   the baseline) or `<-X%` (more than X % below); the sign may be left out but must not
//!   contradict the operator. Absolute: `>N` or `<N`, N an integer in the metric's unit (ns,
//!   bytes, µs or a count): breached when the candidate is above (below) N.
//!
//! Evaluation ([`evaluate`]): each side's value is the nearest-rank **median** of its steps'
//! values ([`Spread`]). A relative rule is breached when the percent change
//! `(cand − base) / base × 100` passes the threshold **and** the change exceeds the steps' own
//! noise: `|cand − base| > NOISE_MADS × max(MAD(base), MAD(cand))`, with `NOISE_MADS` = 3. With
//! one step per side both MADs are 0, so the percent rule alone decides. A baseline of 0 has no
//! percent: then `>` is breached by any rise beyond the noise, `<` never. An absolute rule
//! compares the candidate's median with N and ignores noise (it is a budget, not a change).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use serde::Serialize;

use crate::analysis::phases::phase_breakdown;
use crate::analysis::steps::Spread;
use crate::format::document::TraceDocument;
use crate::format::profile::ProfileDocument;

/// How many MADs a change must exceed to count (see the module docs).
pub const NOISE_MADS: u64 = 3;

/// A number the gate can check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// The trace summary's `total_ns`.
    Total,
    /// The trace summary's `peak_bytes`.
    PeakBytes,
    /// Forward ns of the phase breakdown.
    Forward,
    /// Backward ns of the phase breakdown.
    Backward,
    /// Optimizer ns of the phase breakdown.
    Optimizer,
    /// Number of `op` lines.
    OpCount,
    /// Median TTFT, µs.
    TtftP50,
    /// 90th percentile TTFT, µs.
    TtftP90,
    /// 99th percentile TTFT, µs.
    TtftP99,
    /// Median inter-token latency, ns.
    ItlP50,
    /// 90th percentile inter-token latency, ns.
    ItlP90,
    /// 99th percentile inter-token latency, ns.
    ItlP99,
}

impl Metric {
    /// Every metric, in the order the docs list them.
    pub const ALL: [Metric; 12] = [
        Metric::Total,
        Metric::PeakBytes,
        Metric::Forward,
        Metric::Backward,
        Metric::Optimizer,
        Metric::OpCount,
        Metric::TtftP50,
        Metric::TtftP90,
        Metric::TtftP99,
        Metric::ItlP50,
        Metric::ItlP90,
        Metric::ItlP99,
    ];

    /// The name rules use.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Total => "total",
            Metric::PeakBytes => "peak_bytes",
            Metric::Forward => "forward",
            Metric::Backward => "backward",
            Metric::Optimizer => "optimizer",
            Metric::OpCount => "op_count",
            Metric::TtftP50 => "ttft_p50",
            Metric::TtftP90 => "ttft_p90",
            Metric::TtftP99 => "ttft_p99",
            Metric::ItlP50 => "itl_p50",
            Metric::ItlP90 => "itl_p90",
            Metric::ItlP99 => "itl_p99",
        }
    }

    /// The unit of its values: `ns`, `bytes`, `µs` or `count`.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::PeakBytes => "bytes",
            Metric::OpCount => "count",
            Metric::TtftP50 | Metric::TtftP90 | Metric::TtftP99 => "µs",
            _ => "ns",
        }
    }

    /// Whether it is read from inference profiles (else from traces).
    pub fn is_profile(self) -> bool {
        matches!(
            self,
            Metric::TtftP50
                | Metric::TtftP90
                | Metric::TtftP99
                | Metric::ItlP50
                | Metric::ItlP90
                | Metric::ItlP99
        )
    }
}

/// `>` or `<`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Breached by a rise.
    Above,
    /// Breached by a fall.
    Below,
}

/// What the metric is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Threshold {
    /// A change of this many percent of the baseline (≥ 0; the direction gives the sign).
    Percent(f64),
    /// The candidate's value itself, in the metric's unit.
    Absolute(u64),
}

/// One parsed `--fail-if` rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    /// The text as given.
    pub text: String,
    /// What it checks.
    pub metric: Metric,
    /// Rise or fall.
    pub direction: Direction,
    /// By how much.
    pub threshold: Threshold,
}

/// A rule that could not be parsed: the rule's text and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad rule `{rule}`: {reason}")]
pub struct RuleError {
    /// The rule as given.
    pub rule: String,
    /// What is wrong with it.
    pub reason: String,
}

fn metric_names() -> String {
    let names: Vec<&str> = Metric::ALL.iter().map(|m| m.as_str()).collect();
    names.join(", ")
}

impl Rule {
    /// Parse `total>+5%`, `peak_bytes<-3%`, `op_count>1000` … (see the module docs).
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let bad = |reason: String| RuleError {
            rule: String::from(text),
            reason,
        };
        let Some(at) = text.find(['>', '<']) else {
            return Err(bad(String::from(
                "expected METRIC>THRESHOLD or METRIC<THRESHOLD, e.g. `total>+5%`",
            )));
        };
        let name = text[..at].trim();
        let direction = if text[at..].starts_with('>') {
            Direction::Above
        } else {
            Direction::Below
        };
        let value = text[at + 1..].trim();
        let metric = Metric::ALL
            .into_iter()
            .find(|m| m.as_str() == name || (*m == Metric::Total && name == "total_ns"))
            .ok_or_else(|| {
                bad(format!(
                    "unknown metric `{name}`; known: {}",
                    metric_names()
                ))
            })?;
        if value.is_empty() {
            return Err(bad(String::from("no threshold after the operator")));
        }
        let threshold = if let Some(number) = value.strip_suffix('%') {
            let number = number.trim();
            let (sign, digits) = match number.as_bytes().first() {
                Some(b'+') => (Some(Direction::Above), &number[1..]),
                Some(b'-') => (Some(Direction::Below), &number[1..]),
                _ => (None, number),
            };
            if sign.is_some_and(|s| s != direction) {
                return Err(bad(String::from(match direction {
                    Direction::Above => "`>` checks a rise: write `>+X%`",
                    Direction::Below => "`<` checks a fall: write `<-X%`",
                })));
            }
            let p: f64 = digits
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{value}` is not a percentage like `+5%`")))?;
            if !p.is_finite() || p < 0.0 {
                return Err(bad(format!("`{value}` is not a percentage like `+5%`")));
            }
            Threshold::Percent(p)
        } else {
            // `u64`'s parser takes a leading `+`: `total>+5` would check a total over 5 ns, not
            // a rise of 5. A signed threshold is a change, which the gate checks in percent.
            if value.starts_with(['+', '-']) {
                return Err(bad(format!(
                    "`{value}` is signed: a change needs `%` (`+5%`), an absolute threshold no sign"
                )));
            }
            let n: u64 = value.parse().map_err(|_| {
                bad(format!(
                    "`{value}` is neither a percentage (`+5%`) nor a whole number of {}",
                    metric.unit()
                ))
            })?;
            Threshold::Absolute(n)
        };
        Ok(Rule {
            text: String::from(text),
            metric,
            direction,
            threshold,
        })
    }
}

/// One side's file, as the gate reads it.
#[derive(Debug, Clone, Copy)]
pub enum Sample<'a> {
    /// An execution trace.
    Trace(&'a TraceDocument),
    /// An inference profile.
    Profile(&'a ProfileDocument),
}

/// Why a file has no value for a metric.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MissingMetric(pub String);

/// The value of `metric` in one file.
pub fn metric_value(metric: Metric, sample: Sample<'_>) -> Result<u64, MissingMetric> {
    let missing = |why: &str| Err(MissingMetric(format!("{} {why}", metric.as_str())));
    match sample {
        Sample::Trace(doc) => {
            if metric.is_profile() {
                return missing("is read from inference profiles; this is an execution trace");
            }
            let summary = doc.summary();
            match metric {
                Metric::Total => Ok(summary.total_ns),
                Metric::OpCount => Ok(summary.op_count),
                Metric::PeakBytes => match crate::analysis::summary::NotCaptured::of(doc).memory {
                    Some(why) => missing(&format!("is {why}")),
                    None => Ok(summary.peak_bytes),
                },
                _ => {
                    let Some(b) = phase_breakdown(doc) else {
                        return missing("needs a measured span; the trace has none");
                    };
                    Ok(match metric {
                        Metric::Forward => b.forward_ns,
                        Metric::Backward => b.backward_ns,
                        _ => b.optimizer_ns,
                    })
                }
            }
        }
        Sample::Profile(doc) => {
            if !metric.is_profile() {
                return missing("is read from execution traces; this is an inference profile");
            }
            let latency = doc.latency();
            let (stats, pick) = match metric {
                Metric::TtftP50 => (latency.ttft_us, 50),
                Metric::TtftP90 => (latency.ttft_us, 90),
                Metric::TtftP99 => (latency.ttft_us, 99),
                Metric::ItlP50 => (latency.itl_nanos, 50),
                Metric::ItlP90 => (latency.itl_nanos, 90),
                _ => (latency.itl_nanos, 99),
            };
            let Some(p) = stats else {
                return missing("needs requests with token timing; the profile has none");
            };
            Ok(match pick {
                50 => p.p50,
                90 => p.p90,
                _ => p.p99,
            })
        }
    }
}

/// A rule evaluated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The rule.
    pub rule: Rule,
    /// The baseline steps' spread.
    pub base: Spread,
    /// The candidate steps' spread.
    pub cand: Spread,
    /// `cand.median − base.median`.
    pub delta: i64,
    /// `delta / base.median × 100`; `None` when the baseline median is 0.
    pub percent: Option<f64>,
    /// `NOISE_MADS × max(base.mad, cand.mad)`: what a change must exceed (relative rules).
    pub noise: u64,
    /// Whether the rule is breached.
    pub breached: bool,
}

/// Evaluate `rule` over the baseline's and the candidate's per-step values; `None` when a
/// side has no values.
pub fn evaluate(rule: &Rule, base: &[u64], cand: &[u64]) -> Option<Verdict> {
    let (b, c) = (Spread::of(base)?, Spread::of(cand)?);
    let delta = crate::analysis::compare::signed_delta(b.median, c.median);
    let percent = crate::analysis::compare::percent(b.median, c.median);
    let noise = b.mad.max(c.mad).saturating_mul(NOISE_MADS);
    let beyond_noise = delta.unsigned_abs() > noise;
    // |delta| is more than x % of the baseline, compared without dividing: `percent`'s
    // (c − b) / b × 100 makes a change of exactly 7 % come out as 7.000000000000001.
    let beyond_percent = |x: f64| delta.unsigned_abs() as f64 * 100.0 > x * b.median as f64;
    let breached = match (rule.threshold, rule.direction) {
        (Threshold::Absolute(n), Direction::Above) => c.median > n,
        (Threshold::Absolute(n), Direction::Below) => c.median < n,
        // From a zero baseline any rise is more than any percentage.
        (Threshold::Percent(x), Direction::Above) => {
            delta > 0 && beyond_noise && (b.median == 0 || beyond_percent(x))
        }
        (Threshold::Percent(x), Direction::Below) => {
            delta < 0 && beyond_noise && b.median > 0 && beyond_percent(x)
        }
    };
    Some(Verdict {
        rule: rule.clone(),
        base: b,
        cand: c,
        delta,
        percent,
        noise,
        breached,
    })
}

impl fmt::Display for Verdict {
    /// `total>+5%: 1000 → 1100 ns (+10.0%), noise 3×MAD = 30 ns`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = self.rule.metric.unit();
        let unit = if unit == "count" { "" } else { unit };
        let sep = if unit.is_empty() { "" } else { " " };
        write!(
            f,
            "{}: {} → {}{sep}{unit}",
            self.rule.text, self.base.median, self.cand.median
        )?;
        match self.percent {
            Some(p) => write!(f, " ({p:+.1}%)")?,
            None => write!(f, " (baseline 0)")?,
        }
        if self.base.count > 1 || self.cand.count > 1 {
            write!(
                f,
                ", medians of {} and {} steps, noise {NOISE_MADS}×MAD = {}{sep}{unit}",
                self.base.count, self.cand.count, self.noise
            )?;
        }
        Ok(())
    }
}

impl Threshold {
    /// The threshold as a rule writes it, with the direction's sign (`+5%`, `1000`).
    pub fn text(&self, direction: Direction) -> String {
        match (self, direction) {
            (Threshold::Percent(p), Direction::Above) => format!("+{p}%"),
            (Threshold::Percent(p), Direction::Below) => format!("-{p}%"),
            (Threshold::Absolute(n), _) => n.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_relative_and_absolute_rules() {
        let r = Rule::parse("total>+5%").unwrap();
        assert_eq!(
            (r.metric, r.direction, r.threshold),
            (Metric::Total, Direction::Above, Threshold::Percent(5.0))
        );
        let r = Rule::parse(" peak_bytes < -3.5% ").unwrap();
        assert_eq!(
            (r.metric, r.direction, r.threshold),
            (Metric::PeakBytes, Direction::Below, Threshold::Percent(3.5))
        );
        let r = Rule::parse("ttft_p90>10%").unwrap();
        assert_eq!(r.threshold, Threshold::Percent(10.0));
        let r = Rule::parse("op_count>1000").unwrap();
        assert_eq!(
            (r.metric, r.threshold),
            (Metric::OpCount, Threshold::Absolute(1000))
        );
        assert_eq!(Rule::parse("total_ns>+1%").unwrap().metric, Metric::Total);
        assert_eq!(r.threshold.text(r.direction), "1000");
    }

    #[test]
    fn bad_rules_name_the_rule_and_the_reason() {
        let e = |t: &str| Rule::parse(t).unwrap_err().to_string();
        assert_eq!(
            e("total=5%"),
            "bad rule `total=5%`: expected METRIC>THRESHOLD or METRIC<THRESHOLD, e.g. `total>+5%`"
        );
        assert!(e("speed>+5%")
            .starts_with("bad rule `speed>+5%`: unknown metric `speed`; known: total, peak_bytes"));
        assert_eq!(
            e("total>"),
            "bad rule `total>`: no threshold after the operator"
        );
        assert_eq!(
            e("total>-5%"),
            "bad rule `total>-5%`: `>` checks a rise: write `>+X%`"
        );
        assert_eq!(
            e("total<+5%"),
            "bad rule `total<+5%`: `<` checks a fall: write `<-X%`"
        );
        assert_eq!(
            e("total>+five%"),
            "bad rule `total>+five%`: `+five%` is not a percentage like `+5%`"
        );
        assert_eq!(
            e("total>+inf%"),
            "bad rule `total>+inf%`: `+inf%` is not a percentage like `+5%`"
        );
        // `u64` would take the `+`: an absolute 5, not the rise the sign asks for.
        assert_eq!(
            e("total>+5"),
            "bad rule `total>+5`: `+5` is signed: a change needs `%` (`+5%`), an absolute threshold no sign"
        );
        assert_eq!(
            e("op_count<-5"),
            "bad rule `op_count<-5`: `-5` is signed: a change needs `%` (`+5%`), an absolute threshold no sign"
        );
        assert_eq!(
            e("peak_bytes>1.5GB"),
            "bad rule `peak_bytes>1.5GB`: `1.5GB` is neither a percentage (`+5%`) nor a whole number of bytes"
        );
    }

    fn rule(t: &str) -> Rule {
        Rule::parse(t).unwrap()
    }

    #[test]
    fn one_step_per_side_is_the_percent_rule() {
        // 1000 → 1060: +6.0 % > 5 → breached; 1000 → 1050: +5.0 %, not more than 5.
        let v = evaluate(&rule("total>+5%"), &[1000], &[1060]).unwrap();
        assert!(v.breached);
        assert_eq!((v.delta, v.noise), (60, 0));
        assert!(
            !evaluate(&rule("total>+5%"), &[1000], &[1050])
                .unwrap()
                .breached
        );
        // A fall never breaches `>`; `<-3%`: 1000 → 960 is −4 % → breached, 980 (−2 %) not.
        assert!(
            !evaluate(&rule("total>+5%"), &[1000], &[500])
                .unwrap()
                .breached
        );
        assert!(
            evaluate(&rule("total<-3%"), &[1000], &[960])
                .unwrap()
                .breached
        );
        assert!(
            !evaluate(&rule("total<-3%"), &[1000], &[980])
                .unwrap()
                .breached
        );
        assert_eq!(
            evaluate(&rule("total>+5%"), &[1000], &[1060])
                .unwrap()
                .to_string(),
            "total>+5%: 1000 → 1060 ns (+6.0%)"
        );
    }

    #[test]
    fn several_steps_must_exceed_their_noise() {
        // base [1000, 1040, 960, 1100, 990]: sorted [960, 990, 1000, 1040, 1100], median 1000;
        // deviations [40, 10, 0, 40, 100] → sorted [0, 10, 40, 40, 100], MAD 40.
        // cand [1080, 1070, 1090]: median 1080; deviations [0, 10, 10] → MAD 10.
        // delta 80 (+8.0 % > 5) but noise 3 × max(40, 10) = 120 ≥ 80: not breached.
        let base = [1000, 1040, 960, 1100, 990];
        let v = evaluate(&rule("total>+5%"), &base, &[1080, 1070, 1090]).unwrap();
        assert_eq!(
            (v.base.median, v.base.mad, v.cand.median, v.noise),
            (1000, 40, 1080, 120)
        );
        assert!(!v.breached);
        // cand [1200, 1190, 1210]: median 1200, MAD 10; delta 200 > 120 and +20 % > 5: breached.
        let v = evaluate(&rule("total>+5%"), &base, &[1200, 1190, 1210]).unwrap();
        assert!(v.breached);
        assert_eq!(
            v.to_string(),
            "total>+5%: 1000 → 1200 ns (+20.0%), medians of 5 and 3 steps, noise 3×MAD = 120 ns"
        );
    }

    #[test]
    fn absolute_rules_and_a_zero_baseline() {
        // Absolute: the candidate's median against N, noise ignored.
        assert!(
            evaluate(&rule("op_count>10"), &[1], &[11])
                .unwrap()
                .breached
        );
        assert!(
            !evaluate(&rule("op_count>10"), &[100], &[10])
                .unwrap()
                .breached
        );
        assert!(
            evaluate(&rule("peak_bytes<100"), &[1], &[99])
                .unwrap()
                .breached
        );
        // Baseline 0: any rise breaches `>`, nothing breaches `<`.
        let v = evaluate(&rule("op_count>+50%"), &[0], &[3]).unwrap();
        assert!(v.breached);
        assert_eq!(v.percent, None);
        assert_eq!(v.to_string(), "op_count>+50%: 0 → 3 (baseline 0)");
        assert!(
            !evaluate(&rule("op_count<-50%"), &[0], &[0])
                .unwrap()
                .breached
        );
        assert_eq!(evaluate(&rule("total>+5%"), &[], &[1]), None);
    }

    #[test]
    fn a_change_of_exactly_the_threshold_is_not_more_than_it() {
        // 100 → 107 is +7 % exactly ((107 − 100) / 100 × 100 is 7.000000000000001 in f64).
        let at = |t: &str, c: u64| evaluate(&rule(t), &[100], &[c]).unwrap().breached;
        assert!(!at("total>+7%", 107));
        assert!(at("total>+7%", 108));
        assert!(at("total>+6.99999%", 107));
        assert!(!at("total<-7%", 93));
        assert!(at("total<-7%", 92));
    }

    #[test]
    fn metrics_come_from_the_right_files() {
        let doc = TraceDocument::from_bytes(
            concat!(
                r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
                "\n",
                r#"{"kind":"span_start","id":"a","name":"step","start_ns":0,"span_kind":"function","measured":true}"#,
                "\n",
                r#"{"kind":"span_start","id":"b","parent_id":"a","name":"backward","start_ns":0,"span_kind":"function","step":"backward"}"#,
                "\n",
                r#"{"kind":"span_end","id":"b","duration_ns":30}"#,
                "\n",
                r#"{"kind":"span_end","id":"a","duration_ns":100}"#,
                "\n",
            )
            .as_bytes(),
        );
        let t = Sample::Trace(&doc);
        assert_eq!(metric_value(Metric::Total, t), Ok(100));
        assert_eq!(metric_value(Metric::Backward, t), Ok(30));
        assert_eq!(metric_value(Metric::Forward, t), Ok(0));
        assert_eq!(
            metric_value(Metric::PeakBytes, t).unwrap_err().0,
            "peak_bytes is not captured"
        );
        assert_eq!(
            metric_value(Metric::TtftP90, t).unwrap_err().0,
            "ttft_p90 is read from inference profiles; this is an execution trace"
        );
    }
}

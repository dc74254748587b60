//! Per-request waterfalls: one lane per phase of the request's timed spans (`request` first,
//! the others in order of first appearance), a lane of the batched forwards that served it, a
//! lane of decode-stage intervals, a lane of token commits, markers for instants / memory / resource /
//! error events, on the request's own time axis (0 = its origin, see
//! `candle_trace_schema::analysis::waterfall::Waterfall`).

use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::profile::ProfileDocument;

use super::chart::Scale;

/// Width of a waterfall's viewBox.
pub const WATERFALL_W: f64 = 800.0;
/// Height of one lane.
pub const LANE_H: f64 = 18.0;

/// A drawn interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Lane.
    pub lane: usize,
    /// Left edge.
    pub x: f64,
    /// Width (at least 1).
    pub w: f64,
    /// CSS class: the phase or stage name, sanitised.
    pub class: String,
    /// Tooltip / accessible text.
    pub label: String,
}

/// A drawn instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    /// Lane.
    pub lane: usize,
    /// x.
    pub x: f64,
    /// CSS class.
    pub class: String,
    /// Text.
    pub label: String,
}

/// One request's waterfall.
#[derive(Debug, Clone, PartialEq)]
pub struct WaterfallChart {
    /// Request id.
    pub request_id: String,
    /// Lane names, top to bottom.
    pub lanes: Vec<String>,
    /// Timed spans and decode stages.
    pub blocks: Vec<Block>,
    /// Token commits, decode ready and event markers.
    pub ticks: Vec<Tick>,
    /// Token commits.
    pub commit_count: usize,
    /// Decode-stage intervals.
    pub stage_count: usize,
    /// Axis end, human.
    pub extent: String,
    /// viewBox height.
    pub height: f64,
}

fn class_of(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("ph-{s}")
}

/// The waterfalls of `doc`, one per request in order of first appearance.
pub fn waterfalls(doc: &ProfileDocument) -> Vec<WaterfallChart> {
    doc.waterfalls()
        .into_iter()
        .map(|w| {
            let lo = w
                .bars
                .iter()
                .map(|b| b.start_ns)
                .chain(w.markers.iter().map(|m| m.at_ns))
                .min()
                .unwrap_or(0)
                .min(0);
            let hi = w.extent_ns.max(lo + 1);
            let x = Scale::new(lo as f64, hi as f64, 0.0, WATERFALL_W);
            let mut lanes: Vec<String> = Vec::new();
            let mut lane_of = |name: &str| -> usize {
                match lanes.iter().position(|l| l == name) {
                    Some(i) => i,
                    None => {
                        lanes.push(name.to_string());
                        lanes.len() - 1
                    }
                }
            };
            // The whole request on top, then phases in order of first appearance.
            if w.bars.iter().any(|b| b.phase == "request") {
                lane_of("request");
            }
            let mut blocks = Vec::new();
            for b in &w.bars {
                let lane = lane_of(&b.phase);
                let end = b
                    .start_ns
                    .saturating_add(i64::try_from(b.duration_ns).unwrap_or(i64::MAX));
                let (x0, x1) = (x.px(b.start_ns as f64), x.px(end as f64));
                blocks.push(Block {
                    lane,
                    x: x0,
                    w: (x1 - x0).max(1.0),
                    class: class_of(&b.phase),
                    label: format!(
                        "{} {} at {} (line {})",
                        b.phase,
                        format_ns(b.duration_ns),
                        format_ns(b.start_ns.max(0) as u64),
                        b.line
                    ),
                });
            }
            if !w.forwards.is_empty() {
                let lane = lane_of("batched forwards");
                for f in &w.forwards {
                    let end = f
                        .start_ns
                        .saturating_add(i64::try_from(f.duration_ns).unwrap_or(i64::MAX));
                    let (x0, x1) = (x.px(f.start_ns as f64), x.px(end as f64));
                    let part = if f.prefill_tokens > 0 {
                        format!("{} prompt tokens", f.prefill_tokens)
                    } else {
                        format!("{} decode token(s)", f.decode_tokens)
                    };
                    blocks.push(Block {
                        lane,
                        x: x0,
                        w: (x1 - x0).max(1.0),
                        class: class_of(if f.prefill_tokens > 0 {
                            "prefill"
                        } else {
                            "decode"
                        }),
                        label: format!(
                            "{} forward {}: {part} of a batch of {}, {} at {} (line {})",
                            f.engine,
                            f.iteration,
                            f.batch_size,
                            format_ns(f.duration_ns),
                            format_ns(f.start_ns.max(0) as u64),
                            f.line
                        ),
                    });
                }
            }
            let mut ticks = Vec::new();
            if !w.stages.is_empty() {
                let lane = lane_of("decode stages");
                for s in &w.stages {
                    let (x0, x1) = (x.px(s.start_ns as f64), x.px(s.end_ns as f64));
                    blocks.push(Block {
                        lane,
                        x: x0,
                        w: (x1 - x0).max(1.0),
                        class: class_of(&s.stage),
                        label: format!(
                            "{} {} – {}",
                            s.stage,
                            format_ns(s.start_ns),
                            format_ns(s.end_ns)
                        ),
                    });
                }
            }
            if !w.commits_ns.is_empty() || w.decode_ready_ns.is_some() {
                let lane = lane_of("tokens");
                if let Some(r) = w.decode_ready_ns {
                    ticks.push(Tick {
                        lane,
                        x: x.px(r as f64),
                        class: "decode-ready".into(),
                        label: format!("decode ready at {}", format_ns(r)),
                    });
                }
                for (i, &c) in w.commits_ns.iter().enumerate() {
                    ticks.push(Tick {
                        lane,
                        x: x.px(c as f64),
                        class: "commit".into(),
                        label: format!("token {} at {}", i + 1, format_ns(c)),
                    });
                }
            }
            if !w.markers.is_empty() {
                let lane = lane_of("events");
                for m in &w.markers {
                    ticks.push(Tick {
                        lane,
                        x: x.px(m.at_ns as f64),
                        class: format!("ev-{}", class_of(&m.event_kind)),
                        label: format!(
                            "{} {} ({}) at {} (line {})",
                            m.event_kind,
                            m.phase,
                            m.status,
                            format_ns(m.at_ns.max(0) as u64),
                            m.line
                        ),
                    });
                }
            }
            let height = LANE_H * lanes.len().max(1) as f64;
            WaterfallChart {
                request_id: w.request_id,
                commit_count: w.commits_ns.len(),
                stage_count: w.stages.len(),
                extent: format_ns(hi.max(0) as u64),
                lanes,
                blocks,
                ticks,
                height,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::read_profile;

    #[test]
    fn fixture_waterfalls() {
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/infer_run.profile.jsonl"
        ));
        let w = waterfalls(&doc);
        assert_eq!(w.len(), 3);
        let r1 = &w[0];
        assert_eq!(r1.commit_count, 5);
        assert_eq!(r1.stage_count, 3);
        assert_eq!(r1.lanes[0], "request");
        assert!(r1.lanes.contains(&"decode stages".to_string()));
        assert!(r1.lanes.contains(&"tokens".to_string()));
        assert!(r1
            .blocks
            .iter()
            .all(|b| b.x >= 0.0 && b.x + b.w <= WATERFALL_W + 0.001));
        assert_eq!(r1.height, LANE_H * r1.lanes.len() as f64);
        assert_eq!(class_of("decode_execution"), "ph-decode-execution");
    }

    #[test]
    fn a_batched_request_shows_the_forwards_that_served_it() {
        // `tests/fixtures/serving/make.py`: a took part in forwards 0, 1, 2 (its prompt, then
        // two decodes); d was rejected before any.
        let doc = candle_trace_schema::format::profile::read_profile(include_bytes!(
            "../../../tests/fixtures/serving/batched.profile.jsonl"
        ));
        let w = waterfalls(&doc);
        let a = w.iter().find(|w| w.request_id == "a").unwrap();
        let lane = a
            .lanes
            .iter()
            .position(|l| l == "batched forwards")
            .unwrap();
        let blocks: Vec<&str> = a
            .blocks
            .iter()
            .filter(|b| b.lane == lane)
            .map(|b| b.class.as_str())
            .collect();
        assert_eq!(blocks, ["ph-prefill", "ph-decode", "ph-decode"]);
        assert!(a.blocks.iter().any(|b| {
            b.label
            == "engine-0 forward 0: 5 prompt tokens of a batch of 2, 2.00 ms at 1.00 ms (line 11)"
        }));
        let d = w.iter().find(|w| w.request_id == "d").unwrap();
        assert!(!d.lanes.iter().any(|l| l == "batched forwards"));
        // The engine has no waterfall.
        assert!(w.iter().all(|w| !w.request_id.starts_with("engine")));
    }
}

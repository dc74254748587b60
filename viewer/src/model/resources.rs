//! The Resources tab of an inference profile: per resource kind (`schema::analysis::resources`),
//! its occupancy over time against its capacity as a step chart, what each request held, the
//! deferrals and rejections with their reasons, and the accounting errors flagged.

use candle_trace_schema::analysis::resources::ResourceUsage;
use candle_trace_schema::analysis::units::format_ns;
use candle_trace_schema::format::profile::ProfileDocument;

use super::chart::{num, polyline, Scale};

/// The chart's width in SVG units.
pub const RESOURCE_W: f64 = 600.0;
/// The chart's height in SVG units.
pub const RESOURCE_H: f64 = 110.0;

/// What one request did with the resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderRow {
    /// The request.
    pub holder: String,
    /// Reserved.
    pub reserved: i64,
    /// Committed.
    pub committed: i64,
    /// Released.
    pub released: i64,
    /// Rolled back.
    pub rolled_back: i64,
    /// Held at the end.
    pub held: i64,
    /// Deferrals.
    pub deferrals: u64,
    /// Rejections.
    pub rejections: u64,
    /// It still holds some at the end (never released).
    pub leaked: bool,
}

/// An accounting error, one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `underflow` or `never released`.
    pub kind: &'static str,
    /// The request.
    pub holder: String,
    /// What happened.
    pub text: String,
}

/// One resource kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceChart {
    /// `resource_kind`.
    pub kind: String,
    /// One line: capacity, peak, deferrals, rejections, errors.
    pub summary: String,
    /// The last stated capacity.
    pub capacity: Option<i64>,
    /// The peak level.
    pub peak: Option<i64>,
    /// The occupancy as a step line (levels hold until the next event).
    pub path: String,
    /// The capacity line's height, when stated.
    pub capacity_y: Option<String>,
    /// The chart's top value and its time extent, human.
    pub axis: (String, String),
    /// Holders in order of first appearance.
    pub holders: Vec<HolderRow>,
    /// `N × action: reason`, in order of first appearance.
    pub reasons: Vec<String>,
    /// Underflows, then never released.
    pub problems: Vec<Problem>,
    /// Deferrals.
    pub deferrals: u64,
    /// Rejections.
    pub rejections: u64,
}

/// The tab's numbers: one chart per resource kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourcesPanel {
    /// In order of first appearance.
    pub kinds: Vec<ResourceChart>,
    /// `resource` objects without a kind or a known action.
    pub unreadable: u64,
}

fn chart(usage: &ResourceUsage) -> ResourceChart {
    let points: Vec<(i64, i64)> = usage
        .occupancy
        .iter()
        .filter_map(|p| Some((p.at_unix_nanos?, p.level)))
        .collect();
    let t0 = points.first().map_or(0, |p| p.0);
    let end_ns = points
        .last()
        .map_or(0, |p| u64::try_from(p.0 - t0).unwrap_or(0));
    let top = points
        .iter()
        .map(|p| p.1)
        .chain(usage.capacity)
        .max()
        .unwrap_or(0)
        .max(1);
    let x = Scale::new(0.0, end_ns.max(1) as f64, 8.0, RESOURCE_W - 8.0);
    let y = Scale::new(0.0, top as f64, RESOURCE_H - 4.0, 8.0);
    // A level holds until the next event: a step per point.
    let mut steps: Vec<(f64, f64)> = Vec::with_capacity(points.len() * 2);
    for (i, &(t, level)) in points.iter().enumerate() {
        let px = x.px((t - t0) as f64);
        if i > 0 {
            let prev = steps[steps.len() - 1].1;
            steps.push((px, prev));
        }
        steps.push((px, y.px(level as f64)));
    }
    let holders: Vec<HolderRow> = usage
        .holders
        .iter()
        .map(|h| HolderRow {
            holder: h.holder.clone(),
            reserved: h.reserved,
            committed: h.committed,
            released: h.released,
            rolled_back: h.rolled_back,
            held: h.held,
            deferrals: h.deferrals,
            rejections: h.rejections,
            leaked: h.held > 0,
        })
        .collect();
    let mut problems: Vec<Problem> = usage
        .underflows
        .iter()
        .map(|u| Problem {
            kind: "underflow",
            holder: u.holder.clone(),
            text: format!(
                "line {}: {} went {} below 0 ({})",
                u.line, u.holder, u.amount, u.kind
            ),
        })
        .collect();
    problems.extend(usage.leaks.iter().map(|l| Problem {
        kind: "never released",
        holder: l.holder.clone(),
        text: format!("{} still holds {} at the end", l.holder, l.held),
    }));
    let capacity = usage.capacity.map_or_else(
        || String::from("capacity not stated"),
        |c| format!("capacity {c}"),
    );
    let peak = usage.peak.as_ref().map(|p| p.level);
    ResourceChart {
        kind: usage.resource_kind.clone(),
        summary: format!(
            "{capacity}, peak {}; {} deferral(s), {} rejection(s), {} underflow(s), {} never released",
            peak.map_or_else(|| String::from("–"), |p| p.to_string()),
            usage.deferrals,
            usage.rejections,
            usage.underflows.len(),
            usage.leaks.len()
        ),
        capacity: usage.capacity,
        peak,
        path: polyline(&steps),
        capacity_y: usage.capacity.map(|c| num(y.px(c as f64))),
        axis: (top.to_string(), format_ns(end_ns)),
        holders,
        reasons: usage
            .reasons
            .iter()
            .map(|r| format!("{} × {}: {}", r.count, r.action, r.reason))
            .collect(),
        problems,
        deferrals: usage.deferrals,
        rejections: usage.rejections,
    }
}

impl ResourcesPanel {
    /// The resources of `doc`.
    pub fn of(doc: &ProfileDocument) -> Self {
        let all = doc.resources();
        ResourcesPanel {
            kinds: all.kinds.iter().map(chart).collect(),
            unreadable: all.unreadable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::profile::read_profile;

    #[test]
    fn the_pool_of_the_serving_fixture() {
        // `tests/fixtures/serving/make.py`: 8 blocks; a 4, b 3, c deferred twice then 3, d
        // rejected; b releases 4 of its 3, c never releases.
        let doc = read_profile(include_bytes!(
            "../../../tests/fixtures/serving/batched.profile.jsonl"
        ));
        let p = ResourcesPanel::of(&doc);
        assert_eq!(p.kinds.len(), 1);
        let kv = &p.kinds[0];
        assert_eq!(kv.kind, "kv_blocks");
        assert_eq!(
            kv.summary,
            "capacity 8, peak 7; 2 deferral(s), 1 rejection(s), 1 underflow(s), 1 never released"
        );
        assert_eq!((kv.capacity, kv.peak), (Some(8), Some(7)));
        let held: Vec<(&str, i64, bool)> = kv
            .holders
            .iter()
            .map(|h| (h.holder.as_str(), h.held, h.leaked))
            .collect();
        assert_eq!(
            held,
            [
                ("a", 0, false),
                ("b", 0, false),
                ("c", 3, true),
                ("d", 0, false)
            ]
        );
        assert_eq!(
            kv.reasons,
            [
                "2 × defer: kv_blocks: 3 needed, 1 free",
                "1 × reject: 20 blocks exceed the capacity of 8"
            ]
        );
        assert_eq!(
            kv.problems
                .iter()
                .map(|p| (p.kind, p.text.as_str()))
                .collect::<Vec<_>>(),
            [
                (
                    "underflow",
                    "line 21: b went 1 below 0 (release_exceeds_holding)"
                ),
                ("never released", "c still holds 3 at the end")
            ]
        );
        // 9 points: a step of two points for each after the first.
        assert_eq!(kv.path.matches(['M', 'L']).count(), 17);
        // The capacity (8) is the top of the axis: at the chart's top margin.
        assert_eq!(kv.capacity_y.as_deref(), Some("8"));
        assert_eq!(kv.axis, (String::from("8"), String::from("7.00 ms")));
    }
}

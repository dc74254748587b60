//! The findings panel: the schema's ranked findings ([`candle_trace_schema::analysis::findings`]) as the
//! page shows them, each with where its link leads on the page.
//!
//! Nothing is decided here: the rules, the ranking, the evidence lines and the notes of rules
//! with too little data are the schema's, word for word (the CLI's `findings` prints the same).
//! This module only resolves each [`Link`] to a place on the page ([`FindingTarget`]):
//! - `span` → the span's index in the document (the page selects it and shows it in the
//!   timeline);
//! - `row` of `modules` → the modules table's row of that path (`module-row`, `data-key`);
//!   `gradients` → the gradient-by-module row (`gradient-group`, `data-module`) of the first
//!   module in file order that lacks gradients and has that key (the group the rule names);
//!   `memory` `peak` → the memory chart of the peak's device (`memory-chart`, `data-device`);
//!   `steps` → the steps table's row (`step-row`, `data-step`); `requests` → the request
//!   table's row (`request-row`, `data-request`); `iterations` → the iteration table's row
//!   (`iteration-row`, `data-key` `engine/iteration`); `resources` → the resource kind's block
//!   (`resource-kind`, `data-kind`); `phases` → the phase row (`phase-<key>`).
//!
//! A link the page cannot follow (a span id not in the document, a table the page lacks) keeps
//! its text and says so instead of a target.

use candle_trace_schema::analysis::findings::{stake_text, Finding, Findings, Link, Stake};
use candle_trace_schema::analysis::gradients::{gradient_groups, GradientFlow};
use candle_trace_schema::format::document::TraceDocument;

use super::gradients::GradientGroupRow;

/// Where a finding's link leads on the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FindingTarget {
    /// A span: select it and show it in the timeline.
    Span {
        /// Index into the document's spans.
        index: u32,
    },
    /// A row (or block) of a table: the element whose `data-testid` is `testid` and, when
    /// `attr` is set, whose attribute `attr.0` equals `attr.1`.
    Row {
        /// The element's `data-testid`.
        testid: String,
        /// The attribute that tells the rows apart, and its value.
        attr: Option<(&'static str, String)>,
    },
}

/// One finding as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingRow {
    /// The rule's id (`backward_short` …), the item's `data-rule`.
    pub rule: String,
    /// The schema's sentence.
    pub title: String,
    /// `ns`, `bytes` or `count`.
    pub stake_kind: &'static str,
    /// What is at stake, in that unit.
    pub stake_value: u64,
    /// What is at stake, for reading (`600 µs`, `4.00 KiB`, `2 parameter(s)`).
    pub stake: String,
    /// The evidence, one line each.
    pub evidence: Vec<String>,
    /// The schema's link, as it is (the item's `data-link-*`).
    pub link: Option<Link>,
    /// Where the link leads on this page; `None` when the page cannot follow it.
    pub target: Option<FindingTarget>,
    /// Where it shows, in words (`span step (id s, line 2)`, ``modules row `attn` ``).
    pub target_text: Option<String>,
}

/// The panel: at most a handful of findings, how many more the ranking left out, and the
/// rules that had too little data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FindingsPanel {
    /// Ranked, as the schema ranks them.
    pub rows: Vec<FindingRow>,
    /// How many the ranking left out.
    pub left_out: usize,
    /// Rules that could not decide, with why.
    pub notes: Vec<String>,
}

/// What the stake of a finding of `rule` says: its unit, value and text (the CLI's wording,
/// [`stake_text`]).
pub fn stake_parts(rule: &str, s: Stake) -> (&'static str, u64, String) {
    let text = stake_text(rule, s);
    match s {
        Stake::Ns(ns) => ("ns", ns, text),
        Stake::Bytes(b) => ("bytes", b, text),
        Stake::Count(n) => ("count", n, text),
    }
}

/// The table row a `row` link names on a page showing `doc` (see the module docs); `None`
/// when the page has no such row.
fn row_target(
    table: &str,
    key: &str,
    doc: Option<&TraceDocument>,
    gradient_rows: &[GradientGroupRow],
) -> Option<FindingTarget> {
    let row = |testid: &str, attr: &'static str, value: String| {
        Some(FindingTarget::Row {
            testid: testid.to_string(),
            attr: Some((attr, value)),
        })
    };
    match table {
        "modules" => row("module-row", "data-key", key.to_string()),
        "gradients" => {
            let doc = doc?;
            // The rows are the schema's groups in the same order (model/gradients.rs).
            let at = gradient_groups(&doc.gradients)
                .iter()
                .position(|g| g.flow != GradientFlow::NoneMissing && g.module == key)?;
            row(
                "gradient-group",
                "data-module",
                gradient_rows.get(at)?.module.clone(),
            )
        }
        "memory" if key == "peak" => {
            let device = doc?.memory_profile.peak_device.clone()?;
            row("memory-chart", "data-device", device)
        }
        "steps" => row("step-row", "data-step", key.to_string()),
        "requests" => row("request-row", "data-request", key.to_string()),
        "iterations" => row("iteration-row", "data-key", key.to_string()),
        "resources" => row("resource-kind", "data-kind", key.to_string()),
        "phases" => Some(FindingTarget::Row {
            testid: format!("phase-{key}"),
            attr: None,
        }),
        _ => None,
    }
}

fn row_of(
    f: &Finding,
    doc: Option<&TraceDocument>,
    gradient_rows: &[GradientGroupRow],
) -> FindingRow {
    let (stake_kind, stake_value, stake) = stake_parts(&f.rule, f.stake);
    let (target, target_text) = match &f.link {
        None => (None, None),
        Some(Link::Span { id, line }) => {
            let index = doc
                .and_then(|d| d.span_index(id))
                .and_then(|i| u32::try_from(i).ok());
            let name = index
                .and_then(|i| doc?.spans.get(i as usize))
                .map_or_else(String::new, |s| format!("{} ", s.name));
            (
                index.map(|index| FindingTarget::Span { index }),
                Some(format!("span {name}(id {id}, line {line})")),
            )
        }
        Some(Link::Row { table, key }) => (
            row_target(table, key, doc, gradient_rows),
            Some(format!("{table} row `{key}`")),
        ),
    };
    FindingRow {
        rule: f.rule.clone(),
        title: f.title.clone(),
        stake_kind,
        stake_value,
        stake,
        evidence: f.evidence.clone(),
        link: f.link.clone(),
        target,
        target_text,
    }
}

impl FindingsPanel {
    /// The panel of `findings` on a page showing the trace `doc` (the document whose spans and
    /// tables the links name: the file, or the first step of a set) with the gradient panel's
    /// `gradient_rows`.
    pub fn of_trace(
        findings: &Findings,
        doc: &TraceDocument,
        gradient_rows: &[GradientGroupRow],
    ) -> Self {
        Self::of(findings, Some(doc), gradient_rows)
    }

    /// The panel of an inference profile's `findings` (links name request rows).
    pub fn of_profile(findings: &Findings) -> Self {
        Self::of(findings, None, &[])
    }

    fn of(
        findings: &Findings,
        doc: Option<&TraceDocument>,
        gradient_rows: &[GradientGroupRow],
    ) -> Self {
        FindingsPanel {
            rows: findings
                .findings
                .iter()
                .map(|f| row_of(f, doc, gradient_rows))
                .collect(),
            left_out: findings.left_out,
            notes: findings.notes.clone(),
        }
    }

    /// What the panel says when no rule found anything.
    pub fn empty_text(&self) -> &'static str {
        if self.notes.is_empty() {
            "No findings: no rule applies to this run."
        } else {
            "No findings among the rules that had the data they need."
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::gradients::GradientPanel;
    use candle_trace_schema::analysis::findings::trace_findings;

    /// One training step, by hand: forward 700 µs with module `attn` 550 µs inside, backward
    /// 100 µs, optimizer 50 µs, a 4096-byte activation live from 100 ns to 800 µs, and three
    /// gradients of which `mlp.fc.weight` and `mlp.fc.bias` are missing; two roots when
    /// `second_root` (then the gradient rows are prefixed by their root).
    fn step(second_root: bool) -> TraceDocument {
        let root2 = if second_root { "head" } else { "model" };
        let text = format!(
            concat!(
                r#"{{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":2,"warmup_steps":1,"device":"cpu","timing_mode":"host","tags":{{}}}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"s","name":"step","start_ns":0,"span_kind":"function","measured":true}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"f","parent_id":"s","name":"forward","start_ns":0,"span_kind":"function","step":"forward"}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"a","parent_id":"f","name":"attn","start_ns":50,"span_kind":"module","step":"forward"}}"#,
                "\n",
                r#"{{"kind":"memory","timestamp_ns":100,"tensor_id":"act","span_id":"a","device":"cuda:0","bytes":4096,"action":"alloc","dtype":"u8","category":"activation"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"a","duration_ns":550000}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"f","duration_ns":700000}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"b","parent_id":"s","name":"backward","start_ns":700000,"span_kind":"function","step":"backward"}}"#,
                "\n",
                r#"{{"kind":"memory","timestamp_ns":800000,"tensor_id":"act","span_id":"b","device":"cuda:0","bytes":4096,"action":"free","dtype":"u8","category":"activation"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"b","duration_ns":100000}}"#,
                "\n",
                r#"{{"kind":"span_start","id":"o","parent_id":"s","name":"optimizer","start_ns":850000,"span_kind":"function","step":"optimizer"}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"o","duration_ns":50000}}"#,
                "\n",
                r#"{{"kind":"span_end","id":"s","duration_ns":1000000}}"#,
                "\n",
                r#"{{"kind":"gradient","event_id":"g1","root":"model","key":"attn.q.weight","state":"present","norm":0.5}}"#,
                "\n",
                r#"{{"kind":"gradient","event_id":"g2","root":"{root2}","key":"mlp.fc.weight","state":"missing"}}"#,
                "\n",
                r#"{{"kind":"gradient","event_id":"g3","root":"{root2}","key":"mlp.fc.bias","state":"missing"}}"#,
                "\n",
            ),
            root2 = root2,
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        doc
    }

    fn panel_of(doc: &TraceDocument) -> FindingsPanel {
        let gradients = GradientPanel::of(doc, 50);
        FindingsPanel::of_trace(&trace_findings(&[doc]), doc, &gradients.groups)
    }

    #[test]
    fn every_link_of_one_step_leads_to_its_place() {
        let doc = step(false);
        let p = panel_of(&doc);
        // By hand: backward 100 µs < 700 µs / 2, at stake 700 − 100 = 600 µs; `attn` 550 µs >
        // 1000 µs / 2, at stake 550 µs; forward 700 µs > 1000 µs / 2, at stake
        // 700 − 300 = 400 µs; peak 4096 bytes; 2 parameters without a gradient.
        // Time first (largest first), then bytes, then counts.
        let shown: Vec<(&str, &str, u64, &str)> = p
            .rows
            .iter()
            .map(|r| {
                (
                    r.rule.as_str(),
                    r.stake_kind,
                    r.stake_value,
                    r.stake.as_str(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("backward_short", "ns", 600_000, "600 µs"),
                ("dominant_module", "ns", 550_000, "550 µs"),
                ("dominant_phase", "ns", 400_000, "400 µs"),
                ("memory_peak", "bytes", 4096, "4.00 KiB"),
                ("gradients_missing", "count", 2, "2 parameter(s)"),
            ]
        );
        // The phase rule links the measured span `s` (index 0, line 2).
        assert_eq!(p.rows[0].target, Some(FindingTarget::Span { index: 0 }));
        assert_eq!(
            p.rows[0].target_text.as_deref(),
            Some("span step (id s, line 2)")
        );
        let row = |testid: &str, attr: &'static str, v: &str| {
            Some(FindingTarget::Row {
                testid: testid.into(),
                attr: Some((attr, v.into())),
            })
        };
        assert_eq!(p.rows[1].target, row("module-row", "data-key", "attn"));
        assert_eq!(p.rows[1].target_text.as_deref(), Some("modules row `attn`"));
        // The dominant phase's row.
        assert_eq!(
            p.rows[2].target,
            Some(FindingTarget::Row {
                testid: "phase-forward".into(),
                attr: None
            })
        );
        // The peak's device, not a fixed name.
        assert_eq!(
            p.rows[3].target,
            row("memory-chart", "data-device", "cuda:0")
        );
        // One root: the gradient row is the module as the key has it.
        assert_eq!(
            p.rows[4].target,
            row("gradient-group", "data-module", "mlp.fc")
        );
        // The schema's words, as they are: the module as its gradient row names it.
        assert_eq!(p.rows[4].evidence, ["mlp.fc: 2 of 2 parameter(s) missing"]);
        assert_eq!(p.left_out, 0);
        // A single file: no outlier-step note (that rule reads several steps only).
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    #[test]
    fn gradient_link_finds_the_row_of_its_root() {
        // Two roots: the gradient panel's rows read `root:module`; the link's key has no root,
        // so the row is the first group lacking gradients with that module: `head:mlp.fc`.
        let doc = step(true);
        let p = panel_of(&doc);
        let g = p
            .rows
            .iter()
            .find(|r| r.rule == "gradients_missing")
            .unwrap();
        assert_eq!(
            g.target,
            Some(FindingTarget::Row {
                testid: "gradient-group".into(),
                attr: Some(("data-module", "head:mlp.fc".into())),
            })
        );
    }

    #[test]
    fn links_the_page_cannot_follow_keep_their_words() {
        let doc = step(false);
        let findings = Findings {
            findings: vec![
                Finding {
                    rule: "x".into(),
                    title: "t".into(),
                    stake: Stake::Ns(5),
                    evidence: vec![],
                    link: Some(Link::Span {
                        id: "nope".into(),
                        line: 9,
                    }),
                },
                Finding {
                    rule: "y".into(),
                    title: "t".into(),
                    stake: Stake::Ns(4),
                    evidence: vec![],
                    link: Some(Link::Row {
                        table: "elsewhere".into(),
                        key: "k".into(),
                    }),
                },
            ],
            left_out: 3,
            notes: vec!["n".into()],
        };
        let p = FindingsPanel::of_trace(&findings, &doc, &[]);
        assert_eq!(p.rows[0].target, None);
        assert_eq!(
            p.rows[0].target_text.as_deref(),
            Some("span (id nope, line 9)")
        );
        assert_eq!(p.rows[1].target, None);
        assert_eq!(p.rows[1].target_text.as_deref(), Some("elsewhere row `k`"));
        assert_eq!((p.left_out, p.notes.clone()), (3, vec![String::from("n")]));
        // A profile's request link needs no document.
        let req = Findings {
            findings: vec![Finding {
                rule: "itl_drift".into(),
                title: "t".into(),
                stake: Stake::Ns(1),
                evidence: vec![],
                link: Some(Link::Row {
                    table: "requests".into(),
                    key: "req-1".into(),
                }),
            }],
            left_out: 0,
            notes: vec![],
        };
        assert_eq!(
            FindingsPanel::of_profile(&req).rows[0].target,
            Some(FindingTarget::Row {
                testid: "request-row".into(),
                attr: Some(("data-request", "req-1".into())),
            })
        );
        assert_eq!(
            FindingsPanel::default().empty_text(),
            "No findings: no rule applies to this run."
        );
    }

    #[test]
    fn serving_findings_link_to_the_iterations_and_resources_tabs() {
        let doc = candle_trace_schema::format::profile::read_profile(include_bytes!(
            "../../../tests/fixtures/serving/batched.profile.jsonl"
        ));
        let panel = FindingsPanel::of_profile(&candle_trace_schema::profile_findings(&doc));
        let target = |rule: &str| {
            panel
                .rows
                .iter()
                .find(|r| r.rule == rule)
                .and_then(|r| r.target.clone())
        };
        assert_eq!(
            target("batch_underfill"),
            Some(FindingTarget::Row {
                testid: "iteration-row".into(),
                attr: Some(("data-key", "engine-0/4".into())),
            })
        );
        assert_eq!(
            target("kv_pressure"),
            Some(FindingTarget::Row {
                testid: "resource-kind".into(),
                attr: Some(("data-kind", "kv_blocks".into())),
            })
        );
        let kv = panel.rows.iter().find(|r| r.rule == "kv_pressure").unwrap();
        assert_eq!(kv.stake, "3 deferral(s) and rejection(s)");
    }
}

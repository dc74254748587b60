//! The panels' colours in `web/style.css` keep WCAG contrast in the light and the dark theme:
//! text on the phase bar ≥ 4.5:1, chart graphics (category layers, lines, bars, percentile and
//! waterfall marks) ≥ 3:1 against the page background.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::collections::BTreeMap;

use candle_trace_viewer::timeline::palette::contrast;

/// `--name: #rrggbb` declarations of each `{ ... }` block that declares `--bg`.
fn themes(css: &str) -> Vec<BTreeMap<String, String>> {
    // Drop comments first: they may contain `:` and `;`.
    let mut css = css.to_string();
    while let Some(start) = css.find("/*") {
        let end = css[start..].find("*/").map_or(css.len(), |e| start + e + 2);
        css.replace_range(start..end, "");
    }
    let mut out = Vec::new();
    for block in css.split('{').skip(1) {
        let body = block.split('}').next().unwrap_or("");
        let vars: BTreeMap<String, String> = body
            .split(';')
            .filter_map(|decl| {
                let (k, v) = decl.split_once(':')?;
                let (k, v) = (k.trim(), v.trim());
                (k.starts_with("--") && v.starts_with('#')).then(|| (k.to_string(), v.to_string()))
            })
            .collect();
        if vars.contains_key("--bg") {
            out.push(vars);
        }
    }
    out
}

#[test]
fn panel_colours_keep_contrast_in_every_theme() {
    let css = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../web/style.css"))
        .expect("web/style.css");
    let themes = themes(&css);
    assert_eq!(themes.len(), 3, "light, dark (system), dark (forced)");
    for vars in &themes {
        let get = |k: &str| {
            vars.get(k)
                .unwrap_or_else(|| panic!("{k} missing"))
                .as_str()
        };
        let bg = get("--bg");
        for ph in [
            "--ph-forward",
            "--ph-backward",
            "--ph-optimizer",
            "--ph-other",
        ] {
            let c = contrast(get("--ph-text"), get(ph));
            assert!(c >= 4.5, "{ph} text contrast {c:.2} (bg {bg})");
        }
        for g in [
            "--cat-parameter",
            "--cat-activation",
            "--cat-gradient",
            "--cat-optimizer",
            "--cat-other",
            "--chart-used",
            "--chart-live",
            "--chart-gap",
            "--hist-bar",
            "--pct-p50",
            "--pct-p90",
            "--pct-p99",
            "--pct-max",
            "--wf-prefill",
            "--wf-decode",
            "--wf-sched",
            "--wf-exec",
            "--wf-post",
            "--wf-commit",
            "--wf-event",
            "--wf-error",
            "--ph-forward",
            "--ph-backward",
            "--ph-optimizer",
            "--ph-other",
        ] {
            let c = contrast(get(g), bg);
            assert!(c >= 3.0, "{g} {} on {bg}: {c:.2}", get(g));
        }
        for t in ["--fg", "--muted", "--error-fg", "--accent"] {
            let c = contrast(get(t), bg);
            assert!(c >= 4.5, "{t} on {bg}: {c:.2}");
        }
    }
}

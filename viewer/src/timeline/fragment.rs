//! The chart's state in the page's URL fragment, so that a reload or a shared link shows the
//! same window and selection of the same file(s):
//!
//! `#files=<names>[&step=<name>]&view=<start_ns>-<end_ns>&sel=<group>:<span id>[&sel=…][&range=<s>-<e>][&tab=<id>]`
//!
//! `files` are the opened files' names (joined with ` + `, the page's title of a set); a state
//! is applied only to a document with the same names. `step` is the step of a step set shown
//! in detail (its `capture_step`; the view, selection and range are that step's). `view` is the visible window in the
//! chart's axis time (whole nanoseconds). Each `sel` is a selected span by group and by its
//! `id` in the file (stable across reloads of the same file). `range` is a range selected on
//! the time axis (axis ns, `s ≤ e`) and `tab` the open tab of the panel below the chart
//! ([`crate::model::panel::Tab::id`]). Values are percent-encoded
//! (UTF-8; everything but ASCII letters, digits and `-._~`). Unknown keys and malformed
//! values are ignored: a fragment never fails to load a page.

/// What the fragment holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChartState {
    /// The files' names.
    pub files: String,
    /// The step of a step set shown in detail.
    pub step: Option<String>,
    /// The visible window `[start, end]`, axis ns.
    pub view: Option<(u64, u64)>,
    /// Selected spans: (group, span id).
    pub selected: Vec<(usize, String)>,
    /// A range selected on the time axis `[start, end]`, axis ns.
    pub range: Option<(u64, u64)>,
    /// The open tab's id.
    pub tab: Option<String>,
}

impl ChartState {
    /// The fragment, starting with `#`.
    pub fn to_fragment(&self) -> String {
        let mut out = format!("#files={}", encode(&self.files));
        if let Some(step) = &self.step {
            out.push_str(&format!("&step={}", encode(step)));
        }
        if let Some((s, e)) = self.view {
            out.push_str(&format!("&view={s}-{e}"));
        }
        for (g, id) in &self.selected {
            out.push_str(&format!("&sel={g}:{}", encode(id)));
        }
        if let Some((s, e)) = self.range {
            out.push_str(&format!("&range={s}-{e}"));
        }
        if let Some(tab) = &self.tab {
            out.push_str(&format!("&tab={}", encode(tab)));
        }
        out
    }

    /// Read a fragment (with or without its `#`).
    pub fn parse(fragment: &str) -> Self {
        let mut state = ChartState::default();
        for pair in fragment.trim_start_matches('#').split('&') {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            match key {
                "files" => {
                    if let Some(f) = decode(value) {
                        state.files = f;
                    }
                }
                "view" => {
                    state.view = value
                        .split_once('-')
                        .and_then(|(s, e)| Some((s.parse().ok()?, e.parse().ok()?)))
                        .filter(|(s, e)| s < e);
                }
                "range" => {
                    state.range = value
                        .split_once('-')
                        .and_then(|(s, e)| Some((s.parse().ok()?, e.parse().ok()?)))
                        .filter(|(s, e)| s <= e);
                }
                "tab" => state.tab = decode(value).filter(|t| !t.is_empty()),
                "step" => state.step = decode(value).filter(|t| !t.is_empty()),
                "sel" => {
                    let sel = value
                        .split_once(':')
                        .and_then(|(g, id)| Some((g.parse().ok()?, decode(id)?)));
                    state.selected.extend(sel);
                }
                _ => {}
            }
        }
        state
    }
}

/// Percent-encode everything but unreserved ASCII.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Undo [`encode`]; `None` for a broken escape or bytes that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let state = ChartState {
            files: "base.trace6.jsonl + cand.trace6.jsonl".into(),
            view: Some((1_200, 98_765)),
            selected: vec![(0, "b3o2".into()), (1, "a&b=c #µ".into())],
            range: Some((2_000, 3_000)),
            tab: Some("ops".into()),
            step: None,
        };
        let f = state.to_fragment();
        assert_eq!(
            f,
            "#files=base.trace6.jsonl%20%2B%20cand.trace6.jsonl&view=1200-98765\
             &sel=0:b3o2&sel=1:a%26b%3Dc%20%23%C2%B5&range=2000-3000&tab=ops"
        );
        assert_eq!(ChartState::parse(&f), state);
        assert_eq!(ChartState::parse(&f[1..]), state);
        // A step set's shown step.
        let steps = ChartState {
            files: "step-2.trace6.jsonl + step-6.trace6.jsonl".into(),
            step: Some("6".into()),
            tab: Some("steps".into()),
            ..ChartState::default()
        };
        let f = steps.to_fragment();
        assert_eq!(
            f,
            "#files=step-2.trace6.jsonl%20%2B%20step-6.trace6.jsonl&step=6&tab=steps"
        );
        assert_eq!(ChartState::parse(&f), steps);
    }

    #[test]
    fn bad_parts_are_ignored() {
        let s = ChartState::parse(
            "#files=a.jsonl&view=9-3&sel=x:1&sel=0:%ZZ&sel=2:ok&what=1&junk&range=5-4&tab=&step=",
        );
        assert_eq!(
            s,
            ChartState {
                files: "a.jsonl".into(),
                view: None,
                selected: vec![(2, "ok".into())],
                range: None,
                tab: None,
                step: None,
            }
        );
        assert_eq!(ChartState::parse("#step=%ZZ").step, None);
        assert_eq!(ChartState::parse("#range=4-4").range, Some((4, 4)));
        assert_eq!(ChartState::parse(""), ChartState::default());
        assert_eq!(ChartState::parse("#view=1-2").view, Some((1, 2)));
        // A truncated escape and invalid UTF-8 are dropped, not panicked on.
        assert_eq!(ChartState::parse("#files=%E").files, "");
        assert_eq!(ChartState::parse("#files=%FF").files, "");
    }
}

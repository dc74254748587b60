//! The app shell: opening files (picker, drop anywhere, `?url=` once or several times, files
//! handed over by the page's boot, the example), progress and cancel, and the view of
//! whatever was read.

use std::sync::Arc;

use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast;

use candle_trace_schema::analysis::findings::{trace_findings, Findings};
use candle_trace_schema::analysis::units::{format_bytes, format_ns};
use candle_trace_schema::format::detect::AnyDocument;

use super::compare::{ComparePicker, CompareView};
use super::diagnostics::Diagnostics;
use super::header::{close_on_escape, HEADER_POPOVERS};
use super::multi::{load_traces, MultiView};
use super::profile::ProfileView;
use super::steps_page::StepsPage;
use super::theme::{theme_signals, ThemeToggle};
use super::trace_view::TraceView;
use super::LoadSeq;
use crate::load::{yield_now, AtStart, LoadError, Source};
use crate::model::compare::CompareModel;
use crate::model::diagnostics::DiagnosticsPanel;
use crate::model::multi::MultiModel;
use crate::model::progress::Progress;
use crate::model::steps::StepsModel;
use crate::model::{MemoryViews, ProfileModel, TraceModel};
use crate::timeline::input::SHORTCUTS;
use crate::timeline::lanes::{extents_of, Lanes};
use crate::worker::{self, LoadTimings, Stage};

/// The shipped example trace (a copy of `tests/fixtures/train_step.trace6.jsonl`).
const EXAMPLE_URL: &str = "assets/example.trace6.jsonl";

/// A read file, ready to show.
#[derive(Clone)]
enum Opened {
    Trace(Arc<TraceModel>),
    Profile(Arc<ProfileModel>),
    Unsupported(Arc<DiagnosticsPanel>),
    /// A baseline and a candidate.
    Compare(Arc<CompareModel>),
    /// Several traces on one axis.
    Multi(Arc<MultiModel>),
    /// The per-step captures of one run.
    Steps(Arc<StepsModel>),
}

impl Opened {
    /// Whether its view has a tab panel, which counts the document as loaded itself once its
    /// first tab is built (after the chart's first frame).
    fn counts_itself_loaded(&self) -> bool {
        match self {
            Opened::Trace(_) | Opened::Steps(_) | Opened::Profile(_) | Opened::Multi(_) => true,
            Opened::Compare(c) => c.refusal.is_none(),
            Opened::Unsupported(_) => false,
        }
    }
}

/// What several files at once are opened as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetMode {
    /// The first file is the baseline, the second the candidate.
    Compare,
    /// Each file a group of lanes on one axis.
    Multi,
}

/// Show where the worker (or the page) is; whether that changed what the bar says (the
/// page's decoding reports each step, and redrawing the bar for each would cost more than the
/// step).
fn show_stage(p: &mut Progress, stage: Stage) -> bool {
    match stage {
        Stage::Reading { read, total, lines } => p.read(read, total, lines),
        Stage::Analysing => p.phase("Analysing"),
        Stage::Receiving { .. } => p.phase("Preparing the view of"),
    }
}

/// The whole page.
#[component]
pub fn App() -> impl IntoView {
    let (theme_choice, theme) = theme_signals();
    let opened: RwSignal<Option<(String, Opened)>> = RwSignal::new(None);
    let progress: RwSignal<Option<Progress>> = RwSignal::new(None);
    let loading = Memo::new(move |_| progress.with(Option::is_some));
    let error: RwSignal<Option<String>> = RwSignal::new(None);
    let dragging = RwSignal::new(false);
    let last_load: RwSignal<Option<ShownTimings>> = RwSignal::new(None);
    // How many documents have been shown: `<main data-load-seq>` lets tests wait for the next,
    // whole (a trace's panels below its timeline included); `data-shown-seq` counts them as
    // soon as their first view is up (a trace's timeline), for the open-time benchmark.
    let load_seq = RwSignal::new(0u64);
    let shown_seq = RwSignal::new(0u64);
    provide_context(LoadSeq(load_seq));
    // `?` anywhere but in a field shows (or hides) every shortcut; Escape hides it.
    let help = RwSignal::new(false);
    let _ = window_event_listener(leptos::ev::keydown, move |ev: web_sys::KeyboardEvent| {
        let in_field = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "SELECT" | "TEXTAREA"));
        if ev.key() == "?" && !in_field {
            ev.prevent_default();
            help.update(|h| *h = !*h);
        } else if ev.key() == "Escape" && help.get_untracked() {
            ev.prevent_default();
            ev.stop_propagation();
            help.set(false);
        }
    });
    let show = move |name: String, shown: Opened| {
        let counts_itself = shown.counts_itself_loaded();
        opened.set(Some((name, shown)));
        shown_seq.update(|n| *n += 1);
        if !counts_itself {
            load_seq.update(|n| *n += 1);
        }
    };
    // Each load gets a generation; a newer load or the cancel button makes older ones stop.
    let generation = StoredValue::new(0u64);

    let open = move |name: String, source: Source| {
        let my_gen = generation.get_value() + 1;
        generation.set_value(my_gen);
        let reading = Progress::new("Reading", name.clone());
        // The load's task is queued before the signals below wake the views that show them,
        // so the worker gets the file before the page redraws its header.
        spawn_local(async move {
            let is_current = move || generation.try_get_value() == Some(my_gen);
            let result = worker::open(
                source,
                true,
                |stage| {
                    if !is_current() {
                        return;
                    }
                    progress.maybe_update(|p| p.as_mut().is_some_and(|p| show_stage(p, stage)));
                },
                is_current,
            )
            .await;
            if !is_current() {
                return;
            }
            match result {
                Ok((doc, load, pending)) => {
                    let layout_since = js_sys::Date::now();
                    // Building the view models is one step; let the page show that first.
                    progress.maybe_update(|p| p.as_mut().is_some_and(|p| p.phase("Laying out")));
                    yield_now().await;
                    if !is_current() {
                        return;
                    }
                    let shown = match doc {
                        AnyDocument::Trace(mut t) => {
                            // The costly steps of a large trace, one task each. The memory
                            // strip's curves first, taking the samples (one per memory event)
                            // out of the document: the memory charts read them after the
                            // chart's first frame, and nothing else does.
                            let memory = MemoryViews::take(&mut t);
                            yield_now().await;
                            let extents = extents_of(&t);
                            yield_now().await;
                            let lanes = Lanes::build(&extents);
                            yield_now().await;
                            if !is_current() {
                                return;
                            }
                            // The other view models while the worker ranks the findings.
                            let mut model = TraceModel::with_memory(
                                *t,
                                memory,
                                extents,
                                lanes,
                                &Findings::default(),
                            );
                            let findings = match pending.findings().await {
                                Some(f) => f,
                                None => {
                                    yield_now().await;
                                    trace_findings(&[&model.doc])
                                }
                            };
                            if !is_current() {
                                return;
                            }
                            model.set_findings(&findings);
                            let model = Arc::new(model);
                            // The memory charts (the memory tab's) after the first frame,
                            // letting the samples they read go.
                            let later = Arc::clone(&model);
                            spawn_local(async move {
                                super::frame::next_frame().await;
                                yield_now().await;
                                later.memory_charts();
                            });
                            Opened::Trace(model)
                        }
                        AnyDocument::Profile(p) => {
                            drop(pending);
                            Opened::Profile(Arc::new(ProfileModel::new(&p)))
                        }
                        AnyDocument::Unsupported { diagnostics, .. } => {
                            Opened::Unsupported(Arc::new(DiagnosticsPanel::of(&diagnostics)))
                        }
                    };
                    progress.set(None);
                    last_load.set(Some(ShownTimings {
                        load,
                        layout_ms: js_sys::Date::now() - layout_since,
                    }));
                    show(name, shown);
                }
                Err(LoadError::Cancelled) => {}
                Err(LoadError::Failed(msg)) => {
                    progress.set(None);
                    error.set(Some(msg));
                }
            }
        });
        error.set(None);
        progress.set(Some(reading));
    };

    // Several files at once: read one after another, then compare or lay out together.
    let open_set = move |mode: SetMode, files: Vec<web_sys::File>| {
        let my_gen = generation.get_value() + 1;
        generation.set_value(my_gen);
        error.set(None);
        let count = files.len();
        progress.set(Some(Progress::new("Reading", format!("{count} files"))));
        spawn_local(async move {
            let is_current = move || generation.try_get_value() == Some(my_gen);
            let result = load_traces(
                files,
                |i, name, stage| {
                    if !is_current() {
                        return;
                    }
                    let name = format!("{name} ({} of {count})", i + 1);
                    progress.maybe_update(|p| {
                        let Some(p) = p else { return false };
                        let renamed = p.name != name;
                        p.name = name;
                        show_stage(p, stage) | renamed
                    });
                },
                is_current,
            )
            .await;
            if !is_current() {
                return;
            }
            match result {
                Ok(docs) => {
                    progress.maybe_update(|p| p.as_mut().is_some_and(|p| p.phase("Laying out")));
                    yield_now().await;
                    if !is_current() {
                        return;
                    }
                    let names: Vec<String> = docs.iter().map(|(n, _)| n.clone()).collect();
                    let shown = match mode {
                        SetMode::Compare => {
                            let mut docs = docs.into_iter();
                            let (Some((base_name, base)), Some((cand_name, cand))) =
                                (docs.next(), docs.next())
                            else {
                                progress.set(None);
                                error.set(Some("comparing needs two files".into()));
                                return;
                            };
                            Opened::Compare(Arc::new(CompareModel::new(
                                base_name, base, cand_name, cand,
                            )))
                        }
                        SetMode::Multi => match StepsModel::of_run(docs) {
                            Ok(steps) => Opened::Steps(Arc::new(steps)),
                            Err(docs) => Opened::Multi(Arc::new(MultiModel::new(docs))),
                        },
                    };
                    progress.set(None);
                    last_load.set(None);
                    show(names.join(" + "), shown);
                }
                Err(LoadError::Cancelled) => {}
                Err(LoadError::Failed(msg)) => {
                    progress.set(None);
                    error.set(Some(msg));
                }
            }
        });
    };
    let on_compare = Callback::new(move |(base, cand): (web_sys::File, web_sys::File)| {
        open_set(SetMode::Compare, vec![base, cand]);
    });

    let cancel = move |_| {
        generation.update_value(|g| *g += 1);
        worker::cancel();
        progress.set(None);
    };

    // At start: files the page's boot handed over, else `?url=PATH` (same origin; given
    // more than once, the files are opened together, as when picked together).
    match crate::load::at_start() {
        AtStart::Nothing => {}
        AtStart::Files(mut files) if files.len() == 1 => {
            let file = files.remove(0);
            open(file.name(), Source::File(file));
        }
        AtStart::Files(files) => open_set(SetMode::Multi, files),
        AtStart::Url(url) => open(crate::load::file_name_of(&url), Source::Url(url)),
        AtStart::Urls(urls) => {
            let at = generation.get_value();
            progress.set(Some(Progress::new(
                "Fetching",
                format!("{} files", urls.len()),
            )));
            spawn_local(async move {
                let fetched = crate::load::fetch_files(&urls).await;
                // Cancelled (or another file opened) meanwhile.
                if generation.try_get_value() != Some(at) {
                    return;
                }
                match fetched {
                    Ok(files) => open_set(SetMode::Multi, files),
                    Err(LoadError::Failed(msg)) => {
                        progress.set(None);
                        error.set(Some(msg));
                    }
                    Err(LoadError::Cancelled) => progress.set(None),
                }
            });
        }
    }

    // Drop anywhere on the page.
    let on_drag = move |ev: web_sys::DragEvent| {
        // Only files: dragging text or links around the page shows no drop target.
        let has_files = ev.data_transfer().is_some_and(|dt| {
            dt.types()
                .includes(&wasm_bindgen::JsValue::from_str("Files"), 0)
        });
        if has_files {
            ev.prevent_default();
            dragging.set(true);
        }
    };
    let _ = window_event_listener(leptos::ev::dragover, on_drag);
    let _ = window_event_listener(leptos::ev::dragenter, on_drag);
    let _ = window_event_listener(leptos::ev::dragleave, move |ev: web_sys::DragEvent| {
        // Leaving the window (not moving between elements) has no related target.
        if ev.related_target().is_none() {
            dragging.set(false);
        }
    });
    let _ = window_event_listener(leptos::ev::drop, move |ev: web_sys::DragEvent| {
        dragging.set(false);
        // A drop on a compare target was handled there.
        if ev.default_prevented() {
            return;
        }
        ev.prevent_default();
        let files = files_of(ev.data_transfer().and_then(|dt| dt.files()));
        match files.len() {
            0 => {}
            1 => {
                let file = files[0].clone();
                open(file.name(), Source::File(file));
            }
            _ => open_set(SetMode::Multi, files),
        }
    });

    let on_pick = move |ev: leptos::ev::Event| {
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        let files = files_of(input.files());
        match files.len() {
            0 => {}
            1 => {
                let file = files[0].clone();
                open(file.name(), Source::File(file));
            }
            _ => open_set(SetMode::Multi, files),
        }
        // Picking the same file again must fire `change` again.
        input.set_value("");
    };

    view! {
        <header class="topbar">
            <h1>"candle-trace"</h1>
            <label class="button" for="file-input">"Open file…"</label>
            <input
                id="file-input"
                class="visually-hidden"
                type="file"
                accept=".jsonl,.json,application/json,text/plain"
                multiple
                data-testid="file-input"
                on:change=on_pick
            />
            <button
                type="button"
                data-testid="open-example"
                on:click=move |_| open("example.trace6.jsonl".into(), Source::Url(EXAMPLE_URL.into()))
            >
                "Open example"
            </button>
            <ComparePicker on_open=on_compare />
            <span class="hint" title="several files at once: the steps of one run, or one lane group each">"or drop files anywhere"</span>
            <span class="spacer"></span>
            {move || last_load.get().map(|t| view! { <LoadTimingsLine timings=t /> })}
            <button type="button" data-testid="shortcuts-open" aria-haspopup="dialog"
                aria-label="keyboard shortcuts" on:click=move |_| help.update(|h| *h = !*h)>"?"</button>
            <ThemeToggle choice=theme_choice />
        </header>
        {move || help.get().then(|| view! { <ShortcutsDialog on_close=Callback::new(move |()| help.set(false)) /> })}
        <div
            class="drop-target"
            class:active=move || dragging.get()
            data-testid="drop-target"
            aria-hidden="true"
        >
            <div>"Drop the trace to open it"</div>
        </div>
        // Built once per load; each update sets the line's text and the bar's value.
        {move || {
            loading.get().then(|| {
                let line = move || progress.with(|p| p.as_ref().map(Progress::line));
                let pct = move || {
                    progress.with(|p| p.as_ref().and_then(Progress::percent).map(|v| format!("{v:.0}")))
                };
                view! {
                    <div class="progress" data-testid="progress" role="status">
                        <span>{line}</span>
                        <progress max="100" value=pct></progress>
                        <button type="button" data-testid="cancel" on:click=cancel>
                            "Cancel"
                        </button>
                    </div>
                }
            })
        }}
        {move || {
            error
                .get()
                .map(|e| view! { <div class="load-error" role="alert" data-testid="load-error">{e}</div> })
        }}
        <main
            data-load-seq=move || load_seq.get().to_string()
            data-shown-seq=move || shown_seq.get().to_string()
        >
            {move || match opened.get() {
                None => view! { <Welcome /> }.into_any(),
                Some((name, Opened::Trace(model))) => {
                    let findings = Arc::new(model.findings.clone());
                    view! { <TraceView model=model file_name=name theme=theme findings=findings /> }.into_any()
                }
                Some((name, Opened::Steps(steps))) => {
                    view! { <StepsPage model=steps file_name=name theme=theme /> }.into_any()
                }
                Some((name, Opened::Profile(model))) => {
                    view! { <ProfileView model=model file_name=name theme=theme /> }.into_any()
                }
                Some((_, Opened::Compare(model))) => {
                    view! { <CompareView model=model theme=theme /> }.into_any()
                }
                Some((_, Opened::Multi(model))) => {
                    view! { <MultiView model=model theme=theme /> }.into_any()
                }
                Some((name, Opened::Unsupported(panel))) => {
                    view! {
                        <section class="doc-page" data-testid="document" data-file=name.clone() data-format="unsupported">
                            <h2>{name.clone()} " could not be read"</h2>
                            <Diagnostics panel=(*panel).clone() />
                        </section>
                    }
                        .into_any()
                }
            }}
        </main>
    }
}

/// The files of a picker's or a drop's list, in order.
fn files_of(list: Option<web_sys::FileList>) -> Vec<web_sys::File> {
    list.map_or_else(Vec::new, |l| {
        (0..l.length()).filter_map(|i| l.get(i)).collect()
    })
}

/// A load's timings plus the page's own last step.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ShownTimings {
    load: LoadTimings,
    /// Building the view models.
    layout_ms: f64,
}

impl std::ops::Deref for ShownTimings {
    type Target = LoadTimings;
    fn deref(&self) -> &LoadTimings {
        &self.load
    }
}

/// How long opening the file took, in the top bar: the total in a few words, a dropdown of the
/// header's ([`HEADER_POPOVERS`]: a click, Enter or Space opens it, Escape closes it) with the
/// breakdown, each stage and where it ran, a line each (benchmarks read its data-*).
#[component]
fn LoadTimingsLine(timings: ShownTimings) -> impl IntoView {
    // The timings come from a millisecond clock (`Date.now()`): 0 is under a millisecond, not
    // 0 ns.
    let ms = |v: f64| {
        if v < 1.0 {
            String::from("< 1 ms")
        } else {
            format_ns((v * 1e6) as u64)
        }
    };
    // Parse throughput: reading every line plus the whole-file analysis, as natively.
    let parse_s = (timings.read_ms + timings.analyse_ms) / 1000.0;
    let rate = if parse_s > 0.0 {
        format!(" ({:.0} MB/s)", timings.bytes as f64 / 1e6 / parse_s)
    } else {
        String::new()
    };
    // Encoding and decoding overlap, and a trace's records cross during the analysis: the
    // hand-over counts once, its records' encoding before the analysis, then from the
    // analysis's end to the last byte decoded.
    let total = timings.start_ms
        + timings.read_ms
        + timings.records_ms
        + timings.analyse_ms
        + timings.handover_ms
        + timings.layout_ms;
    // The breakdown, a stage a line.
    let lines: Vec<String> = if timings.in_worker {
        let start = (timings.start_ms >= 1.0)
            .then(|| format!("worker started in {}", ms(timings.start_ms)));
        start
            .into_iter()
            .chain([
                format!(
                    "read {} and analysed {}{rate} in the worker",
                    ms(timings.read_ms),
                    ms(timings.analyse_ms)
                ),
                format!(
                    "handed {} to the page (encode {} and decode {}, overlapping; done {} after the analysis)",
                    format_bytes(timings.transfer_bytes),
                    ms(timings.encode_ms),
                    ms(timings.receive_ms),
                    ms(timings.handover_ms),
                ),
                format!("laid out in {}", ms(timings.layout_ms)),
            ])
            .collect()
    } else {
        vec![
            format!(
                "read {} and analysed {}{rate} on the page (no worker available)",
                ms(timings.read_ms),
                ms(timings.analyse_ms)
            ),
            format!("laid out in {}", ms(timings.layout_ms)),
        ]
    };
    let head = format!("Opened {} in {}:", format_bytes(timings.bytes), ms(total));
    let short = format!("opened {} in {}", format_bytes(timings.bytes), ms(total));
    view! {
        <details
            class="load-timings dropdown"
            name=HEADER_POPOVERS
            data-testid="load-timings"
            on:keydown=move |ev| close_on_escape(&ev)
            data-in-worker=timings.in_worker.to_string()
            data-bytes=timings.bytes.to_string()
            data-start-ms=format!("{:.1}", timings.start_ms)
            data-read-ms=format!("{:.1}", timings.read_ms)
            data-records-ms=format!("{:.1}", timings.records_ms)
            data-analyse-ms=format!("{:.1}", timings.analyse_ms)
            data-encode-ms=format!("{:.1}", timings.encode_ms)
            data-transfer-bytes=timings.transfer_bytes.to_string()
            data-receive-ms=format!("{:.1}", timings.receive_ms)
            data-handover-ms=format!("{:.1}", timings.handover_ms)
            data-layout-ms=format!("{:.1}", timings.layout_ms)
        >
            <summary>{short}</summary>
            <div class="dropdown-body" data-testid="load-timings-breakdown">
                <p>{head}</p>
                <ul>{lines.into_iter().map(|l| view! { <li>{l}</li> }).collect_view()}</ul>
            </div>
        </details>
    }
}

/// Every shortcut of the page (`timeline::input::SHORTCUTS`), shown by `?`.
#[component]
fn ShortcutsDialog(
    /// Closes the list.
    on_close: Callback<()>,
) -> impl IntoView {
    let close_ref = NodeRef::<leptos::html::Button>::new();
    // The dialog takes the focus; Escape or the button gives it back to the page.
    Effect::new(move |_| {
        if let Some(b) = close_ref.get() {
            let _ = b.focus();
        }
    });
    view! {
        <div class="dialog-backdrop" on:click=move |_| on_close.run(())></div>
        <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="shortcuts-title" data-testid="shortcuts">
            <h2 id="shortcuts-title">"Keyboard and mouse"</h2>
            <p class="muted">"The chart's keys work once the chart has the focus: after a click anywhere in it (the minimap and the memory strip included). Arrow keys act on what has the focus: the chart, the tab list, a table's row (↑/↓ move to the next row, Enter or Space select its spans) or the panel's edge."</p>
            <table>
                <tbody>
                    {SHORTCUTS.iter().map(|(keys, what)| view! {
                        <tr data-testid="shortcut"><th scope="row"><kbd>{*keys}</kbd></th><td>{*what}</td></tr>
                    }).collect_view()}
                </tbody>
            </table>
            <button type="button" node_ref=close_ref data-testid="shortcuts-close" on:click=move |_| on_close.run(())>"Close"</button>
        </div>
    }
}

/// What the page says before a file is open.
#[component]
fn Welcome() -> impl IntoView {
    view! {
        <section class="welcome">
            <p>
                "Open a candle-trace execution trace (trace/6) or an inference profile: pick a file, drop it on the page, or open the example. Files are read in the browser; nothing leaves this machine."
            </p>
        </section>
    }
}

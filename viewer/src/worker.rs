//! Parsing off the page: a dedicated module worker (`web/worker.js`) runs this same wasm and
//! reads, validates and analyses the file, then hands the page the document as a stream of
//! chunks (see [`crate::transfer`]). A trace's record tables are final once its last line is
//! read, so they go first, before the analysis, and the page decodes them while the worker
//! analyses; the rest (spans, span tree, memory profile, diagnostics) follows. The page decodes
//! each chunk while the worker writes the next, a block of rows at a time, yielding every
//! ~12 ms, so no task on the page grows with the file and the page never holds the whole
//! encoding.
//!
//! Messages (plain JS objects):
//! - worker → page `{type: "ready"}` once its wasm has started;
//! - page → worker `{file: File}` or `{url: "<absolute same-origin URL>"}`;
//! - worker → page `{type: "progress", read, total, lines}` about every MiB (`lines` null
//!   until the format is known, and for Chrome JSON), `{type: "chunk", bytes: ArrayBuffer}`
//!   for each chunk of the document (the buffer transferred, not copied): a trace's records
//!   first, then `{type: "analysing"}` when the whole-file analysis starts, then the other
//!   chunks, then `{type: "done", readMs, recordsMs, analyseMs, encodeMs, analysedAt}` (the
//!   times measured in the worker: `recordsMs` the records' encoding before the analysis,
//!   `encodeMs` both stages of encoding, `analysedAt` the analysis's end on `Date.now()`'s
//!   clock); after it, for a trace the page asked findings of (`findings: true`),
//!   `{type: "findings", bytes: ArrayBuffer, ms}` (`transfer::encode_findings`); or
//!   `{type: "failed", message}`.
//!
//! A worker serves one file. The page starts the next one ahead of need ([`prepare`], at mount
//! and two seconds after each load): while the user picks a file, a spare worker loads its
//! wasm, so opening does not wait for that. The page's first worker (named
//! [`WARM_WORKER`](crate::warm::WARM_WORKER)) is started by `web/loader.js` before the page's
//! own wasm, where it can, and the page takes it over at mount; it also warms the engine from
//! its start until a file comes (see [`crate::warm`]).
//!
//! Cancelling (or opening another file) terminates the worker: nothing it was doing reaches
//! the page. A worker that dies (out of memory on a huge file, for one) takes only itself
//! down; the page reports it and stays usable.

use std::cell::RefCell;

use futures::channel::mpsc;
use futures::StreamExt;
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

use candle_trace_schema::analysis::findings::{trace_findings, Findings};
use candle_trace_schema::format::detect::AnyDocument;

use crate::load::{read, same_origin, LoadError, Pacer, Source};
use crate::transfer::{Decoder, Stepped};

/// The worker script, next to `index.html`.
const WORKER_SCRIPT: &str = "./worker.js";

/// Where a load stands, for the progress bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stage {
    /// Bytes read so far, the total when known, lines seen.
    Reading {
        /// Bytes read.
        read: u64,
        /// File size, when known.
        total: Option<u64>,
        /// Lines read, once the format is known and is one of lines.
        lines: Option<u64>,
    },
    /// The whole-file analysis (span tree, memory profile) is running.
    Analysing,
    /// The page is taking over the analysed document.
    Receiving {
        /// Bytes decoded.
        done: u64,
        /// Bytes received so far.
        received: u64,
    },
}

/// Where the time of one load went (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoadTimings {
    /// Whether a worker did the reading (false: the page did, no worker available).
    pub in_worker: bool,
    /// Bytes of the file.
    pub bytes: u64,
    /// Waiting for the worker to be ready (0 when a spare one was waiting already).
    pub start_ms: f64,
    /// Reading and parsing every line (measured where it ran).
    pub read_ms: f64,
    /// Encoding and posting a trace's records (final once the last line is read) before the
    /// analysis (0 for other formats).
    pub records_ms: f64,
    /// The whole-file analysis: cross-record checks, span tree, memory profile.
    pub analyse_ms: f64,
    /// Encoding the document for the page, both stages: the records before the analysis,
    /// the rest after it.
    pub encode_ms: f64,
    /// Bytes handed from the worker to the page.
    pub transfer_bytes: u64,
    /// From the first chunk received to the document decoded on the page; the worker
    /// analyses (a trace's records come before the analysis) and encodes meanwhile.
    pub receive_ms: f64,
    /// From the end of the worker's analysis to the document decoded on the page: what the
    /// hand-over adds after the analysis, encoding and decoding overlapping (a trace's
    /// records crossed before, during the analysis).
    pub handover_ms: f64,
}

// ---------------------------------------------------------------------------------------------
// Inside the worker.

fn message(kind: &str) -> Object {
    let m = Object::new();
    let _ = Reflect::set(&m, &"type".into(), &kind.into());
    m
}

fn set(m: &Object, key: &str, value: JsValue) {
    let _ = Reflect::set(m, &key.into(), &value);
}

/// Start serving parse requests arriving on `port` (a worker's global scope, or the page's
/// channel when it reads files itself); `name` is the worker's.
pub fn serve(port: web_sys::MessagePort, name: &str) {
    let handler_port = port.clone();
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            crate::warm::stop();
            let port = handler_port.clone();
            wasm_bindgen_futures::spawn_local(async move { parse(port, ev.data()).await });
        });
    port.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The handler lives as long as the worker.
    on_message.forget();
    let _ = port.post_message(&message("ready"));
    if name == crate::warm::WARM_WORKER {
        // At once: a file chosen as soon as the page can take it then meets code that has
        // begun to tier up (faster than when the worker waited as the page does;
        // BENCHMARKS.md, one-offs).
        wasm_bindgen_futures::spawn_local(async {
            crate::warm::run(crate::warm::worker_round, next_task).await;
        });
    }
}

/// Call `f` `ms` from now, on the page or in a worker, whichever this is.
fn set_timeout(f: &js_sys::Function, ms: i32) {
    let global = js_sys::global();
    if let Some(window) = global.dyn_ref::<web_sys::Window>() {
        let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(f, ms);
    } else if let Some(scope) = global.dyn_ref::<web_sys::DedicatedWorkerGlobalScope>() {
        let _ = scope.set_timeout_with_callback_and_timeout_and_arguments_0(f, ms);
    }
}

/// Call `f` once, `ms` from now.
fn after(ms: i32, f: impl FnOnce() + 'static) {
    set_timeout(Closure::once_into_js(f).unchecked_ref(), ms);
}

/// Resolves in a later task of the event loop (in a worker, a message from the page first).
async fn next_task() {
    let promise = js_sys::Promise::new(&mut |resolve, _reject| set_timeout(&resolve, 0));
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

fn source_of(data: &JsValue) -> Option<Source> {
    if let Some(file) = Reflect::get(data, &"file".into())
        .ok()
        .and_then(|f| f.dyn_into::<web_sys::File>().ok())
    {
        return Some(Source::File(file));
    }
    Reflect::get(data, &"url".into())
        .ok()
        .and_then(|u| u.as_string())
        .map(Source::Url)
}

async fn parse(port: web_sys::MessagePort, data: JsValue) {
    let post = |m: &Object| {
        let _ = port.post_message(m);
    };
    let fail = |text: String| {
        let m = message("failed");
        set(&m, "message", text.into());
        post(&m);
    };
    let Some(source) = source_of(&data) else {
        fail("the page sent the worker nothing to read".into());
        return;
    };
    let progress = |read: u64, total: Option<u64>, lines: Option<u64>| {
        let m = message("progress");
        set(&m, "read", (read as f64).into());
        set(
            &m,
            "total",
            total.map_or(JsValue::NULL, |t| (t as f64).into()),
        );
        set(
            &m,
            "lines",
            lines.map_or(JsValue::NULL, |n| (n as f64).into()),
        );
        post(&m);
    };
    if let Source::File(file) = &source {
        // The document takes about as many bytes as the file (see `reserve_heap`).
        crate::load::reserve_heap(file.size() as usize);
    }
    let started = js_sys::Date::now();
    let reader = match read(source, progress, || true).await {
        Ok(reader) => reader,
        Err(LoadError::Failed(text)) => return fail(text),
        Err(LoadError::Cancelled) => return,
    };
    // The last line read, the record tables are final: they go first, and the page decodes
    // them while this worker analyses.
    let read = reader.end_input();
    let records_since = js_sys::Date::now();
    // Each chunk goes as soon as it is written: the page decodes it while the next is.
    let mut posted = true;
    let mut post_chunk = |chunk: Vec<u8>| {
        // One copy into a JS buffer, which then moves to the page without another.
        let array = Uint8Array::from(&chunk[..]);
        let m = message("chunk");
        set(&m, "bytes", array.buffer().into());
        posted &= port
            .post_message_with_transferable(&m, &Array::of1(&array.buffer()))
            .is_ok();
    };
    let staged = read
        .records()
        .map(|records| crate::transfer::encode_records(records, &mut post_chunk));
    post(&message("analysing"));
    let analysing_since = js_sys::Date::now();
    let doc = read.finish();
    let analysed_at = js_sys::Date::now();
    match (staged, &doc) {
        (Some(staged), AnyDocument::Trace(t)) => staged.encode_rest(t, &mut post_chunk),
        (None, doc) => crate::transfer::encode(doc, &mut post_chunk),
        // A reader with records finishes as a trace.
        (Some(_), _) => {
            return fail("the worker read a trace that did not finish as one".into());
        }
    }
    if !posted {
        return fail("the worker could not hand the document to the page".into());
    }
    let done_at = js_sys::Date::now();
    let m = message("done");
    set(&m, "readMs", (records_since - started).into());
    set(&m, "recordsMs", (analysing_since - records_since).into());
    set(&m, "analyseMs", (analysed_at - analysing_since).into());
    set(
        &m,
        "encodeMs",
        ((analysing_since - records_since) + (done_at - analysed_at)).into(),
    );
    set(&m, "analysedAt", analysed_at.into());
    post(&m);
    // While the page lays the document out, its findings (the costly whole-document
    // analysis left): a few dozen ranked rows, as bytes (`transfer::encode_findings`).
    let wants_findings = Reflect::get(&data, &"findings".into())
        .ok()
        .and_then(|f| f.as_bool())
        .unwrap_or(false);
    if let (true, AnyDocument::Trace(t)) = (wants_findings, &doc) {
        let since = js_sys::Date::now();
        let findings = trace_findings(&[t]);
        drop(doc);
        let array = Uint8Array::from(&crate::transfer::encode_findings(&findings)[..]);
        let m = message("findings");
        set(&m, "bytes", array.buffer().into());
        set(&m, "ms", (js_sys::Date::now() - since).into());
        post(&m);
    }
}

// ---------------------------------------------------------------------------------------------
// On the page.

/// What the page hears from its worker.
enum Heard {
    Ready,
    Progress(Stage),
    /// A chunk of the document.
    Chunk(js_sys::ArrayBuffer),
    Done(Box<Finished>),
    /// A trace's findings, as `transfer::encode_findings` wrote them.
    Findings(js_sys::ArrayBuffer),
    Failed(String),
    /// The worker died (an uncaught error: typically out of memory).
    Crashed(String),
    Cancelled,
}

/// The worker's `done`: its own timings.
struct Finished {
    /// When its analysis ended (`Date.now()`, the same clock as the page's).
    analysed_at: f64,
    read_ms: f64,
    records_ms: f64,
    analyse_ms: f64,
    encode_ms: f64,
}

/// The page's current worker, so cancelling can stop it at once.
struct Running {
    worker: web_sys::Worker,
    heard: mpsc::UnboundedSender<Heard>,
    // Kept alive while the worker runs.
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::ErrorEvent)>,
}

/// A started worker and what it has said so far.
struct Spawned {
    running: Running,
    heard: mpsc::UnboundedReceiver<Heard>,
}

thread_local! {
    /// The page has started a worker.
    static SPAWNED_ONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static RUNNING: RefCell<Option<Running>> = const { RefCell::new(None) };
    /// A worker started ahead of need, loading its wasm (or ready) while nothing is open.
    static SPARE: RefCell<Option<Spawned>> = const { RefCell::new(None) };
}

/// When nothing has been opened [`IDLE_MS`](crate::warm::IDLE_MS) after the page could take a
/// file, warm the page's code (its first worker warms itself, see [`serve`]).
pub fn warm_page_when_idle() {
    after(crate::warm::IDLE_MS, || {
        if crate::warm::stopped() {
            return;
        }
        wasm_bindgen_futures::spawn_local(async {
            let input = crate::warm::page_input();
            let round = || {
                let _ = crate::warm::page_round(&input);
            };
            crate::warm::run(round, next_task).await;
        });
    });
}

/// Start a spare worker, if there is none, so that the next [`open`] finds one ready.
pub fn prepare() {
    if SPARE.with(|s| s.borrow().is_none()) {
        let spawned = spawn();
        SPARE.with(|s| *s.borrow_mut() = spawned);
    }
}

/// Stop the current load's worker, if any; its `open` returns [`LoadError::Cancelled`].
pub fn cancel() {
    if let Some(running) = RUNNING.with(|r| r.borrow_mut().take()) {
        running.worker.terminate();
        let _ = running.heard.unbounded_send(Heard::Cancelled);
    }
}

fn heard_of(data: &JsValue) -> Option<Heard> {
    let kind = Reflect::get(data, &"type".into()).ok()?.as_string()?;
    let num = |key: &str| {
        Reflect::get(data, &key.into())
            .ok()
            .and_then(|v| v.as_f64())
    };
    Some(match kind.as_str() {
        "ready" => Heard::Ready,
        "progress" => Heard::Progress(Stage::Reading {
            read: num("read").unwrap_or(0.0) as u64,
            total: num("total").map(|t| t as u64),
            lines: num("lines").map(|n| n as u64),
        }),
        "analysing" => Heard::Progress(Stage::Analysing),
        "chunk" => Heard::Chunk(
            Reflect::get(data, &"bytes".into())
                .ok()?
                .dyn_into::<js_sys::ArrayBuffer>()
                .ok()?,
        ),
        "findings" => Heard::Findings(
            Reflect::get(data, &"bytes".into())
                .ok()?
                .dyn_into::<js_sys::ArrayBuffer>()
                .ok()?,
        ),
        "done" => Heard::Done(Box::new(Finished {
            analysed_at: num("analysedAt").unwrap_or(0.0),
            read_ms: num("readMs").unwrap_or(0.0),
            records_ms: num("recordsMs").unwrap_or(0.0),
            analyse_ms: num("analyseMs").unwrap_or(0.0),
            encode_ms: num("encodeMs").unwrap_or(0.0),
        })),
        "failed" => Heard::Failed(
            Reflect::get(data, &"message".into())
                .ok()
                .and_then(|m| m.as_string())
                .unwrap_or_else(|| "the worker failed".into()),
        ),
        _ => return None,
    })
}

/// Start a worker, or `None` where the page cannot have one.
fn spawn() -> Option<Spawned> {
    let options = web_sys::WorkerOptions::new();
    options.set_type(web_sys::WorkerType::Module);
    // The page's first worker warms the engine while the user picks a file (`warm`); later
    // ones find it warm.
    if !SPAWNED_ONE.with(|s| s.replace(true)) {
        if let Some(first) = started_by_loader() {
            return Some(first);
        }
        options.set_name(crate::warm::WARM_WORKER);
    }
    let worker = web_sys::Worker::new_with_options(WORKER_SCRIPT, &options).ok()?;
    Some(listen(worker))
}

/// The page's first worker, when `web/loader.js` started it before the page's wasm
/// (`window.candleTraceFirstWorker`: the worker, named [`WARM_WORKER`](crate::warm::WARM_WORKER),
/// and the events it fired until now), listened to from here on with what it said so far.
fn started_by_loader() -> Option<Spawned> {
    let global = js_sys::global();
    let key = JsValue::from_str("candleTraceFirstWorker");
    let first = Reflect::get(&global, &key)
        .ok()
        .filter(JsValue::is_object)?;
    let _ = Reflect::delete_property(&global, &key);
    let worker: web_sys::Worker = Reflect::get(&first, &"worker".into())
        .ok()?
        .dyn_into()
        .ok()?;
    let early: Array = Reflect::get(&first, &"heard".into())
        .ok()?
        .dyn_into()
        .ok()?;
    let spawned = listen(worker);
    // In the order fired; whatever comes next reaches `listen`'s handlers after these.
    for event in early.iter() {
        let is_error = Reflect::get(&event, &"type".into())
            .ok()
            .and_then(|t| t.as_string())
            .is_some_and(|t| t == "error");
        let heard = if is_error {
            Some(crashed(&event))
        } else {
            Reflect::get(&event, &"data".into())
                .ok()
                .and_then(|data| heard_of(&data))
        };
        if let Some(h) = heard {
            let _ = spawned.running.heard.unbounded_send(h);
        }
    }
    Some(spawned)
}

/// A worker's `error` event as what the page hears.
fn crashed(event: &JsValue) -> Heard {
    // A worker whose script did not load fires a plain `Event`, without `message`.
    let message = Reflect::get(event, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_else(|| String::from("its script could not be loaded"));
    Heard::Crashed(message)
}

/// The worker's messages, and its death, as [`Heard`]s.
fn listen(worker: web_sys::Worker) -> Spawned {
    let (tx, rx) = mpsc::unbounded();
    let to_page = tx.clone();
    let on_message =
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            if let Some(h) = heard_of(&ev.data()) {
                let _ = to_page.unbounded_send(h);
            }
        });
    let to_page = tx.clone();
    let on_error =
        Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |ev: web_sys::ErrorEvent| {
            ev.prevent_default();
            let _ = to_page.unbounded_send(crashed(&ev));
        });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    Spawned {
        running: Running {
            worker,
            heard: tx,
            _on_message: on_message,
            _on_error: on_error,
        },
        heard: rx,
    }
}

/// The parsing worker's wasm run on the page itself, for a page that cannot start a worker:
/// `web/loader.js`'s `candleTraceWorkerHere` loads it and hands back an object that the page
/// talks to as to a worker (`postMessage`, `onmessage`, `onerror`, `terminate`) over a
/// `MessageChannel`. `None` where there is no such function (the `report`'s page) or it fails.
async fn worker_here() -> Option<(web_sys::Worker, mpsc::UnboundedReceiver<Heard>)> {
    let start = Reflect::get(&js_sys::global(), &"candleTraceWorkerHere".into())
        .ok()?
        .dyn_into::<js_sys::Function>()
        .ok()?;
    let promise = start
        .call0(&JsValue::UNDEFINED)
        .ok()?
        .dyn_into::<js_sys::Promise>()
        .ok()?;
    let here = match wasm_bindgen_futures::JsFuture::from(promise).await {
        Ok(here) => here,
        Err(e) => {
            web_sys::console::warn_1(
                &format!("the page could not run the parsing worker's code itself: {e:?}").into(),
            );
            return None;
        }
    };
    // Not a `Worker`, but it answers to every method the page calls on one.
    let Spawned { running, heard } = listen(here.unchecked_into());
    cancel();
    let worker = running.worker.clone();
    RUNNING.with(|r| *r.borrow_mut() = Some(running));
    Some((worker, heard))
}

/// The spare worker (or a new one) as the current load's, after cancelling any other load.
fn take_worker() -> Option<(web_sys::Worker, mpsc::UnboundedReceiver<Heard>)> {
    let Spawned { running, heard } = SPARE.with(|s| s.borrow_mut().take()).or_else(spawn)?;
    cancel();
    let worker = running.worker.clone();
    RUNNING.with(|r| *r.borrow_mut() = Some(running));
    Some((worker, heard))
}

/// What comes after a load's document: a trace's findings, which the worker computes while
/// the page lays the document out. Dropping it lets the worker go.
pub struct Pending {
    worker: Option<(web_sys::Worker, mpsc::UnboundedReceiver<Heard>)>,
}

impl Pending {
    /// The findings the worker computed; `None` where it computed none (no worker, not a
    /// trace, not asked for, or the worker failed): the page computes them then.
    pub async fn findings(mut self) -> Option<Findings> {
        let (_, rx) = self.worker.as_mut()?;
        loop {
            match rx.next().await? {
                Heard::Findings(bytes) => {
                    return crate::transfer::decode_findings(&Uint8Array::new(&bytes).to_vec())
                        .ok();
                }
                Heard::Progress(_) | Heard::Ready => {}
                _ => return None,
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some((worker, _)) = self.worker.take() {
            // Its work is done; ending it takes the page's thread some milliseconds, which
            // would come just before the page shows what it loaded.
            forget(&worker);
            after(TERMINATE_DELAY_MS, move || worker.terminate());
            prepare_later();
        }
    }
}

/// Read, validate and analyse `source` in a worker and return the document, reporting each
/// [`Stage`], and (with `findings`) the worker's findings to come. Where the page cannot start
/// a worker, the same work runs on the page.
pub async fn open(
    source: Source,
    findings: bool,
    stage: impl Fn(Stage),
    is_current: impl Fn() -> bool,
) -> Result<(AnyDocument, LoadTimings, Pending), LoadError> {
    crate::warm::stop();
    if let Source::Url(url) = &source {
        same_origin(url)?;
    }
    // Where no worker starts, the page runs the worker's code itself.
    let mut in_worker = true;
    let (mut worker, mut rx) = match take_worker() {
        Some(w) => w,
        None => {
            in_worker = false;
            worker_here().await.ok_or_else(no_worker)?
        }
    };
    let request = Object::new();
    match &source {
        Source::File(file) => set(&request, "file", file.into()),
        Source::Url(url) => set(&request, "url", same_origin(url)?.into()),
    }
    set(&request, "findings", findings.into());
    let started = js_sys::Date::now();
    let mut timings = LoadTimings {
        in_worker,
        ..LoadTimings::default()
    };
    // A worker that fails before it is ready (its wasm did not start: a spare that broke while
    // idle, a failed fetch) has seen no file. One fresh worker is tried; if it fails the same
    // way, the file is read on the page.
    let mut ready = false;
    let mut fresh_tried = false;
    let mut decoder = Decoder::new();
    // One pacer for every chunk: chunks queued while one is decoded follow without a yield.
    let mut pacer = Pacer::new();
    // When the first chunk came.
    let mut received_since: Option<f64> = None;
    let result = loop {
        let Some(heard) = rx.next().await else {
            break Err(LoadError::Cancelled);
        };
        if !is_current() {
            break Err(LoadError::Cancelled);
        }
        match heard {
            Heard::Ready => {
                ready = true;
                timings.start_ms = js_sys::Date::now() - started;
                if let Err(e) = worker.post_message(&request) {
                    break Err(LoadError::Failed(format!(
                        "cannot hand the file to the parsing worker: {e:?}"
                    )));
                }
            }
            Heard::Progress(s) => {
                if let Stage::Reading { read, .. } = s {
                    timings.bytes = read;
                }
                stage(s)
            }
            Heard::Chunk(bytes) => {
                let since = *received_since.get_or_insert_with(js_sys::Date::now);
                timings.transfer_bytes += u64::from(bytes.byte_length());
                if let Err(e) =
                    receive(&mut decoder, &bytes, timings.transfer_bytes, &mut pacer, &stage, &is_current)
                        .await
                {
                    break Err(e);
                }
                timings.receive_ms = js_sys::Date::now() - since;
            }
            Heard::Done(finished) => {
                let Finished {
                    analysed_at,
                    read_ms,
                    records_ms,
                    analyse_ms,
                    encode_ms,
                } = *finished;
                timings.read_ms = read_ms;
                timings.records_ms = records_ms;
                timings.analyse_ms = analyse_ms;
                timings.encode_ms = encode_ms;
                timings.handover_ms = js_sys::Date::now() - analysed_at;
                match std::mem::take(&mut decoder).finish() {
                    // The worker stays until its findings come (or `Pending` is dropped).
                    Ok(doc) => {
                        return Ok((
                            doc,
                            timings,
                            Pending {
                                worker: Some((worker, rx)),
                            },
                        ))
                    }
                    Err(e) => break Err(LoadError::Failed(e.to_string())),
                }
            }
            Heard::Findings(_) => {}
            Heard::Failed(text) | Heard::Crashed(text) if !ready => {
                web_sys::console::warn_1(
                    &format!("the parsing worker did not start: {text}").into(),
                );
                release(&worker);
                if !timings.in_worker {
                    break Err(no_worker());
                }
                let next = if fresh_tried { None } else { take_worker() };
                fresh_tried = true;
                (worker, rx) = match next {
                    Some(w) => w,
                    None => {
                        timings.in_worker = false;
                        worker_here().await.ok_or_else(no_worker)?
                    }
                };
            }
            Heard::Failed(text) => break Err(LoadError::Failed(text)),
            Heard::Crashed(text) => {
                break Err(LoadError::Failed(format!(
                    "the parsing worker stopped ({text}); a file this large may not fit in the browser's memory for one tab — try a smaller capture (fewer steps or spans)"
                )))
            }
            Heard::Cancelled => break Err(LoadError::Cancelled),
        }
    };
    release(&worker);
    prepare_later();
    result
}

/// Done with `worker` (a newer load may already have replaced it as the running one).
fn release(worker: &web_sys::Worker) {
    forget(worker);
    worker.terminate();
}

/// `worker` is no longer the running one (where it still is).
fn forget(worker: &web_sys::Worker) {
    RUNNING.with(|r| {
        let mut r = r.borrow_mut();
        if r.as_ref().is_some_and(|running| &running.worker == worker) {
            *r = None;
        }
    });
}

/// [`prepare`] once the page has shown what it just loaded: a worker starting up (compiling
/// its wasm) at the same time would slow the page's layout and first render.
fn prepare_later() {
    after(PREPARE_DELAY_MS, prepare);
}

/// How long after its findings came a load's worker is ended.
const TERMINATE_DELAY_MS: i32 = 500;

/// How long after a load the next spare worker starts.
const PREPARE_DELAY_MS: i32 = 2000;

/// Decode one chunk of the worker's document a bounded step at a time, yielding to the page
/// as it goes. The chunk is copied straight from its JS buffer into the decoder's own (reused
/// for every chunk), so the page's memory holds one chunk at a time.
async fn receive(
    decoder: &mut Decoder,
    buffer: &js_sys::ArrayBuffer,
    received: u64,
    pacer: &mut Pacer,
    stage: &impl Fn(Stage),
    is_current: &impl Fn() -> bool,
) -> Result<(), LoadError> {
    let broken = |e: crate::transfer::TransferError| LoadError::Failed(e.to_string());
    let array = Uint8Array::new(buffer);
    decoder
        .push_with(array.length() as usize, |to| array.copy_to(to))
        .map_err(broken)?;
    while decoder.step().map_err(broken)? == Stepped::More {
        stage(Stage::Receiving {
            done: decoder.position() as u64,
            received,
        });
        pacer.pace().await;
        if !is_current() {
            return Err(LoadError::Cancelled);
        }
    }
    Ok(())
}

/// Neither a worker nor the page itself could run the parsing worker's code.
fn no_worker() -> LoadError {
    LoadError::Failed(
        "no parsing worker could start, and the page could not read the file itself".into(),
    )
}

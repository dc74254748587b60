//! Reading a file in the browser: a picked or dropped `File` in `Blob` slices, or a same-origin
//! URL as a response stream, fed chunk by chunk to [`AnyReader`]. Never one JS string.
//!
//! What the page opens at start ([`at_start`]): files its boot handed over
//! (`window.candleTraceFiles`, the one-file report's traces), else `?url=` — one URL read as a
//! stream, or several (the parameter given more than once, as `candle-trace view` does for a
//! directory of step files) fetched whole ([`fetch_files`]) and opened as a picked set.
//!
//! [`read`] is the reading loop. It normally runs inside the parsing worker (see
//! [`crate::worker`]), which also does the whole-file analysis and hands the page the finished
//! document; on a page without workers it runs on the page itself, yielding to the event loop
//! between chunks so the progress bar keeps painting.

use candle_trace_schema::format::detect::AnyReader;
use js_sys::{Promise, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// Bytes read from a `File` per step.
pub const CHUNK_BYTES: f64 = (1 << 20) as f64;

/// Bytes read between two progress reports of a stream (a worker's file, a URL).
const PROGRESS_BYTES: u64 = 1 << 20;

/// Where a file comes from.
#[derive(Clone)]
pub enum Source {
    /// A picked or dropped file.
    File(web_sys::File),
    /// A same-origin URL (`?url=` or the example).
    Url(String),
}

/// Why reading stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// A newer load (or the cancel button) replaced this one.
    Cancelled,
    /// The browser could not read the file or URL.
    Failed(String),
}

fn js_err(context: &str, e: JsValue) -> LoadError {
    let detail = e
        .as_string()
        .or_else(|| {
            e.dyn_ref::<js_sys::Error>()
                .map(|err| String::from(err.message()))
        })
        .unwrap_or_else(|| "unknown error".to_string());
    LoadError::Failed(format!("{context}: {detail}"))
}

/// Resolve in a later task of the page's event loop, so that the browser can paint and handle
/// input in between: a message to a channel of the page's own. Not a zero-delay timer, which
/// browsers hold for at least 4 ms once nested five deep (a quarter of every 16 ms of a long
/// decode spent waiting), nor `scheduler.yield()`, whose continuation goes ahead of rendering
/// (the progress bar then painted about every 110 ms, not every frame; BENCHMARKS.md,
/// one-offs). In a worker (no page to keep responsive) it returns at once.
pub async fn yield_now() {
    let Some(window) = web_sys::window() else {
        return;
    };
    let promise = Promise::new(&mut |resolve, _reject| {
        let posted = YIELDS.with(|y| y.as_ref().map(|y| y.post(resolve.clone())));
        if posted != Some(true) {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0);
        }
    });
    let _ = JsFuture::from(promise).await;
}

/// A channel whose messages resolve [`yield_now`]'s promises, one message each, in order.
struct Yields {
    /// The end messages are posted to.
    port: web_sys::MessagePort,
    /// Resolvers waiting for their message.
    waiting: std::rc::Rc<std::cell::RefCell<std::collections::VecDeque<js_sys::Function>>>,
    /// The other end's handler, kept alive with the channel.
    _on_message: wasm_bindgen::closure::Closure<dyn FnMut()>,
}

impl Yields {
    fn new() -> Option<Self> {
        let channel = web_sys::MessageChannel::new().ok()?;
        let waiting = std::rc::Rc::new(std::cell::RefCell::new(std::collections::VecDeque::<
            js_sys::Function,
        >::new()));
        let queue = std::rc::Rc::clone(&waiting);
        let on_message = wasm_bindgen::closure::Closure::<dyn FnMut()>::new(move || {
            let next = queue.borrow_mut().pop_front();
            if let Some(resolve) = next {
                let _ = resolve.call0(&JsValue::NULL);
            }
        });
        channel
            .port1()
            .set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        Some(Yields {
            port: channel.port2(),
            waiting,
            _on_message: on_message,
        })
    }

    /// Queue `resolve` for the next message and post it; `false` if the post failed.
    fn post(&self, resolve: js_sys::Function) -> bool {
        self.waiting.borrow_mut().push_back(resolve);
        if self.port.post_message(&JsValue::NULL).is_ok() {
            return true;
        }
        self.waiting.borrow_mut().pop_back();
        false
    }
}

thread_local! {
    static YIELDS: Option<Yields> = Yields::new();
}

/// Grow the wasm heap by about `bytes` in one step before a large load.
///
/// Reading a file makes a great many small allocations; without this, the allocator grows the
/// wasm memory a little at a time as they come, and the growing itself cost about a third of
/// the parse (a 100 MB trace in V8: 1094 ms on a fresh instance, 719 ms after growing first,
/// 621 ms on a warm one). The block is allocated and freed at once, so its pages are not
/// touched (no RAM is used until the allocations that follow fill them). When the memory
/// cannot grow that far, nothing happens; the load then grows it as it goes.
pub fn reserve_heap(bytes: usize) {
    let mut block: Vec<u8> = Vec::new();
    // At most 1 GiB: a larger file is read anyway, and wasm32 has 4 GiB in all.
    let _ = block.try_reserve_exact(bytes.min(1 << 30));
}

/// Yields to the page when it has been busy for a frame's worth of time, so a long run of
/// short steps neither blocks painting nor yields after every step.
pub struct Pacer {
    since: f64,
}

impl Pacer {
    /// Busy time after which [`Pacer::pace`] yields.
    const BUDGET_MS: f64 = 12.0;

    /// Start counting now.
    pub fn new() -> Self {
        Pacer {
            since: js_sys::Date::now(),
        }
    }

    /// Yield if the budget is spent.
    pub async fn pace(&mut self) {
        if js_sys::Date::now() - self.since >= Self::BUDGET_MS {
            yield_now().await;
            self.since = js_sys::Date::now();
        }
    }
}

/// Read `source` to the end into a reader; the caller calls `finish()` (the analysis that
/// needs the whole file, a single step). `progress(bytes_read, total, lines_read)` is called
/// after each chunk, with the reader's own count of lines (`None` until the format is known
/// and for Chrome JSON); `is_current()` is asked before each chunk and a `false` stops the read as cancelled.
pub async fn read(
    source: Source,
    progress: impl Fn(u64, Option<u64>, Option<u64>),
    is_current: impl Fn() -> bool,
) -> Result<AnyReader, LoadError> {
    // A file's size lets a trace's record lists grow once to their final size.
    let mut reader = match &source {
        Source::File(file) => AnyReader::with_size_hint(file.size() as u64),
        Source::Url(_) => AnyReader::new(),
    };
    match source {
        Source::File(file) => read_file(&file, &mut reader, &progress, &is_current).await?,
        Source::Url(url) => {
            // On the page, check the origin here; a worker gets URLs the page already checked.
            let url = match web_sys::window() {
                Some(_) => same_origin(&url)?,
                None => url,
            };
            read_url(&url, &mut reader, &progress, &is_current).await?
        }
    }
    if !is_current() {
        return Err(LoadError::Cancelled);
    }
    Ok(reader)
}

async fn read_file(
    file: &web_sys::File,
    reader: &mut AnyReader,
    progress: &impl Fn(u64, Option<u64>, Option<u64>),
    is_current: &impl Fn() -> bool,
) -> Result<(), LoadError> {
    let size = file.size();
    if web_sys::window().is_none() {
        // In a worker nothing waits between chunks: the file as one stream, which the browser
        // fills ahead of the parse (with slices read one ahead the worker sat idle between
        // them; BENCHMARKS.md, one-offs).
        let stream = file.stream();
        return read_stream(&stream, Some(size as u64), reader, progress, is_current).await;
    }
    progress(0, Some(size as u64), None);
    // On the page a chunk is also a step between yields, so it stays small. Read ahead: the
    // browser reads the next slice while this one is parsed.
    let slice = |from: f64| -> Result<JsFuture, LoadError> {
        let blob = file
            .slice_with_f64_and_f64(from, (from + CHUNK_BYTES).min(size))
            .map_err(|e| js_err("cannot slice the file", e))?;
        Ok(JsFuture::from(blob.array_buffer()))
    };
    let mut offset = 0.0;
    let mut next = if size > 0.0 { Some(slice(0.0)?) } else { None };
    let mut bytes = Vec::new();
    while let Some(pending) = next.take() {
        if !is_current() {
            return Err(LoadError::Cancelled);
        }
        let buffer = pending
            .await
            .map_err(|e| js_err("cannot read the file", e))?;
        let end = (offset + CHUNK_BYTES).min(size);
        if end < size {
            next = Some(slice(end)?);
        }
        let array = Uint8Array::new(&buffer);
        bytes.resize(array.length() as usize, 0);
        array.copy_to(&mut bytes);
        reader.push(&bytes);
        offset = end;
        progress(offset as u64, Some(size as u64), reader.lines_read());
        if reader.is_rejected() {
            break;
        }
        yield_now().await;
    }
    Ok(())
}

/// The URL resolved against the page, if it has the page's origin.
pub fn same_origin(url: &str) -> Result<String, LoadError> {
    let window = web_sys::window().ok_or_else(|| LoadError::Failed("no window".into()))?;
    let here = window
        .location()
        .href()
        .map_err(|e| js_err("cannot read the page address", e))?;
    let resolved = web_sys::Url::new_with_base(url, &here)
        .map_err(|_| LoadError::Failed(format!("`{url}` is not a valid address")))?;
    let origin = window
        .location()
        .origin()
        .map_err(|e| js_err("cannot read the page origin", e))?;
    if resolved.origin() != origin {
        return Err(LoadError::Failed(format!(
            "`{url}` is on another origin; the viewer only opens files from its own origin"
        )));
    }
    Ok(resolved.href())
}

/// What the page opens when it starts.
pub enum AtStart {
    /// Nothing: the welcome text.
    Nothing,
    /// Files the page's boot handed over, opened like files picked together.
    Files(Vec<web_sys::File>),
    /// One `?url=`, read as a stream.
    Url(String),
    /// Several `?url=`s, fetched whole and opened like files picked together.
    Urls(Vec<String>),
}

/// What the page opens when it starts: the files in `window.candleTraceFiles` (an array of
/// `File`s that a page's own boot script sets before the wasm starts), else every non-empty
/// `?url=` of the page's address.
pub fn at_start() -> AtStart {
    let Some(window) = web_sys::window() else {
        return AtStart::Nothing;
    };
    let handed: Vec<web_sys::File> = Reflect::get(&window, &JsValue::from_str("candleTraceFiles"))
        .ok()
        .and_then(|v| v.dyn_into::<js_sys::Array>().ok())
        .map(|a| a.iter().filter_map(|f| f.dyn_into().ok()).collect())
        .unwrap_or_default();
    if !handed.is_empty() {
        return AtStart::Files(handed);
    }
    let mut urls: Vec<String> = window
        .location()
        .search()
        .ok()
        .and_then(|s| web_sys::UrlSearchParams::new_with_str(&s).ok())
        .map(|p| {
            p.get_all("url")
                .iter()
                .filter_map(|u| u.as_string())
                .collect()
        })
        .unwrap_or_default();
    urls.retain(|u| !u.trim().is_empty());
    match urls.len() {
        0 => AtStart::Nothing,
        1 => AtStart::Url(urls.remove(0)),
        _ => AtStart::Urls(urls),
    }
}

/// The last path segment of a URL, percent-decoded (as it is when it does not decode): the
/// name a `?url=` file is shown under.
pub fn file_name_of(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let last = path.rsplit('/').next().unwrap_or(path);
    js_sys::decode_uri_component(last)
        .ok()
        .and_then(|s| s.as_string())
        .unwrap_or_else(|| last.to_string())
}

/// Same-origin URLs fetched whole, in order, each as a `File` named by [`file_name_of`].
pub async fn fetch_files(urls: &[String]) -> Result<Vec<web_sys::File>, LoadError> {
    let mut files = Vec::with_capacity(urls.len());
    for url in urls {
        let resolved = same_origin(url)?;
        let response: web_sys::Response = JsFuture::from(fetch(&resolved)?)
            .await
            .map_err(|e| js_err(&format!("cannot fetch {url}"), e))?
            .dyn_into()
            .map_err(|e| js_err("unexpected fetch result", e))?;
        if !response.ok() {
            return Err(LoadError::Failed(format!(
                "fetching {url} failed with HTTP {}",
                response.status()
            )));
        }
        let blob = response
            .blob()
            .map_err(|e| js_err(&format!("cannot read {url}"), e))?;
        let blob = JsFuture::from(blob)
            .await
            .map_err(|e| js_err(&format!("cannot read {url}"), e))?;
        let file =
            web_sys::File::new_with_blob_sequence(&js_sys::Array::of1(&blob), &file_name_of(url))
                .map_err(|e| js_err(&format!("cannot read {url}"), e))?;
        files.push(file);
    }
    Ok(files)
}

/// `fetch(url)` on the page or in a worker.
fn fetch(url: &str) -> Result<Promise, LoadError> {
    if let Some(window) = web_sys::window() {
        return Ok(window.fetch_with_str(url));
    }
    js_sys::global()
        .dyn_into::<web_sys::WorkerGlobalScope>()
        .map(|scope| scope.fetch_with_str(url))
        .map_err(|_| LoadError::Failed("neither a page nor a worker: cannot fetch".into()))
}

async fn read_url(
    url: &str,
    reader: &mut AnyReader,
    progress: &impl Fn(u64, Option<u64>, Option<u64>),
    is_current: &impl Fn() -> bool,
) -> Result<(), LoadError> {
    let response: web_sys::Response = JsFuture::from(fetch(url)?)
        .await
        .map_err(|e| js_err("cannot fetch the file", e))?
        .dyn_into()
        .map_err(|e| js_err("unexpected fetch result", e))?;
    if !response.ok() {
        return Err(LoadError::Failed(format!(
            "fetching the file failed with HTTP {}",
            response.status()
        )));
    }
    let total = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<u64>().ok());
    let Some(body) = response.body() else {
        return Ok(());
    };
    read_stream(&body, total, reader, progress, is_current).await
}

/// Bytes a byte stream's reader asks for at a time, into its own buffer.
const BYOB_BYTES: u32 = 4 << 20;

/// A stream's reader: one that brings its own buffer where the stream is a byte stream (a
/// `File`'s and a response's body in current browsers), else the default one. The default
/// reader hands over each chunk in a new buffer the browser allocates and fills: about 70–120
/// ms of the worker's own time for a 100 MB file, against 10–20 ms when the browser fills one
/// buffer passed back and forth (BENCHMARKS.md, one-offs).
enum StreamReader {
    Byob {
        reader: web_sys::ReadableStreamByobReader,
        /// The buffer lent to the stream for the next read (moved, and handed back filled).
        buffer: js_sys::ArrayBuffer,
    },
    Default(web_sys::ReadableStreamDefaultReader),
}

impl StreamReader {
    fn of(body: &web_sys::ReadableStream) -> Result<Self, LoadError> {
        if let Ok(reader) = web_sys::ReadableStreamByobReader::new(body) {
            return Ok(Self::Byob {
                reader,
                buffer: js_sys::ArrayBuffer::new(BYOB_BYTES),
            });
        }
        body.get_reader()
            .dyn_into()
            .map(Self::Default)
            .map_err(|e| js_err("cannot stream the file", e.into()))
    }

    /// The next chunk, `None` at the end of the stream.
    async fn next(&mut self) -> Result<Option<Uint8Array>, LoadError> {
        let promise = match self {
            Self::Byob { reader, buffer } => reader.read_with_array_buffer_view(
                &Uint8Array::new_with_byte_offset_and_length(buffer, 0, BYOB_BYTES),
            ),
            Self::Default(reader) => reader.read(),
        };
        let result = JsFuture::from(promise)
            .await
            .map_err(|e| js_err("cannot read the stream", e))?;
        let done = Reflect::get(&result, &JsValue::from_str("done"))
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        if done {
            return Ok(None);
        }
        let value = Reflect::get(&result, &JsValue::from_str("value"))
            .map_err(|e| js_err("cannot read the stream", e))?;
        // A stream's chunks are `Uint8Array`s already: `new Uint8Array(chunk)` would copy each
        // one in JS first (156 ms of a 100 MB read in a CDP profile).
        let chunk = value
            .dyn_into::<Uint8Array>()
            .unwrap_or_else(|other| Uint8Array::new(&other));
        if let Self::Byob { buffer, .. } = self {
            // The filled view is over the buffer lent: it goes back for the next read.
            *buffer = chunk.buffer();
        }
        Ok(Some(chunk))
    }

    fn cancel(&self) {
        let _ = match self {
            Self::Byob { reader, .. } => reader.cancel(),
            Self::Default(reader) => reader.cancel(),
        };
    }
}

/// Read `body` to its end into `reader`, reporting progress every [`PROGRESS_BYTES`].
async fn read_stream(
    body: &web_sys::ReadableStream,
    total: Option<u64>,
    reader: &mut AnyReader,
    progress: &impl Fn(u64, Option<u64>, Option<u64>),
    is_current: &impl Fn() -> bool,
) -> Result<(), LoadError> {
    let mut stream = StreamReader::of(body)?;
    let mut read = 0u64;
    let mut reported = 0u64;
    let mut bytes = Vec::new();
    progress(0, total, None);
    loop {
        if !is_current() {
            stream.cancel();
            return Err(LoadError::Cancelled);
        }
        let Some(array) = stream.next().await? else {
            break;
        };
        // Copied once into wasm memory, into one buffer reused for every chunk.
        bytes.resize(array.length() as usize, 0);
        array.copy_to(&mut bytes);
        read += bytes.len() as u64;
        reader.push(&bytes);
        if reader.is_rejected() {
            stream.cancel();
            break;
        }
        if read - reported >= PROGRESS_BYTES {
            reported = read;
            progress(read, total, reader.lines_read());
        }
        yield_now().await;
    }
    progress(read, total, reader.lines_read());
    Ok(())
}

// Browser benchmarks: open time and memory of the candle-trace viewer on a trace/6 file beside
// speedscope (its npm package's static build, served from the same local server) on the same
// content as Chrome JSON, in the same headless Chromium, alternating runs; and frame times
// while panning and zooming a large trace in the viewer, unpaced (each interval is one frame's
// work) and paced by the 60 Hz display; and, on a file speedscope opens, ours beside speedscope
// on the same content, unpaced. Open
// time counts from navigation (page, script and wasm load included), the file chosen as soon
// as the page takes it; the time from the file chosen is kept beside it.
//
//   node bench.mjs --pair TRACE.jsonl CHROME.json [--pair ...] [--frames BIG.jsonl]
//                  [--frames-peer TRACE.jsonl CHROME.json]
//                  [--runs 5] [--timeout-s 600] [--out results.json] [--ours-only]
//
// `--ours-only` skips speedscope (for quick checks while working on the viewer).
//
// `cargo xtask bench` runs it and writes the tables in BENCHMARKS.md.
import { createServer } from 'node:http';
import { readFileSync, existsSync, statSync, readdirSync, writeFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { sendFile, urlPath } from './static.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const dist = resolve(process.env.VIEWER_DIST ?? join(root, 'web', 'dist'));
const speedscopeDir = join(here, 'node_modules', 'speedscope', 'dist', 'release');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

function parseArgs(argv) {
  const opts = { pairs: [], frames: null, framesPeer: null, runs: 5, timeoutS: 600, out: null, oursOnly: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--pair') opts.pairs.push({ trace: resolve(argv[++i]), chrome: resolve(argv[++i]) });
    else if (a === '--frames') opts.frames = resolve(argv[++i]);
    else if (a === '--frames-peer') opts.framesPeer = { trace: resolve(argv[++i]), chrome: resolve(argv[++i]) };
    else if (a === '--runs') opts.runs = Number(argv[++i]);
    else if (a === '--timeout-s') opts.timeoutS = Number(argv[++i]);
    else if (a === '--out') opts.out = resolve(argv[++i]);
    else if (a === '--ours-only') opts.oursOnly = true;
    else throw new Error(`unknown argument ${a}`);
  }
  return opts;
}

/** Serve web/dist at / and speedscope at /speedscope/, on 127.0.0.1 only. */
async function serve() {
  const server = createServer((req, res) => {
    const path = urlPath(req);
    if (path.startsWith('/speedscope/')) sendFile(res, speedscopeDir, path.slice('/speedscope'.length));
    else sendFile(res, dist, path);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}

/** This script's Chromium processes (descendants of this node process). */
function ourChromium() {
  const parent = new Map();
  const pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  for (const pid of pids) {
    try {
      // Fields after the parenthesised command: state, ppid, ...
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      parent.set(pid, stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    } catch { /* the process ended */ }
  }
  return pids.filter((pid) => {
    for (let p = parent.get(pid), hops = 0; p && p !== '0' && hops < 64; p = parent.get(p), hops++) {
      if (p === String(process.pid)) return true;
    }
    return false;
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(() => r('timeout'), ms));

/** Drives a page that is being measured through the DevTools protocol alone. Playwright's
 * calls that take a selector or wait for a function (`waitForSelector`, `setInputFiles`,
 * `waitForFunction`, `$eval`) first inject its selector engine into the page: about 1.2 MB of
 * JS heap (two copies of a 330 KB script, seen in a heap snapshot; the page's heap before a
 * file was 2.3 MB with them, 1.1 MB without), which the memory figures would count as the
 * tool's, and a script compiled on the page's thread before the file is chosen. Both tools
 * are driven this way. */
async function driverOf(page) {
  const cdp = await page.context().newCDPSession(page);
  /** The value of `expression` in the page (awaited when it is a promise). */
  const js = async (expression) => {
    const r = await cdp.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) {
      throw new Error(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text);
    }
    return r.result.value;
  };
  /** Whether `expression` became true within `timeoutMs`, checked every `pollMs`. A check
   * waits while the tab is busy (speedscope importing a huge file, say), so a timer of our
   * own races each one. */
  const until = async (expression, timeoutMs, pollMs = 50) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      const check = js(expression);
      check.catch(() => {});
      const r = await Promise.race([check, sleep(left)]);
      if (r === 'timeout') return false;
      if (r) return true;
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
    }
  };
  /** Choose `file` in the file input `selector`, as a user would (input and change events). */
  const choose = async (selector, file) => {
    const { root } = await cdp.send('DOM.getDocument', { depth: 0 });
    const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector });
    if (!nodeId) throw new Error(`no ${selector} in the page`);
    await cdp.send('DOM.setFileInputFiles', { files: [resolve(file)], nodeId });
  };
  return { cdp, js, until, choose };
}

/** Resident memory of this script's Chromium renderer processes (the tab and its worker; each
 * run has a browser of its own, with one page), in bytes. Only processes descended from this
 * node process count, so a browser left over from another run cannot inflate the figure. */
function rendererRss() {
  let total = 0;
  for (const pid of ourChromium()) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('--type=renderer')) continue;
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m) total += Number(m[1]) * 1024;
    } catch { /* the process ended */ }
  }
  return total;
}

/** Memory the page holds once loaded, after a garbage collection (so buffers already let go
 * of, such as the worker's hand-over, do not count): JS heap in use, ArrayBuffer backing
 * stores, and the viewer's wasm memory (`window.candleTraceMemory`, set by web/loader.js; V8
 * does not count it among the backing stores). In bytes. */
async function memoryOf(d) {
  await d.cdp.send('HeapProfiler.collectGarbage');
  const usage = await d.cdp.send('Runtime.getHeapUsage');
  const wasm = await d.js('window.candleTraceMemory?.buffer.byteLength ?? 0');
  const buffers = usage.backingStorageSize ?? 0;
  return { heap: usage.usedSize + buffers + wasm, js_heap: usage.usedSize, buffers, wasm };
}

const twoFrames = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r())));

/** In the page, before the file is chosen: check `predicate` in every animation frame, and once
 * it holds, note when that frame has been painted (a task posted from an animation-frame
 * callback runs after the frame's paint), as `performance.now()`: ms since navigation began.
 * Returns the moment the file is chosen on the same clock. Timed inside the page, so that the
 * work a page goes on with after its first frame (our panels below the timeline are built one
 * task each after it) cannot delay the frames a check from outside would wait for; both tools
 * are timed this way. */
async function watchShown(d, predicate) {
  const watch = (holds) => {
    window.__benchShownAt = undefined;
    const check = () => {
      if (holds()) setTimeout(() => { window.__benchShownAt = performance.now(); });
      else requestAnimationFrame(check);
    };
    requestAnimationFrame(check);
    return performance.now();
  };
  // One expression with the predicate's source in it: no `eval` inside the page, whose CSP
  // would refuse it.
  return d.js(`(${watch})(${predicate})`);
}

/** What `watchShown` noted, once it has. */
async function shownAt(d) {
  if (!(await d.until('window.__benchShownAt !== undefined', 60000, 10))) {
    throw new Error('the first frame was not noted within 60 s');
  }
  return d.js('window.__benchShownAt');
}

/** Open `file` in our viewer; ms from navigation to the first painted timeline (`ms`) and from
 * choosing the file (`chosen_ms`). */
async function openOurs(browser, origin, file, timeoutMs) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  try {
    // Timed from navigation (page, script and wasm load included); the file is chosen as soon
    // as the page can take it, and the time from there is kept beside it.
    await page.goto(origin + '/');
    const d = await driverOf(page);
    await d.until("!!document.querySelector('[data-testid=file-input]')", 60000, 10);
    // Shown: the timeline is up (the panels below it are built after its first frame, one
    // task each; `data-load-seq` counts the load once they are).
    const shown = () => {
      if (document.querySelector('[data-testid=load-error]')) return true;
      return Number(document.querySelector('main')?.getAttribute('data-shown-seq')) > 0
        && document.querySelector('[data-testid=timeline-canvas]');
    };
    const started = await watchShown(d, shown);
    await d.choose('[data-testid=file-input]', file);
    const loaded = await d.until(`(${shown})()`, timeoutMs);
    if (!loaded) {
      return { opened: false, reason: `not open after ${timeoutMs / 1000} s`, errors };
    }
    const failed = await d.js("document.querySelector('[data-testid=load-error]')?.textContent ?? null");
    if (failed !== null) {
      return { opened: false, reason: failed };
    }
    const painted = await shownAt(d);
    // Memory once everything is built, panels included.
    await d.until("Number(document.querySelector('main')?.getAttribute('data-load-seq')) > 0", timeoutMs);
    const t = await d.js("({ ...document.querySelector('[data-testid=load-timings]').dataset })");
    return {
      opened: true, ms: painted, chosen_ms: painted - started,
      rss: rendererRss(), ...(await memoryOf(d)), errors,
      in_worker: t.inWorker === 'true',
      parse_ms: Number(t.readMs) + Number(t.analyseMs),
      read_ms: Number(t.readMs), analyse_ms: Number(t.analyseMs),
      start_ms: Number(t.startMs), encode_ms: Number(t.encodeMs),
      transfer_bytes: Number(t.transferBytes),
      receive_ms: Number(t.receiveMs), layout_ms: Number(t.layoutMs), bytes: Number(t.bytes),
      // Encoding and decoding overlap (the document crosses in chunks): the hand-over in all,
      // from the worker's first byte encoded to the page's last decoded.
      handover_ms: t.handoverMs === undefined ? undefined : Number(t.handoverMs),
    };
  } catch (e) {
    return { opened: false, reason: String(e).split('\n')[0], errors };
  } finally {
    await Promise.race([context.close(), sleep(20000)]);
  }
}

/** Open `file` in speedscope; ms from navigation to the first painted flame graph (`ms`) and
 * from choosing the file (`chosen_ms`). */
async function openSpeedscope(browser, origin, file, timeoutMs) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  try {
    await page.goto(origin + '/speedscope/index.html');
    const d = await driverOf(page);
    await d.until("!!document.querySelector('#file')", 60000, 10);
    // Loaded: speedscope sets the title to "<profile name> - speedscope" once the profile is
    // imported (its landing and loading views have other titles), or it says it could not
    // import the file.
    const shown = () => / - speedscope$/.test(document.title)
      || /Something went wrong/.test(document.body.innerText);
    const started = await watchShown(d, shown);
    await d.choose('#file', file);
    const loaded = await d.until(`(${shown})()`, timeoutMs);
    if (!loaded) {
      return { opened: false, reason: `not open after ${timeoutMs / 1000} s`, errors };
    }
    if (await d.js('/Something went wrong/.test(document.body.innerText)')) {
      return { opened: false, reason: 'speedscope could not import the file', errors };
    }
    const painted = await shownAt(d);
    return {
      opened: true, ms: painted, chosen_ms: painted - started,
      rss: rendererRss(), ...(await memoryOf(d)), errors,
    };
  } catch (e) {
    return { opened: false, reason: String(e).split('\n')[0], errors };
  } finally {
    await Promise.race([context.close(), sleep(20000)]);
  }
}

/** Zoom in by e^0.2 ≈ 1.2214× per step, as our wheel does for deltaY −100 (`timeline::input::wheel`). */
const ZOOM_STEP = Math.exp(0.2);

/** 360 frames of the same interaction on the chart whose box is `box`: each frame one wheel
 * zoom step (in for 30 frames, out for 30) or one 12 px drag step, fired from inside
 * requestAnimationFrame as a user's input would arrive. Returns the frame intervals (ms).
 * `speedscope`: its main flame chart zooms on ctrl+wheel by `1 + deltaY / 40` (plain wheel
 * pans), so the wheel carries ctrl and the deltaY that gives the same zoom factor per step. */
async function drive(page, selector, speedscope) {
  return page.evaluate(async ([selector, speedscope, step]) => {
    const canvases = [...document.querySelectorAll(selector)];
    // speedscope draws on one page-sized WebGL canvas under 2D overlays: its flame chart is the
    // largest canvas smaller than the window.
    const chart = speedscope
      ? canvases.filter((c) => c.getBoundingClientRect().height < window.innerHeight)
        .sort((a, b) => b.getBoundingClientRect().height - a.getBoundingClientRect().height)[0]
      : canvases[0];
    const box = chart.getBoundingClientRect();
    const x = box.left + box.width / 2;
    const y = box.top + box.height / 2;
    const target = speedscope ? document.elementFromPoint(x, y) : chart;
    const zoomIn = speedscope ? (1 / step - 1) * 40 : -100;
    const zoomOut = speedscope ? (step - 1) * 40 : 100;
    const out = [];
    let last = null;
    for (let i = 0; i < 360; i++) {
      await new Promise((r) => requestAnimationFrame(r));
      const now = performance.now();
      if (last !== null) out.push(now - last);
      last = now;
      const phase = Math.floor(i / 30) % 4;
      if (phase < 2) {
        target.dispatchEvent(new WheelEvent('wheel', {
          bubbles: true, cancelable: true, clientX: x, clientY: y, ctrlKey: speedscope,
          deltaY: phase === 0 ? zoomIn : zoomOut,
        }));
      } else {
        const dx = phase === 2 ? 12 : -12;
        target.dispatchEvent(new MouseEvent('mousedown', { bubbles: true, clientX: x, clientY: y, button: 0 }));
        target.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: x + dx, clientY: y, buttons: 1 }));
        target.dispatchEvent(new MouseEvent('mouseup', { bubbles: true, clientX: x + dx, clientY: y, button: 0 }));
      }
    }
    return out;
  }, [selector, speedscope, ZOOM_STEP]);
}

/** p50, p95, max and frames over 25 ms (one a 60 Hz display drops) of frame `intervals`. */
function frameStats(intervals) {
  const sorted = [...intervals].sort((a, b) => a - b);
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  const late = intervals.filter((ms) => ms > 25).length;
  return { frames: intervals.length, p50: pct(50), p95: pct(95), max: sorted.at(-1), late };
}

/** Frame intervals while zooming and panning the whole (zoomed-out) timeline of `file`. */
async function frameTimes(browser, origin, file, timeoutMs) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  try {
    await page.goto(origin + '/');
    const d = await driverOf(page);
    await d.until("!!document.querySelector('[data-testid=file-input]')", 60000, 10);
    await d.choose('[data-testid=file-input]', file);
    if (!(await d.until("Number(document.querySelector('main')?.getAttribute('data-load-seq')) > 0", timeoutMs, 100))) {
      throw new Error(`not open after ${timeoutMs / 1000} s`);
    }
    const spans = Number(await d.js("document.querySelector('[data-testid=summary-span_count]').dataset.value"));
    return { spans, ...frameStats(await drive(page, '[data-testid=timeline-canvas]', false)) };
  } finally {
    await Promise.race([context.close(), sleep(20000)]);
  }
}

/** The same interaction in speedscope on `chrome` (the frames file's content as Chrome JSON),
 * whole profile in view at the start; `{opened: false, reason}` when it does not open. */
async function speedscopeFrameTimes(browser, origin, chrome, timeoutMs) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  try {
    await page.goto(origin + '/speedscope/index.html');
    const d = await driverOf(page);
    await d.until("!!document.querySelector('#file')", 60000, 10);
    await d.choose('#file', chrome);
    const loaded = await d.until(
      "/ - speedscope$/.test(document.title) || /Something went wrong/.test(document.body.innerText)",
      timeoutMs,
    );
    if (!loaded) return { opened: false, reason: `not open after ${timeoutMs / 1000} s` };
    if (await d.js('/Something went wrong/.test(document.body.innerText)')) {
      return { opened: false, reason: 'speedscope could not import the file' };
    }
    await page.evaluate(twoFrames);
    return { opened: true, ...frameStats(await drive(page, 'canvas', true)) };
  } catch (e) {
    return { opened: false, reason: String(e).split('\n')[0] };
  } finally {
    await Promise.race([context.close(), sleep(20000)]);
  }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : null;
}

const opts = parseArgs(process.argv.slice(2));
for (const dir of [dist, speedscopeDir]) {
  if (!existsSync(join(dir, 'index.html'))) throw new Error(`missing ${dir}/index.html`);
}
const { server, origin } = await serve();
/** A fresh browser, so that the renderer memory measured is this run's alone. `extra`: more
 * Chromium switches. */
const launch = (extra = []) => chromium.launch({
  executablePath: chromiumPath,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run', ...extra],
});
/** Frames as fast as the page can make them, not paced by a 60 Hz display: each interval
 * between animation frames is then the time one frame took (input, script, layout, paint). */
const UNTHROTTLED = ['--disable-frame-rate-limit', '--disable-gpu-vsync'];

/** `f(browser)` in a browser of its own. A tab still busy after a timed-out run (speedscope
 * importing a huge file, say) can keep a graceful close waiting for many minutes: after 20 s
 * the browser's processes are killed instead. */
async function fresh(f, extra = []) {
  const browser = await launch(extra);
  try {
    return await f(browser);
  } finally {
    if (await Promise.race([browser.close(), sleep(20000)]) === 'timeout') {
      for (const pid of ourChromium()) {
        try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
      }
    }
  }
}
const results = { chromium: await fresh((b) => b.version()), runs: opts.runs, open: [], frames: null };
try {
  for (const { trace, chrome } of opts.pairs) {
    const ours = [];
    const peer = [];
    const timeoutMs = opts.timeoutS * 1000;
    // For a file of 500 MB or more the question is whether each tool opens it at all (and in
    // what time): one attempt each, as five would take hours.
    const runs = statSync(trace).size >= 5e8 ? 1 : opts.runs;
    for (let i = 0; i < runs; i++) {
      // Alternate which tool goes first, so neither always gets the warmer machine.
      const order = opts.oursOnly ? ['ours'] : i % 2 === 0 ? ['ours', 'peer'] : ['peer', 'ours'];
      for (const who of order) {
        const r = await fresh((browser) => (who === 'ours'
          ? openOurs(browser, origin, trace, timeoutMs)
          : openSpeedscope(browser, origin, chrome, timeoutMs)));
        (who === 'ours' ? ours : peer).push(r);
        console.error(`${who} ${trace}: ${r.opened ? `${r.ms} ms, rss ${(r.rss / 1e6).toFixed(0)} MB` : `did not open: ${r.reason}`}`);
        if (!r.opened) break;
      }
      if (!ours.at(-1)?.opened && (opts.oursOnly || !peer.at(-1)?.opened)) break;
    }
    const summary = (rs) => {
      const ok = rs.filter((r) => r.opened);
      return {
        opened: ok.length === rs.length && rs.length > 0,
        reason: rs.find((r) => !r.opened)?.reason ?? null,
        runs: rs.length,
        median_ms: median(ok.map((r) => r.ms)),
        all_ms: ok.map((r) => r.ms),
        median_chosen_ms: median(ok.map((r) => r.chosen_ms)),
        median_rss: median(ok.map((r) => r.rss)),
        median_heap: median(ok.map((r) => r.heap)),
        median_js_heap: median(ok.map((r) => r.js_heap)),
        median_buffers: median(ok.map((r) => r.buffers)),
        median_wasm: median(ok.map((r) => r.wasm)),
        median_parse_ms: median(ok.filter((r) => r.parse_ms).map((r) => r.parse_ms)),
        median_read_ms: median(ok.filter((r) => r.read_ms !== undefined).map((r) => r.read_ms)),
        median_start_ms: median(ok.filter((r) => r.start_ms !== undefined).map((r) => r.start_ms)),
        median_encode_ms: median(ok.filter((r) => r.encode_ms !== undefined).map((r) => r.encode_ms)),
        median_transfer_bytes: median(ok.filter((r) => r.transfer_bytes !== undefined).map((r) => r.transfer_bytes)),
        median_analyse_ms: median(ok.filter((r) => r.analyse_ms !== undefined).map((r) => r.analyse_ms)),
        median_receive_ms: median(ok.filter((r) => r.receive_ms !== undefined).map((r) => r.receive_ms)),
        median_handover_ms: median(ok.filter((r) => r.handover_ms !== undefined).map((r) => r.handover_ms)),
        median_layout_ms: median(ok.filter((r) => r.layout_ms !== undefined).map((r) => r.layout_ms)),
        in_worker: ok.every((r) => r.in_worker !== false),
        errors: rs.flatMap((r) => r.errors ?? []),
      };
    };
    results.open.push({
      trace, chrome, runs,
      trace_bytes: statSync(trace).size, chrome_bytes: statSync(chrome).size,
      ours: summary(ours), speedscope: summary(peer),
    });
  }
  if (opts.frames) {
    const timeoutMs = opts.timeoutS * 1000;
    results.frames = {
      unthrottled: await fresh((browser) => frameTimes(browser, origin, opts.frames, timeoutMs), UNTHROTTLED),
      display: await fresh((browser) => frameTimes(browser, origin, opts.frames, timeoutMs)),
    };
    // speedscope does not open the 1M-span file within the time limit, so the peer comparison
    // runs on a file it opens: ours on the trace/6 file, speedscope on its Chrome JSON, unpaced.
    if (opts.framesPeer && !opts.oursOnly) {
      const { trace, chrome } = opts.framesPeer;
      results.frames.peer = {
        trace, chrome,
        ours: await fresh((browser) => frameTimes(browser, origin, trace, timeoutMs), UNTHROTTLED),
        speedscope: await fresh(
          (browser) => speedscopeFrameTimes(browser, origin, chrome, timeoutMs), UNTHROTTLED),
      };
    }
    console.error(`frames: ${JSON.stringify(results.frames)}`);
  }
} finally {
  server.close();
}
const json = JSON.stringify(results, null, 2);
if (opts.out) writeFileSync(opts.out, json + '\n');
console.log(json);
// Nothing else to wait for (keep-alive sockets of closed browsers must not hold the process).
process.exit(0);

// Where a cold open's time goes, from navigation to the first painted timeline: the same open
// as `bench.mjs` (a fresh headless Chromium, web/dist served from 127.0.0.1, the file chosen
// as soon as the page takes it, the first painted frame noted inside the page), with the
// page's milestones on the page's clock (ms since navigation began): the HTML, every resource
// the page fetched (resource timing), the page's wasm compiled and instantiated (the
// WebAssembly calls timed by a script the DevTools protocol adds before the page's own), the
// file input in the document, the file chosen, the viewer's own load timings, the frame
// painted, and the worker's progress through the file over time (the first megabytes run in
// V8's baseline tier). Also a trivial page served the same way (`/__floor.html`: one line of
// text) from navigation to its first paint: what the browser itself takes on this machine.
//
//   node breakdown.mjs TRACE [--runs 5] [--out results.json]
import { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { MIME, sendFile, urlPath } from './static.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const dist = resolve(process.env.VIEWER_DIST ?? join(here, '..', '..', 'web', 'dist'));
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

const args = process.argv.slice(2);
const trace = resolve(args[0]);
let runs = 5;
let out = null;
let profile = false;
let tracePath = null;
for (let i = 1; i < args.length; i++) {
  if (args[i] === '--runs') runs = Number(args[++i]);
  else if (args[i] === '--out') out = resolve(args[++i]);
  else if (args[i] === '--profile') profile = true;
  else if (args[i] === '--trace') tracePath = resolve(args[++i]);
  else throw new Error(`unknown argument ${args[i]}`);
}

const FLOOR_HTML = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>floor</title></head><body><p>floor</p></body></html>';

const server = createServer((req, res) => {
  const path = urlPath(req);
  if (path === '/__floor.html') {
    res.writeHead(200, { 'content-type': MIME['.html'] }).end(FLOOR_HTML);
    return;
  }
  sendFile(res, dist, path);
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const origin = `http://127.0.0.1:${server.address().port}`;

const launch = () => chromium.launch({
  executablePath: chromiumPath,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run',
    // More switches, for experiments: BREAKDOWN_ARGS="--js-flags=--no-wasm-tier-up".
    ...(process.env.BREAKDOWN_ARGS?.split(' ').filter(Boolean) ?? [])],
});

/** Runs in the page before its own scripts: times the WebAssembly calls, notes when the file
 * input appears and when a file is chosen, all on `performance.now()`. */
function probe() {
  const marks = (window.__marks = {});
  const note = (name) => { if (marks[name] === undefined) marks[name] = performance.now(); };
  for (const f of ['instantiateStreaming', 'compileStreaming', 'instantiate', 'compile']) {
    const orig = WebAssembly[f];
    if (!orig) continue;
    WebAssembly[f] = function (...a) {
      const t0 = performance.now();
      const r = orig.apply(this, a);
      r.then(() => { (marks.wasm ??= []).push({ f, start: t0, end: performance.now() }); });
      return r;
    };
  }
  new MutationObserver(() => {
    if (document.querySelector('[data-testid=file-input]')) note('fileInput');
    if (document.querySelector('main')) note('main');
  }).observe(document, { childList: true, subtree: true });
  document.addEventListener('change', () => note('chosen'), true);
  // What the workers say, when the page hears it.
  const heard = (marks.heard = []);
  const OrigWorker = window.Worker;
  window.Worker = class extends OrigWorker {
    constructor(...a) {
      super(...a);
      const name = a[1]?.name ?? '';
      heard.push({ what: `new ${name}`, at: performance.now() });
      this.addEventListener('message', (e) => {
        const type = e.data?.type ?? '?';
        // The worker's read over time: how fast it goes while V8 still runs baseline code.
        if (type === 'progress') (marks.read ??= []).push([performance.now(), e.data.read]);
        const last = heard.at(-1);
        if (last?.what === `${name} ${type}`) last.to = performance.now();
        else heard.push({ what: `${name} ${type}`, at: performance.now() });
      });
    }
  };
  // The page's main-thread tasks over 50 ms.
  marks.long = [];
  new PerformanceObserver((l) => {
    for (const e of l.getEntries()) marks.long.push([Math.round(e.startTime), Math.round(e.duration)]);
  }).observe({ type: 'longtask', buffered: true });
  new MutationObserver(() => {
    if (Number(document.querySelector('main')?.getAttribute('data-shown-seq')) > 0) note('shownSeq');
  }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-shown-seq'] });
  document.addEventListener('DOMContentLoaded', () => note('domContentLoaded'));
}

async function driver(page) {
  const cdp = await page.context().newCDPSession(page);
  const js = async (expression) => {
    const r = await cdp.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text);
    return r.result.value;
  };
  const until = async (expression, timeoutMs, pollMs = 10) => {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await js(expression)) return true;
      await new Promise((r) => setTimeout(r, pollMs));
    }
    return false;
  };
  return { cdp, js, until };
}

async function floorRun() {
  const browser = await launch();
  try {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    await page.goto(origin + '/__floor.html');
    const d = await driver(page);
    await d.until("performance.getEntriesByName('first-contentful-paint').length > 0", 10000);
    return await d.js(`({
      responseEnd: performance.getEntriesByType('navigation')[0].responseEnd,
      fcp: performance.getEntriesByName('first-contentful-paint')[0].startTime,
    })`);
  } finally {
    await browser.close();
  }
}

async function oursRun() {
  const browser = await launch();
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addInitScript(probe);
    const page = await context.newPage();
    if (tracePath) {
      await browser.startTracing(page, {
        path: tracePath, screenshots: false,
        categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8.wasm', 'toplevel', 'blink', 'loading', 'v8', 'disabled-by-default-v8.compile'],
      });
    }
    await page.goto(origin + '/');
    const d = await driver(page);
    await d.until("!!document.querySelector('[data-testid=file-input]')", 60000);
    await d.js(`(() => {
      window.__shownAt = undefined;
      const holds = () => document.querySelector('[data-testid=load-error]')
        || (Number(document.querySelector('main')?.getAttribute('data-shown-seq')) > 0
          && document.querySelector('[data-testid=timeline-canvas]'));
      const check = () => {
        if (holds()) setTimeout(() => { window.__shownAt = performance.now(); });
        else requestAnimationFrame(check);
      };
      requestAnimationFrame(check);
    })()`);
    if (profile) {
      await d.cdp.send('Profiler.enable');
      await d.cdp.send('Profiler.setSamplingInterval', { interval: 200 });
      await d.cdp.send('Profiler.start');
    }
    const { root } = await d.cdp.send('DOM.getDocument', { depth: 0 });
    const { nodeId } = await d.cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: '[data-testid=file-input]' });
    await d.cdp.send('DOM.setFileInputFiles', { files: [trace], nodeId });
    await d.until('window.__shownAt !== undefined', 60000);
    if (profile) {
      const { profile: p } = await d.cdp.send('Profiler.stop');
      if (process.env.BREAKDOWN_PROFILE_OUT) writeFileSync(process.env.BREAKDOWN_PROFILE_OUT, JSON.stringify(p));
      const self = new Map();
      const byId = new Map(p.nodes.map((n) => [n.id, n]));
      const dt = new Map();
      p.samples.forEach((id, i) => dt.set(id, (dt.get(id) ?? 0) + (p.timeDeltas[i + 1] ?? 0)));
      for (const [id, us] of dt) {
        const f = byId.get(id).callFrame;
        const k = `${f.functionName || '(anon)'} ${f.url.split('/').pop()}`;
        self.set(k, (self.get(k) ?? 0) + us / 1000);
      }
      console.log([...self].sort((a, b) => b[1] - a[1]).slice(0, 30).map(([k, v]) => `${v.toFixed(1)} ms ${k}`).join('\n'));
    }
    await d.until("Number(document.querySelector('main')?.getAttribute('data-load-seq')) > 0", 60000);
    if (tracePath) await browser.stopTracing();
    return await d.js(`(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const res = {};
      for (const e of performance.getEntriesByType('resource')) {
        res[e.name.replace(location.origin + '/', '')] = { start: e.startTime, end: e.responseEnd };
      }
      const paint = {};
      for (const e of performance.getEntriesByType('paint')) paint[e.name] = e.startTime;
      return {
        html: nav.responseEnd, domInteractive: nav.domInteractive, dcl: nav.domContentLoadedEventEnd,
        load: nav.loadEventEnd, res, paint, marks: window.__marks, painted: window.__shownAt,
        timings: { ...document.querySelector('[data-testid=load-timings]')?.dataset },
      };
    })()`);
  } finally {
    await browser.close();
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null;
};
const all = { floor: [], ours: [] };
for (let i = 0; i < runs; i++) {
  all.floor.push(await floorRun());
  const r = await oursRun();
  all.ours.push(r);
  const w = (r.marks.wasm ?? []).map((x) => `${x.f} ${x.start.toFixed(0)}→${x.end.toFixed(0)}`).join(', ');
  const res = Object.entries(r.res).map(([k, v]) => `${k} ${v.start.toFixed(0)}→${v.end.toFixed(0)}`).join(', ');
  console.log(`run ${i}: floor page fcp ${all.floor.at(-1).fcp.toFixed(0)}; ours html ${r.html.toFixed(0)}, ` +
    `dcl ${r.dcl.toFixed(0)}, fcp ${r.paint['first-contentful-paint']?.toFixed(0)}, [${res}], [${w}], main ${r.marks.main?.toFixed(0)}, ` +
    `input ${r.marks.fileInput?.toFixed(0)}, chosen ${r.marks.chosen?.toFixed(0)}, shown-seq ${r.marks.shownSeq?.toFixed(0)}, painted ${r.painted.toFixed(0)}; ` +
    `timings ${JSON.stringify(r.timings)}`);
  const read = r.marks.read ?? [];
  if (read.length) {
    // About a dozen points from the first progress message: ms after it, MB read by then.
    const every = Math.ceil(read.length / 12);
    const points = read.filter((_, i) => i % every === 0 || i === read.length - 1);
    console.log(`  read ${points.map(([t, b]) => `+${(t - read[0][0]).toFixed(0)} ms ${(b / 1e6).toFixed(1)} MB`).join(', ')}`);
  }
  console.log(`  heard ${r.marks.heard.map((h) => `${h.what} ${h.at.toFixed(0)}${h.to ? `–${h.to.toFixed(0)}` : ''}`).join(', ')}; long tasks ${JSON.stringify(r.marks.long)}`);
}
const m = (f) => median(all.ours.map(f).filter((x) => x !== undefined)).toFixed(0);
console.log(`medians: floor page fcp ${median(all.floor.map((r) => r.fcp)).toFixed(0)}; ours html ${m((r) => r.html)}, ` +
  `fcp ${m((r) => r.paint['first-contentful-paint'])}, page wasm instantiated ${m((r) => r.marks.wasm?.[0]?.end)}, ` +
  `input ${m((r) => r.marks.fileInput)}, chosen ${m((r) => r.marks.chosen)}, painted ${m((r) => r.painted)}`);
if (out) writeFileSync(out, JSON.stringify(all, null, 1));
server.close();

// Shared pieces of the browser tests: a static server for web/dist on 127.0.0.1, one headless
// Chromium, and helpers to open files and read what the page shows. Each `*.test.mjs` file
// calls `useHarness()` at top level, then uses `ctx.browser` / `ctx.origin` or the helpers.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve, dirname, basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sendFile, urlPath } from './static.mjs';
import { chromium } from 'playwright-core';

export const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, '..', '..');
export const dist = resolve(process.env.VIEWER_DIST ?? join(root, 'web', 'dist'));
export const fixtures = join(root, 'tests', 'fixtures');
export const artifacts = join(root, 'target', 'e2e');
export const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

export const TRACE_FIELDS = [
  'op_count', 'total_ns', 'span_count', 'root_span_count',
  'max_depth', 'alloc_count', 'free_count', 'peak_bytes',
];
export const PROFILE_FIELDS = [
  'request_count', 'event_count', 'invalid_event_count', 'error_count', 'memory_snapshot_count',
];

/** Run the CLI and parse its JSON output (exit status 1 = the file has errors, still JSON). */
export function cli(...args) {
  const bin = process.env.CANDLE_TRACE_BIN;
  const [cmd, argv] = bin
    ? [bin, args]
    : ['cargo', ['run', '-q', '--release', '-p', 'candle-trace-cli',
        '--bin', 'candle-trace', '--', ...args]];
  const r = spawnSync(cmd, argv, { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0 && r.status !== 1) {
    throw new Error(`${cmd} ${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
  }
  return JSON.parse(r.stdout);
}

export { MIME } from './static.mjs';

/** The running server's origin and the browser (set by `useHarness`'s `before`). */
export const ctx = { server: null, origin: null, browser: null };

/** Start the server and the browser before this file's tests; stop them after. */
export function useHarness() {
before(async () => {
  assert.ok(existsSync(join(dist, 'index.html')), `build the page first: ${dist}/index.html`);
  ctx.server = createServer((req, res) => sendFile(res, dist, urlPath(req)));
  await new Promise((ok) => ctx.server.listen(0, '127.0.0.1', ok));
  ctx.origin = `http://127.0.0.1:${ctx.server.address().port}`;
  ctx.browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  mkdirSync(artifacts, { recursive: true });
});

after(async () => {
  await ctx.browser?.close();
  ctx.server?.close();
});
}

/** A fresh page that records requests, console errors and dialogs. */
export async function openPage(path = '/', viewport = { width: 1280, height: 900 }) {
  const page = await ctx.browser.newPage({ viewport });
  const seen = { requests: [], errors: [], dialogs: [] };
  page.on('request', (r) => seen.requests.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') seen.errors.push(m.text()); });
  page.on('pageerror', (e) => seen.errors.push(String(e)));
  page.on('dialog', async (d) => { seen.dialogs.push(d.message()); await d.dismiss(); });
  await page.goto(ctx.origin + path);
  await page.waitForSelector('[data-testid=file-input]', { state: 'attached' });
  return { page, seen };
}

export async function loadSeq(page) {
  return Number(await page.getAttribute('main', 'data-load-seq'));
}

export async function waitNextDocument(page, before) {
  await page.waitForFunction(
    (n) => Number(document.querySelector('main')?.getAttribute('data-load-seq')) > n,
    before, { timeout: 60_000 });
}

export async function openByPicker(page, file) {
  const n = await loadSeq(page);
  await page.setInputFiles('[data-testid=file-input]', file);
  await waitNextDocument(page, n);
}

export async function openByDrop(page, name, bytes) {
  const n = await loadSeq(page);
  await page.evaluate(({ name, b64 }) => {
    const bin = atob(b64);
    const data = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) data[i] = bin.charCodeAt(i);
    const dt = new DataTransfer();
    dt.items.add(new File([data], name, { type: 'application/x-ndjson' }));
    for (const type of ['dragenter', 'dragover', 'drop']) {
      document.body.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: dt }));
    }
  }, { name, b64: Buffer.from(bytes).toString('base64') });
  await waitNextDocument(page, n);
}

/** Open the panel's tab `id` by a click (when the view has it) and wait until it is shown. */
export async function openTab(page, id) {
  await page.click(`[data-testid=tab-${id}]`);
  await page.waitForSelector(`[data-testid=tabpanel][data-tab=${id}]`, { state: 'attached' });
}

export async function shownValues(page) {
  return page.$$eval('[data-testid^="summary-"]', (els) =>
    Object.fromEntries(els.map((e) => [e.dataset.testid.slice('summary-'.length), e.dataset.value])));
}

export async function shownDiagnostics(page) {
  return page.$$eval('[data-testid=diagnostic]', (els) =>
    els.map((e) => ({ line: Number(e.dataset.line), severity: e.dataset.severity })));
}

export async function checkAgainstCli(page, file, how) {
  const name = basename(file);
  const summary = cli('summary', '--json', file);
  const validate = cli('validate', '--json', file);
  const values = await shownValues(page);
  const format = await page.getAttribute('[data-testid=document]', 'data-format');
  if ('op_count' in summary) {
    assert.equal(format, 'trace', `${name} (${how})`);
    for (const f of TRACE_FIELDS) {
      assert.equal(values[f], String(summary[f]), `${name} (${how}): ${f}`);
    }
  } else {
    assert.equal(format, 'profile', `${name} (${how})`);
    for (const f of PROFILE_FIELDS) {
      assert.equal(values[f], String(summary[f]), `${name} (${how}): ${f}`);
    }
    for (const key of ['ttft_us', 'itl_nanos']) {
      for (const p of ['p50', 'p90', 'p99', 'max']) {
        const want = summary[key] ? String(summary[key][p]) : undefined;
        assert.equal(values[`${key}-${p}`], want, `${name} (${how}): ${key} ${p}`);
      }
    }
  }
  const want = validate.diagnostics.map((d) => ({ line: d.line, severity: d.severity }));
  assert.deepEqual(await shownDiagnostics(page), want, `${name} (${how}): diagnostics`);
  if ('peak_bytes' in summary && summary.peak_bytes > 0) {
    // The memory tab's largest device peak is the summary's peak.
    await openTab(page, 'memory');
    const peaks = await page.$$eval('[data-testid=memory-device]', (rows) => rows.map((r) => Number(r.dataset.value)));
    assert.equal(String(Math.max(...peaks)), String(summary.peak_bytes), `${name} (${how}): memory panel`);
  }
  if ('op_count' in summary) {
    // Gradient counts equal `query --kind gradients` (the tab shows none without gradients).
    const grads = cli('query', file, '--kind', 'gradients', '--json');
    await openTab(page, 'gradients');
    const total = Object.values(grads.counts).reduce((a, b) => a + b, 0);
    for (const [state, count] of Object.entries(grads.counts)) {
      const el = page.locator(`[data-testid=gradients-${state}]`);
      const shown = (await el.count()) === 0 ? null : await el.getAttribute('data-value');
      assert.equal(shown, total === 0 ? null : String(count), `${name} (${how}): gradients ${state}`);
    }
  }
  const untrusted = await page.locator('[data-testid=untrusted-banner]').count();
  assert.equal(untrusted > 0, validate.errors > 0, `${name} (${how}): untrusted banner`);
}


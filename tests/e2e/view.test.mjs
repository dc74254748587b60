// `candle-trace view` and `candle-trace report` in headless Chromium (see README.md): the CLI
// binary, copied alone into an empty folder, serves the page it carries with the file(s) open,
// showing `summary --json`'s numbers (a directory of step files opens as the steps view, equal
// to `steps --json`); it answers only its own Host, and 404 for anything but the page and the
// given files; bad input is refused before it serves. The one-file report opens from file://
// with the network off and shows the same numbers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { root, fixtures, artifacts, chromiumPath, cli, openTab, TRACE_FIELDS } from './harness.mjs';

// The demo's training trace when `cargo xtask demo` has written it, else the fixture of one
// training step (both are trace/6 files of a real step's shape).
const demoTrace = join(root, 'target', 'demo', 'train.trace6.jsonl');
const trace = process.env.VIEW_TRACE
  ?? (statSync(demoTrace, { throwIfNoEntry: false })?.isFile() ? demoTrace : join(fixtures, 'train_step.trace6.jsonl'));
const stepsDir = join(fixtures, 'steps_outlier');

const ctx = { dir: null, bin: null, browser: null, servers: [] };

before(async () => {
  const built = process.env.CANDLE_TRACE_BIN;
  assert.ok(built, 'set CANDLE_TRACE_BIN to the built CLI (tests/e2e/run.sh does)');
  // The installed binary alone: nothing else of the repository next to it.
  ctx.dir = mkdtempSync(join(tmpdir(), 'candle-trace-view-'));
  ctx.bin = join(ctx.dir, 'candle-trace');
  copyFileSync(built, ctx.bin);
  ctx.browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
});

after(async () => {
  for (const s of ctx.servers) s.kill('SIGINT');
  await ctx.browser?.close();
  if (ctx.dir) rmSync(ctx.dir, { recursive: true, force: true });
});

/** Start `candle-trace view ARGS --no-open` from the empty folder; resolves with its URL. */
function view(...args) {
  const child = spawn(ctx.bin, ['view', ...args, '--no-open'], { cwd: ctx.dir });
  ctx.servers.push(child);
  return new Promise((ok, fail) => {
    let out = '';
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n')[0];
      if (out.includes('\n')) ok({ url: line, port: Number(new URL(line).port), child });
    });
    child.on('exit', (code) => fail(new Error(`view exited ${code}: ${err}`)));
  });
}

/** One raw GET to 127.0.0.1:port with this Host header: [status, body]. */
function get(port, path, host = `127.0.0.1:${port}`) {
  return new Promise((ok, fail) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => ok([res.statusCode, body]));
    });
    req.on('error', fail);
    req.end();
  });
}

async function openedPage(url, context) {
  const page = await (context ?? ctx.browser).newPage({ viewport: { width: 1280, height: 900 } });
  const seen = { requests: [], errors: [] };
  page.on('request', (r) => seen.requests.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') seen.errors.push(m.text()); });
  page.on('pageerror', (e) => seen.errors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(
    () => Number(document.querySelector('main')?.getAttribute('data-load-seq')) >= 1,
    null, { timeout: 120_000 });
  return { page, seen };
}

async function checkSummary(page, file, how) {
  const want = cli('summary', '--json', file);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'trace', how);
  const shown = await page.$$eval('[data-testid^="summary-"]', (els) =>
    Object.fromEntries(els.map((e) => [e.dataset.testid.slice('summary-'.length), e.dataset.value])));
  for (const f of TRACE_FIELDS) assert.equal(shown[f], String(want[f]), `${how}: ${f}`);
}

async function checkSteps(page, dir, how) {
  const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort().map((f) => join(dir, f));
  const want = cli('steps', '--json', ...files);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'steps', how);
  await openTab(page, 'steps');
  const rows = await page.$$eval('[data-testid=step-row]', (els) =>
    els.map((e) => [e.dataset.step, Number(e.dataset.total)]));
  assert.deepEqual(rows, want.steps.map((s) => [String(s.capture_step), s.total_ns]), how);
}

test('the binary alone serves the page it carries with the file open, equal to summary --json', async () => {
  assert.deepEqual(readdirSync(ctx.dir), ['candle-trace']);
  const { url, port } = await view(trace);
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/\?url=files\/0\/[^&]+$/);
  const { page, seen } = await openedPage(url);
  await checkSummary(page, trace, 'view');
  await page.screenshot({ path: join(artifacts, 'view.png') });
  assert.deepEqual(seen.errors, []);
  assert.ok(seen.requests.every((u) => u.startsWith(`http://127.0.0.1:${port}/`)), seen.requests.join('\n'));
  // localhost at the same port is the same server.
  const other = await openedPage(url.replace('127.0.0.1', 'localhost'));
  await checkSummary(other.page, trace, 'view via localhost');
  await page.close();
  await other.page.close();
});

test('a directory of step files opens as the steps view, equal to steps --json', async () => {
  const { url } = await view(stepsDir);
  assert.equal(new URL(url).searchParams.getAll('url').length, 5);
  const { page, seen } = await openedPage(url);
  await checkSteps(page, stepsDir, 'view DIR');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('only the page and the given files are served, and only to its own Host', async () => {
  const { port } = await view(trace);
  const name = trace.split('/').pop();
  assert.equal((await get(port, `/files/0/${name}`))[0], 200);
  assert.equal((await get(port, '/'))[0], 200);
  assert.equal((await get(port, '/candle-trace-viewer_bg.wasm'))[0], 200);
  for (const path of ['/candle-trace', '/files/1/x.jsonl', `/files/0/../../${name}`, '/files/',
    '/assets/', '/etc/passwd', '/%2e%2e/candle-trace', `/files/0/${name}.bak`]) {
    assert.equal((await get(port, path))[0], 404, path);
  }
  for (const host of ['evil.example', `evil.example:${port}`, '127.0.0.1', `127.0.0.1:${port + 1}`]) {
    const [status, body] = await get(port, '/', host);
    assert.equal(status, 403, host);
    assert.doesNotMatch(body, /<html/);
  }
  assert.equal((await get(port, '/', `localhost:${port}`))[0], 200);
});

test('a missing file, or a port in use, is refused before serving (exit 2)', async () => {
  const missing = join(ctx.dir, 'no-such.trace6.jsonl');
  let r = spawnSync(ctx.bin, ['view', missing, '--no-open'], { encoding: 'utf8', timeout: 10_000 });
  assert.equal(r.status, 2);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /no-such\.trace6\.jsonl/);
  const taken = createServer();
  await new Promise((ok) => taken.listen(0, '127.0.0.1', ok));
  const port = taken.address().port;
  r = spawnSync(ctx.bin, ['view', trace, '--port', String(port), '--no-open'], { encoding: 'utf8', timeout: 10_000 });
  taken.close();
  assert.equal(r.status, 2);
  assert.equal(r.stdout, '');
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`port ${port} is in use`));
  r = spawnSync(ctx.bin, ['report', missing, '-o', join(ctx.dir, 'r.html')], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /no-such\.trace6\.jsonl/);
  assert.deepEqual(readdirSync(ctx.dir), ['candle-trace']);
});

test('the report opens from file:// with the network off and shows the same numbers', async () => {
  const out = join(ctx.dir, 'report.html');
  let r = spawnSync(ctx.bin, ['report', trace, '-o', out], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  console.log(`report of ${trace}: ${statSync(out).size} bytes (trace ${statSync(trace).size} bytes)`);
  const context = await ctx.browser.newContext({ offline: true });
  // Anything but the file itself would be the network: refuse it, and count it.
  const outside = [];
  await context.route((u) => !u.href.startsWith('file:'), (route) => {
    outside.push(route.request().url());
    return route.abort();
  });
  const { page, seen } = await openedPage(pathToFileURL(out).href, context);
  await checkSummary(page, trace, 'report');
  // Parsed in a worker (the report's blob: worker), as on a served page.
  assert.equal(await page.getAttribute('[data-testid=load-timings]', 'data-in-worker'), 'true');
  await page.screenshot({ path: join(artifacts, 'report.png') });
  assert.deepEqual(outside, []);
  assert.deepEqual(seen.errors, []);

  // A directory of step files: the steps view.
  const steps = join(ctx.dir, 'steps.html');
  r = spawnSync(ctx.bin, ['report', stepsDir, '-o', steps], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const second = await openedPage(pathToFileURL(steps).href, context);
  await checkSteps(second.page, stepsDir, 'report DIR');
  assert.deepEqual(second.seen.errors, []);
  assert.deepEqual(outside, []);
  await context.close();
});

// Browser tests of the inference profile view as an application (issue #40): every tab whose
// rows stand for spans linked both ways with the chart (a row selects, shows and outlines its
// spans; a span marks its rows; rows by keyboard: Enter, Space, ↑/↓), a range's numbers in each tab, the times
// of the tabs on the chart's axis, profile-only span details, and the serving tabs shown only
// where a profile has them. Numbers are worked out by hand from the fixtures' generators
// (tests/fixtures/make_fixtures.py, serving/make.py, modules/make.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useHarness, fixtures, artifacts, openPage, openByPicker, openTab } from './harness.mjs';

useHarness();

const INFER = join(fixtures, 'infer_run.profile.jsonl');
const BATCHED = join(fixtures, 'serving', 'batched.profile.jsonl');
const MODULES = join(fixtures, 'modules', 'module_spans.profile.jsonl');
const OTLP = join(fixtures, 'otlp', 'otlp_request.profile.jsonl');

const attrs = (page, selector, names) => page.$$eval(selector, (els, names) =>
  els.map((e) => Object.fromEntries(names.map((n) => [n, e.getAttribute(n)]))), names);
const chartAttr = (page, name) => page.getAttribute('[data-testid=flame-chart]', name);
const details = (page) => page.$$eval('[data-testid=span-details] [data-field]', (els) =>
  Object.fromEntries(els.map((e) => [e.dataset.field, e.querySelector('dd').textContent])));
const linked = (page, testid, attr) => page.$$eval(`[data-testid=${testid}][data-linked=true]`,
  (els, attr) => els.map((e) => e.getAttribute(attr)), attr);

/** Open `file` with the URL fragment `hash` (`tab=…`, `range=…`) already in place. */
async function openWithHash(file, name, hash) {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await page.evaluate((h) => { location.hash = h; }, `#files=${name}&${hash}`);
  await page.reload();
  await page.waitForSelector('[data-testid=file-input]', { state: 'attached' });
  await openByPicker(page, file);
  return { page, seen };
}

test('requests and spans linked both ways, by pointer and keyboard; the request span lasts its row', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, INFER);
  await openTab(page, 'requests');
  const rows = page.locator('[data-testid=request-row]');
  assert.deepEqual(await attrs(page, '[data-testid=request-row]', ['data-request', 'tabindex']), [
    { 'data-request': 'req-1', tabindex: '0' },
    { 'data-request': 'req-2', tabindex: '0' },
    { 'data-request': 'req-3', tabindex: '0' },
  ]);
  // Hovering a row outlines its request span; leaving puts back what was outlined.
  await rows.nth(0).hover();
  assert.equal(await chartAttr(page, 'data-highlighted'), '1');
  await page.mouse.move(5, 5);
  assert.equal(await chartAttr(page, 'data-highlighted'), '0');
  // A click selects req-2's request span, shows it and marks the row.
  await rows.nth(1).click();
  assert.notEqual(await chartAttr(page, 'data-selected'), '');
  assert.equal(await chartAttr(page, 'data-highlighted'), '1');
  assert.deepEqual(await linked(page, 'request-row', 'data-request'), ['req-2']);
  // The details say only what a profile span has; req-2 opens at 5 ms and lasts 1775 µs.
  let d = await details(page);
  assert.deepEqual(Object.keys(d), ['name', 'lane', 'stands for', 'start (chart time)', 'duration', 'self time']);
  assert.equal(d.lane, 'request req-2');
  assert.equal(d['start (chart time)'], '5.00 ms');
  assert.equal(await rows.nth(1).getAttribute('data-duration'), '1775');
  assert.equal(d.duration, await rows.nth(1).locator('td').nth(5).textContent());
  const view0 = Number(await chartAttr(page, 'data-view-start-ns'));
  const view1 = Number(await chartAttr(page, 'data-view-end-ns'));
  assert.ok(view0 <= 5_000_000 && view1 >= 6_775_000, `shown ${view0}..${view1}`);
  // Enter on a focused row activates it; the focus stays on the row.
  await rows.nth(2).focus();
  await page.keyboard.press('Enter');
  assert.equal((await details(page)).lane, 'request req-3');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.request), 'req-3');
  assert.deepEqual(await linked(page, 'request-row', 'data-request'), ['req-3']);
  // ↑ and ↓ move the focus between rows (the tab does not scroll instead); Space activates.
  await page.keyboard.press('ArrowUp');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.request), 'req-2');
  await page.keyboard.press('ArrowUp');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.request), 'req-2');
  assert.deepEqual(await linked(page, 'request-row', 'data-request'), ['req-3']);
  await page.keyboard.press(' ');
  assert.equal((await details(page)).lane, 'request req-2');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.request), 'req-2');
  assert.deepEqual(await linked(page, 'request-row', 'data-request'), ['req-2']);
  // A click on req-1's request span (its group's first lane: axis 22 px, header 18 px, a
  // 20 px lane; 0–3.015 ms of a fitted 0–11.1 ms axis) marks req-1's row; its duration is
  // the row's (3015 µs: the file's `duration_us`).
  await page.click('[data-testid=zoom-fit]');
  const box = await page.locator('[data-testid=timeline-canvas]').boundingBox();
  await page.mouse.click(box.x + box.width * 0.1, box.y + 50);
  assert.deepEqual(await linked(page, 'request-row', 'data-request'), ['req-1']);
  d = await details(page);
  assert.equal(d.name, 'request');
  assert.equal(d.duration, '3.02 ms');
  assert.equal(await rows.nth(0).locator('td').nth(5).textContent(), '3.02 ms');
  assert.equal(await rows.nth(0).getAttribute('data-duration'), '3015');
  // Memory: the snapshot req-1 took at 3.01 ms lies in its request span; the row's click
  // selects the innermost span of req-1 running then (its request: decode ended at 3.005 ms).
  await openTab(page, 'memory');
  assert.deepEqual(await attrs(page, '[data-testid=snapshot-row]', ['data-at', 'data-linked']), [
    { 'data-at': '3010000', 'data-linked': 'true' },
    { 'data-at': '6770000', 'data-linked': 'false' },
    { 'data-at': '11105000', 'data-linked': 'false' },
  ]);
  await page.click('[data-testid=snapshot-row][data-at="6770000"]');
  d = await details(page);
  assert.equal(d.lane, 'request req-2');
  assert.equal(d.name, 'request');
  assert.deepEqual(await linked(page, 'snapshot-row', 'data-at'), ['6770000']);
  // Resources: req-1's reserve; a holder row stands for its request.
  await openTab(page, 'resources');
  await page.click('[data-testid=resource-holder][data-holder=req-1]');
  assert.equal((await details(page)).lane, 'request req-1');
  assert.deepEqual(await linked(page, 'resource-holder', 'data-holder'), ['req-1']);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a row that stands for no span is no link: not focusable, no pointer or hover, skipped by ↑/↓', async () => {
  // infer_run with req-1's snapshot moved from 3.01 ms to 903.01 ms, when none of req-1's
  // spans runs (its request span ends at 3.01 ms): that row stands for no span.
  const text = readFileSync(INFER, 'utf8')
    .replace('"ts_unix_nanos":1717000000003010000', '"ts_unix_nanos":1717000000903010000')
    .replace('16:26:40.003010000Z', '16:26:40.903010000Z');
  mkdirSync(artifacts, { recursive: true });
  const file = join(artifacts, 'late-snapshot.profile.jsonl');
  writeFileSync(file, text);
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, file);
  await openTab(page, 'memory');
  const look = (at) => page.$eval(`[data-testid=snapshot-row][data-at="${at}"]`, (e) => ({
    tabindex: e.getAttribute('tabindex'), cursor: getComputedStyle(e).cursor, bg: getComputedStyle(e).backgroundColor,
  }));
  const late = await look('903010000');
  assert.deepEqual({ tabindex: late.tabindex, pointer: late.cursor === 'pointer' }, { tabindex: null, pointer: false });
  assert.deepEqual(await attrs(page, '[data-testid=snapshot-row]', ['data-at', 'tabindex']), [
    { 'data-at': '6770000', tabindex: '0' },
    { 'data-at': '11105000', tabindex: '0' },
    { 'data-at': '903010000', tabindex: null },
  ]);
  assert.equal((await look('6770000')).cursor, 'pointer');
  // A click selects req-2's request; hovering or clicking the late row changes nothing.
  await page.click('[data-testid=snapshot-row][data-at="6770000"]');
  assert.equal((await details(page)).lane, 'request req-2');
  const selected = await chartAttr(page, 'data-selected');
  await page.hover('[data-testid=snapshot-row][data-at="903010000"]');
  assert.deepEqual(await look('903010000'), late);
  assert.equal(await chartAttr(page, 'data-highlighted'), '1');
  await page.click('[data-testid=snapshot-row][data-at="903010000"]');
  assert.equal(await chartAttr(page, 'data-selected'), selected);
  assert.notEqual(await page.evaluate(() => document.activeElement.dataset.at ?? null), '903010000');
  // ↓ from the last linked row does not land on it.
  await page.focus('[data-testid=snapshot-row][data-at="11105000"]');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.at), '11105000');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('batched forwards and module rows linked both ways; starts on the chart time', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, BATCHED);
  await openTab(page, 'iterations');
  // serving/make.py: forwards at 1, 3, 4, 5.5, 7 ms after a's open, the chart's time 0.
  assert.deepEqual((await attrs(page, '[data-testid=iteration-row]', ['data-start'])).map((r) => r['data-start']),
    ['1000000', '3000000', '4000000', '5500000', '7000000']);
  assert.equal(await page.locator('[data-testid=iteration-row]').nth(1).locator('td').nth(2).textContent(), '3.00 ms');
  // Forward 0 ran a's and b's prompts: the engine's span selected, the three outlined.
  const row = page.locator('[data-testid=iteration-row][data-key="engine-0/0"]');
  await row.hover();
  assert.equal(await chartAttr(page, 'data-highlighted'), '3');
  await row.click();
  let d = await details(page);
  assert.equal(d.lane, 'engine engine-0');
  assert.equal(d['stands for'], 'batched forward engine-0/0');
  assert.equal(d['start (chart time)'], '1.00 ms');
  assert.deepEqual(await linked(page, 'iteration-row', 'data-key'), ['engine-0/0']);
  // Module rows (by name): block ran in forward 1 (3.01 ms, 0.8 ms).
  await openTab(page, 'modules');
  await page.selectOption('[data-testid=profile-modules-by]', 'name');
  await page.click('[data-testid=profile-module-row][data-key=block]');
  d = await details(page);
  assert.equal(d.name, 'block');
  assert.equal(d['start (chart time)'], '3.01 ms');
  assert.deepEqual(await linked(page, 'profile-module-row', 'data-key'), ['block']);
  // The selected module span marks forward 1 in Iterations.
  await openTab(page, 'iterations');
  assert.deepEqual(await linked(page, 'iteration-row', 'data-key'), ['engine-0/1']);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a range: each tab counts what ran inside it, worked out by hand', async () => {
  // module_spans: r1's calls at 0 and 20 µs, r2's at 0 (13 ns later), 5 module spans each.
  let { page, seen } = await openWithHash(MODULES, 'module_spans.profile.jsonl', 'range=0-15000&tab=modules');
  await page.waitForSelector('[data-testid=range-bar][data-start-ns="0"][data-end-ns="15000"]');
  assert.equal(await page.getAttribute('[data-testid=range-note]', 'data-follows'), 'true');
  assert.match(await page.textContent('[data-testid=profile-modules-totals]'),
    /In the range: 2 forward calls, 10 module spans, 30\.0 µs of module time inside it/);
  const inRange = page.locator('[data-testid=profile-modules-in-range]');
  assert.equal(await inRange.getAttribute('data-calls'), '2');
  assert.equal(await inRange.getAttribute('data-spans'), '10');
  // Requests: r1 0–50 µs and r2: 15 µs of each inside (r2 from 13 ns: 14.987 µs).
  await openTab(page, 'requests');
  assert.deepEqual(await attrs(page, '[data-testid=request-row]', ['data-request', 'data-inside']), [
    { 'data-request': 'r1', 'data-inside': '15000' },
    { 'data-request': 'r2', 'data-inside': '14987' },
  ]);
  assert.deepEqual(seen.errors, []);
  await page.close();

  // batched, 2.5–5.75 ms: 0.5 ms of forward 0, forwards 1 and 2 whole, 0.25 ms of forward 3.
  ({ page, seen } = await openWithHash(BATCHED, 'batched.profile.jsonl', 'range=2500000-5750000&tab=iterations'));
  await page.waitForSelector('[data-testid=iterations-in-range]');
  assert.deepEqual(await attrs(page, '[data-testid=iteration-row]', ['data-key', 'data-inside']), [
    { 'data-key': 'engine-0/0', 'data-inside': '500000' },
    { 'data-key': 'engine-0/1', 'data-inside': '1000000' },
    { 'data-key': 'engine-0/2', 'data-inside': '1000000' },
    { 'data-key': 'engine-0/3', 'data-inside': '250000' },
  ]);
  assert.equal(await page.textContent('[data-testid=iterations-in-range]'),
    '4 of 5 forward(s) ran in the range, 2.75 ms of forward time inside it.');
  // Tabs that cover the whole run say so.
  await openTab(page, 'resources');
  assert.equal(await page.getAttribute('[data-testid=range-note]', 'data-follows'), 'false');
  assert.deepEqual(seen.errors, []);
  await page.close();

  // infer_run, 3.01–11 ms: the snapshots at 3.01 and 6.77 ms, not the one at 11.105 ms.
  ({ page, seen } = await openWithHash(INFER, 'infer_run.profile.jsonl', 'range=3010000-11000000&tab=memory'));
  await page.waitForSelector('[data-testid=snapshots-in-range]');
  assert.equal(await page.getAttribute('[data-testid=snapshots-in-range]', 'data-value'), '2');
  assert.deepEqual((await attrs(page, '[data-testid=snapshot-row]', ['data-at'])).map((r) => r['data-at']),
    ['3010000', '6770000']);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a profile without batched forwards or resources hides those tabs; a URL naming one opens the first', async () => {
  const { page, seen } = await openWithHash(OTLP, 'otlp_request.profile.jsonl', 'tab=iterations');
  assert.deepEqual(await page.$$eval('[role=tab]', (els) => els.map((e) => e.dataset.tab)),
    ['findings', 'requests', 'latency', 'modules', 'memory']);
  assert.equal(await page.getAttribute('[data-testid=tabpanel]', 'data-tab'), 'findings');
  await page.waitForFunction(() => location.hash.includes('tab=findings'));
  assert.deepEqual(seen.errors, []);
  await page.close();
});

// Browser tests of comparing two traces and of several files at once (see README.md): every
// number shown equals `candle-trace compare --json` / `summary --json`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  ctx, useHarness, fixtures, artifacts, cli, openPage, loadSeq, waitNextDocument, openTab, TRACE_FIELDS,
} from './harness.mjs';

useHarness();

const BASE = join(fixtures, 'compare', 'base.trace6.jsonl');
const CAND = join(fixtures, 'compare', 'cand.trace6.jsonl');
const OTHER = join(fixtures, 'compare', 'other_device.trace6.jsonl');

/** The page's percent attribute as a number, or null when empty (no baseline). */
const pct = (s) => (s === '' || s == null ? null : Number(s));

/** Drop one file on the element matching `selector`. */
async function dropOn(page, selector, file) {
  const b64 = readFileSync(file).toString('base64');
  const name = file.split('/').pop();
  await page.evaluate(({ selector, name, b64 }) => {
    const bin = atob(b64);
    const data = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) data[i] = bin.charCodeAt(i);
    const dt = new DataTransfer();
    dt.items.add(new File([data], name, { type: 'application/x-ndjson' }));
    const el = document.querySelector(selector);
    for (const type of ['dragenter', 'dragover', 'drop']) {
      el.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: dt }));
    }
  }, { selector, name, b64 });
}

/** The viewer's classification of a path (model/compare.rs: change_of, 1% threshold). */
function changeOf(p) {
  if (p.presence === 'new') return 'new';
  if (p.presence === 'vanished') return 'vanished';
  if (p.percent != null && Math.abs(p.percent) < 1) return 'unchanged';
  if (p.delta_ns < 0) return 'faster';
  if (p.delta_ns > 0) return 'slower';
  return 'unchanged';
}

/** Every delta the page shows equals the CLI's JSON. */
async function checkDeltas(page, want, how) {
  await openTab(page, 'summary');
  for (const s of want.summary) {
    const el = page.locator(`[data-testid=delta-${s.field}]`);
    assert.equal(await el.getAttribute('data-value'), String(s.delta), `${how}: ${s.field} delta`);
    assert.equal(await el.getAttribute('data-base'), String(s.base), `${how}: ${s.field} base`);
    assert.equal(await el.getAttribute('data-cand'), String(s.cand), `${how}: ${s.field} cand`);
    assert.equal(pct(await el.getAttribute('data-percent')), s.percent ?? null, `${how}: ${s.field} %`);
  }
  await openTab(page, 'paths');
  const paths = await page.$$eval('[data-testid=path-delta]', (rows) => rows.map((r) => ({
    path: r.dataset.path, base_count: Number(r.dataset.baseCount), cand_count: Number(r.dataset.candCount),
    base_ns: Number(r.dataset.baseNs), cand_ns: Number(r.dataset.candNs), delta_ns: Number(r.dataset.value),
    percent: r.dataset.percent === '' ? null : Number(r.dataset.percent), presence: r.dataset.presence,
  })));
  assert.deepEqual(paths, want.paths.map((p) => ({ ...p, percent: p.percent ?? null })), `${how}: paths`);
  await openTab(page, 'ops');
  const ops = await page.$$eval('[data-testid=op-delta]', (rows) => rows.map((r) => ({
    op_name: r.dataset.op, shape: JSON.parse(r.dataset.shape), dtype: r.dataset.dtype,
    base_count: Number(r.dataset.baseCount), cand_count: Number(r.dataset.candCount),
    base_ns: Number(r.dataset.baseNs), cand_ns: Number(r.dataset.candNs), delta_ns: Number(r.dataset.value),
    percent: r.dataset.percent === '' ? null : Number(r.dataset.percent), presence: r.dataset.presence,
  })));
  assert.deepEqual(ops, want.ops.map((o) => ({ ...o, percent: o.percent ?? null })), `${how}: ops`);
  await openTab(page, 'memory');
  const peak = page.locator('[data-testid=memory-delta-peak]');
  assert.equal(await peak.getAttribute('data-value'), String(want.memory.delta_bytes), `${how}: peak`);
  assert.equal(await peak.getAttribute('data-base'), String(want.memory.base_peak_bytes));
  assert.equal(await peak.getAttribute('data-cand'), String(want.memory.cand_peak_bytes));
  for (const c of want.memory.by_category) {
    const el = page.locator(`[data-testid=memory-delta-${c.category}]`);
    assert.equal(await el.getAttribute('data-value'), String(c.delta_bytes), `${how}: memory ${c.category}`);
    assert.equal(await el.getAttribute('data-base'), String(c.base_bytes));
    assert.equal(await el.getAttribute('data-cand'), String(c.cand_bytes));
  }
  await openTab(page, 'gradients');
  const grads = await page.$$eval('[data-testid=gradient-change]', (rows) => rows.map((r) => ({
    param: r.dataset.param, base: r.dataset.base, cand: r.dataset.cand,
  })));
  assert.deepEqual(grads, want.gradients.map((g) => ({
    param: `${g.root}/${g.key}`, base: g.base ?? 'none', cand: g.cand ?? 'none',
  })), `${how}: gradients`);
  // The timeline legend counts candidate spans per change of their path (vanished paths: the
  // baseline's spans).
  const counts = { faster: 0, slower: 0, unchanged: 0, new: 0, vanished: 0 };
  for (const p of want.paths) counts[changeOf(p)] += p.presence === 'vanished' ? p.base_count : p.cand_count;
  for (const [change, n] of Object.entries(counts)) {
    assert.equal(await page.getAttribute(`[data-testid=change-${change}]`, 'data-value'), String(n),
      `${how}: spans ${change}`);
  }
}

test('compare a baseline and a candidate by the pickers: every delta equals compare --json', async () => {
  const want = cli('compare', BASE, CAND, '--json');
  assert.deepEqual(want.mismatches, []);
  const { page, seen } = await openPage();
  await page.click('[data-testid=compare-open]');
  await page.setInputFiles('[data-testid=compare-base-input]', BASE);
  const n = await loadSeq(page);
  await page.setInputFiles('[data-testid=compare-cand-input]', CAND);
  await waitNextDocument(page, n);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'compare');
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-comparable'), 'true');
  assert.equal(await page.locator('[data-testid=compare-refusal]').count(), 0);
  // The header lists each summary number that changed, in words, baseline → candidate.
  for (const d of want.summary) {
    assert.equal(await page.locator(`[data-testid=changed-${d.field}]`).count(), d.base === d.cand ? 0 : 1, d.field);
  }
  assert.equal(await page.textContent('[data-testid=changed-total_ns]'), '100 µs → 80.0 µs (−20.0%)measured total');
  await checkDeltas(page, want, 'picker');
  // New and vanished paths are marked.
  await openTab(page, 'paths');
  assert.ok(want.paths.some((p) => p.presence === 'new') && want.paths.some((p) => p.presence === 'vanished'));
  assert.ok(await page.locator('[data-testid=path-delta][data-presence=new] .tag').count() > 0);
  assert.ok(await page.locator('[data-testid=path-delta][data-presence=vanished] .tag').count() > 0);
  await page.screenshot({ path: join(artifacts, 'compare.png'), fullPage: true });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.screenshot({ path: join(artifacts, 'compare-dark.png'), fullPage: true });
  await page.emulateMedia({ colorScheme: 'light' });

  // Sorting: by path (descending, then ascending), by signed change.
  const shownPaths = () => page.$$eval('[data-testid=path-delta]', (r) => r.map((x) => x.dataset.path));
  const byPath = want.paths.map((p) => p.path).sort();
  await page.click('[data-testid=sort-paths-path]');
  assert.deepEqual(await shownPaths(), [...byPath].reverse());
  await page.click('[data-testid=sort-paths-path]');
  assert.deepEqual(await shownPaths(), byPath);
  await page.click('[data-testid=sort-paths-delta]');
  const deltas = await page.$$eval('[data-testid=path-delta]', (r) => r.map((x) => Number(x.dataset.value)));
  assert.deepEqual(deltas, [...deltas].sort((a, b) => b - a));
  assert.deepEqual(seen.errors, []);
  assert.ok(seen.requests.every((u) => u.startsWith(ctx.origin)), seen.requests.join('\n'));
  await page.close();
});

test('differing meta is refused naming the field and values; compare anyway shows the deltas', async () => {
  const want = cli('compare', BASE, OTHER, '--json', '--force');
  assert.equal(want.mismatches.length, 1);
  const m = want.mismatches[0];
  const { page, seen } = await openPage();
  await page.click('[data-testid=compare-open]');
  const n = await loadSeq(page);
  // Drops onto the two targets (not the page: one file there would open it alone).
  await dropOn(page, '[data-testid=compare-base-drop]', BASE);
  assert.equal(await loadSeq(page), n, 'the baseline alone opens nothing');
  assert.equal(await page.textContent('[data-testid=compare-base-name]'), 'base.trace6.jsonl');
  await dropOn(page, '[data-testid=compare-cand-drop]', OTHER);
  await waitNextDocument(page, n);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-comparable'), 'false');
  const text = await page.textContent('[data-testid=compare-refusal]');
  assert.ok(text.includes(`${m.field} differs (baseline \`${m.base}\`, candidate \`${m.cand}\`)`), text);
  const item = page.locator(`[data-testid=mismatch-${m.field}]`);
  assert.equal(await item.getAttribute('data-base'), m.base);
  assert.equal(await item.getAttribute('data-cand'), m.cand);
  assert.equal(await page.locator('[data-testid=compare-deltas]').count(), 0, 'no deltas before compare anyway');
  assert.equal(await page.locator('[data-testid^=changed-]').count(), 0, 'no changed numbers in the header before compare anyway');
  await page.screenshot({ path: join(artifacts, 'compare-refused.png'), fullPage: true });
  await page.click('[data-testid=compare-anyway]');
  await page.waitForSelector('[data-testid=compare-deltas]');
  await page.waitForSelector('[data-testid=compare-forced]');
  await checkDeltas(page, want, 'forced');
  await page.screenshot({ path: join(artifacts, 'compare-forced.png'), fullPage: true });
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('compare shows both sides in one chart; a path row selects both spans; keys, search and alignment', async () => {
  const want = cli('compare', BASE, CAND, '--json');
  const { page, seen } = await openPage();
  await page.click('[data-testid=compare-open]');
  await page.setInputFiles('[data-testid=compare-base-input]', BASE);
  const n = await loadSeq(page);
  await page.setInputFiles('[data-testid=compare-cand-input]', CAND);
  await waitNextDocument(page, n);
  const chart = page.locator('[data-testid=flame-chart]');
  assert.equal(await chart.count(), 1);
  assert.equal(await chart.getAttribute('data-groups'), '2');
  const groups = chart.locator('[data-testid=chart-group]');
  assert.deepEqual(await groups.allTextContents(), ['baseline: base.trace6.jsonl', 'candidate: cand.trace6.jsonl']);
  const groupAttr = (a) => groups.evaluateAll((els, a) => els.map((e) => e.getAttribute(a)), a);
  // Both measured regions start at 0 ns: no shift; the axis runs to the baseline's end (100 µs).
  assert.deepEqual(await groupAttr('data-shift-ns'), ['0', '0']);
  assert.equal(await chart.getAttribute('data-view-start-ns'), '0');
  assert.equal(await chart.getAttribute('data-view-end-ns'), '100000');
  // A path row selects that path's first span on both sides, and the details show it.
  await openTab(page, 'paths');
  const backward = want.paths.find((p) => p.path.endsWith('backward')).path;
  await page.click(`[data-testid=path-delta][data-path="${backward}"]`);
  assert.deepEqual(await groupAttr('data-selected'), ['bwd', 'bwd']);
  await page.waitForSelector('[data-testid=span-details] dl.fields');
  assert.equal(await page.textContent('[data-testid=span-details] dl.fields dd'), 'backward');
  // Aligned by that path: backward starts at 42 µs in the baseline, 32 µs in the candidate.
  await page.click('[data-testid=compare-align-menu] > summary');
  await page.check('[data-testid=compare-align] input[value=path]');
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=chart-group]')].map((e) => e.dataset.shiftNs).join() === '0,10000');
  assert.equal(await page.textContent('[data-testid=compare-align-menu] > summary'), 'align: path');
  await page.check('[data-testid=compare-align] input[value=start]');
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=chart-group]')].map((e) => e.dataset.shiftNs).join() === '0,0');
  // Keys zoom and fit; search finds in both sides; a click on the candidate's root selects
  // it alone.
  const canvas = page.locator('[data-testid=timeline-canvas]');
  await canvas.focus();
  await page.keyboard.press('0');
  await page.keyboard.press('w');
  assert.ok(Number(await chart.getAttribute('data-view-end-ns')) - Number(await chart.getAttribute('data-view-start-ns')) < 100000);
  await page.keyboard.press('0');
  await chart.locator('[data-testid=search-input]').fill('linear');
  await page.waitForFunction(() => document.querySelector('[data-testid=search-count]').textContent === '4 matches');
  await chart.locator('[data-testid=search-input]').fill('');
  const box = await canvas.boundingBox();
  // Rows: axis 22 px; baseline header 18 + 3 lanes × 20; candidate header 18, then its lanes.
  await page.mouse.click(box.x + box.width / 2, box.y + 22 + 18 + 60 + 18 + 10);
  assert.deepEqual(await groupAttr('data-selected'), ['', 'step']);
  assert.equal(await chart.getAttribute('data-selected'), 'step');
  await page.screenshot({ path: join(artifacts, 'compare-chart.png'), fullPage: true });
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('the compare chart\'s toolbar is one line at 1280×720 and 1440×900, its alignment a keyboard dropdown', async () => {
  for (const [width, height] of [[1280, 720], [1440, 900]]) {
    for (const theme of ['light', 'dark']) {
      const how = `${width}×${height} ${theme}`;
      const { page, seen } = await openPage('/', { width, height });
      await page.emulateMedia({ colorScheme: theme });
      await page.click('[data-testid=compare-open]');
      await page.setInputFiles('[data-testid=compare-base-input]', BASE);
      const n = await loadSeq(page);
      await page.setInputFiles('[data-testid=compare-cand-input]', CAND);
      await waitNextDocument(page, n);
      // Every control shown shares one row: the toolbar is no taller than its tallest item, and
      // the hint at its end is whole (not cut short).
      const bar = await page.evaluate(() => {
        const t = document.querySelector('.chart-toolbar');
        const items = [...t.children].filter((c) => c.getClientRects().length > 0)
          .map((c) => c.getBoundingClientRect());
        const hint = t.querySelector('.chart-hint');
        return {
          height: t.getBoundingClientRect().height,
          tallest: Math.max(...items.map((r) => r.height)),
          tops: items.map((r) => Math.round(r.top + r.height / 2)),
          items: items.length,
          hintCut: hint.scrollWidth > hint.clientWidth,
        };
      });
      assert.ok(bar.items >= 6, `${how}: ${JSON.stringify(bar)}`);
      assert.ok(bar.height <= bar.tallest + 1, `${how}: the toolbar takes more than one row: ${JSON.stringify(bar)}`);
      assert.ok(Math.max(...bar.tops) - Math.min(...bar.tops) <= 4, `${how}: ${JSON.stringify(bar)}`);
      assert.equal(bar.hintCut, false, `${how}: the hint is cut`);
      // The legend's counts stay in the toolbar; the alignment opens by keyboard, a choice is
      // made with the arrows, Escape closes it and gives the focus back to its summary.
      assert.equal(await page.locator('[data-testid=change-new]').isVisible(), true);
      const menu = page.locator('[data-testid=compare-align-menu]');
      await menu.locator('summary').focus();
      await page.keyboard.press('Enter');
      assert.equal(await menu.getAttribute('open'), '');
      await page.keyboard.press('Tab');
      await page.keyboard.press('ArrowDown');
      assert.equal(await page.isChecked('[data-testid=compare-align] input[value=path]'), true);
      assert.equal(await menu.locator('summary').textContent(), 'align: path');
      const body = await page.locator('[data-testid=compare-align]').boundingBox();
      assert.ok(body.x >= 0 && body.x + body.width <= width, `${how}: the dropdown leaves the window`);
      await page.screenshot({ path: join(artifacts, `compare-toolbar-${width}-${theme}.png`) });
      await page.keyboard.press('Escape');
      assert.equal(await menu.getAttribute('open'), null);
      assert.equal(await page.evaluate(() => document.activeElement.closest('summary') !== null), true);
      assert.deepEqual(seen.errors, []);
      await page.close();
    }
  }
});

/** [first measured start, last measured end] of a trace/6 file, read here independently. */
function measuredWindow(text) {
  const starts = new Map();
  let lo = Infinity;
  let hi = -Infinity;
  for (const line of text.split('\n').filter((l) => l.trim())) {
    const e = JSON.parse(line);
    if (e.kind === 'span_start' && e.measured) starts.set(e.id, e.start_ns);
    if (e.kind === 'span_end' && starts.has(e.id)) {
      lo = Math.min(lo, starts.get(e.id));
      hi = Math.max(hi, starts.get(e.id) + e.duration_ns);
    }
  }
  return [lo, hi];
}

test('compare rows link to their spans on both sides: paths, ops, memory, gradients', async () => {
  // By hand from the fixtures: `linear` is l1 and l2 on both sides; matmul [8, 16] f32 ran in
  // l1 and l2 on both sides, relu in the baseline's forward only, gelu in the candidate's
  // gelu only; everything live at either peak was allocated in step, the gradient g only at
  // the baseline's (2.00 KiB at 50 µs; the candidate's 1.50 KiB peak is at 3 µs); w and new
  // are top-level parameters, so their rows are the backward (bwd) of each side.
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await page.click('[data-testid=compare-open]');
  await page.setInputFiles('[data-testid=compare-base-input]', BASE);
  const n = await loadSeq(page);
  await page.setInputFiles('[data-testid=compare-cand-input]', CAND);
  await waitNextDocument(page, n);
  const selected = () => page.$$eval('[data-testid=chart-group]', (els) => els.map((e) => e.dataset.selected));
  const highlighted = (n) => page.waitForFunction(
    (n) => document.querySelector('[data-testid=flame-chart]').dataset.highlighted === String(n), n);
  const linkedRows = (testid, attr) => page.$$eval(`[data-testid=${testid}][data-linked=true]`, (els, a) => els.map((e) => e.getAttribute(a)), attr);

  // Span paths: hovering a row outlines its spans on both sides; a picked row is marked.
  await openTab(page, 'paths');
  await page.hover('[data-testid=path-delta][data-path="step/forward/linear"]');
  await highlighted(4);
  await page.mouse.move(5, 5);
  await highlighted(0);
  await page.click('[data-testid=path-delta][data-path="step/forward/linear"]');
  assert.deepEqual(await selected(), ['l1', 'l1']);
  assert.deepEqual(await linkedRows('path-delta', 'data-path'), ['step/forward/linear']);

  // Ops: a click selects the group's first span on each side that ran it and outlines them.
  await openTab(page, 'ops');
  await page.click('[data-testid=op-delta][data-op=relu]');
  assert.deepEqual(await selected(), ['fwd', '']);
  await highlighted(1);
  assert.deepEqual(await linkedRows('op-delta', 'data-op'), ['relu']);
  await page.hover('[data-testid=op-delta][data-op=gelu]');
  await highlighted(1);
  await page.click('[data-testid=op-delta][data-op=matmul]');
  assert.deepEqual(await selected(), ['l1', 'l1']);
  await highlighted(4);
  assert.deepEqual(await linkedRows('op-delta', 'data-op'), ['matmul']);

  // Memory: what was live at each peak (the gradient's at the baseline's only).
  await openTab(page, 'memory');
  await page.click('[data-testid=memory-delta-gradient]');
  assert.deepEqual(await selected(), ['step', '']);
  await page.hover('[data-testid=memory-delta-peak]');
  await highlighted(2);
  assert.equal(await page.getAttribute('[data-testid=memory-delta-gradient]', 'data-linked'), 'true');

  // Gradients: a top-level parameter's row is each side's backward.
  await openTab(page, 'gradients');
  await page.click('[data-testid=gradient-change][data-param="m/w"]');
  assert.deepEqual(await selected(), ['bwd', 'bwd']);
  await highlighted(2);
  assert.deepEqual((await linkedRows('gradient-change', 'data-param')).sort(), ['m/new', 'm/w']);
  assert.equal(await page.evaluate(() => document.activeElement.dataset.param), 'm/w');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('several files at once: per-file numbers equal summary --json, totals follow the rule, offsets move a group', async () => {
  // Three ranks: the pair 50 µs apart by their timestamps, and one with an unusable timestamp.
  const dir = join(artifacts, 'multi');
  mkdirSync(dir, { recursive: true });
  const ts = '"timestamp":"2026-01-01T00:00:00Z"';
  const texts = [
    readFileSync(BASE, 'utf8'),
    readFileSync(CAND, 'utf8').replace(ts, '"timestamp":"2026-01-01T00:00:00.000050Z"'),
    readFileSync(OTHER, 'utf8').replace(ts, '"timestamp":"yesterday"'),
  ];
  const files = texts.map((t, i) => {
    const f = join(dir, `rank${i}.trace6.jsonl`);
    writeFileSync(f, t);
    return f;
  });
  const summaries = files.map((f) => cli('summary', '--json', f));
  const { page, seen } = await openPage();
  const n = await loadSeq(page);
  await page.setInputFiles('[data-testid=file-input]', files);
  await waitNextDocument(page, n);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'multi');
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-files'), '3');
  for (const [i, s] of summaries.entries()) {
    for (const f of TRACE_FIELDS) {
      assert.equal(await page.getAttribute(`[data-testid=multi-${i}-${f}]`, 'data-value'), String(s[f]), `file ${i} ${f}`);
    }
  }
  const group = (i, attr) => page.getAttribute(`[data-testid=group-${i}]`, attr);
  await openTab(page, 'alignment');
  assert.deepEqual([await group(0, 'data-offset-ns'), await group(1, 'data-offset-ns'), await group(2, 'data-offset-ns')],
    ['0', '50000', '0']);
  assert.deepEqual([await group(0, 'data-align'), await group(1, 'data-align'), await group(2, 'data-align')],
    ['timestamp', 'timestamp', 'unparseable']);
  assert.equal(await page.inputValue('[data-testid=offset-1]'), '50');

  const windows = texts.map(measuredWindow);
  const checkTotals = async (offsets, how) => {
    const sum = (f) => summaries.reduce((a, s) => a + s[f], 0);
    const max = (f) => Math.max(...summaries.map((s) => s[f]));
    const lo = Math.min(...windows.map(([s], i) => s + offsets[i]));
    const hi = Math.max(...windows.map(([, e], i) => e + offsets[i]));
    const want = {
      op_count: sum('op_count'), span_count: sum('span_count'), root_span_count: sum('root_span_count'),
      alloc_count: sum('alloc_count'), free_count: sum('free_count'),
      max_depth: max('max_depth'), peak_bytes: max('peak_bytes'), total_ns: hi - lo,
    };
    // The totals re-render with the offsets; give them a moment before asserting.
    await openTab(page, 'files');
    await page.waitForFunction((v) => document.querySelector('[data-testid=multi-total-total_ns]')?.dataset.value === v,
      String(want.total_ns), { timeout: 5_000 }).catch(() => {});
    for (const f of TRACE_FIELDS) {
      assert.equal(await page.getAttribute(`[data-testid=multi-total-${f}]`, 'data-value'), String(want[f]), `${how}: total ${f}`);
    }
  };
  await checkTotals([0, 50_000, 0], 'aligned');
  // The files are the chart's lane groups: keys zoom, search finds in every file, a click selects.
  const chart = page.locator('[data-testid=flame-chart]');
  assert.equal(await chart.getAttribute('data-groups'), '3');
  assert.deepEqual(await chart.locator('[data-testid=chart-group]').allTextContents(), files.map((f) => f.split('/').pop()));
  assert.deepEqual(await chart.locator('[data-testid=chart-group]').evaluateAll((els) => els.map((e) => e.dataset.shiftNs)),
    ['0', '50000', '0']);
  const width = async () => Number(await chart.getAttribute('data-view-end-ns')) - Number(await chart.getAttribute('data-view-start-ns'));
  const fitted = await width();
  await page.locator('[data-testid=timeline-canvas]').focus();
  await page.keyboard.press('w');
  assert.ok(await width() < fitted);
  await page.keyboard.press('0');
  assert.equal(await width(), fitted);
  const linear = texts.reduce((n, t) => n + t.split('\n').filter((l) => l.includes('"kind":"span_start"') && l.includes('"name":"linear"')).length, 0);
  assert.ok(linear > 0);
  await chart.locator('[data-testid=search-input]').fill('linear');
  await page.waitForFunction((n) => document.querySelector('[data-testid=flame-chart] [data-testid=search-count]').textContent === `${n} matches`, linear);
  await chart.locator('[data-testid=search-input]').press('Enter');
  assert.equal(await chart.getAttribute('data-selected'), 'l1');
  await page.waitForSelector('[data-testid=span-details] dl.fields');
  assert.equal(await page.textContent('[data-testid=span-details] dl.fields dd'), 'linear');
  await chart.locator('[data-testid=search-input]').fill('');

  // A file's row (in the files and the alignment tabs) is its lane group: a click selects its
  // root span (each file's is `step`) alone, hovering outlines it, a selection marks the row.
  const groupSelected = () => chart.locator('[data-testid=chart-group]').evaluateAll((els) => els.map((e) => e.dataset.selected));
  await openTab(page, 'files');
  await page.click('[data-testid=multi-file-1]');
  assert.deepEqual(await groupSelected(), ['', 'step', '']);
  assert.equal(await page.getAttribute('[data-testid=multi-file-1]', 'data-linked'), 'true');
  await page.hover('[data-testid=multi-file-2]');
  await page.waitForFunction(() => document.querySelector('[data-testid=flame-chart]').dataset.highlighted === '1');
  await openTab(page, 'alignment');
  assert.equal(await group(1, 'data-linked'), 'true');
  await page.click('[data-testid=group-2] th');
  assert.deepEqual(await groupSelected(), ['', '', 'step']);
  // A click in the offset field is the field's.
  await page.click('[data-testid=offset-0]');
  assert.deepEqual(await groupSelected(), ['', '', 'step']);
  await page.mouse.move(5, 5);
  await page.screenshot({ path: join(artifacts, 'multi.png'), fullPage: true });
  const before = await page.locator('[data-testid=timeline-canvas]').screenshot();

  // Move rank 1 to 250 µs: its group moves, the axis and the wall-span total follow.
  await openTab(page, 'alignment');
  await page.fill('[data-testid=offset-1]', '250');
  await page.$eval('[data-testid=offset-1]', (e) => e.dispatchEvent(new Event('change', { bubbles: true })));
  await page.waitForFunction(() => document.querySelector('[data-testid=group-1]').dataset.offsetNs === '250000');
  assert.equal(await group(1, 'data-shift-ns'), '250000');
  await checkTotals([0, 250_000, 0], 'moved');
  // A negative offset moves the axis start: every group's shift stays >= 0.
  await openTab(page, 'alignment');
  await page.fill('[data-testid=offset-2]', '-20');
  await page.$eval('[data-testid=offset-2]', (e) => e.dispatchEvent(new Event('change', { bubbles: true })));
  await page.waitForFunction(() => document.querySelector('[data-testid=group-2]').dataset.offsetNs === '-20000');
  await page.waitForFunction(() => document.querySelector('[data-testid=group-0]').dataset.shiftNs === '20000', null, { timeout: 5_000 }).catch(() => {});
  await openTab(page, 'alignment');
  assert.deepEqual([await group(0, 'data-shift-ns'), await group(1, 'data-shift-ns'), await group(2, 'data-shift-ns')],
    ['20000', '270000', '0']);
  await checkTotals([0, 250_000, -20_000], 'negative');
  const after = await page.locator('[data-testid=timeline-canvas]').screenshot();
  assert.ok(!before.equals(after), 'the timeline is repainted with the group moved');
  await page.screenshot({ path: join(artifacts, 'multi-moved.png'), fullPage: true });

  // Dropping two files on the page opens both; one file alone keeps the single-file view.
  const m = await loadSeq(page);
  await page.evaluate((pairs) => {
    const dt = new DataTransfer();
    for (const [name, text] of pairs) dt.items.add(new File([text], name, { type: 'application/x-ndjson' }));
    for (const type of ['dragenter', 'dragover', 'drop']) {
      document.body.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: dt }));
    }
  }, [['a.trace6.jsonl', texts[0]], ['b.trace6.jsonl', texts[1]]]);
  await waitNextDocument(page, m);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-files'), '2');
  assert.equal(await page.getAttribute('[data-testid=multi-file-1]', 'data-file'), 'b.trace6.jsonl');
  const k = await loadSeq(page);
  await page.setInputFiles('[data-testid=file-input]', files[0]);
  await waitNextDocument(page, k);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'trace');
  assert.equal(await page.getAttribute('[data-testid=summary-total_ns]', 'data-value'), String(summaries[0].total_ns));
  assert.deepEqual(seen.errors, []);
  await page.close();
});

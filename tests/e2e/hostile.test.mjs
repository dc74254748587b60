// Hostile input in the viewer: 100 000-deep span nesting renders (no recursion overflow),
// hostile names (HTML, scripts, bidi overrides, a 1 MB name, emoji, zero-width characters) are
// inert text that does not break the layout, and the page's CSP stops inline script even if
// some text ever reached the DOM as markup.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  useHarness, artifacts, cli, openPage, openByPicker, shownValues, shownDiagnostics, openTab, TRACE_FIELDS,
} from './harness.mjs';

useHarness();

const META = {
  kind: 'meta', schema: 'candle-graph/trace/6', run_id: 'hostile', correlation_id: 'c',
  entrypoint: 'e', phase: 'train', timestamp: '2026-01-01T00:00:00Z', capture_step: 1,
  warmup_steps: 0, device: 'cpu', timing_mode: 'host', tags: {},
};

function writeTrace(name, lines) {
  const file = join(artifacts, name);
  writeFileSync(file, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  return file;
}

/** Console messages of every type (the harness keeps only errors). */
function recordConsole(page) {
  const all = [];
  page.on('console', (m) => all.push(m.text()));
  return all;
}

test('100 000-deep span nesting renders without a recursion overflow', async () => {
  const N = 100_000;
  const lines = [META];
  lines.push('{"kind":"span_start","id":"s0","name":"level 0","start_ns":0,"span_kind":"function","measured":true}');
  for (let i = 1; i < N; i++) {
    lines.push(`{"kind":"span_start","id":"s${i}","parent_id":"s${i - 1}","name":"level ${i}","start_ns":${i},"span_kind":"function"}`);
  }
  for (let i = N - 1; i >= 0; i--) {
    lines.push(`{"kind":"span_end","id":"s${i}","duration_ns":${2 * (N - i)}}`);
  }
  const file = writeTrace('deep.trace6.jsonl', lines);
  const summary = cli('summary', '--json', file);
  assert.equal(summary.max_depth, N - 1);
  const { page, seen } = await openPage();
  await openByPicker(page, file);
  const values = await shownValues(page);
  for (const f of TRACE_FIELDS) assert.equal(values[f], String(summary[f]), f);
  assert.deepEqual(await shownDiagnostics(page), []);
  // The timeline and the tables are there and the page still answers: zoom, then select the
  // deepest span through the span table's first row and walk down the tree.
  const canvas = page.locator('[data-testid=timeline-canvas]');
  await canvas.focus();
  for (const key of ['w', 'w', 's', '0']) await page.keyboard.press(key);
  await openTab(page, 'ops');
  await page.click('[data-testid=span-row] >> nth=0');
  await page.waitForSelector('[data-testid=span-details] dl.fields');
  await canvas.focus();
  for (let i = 0; i < 20; i++) await page.keyboard.press('ArrowDown');
  // The canvas stays the area's height, its lanes scrolled so that the selected span's lane
  // (span s<i> is at depth i: layout y 22 + 20 i) shows under the axis.
  const box = await canvas.boundingBox();
  assert.ok(box.height < 2000, `canvas ${box.height} px high`);
  const depth = Number((await page.getAttribute('[data-testid=flame-chart]', 'data-selected')).slice(1));
  const top = Number(await page.getAttribute('[data-testid=flame-chart]', 'data-lanes-top'));
  const lane = 22 + 20 * depth;
  assert.ok(lane >= top + 22 - 1 && lane + 20 <= top + box.height + 1, JSON.stringify({ depth, top, lane, h: box.height }));
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  await page.screenshot({ path: join(artifacts, 'hostile-deep.png') });
  assert.deepEqual(seen.errors, []);
  await page.close();
});

const MB_NAME = 'x'.repeat(1 << 20);
const HOSTILE = [
  '<b id="injected-b">bold?</b>',
  '<script>window.__pwned = 1; console.log("PWNED-script")</script>',
  '<img id="injected-img" src=x onerror="window.__pwned = 2; console.log(\'PWNED-img\')">',
  '<svg onload="window.__pwned = 3">',
  '<iframe srcdoc="<script>parent.__pwned = 4</script>"></iframe>',
  '<a id="injected-a" href="javascript:window.__pwned=5">click me</a>',
  'javascript:window.__pwned=6',
  '\u202Egnp.exe\u202C then normal text',
  'zero\u200Bwidth\u200Djoiner\u2060word\uFEFFbom',
  '🔥 👩‍👩‍👧‍👦 🏳️‍🌈 ñ 漢字 العربية',
  MB_NAME,
];

function hostileTrace() {
  const meta = { ...META, entrypoint: '<script>window.__pwned = 7</script>',
    tags: { a: '<img src=x onerror="window.__pwned = 8">', b: 'javascript:window.__pwned=9', c: '\u202Eevil' } };
  const lines = [meta,
    '{"kind":"span_start","id":"root","name":"root","start_ns":0,"span_kind":"function","measured":true}'];
  HOSTILE.forEach((name, i) => {
    lines.push({ kind: 'span_start', id: `h${i}`, parent_id: 'root', name, start_ns: 10 * i, span_kind: 'op' });
    lines.push({ kind: 'op', span_id: `h${i}`, op_name: name, inputs: [], shape: [2], dtype: 'f32', device: 'cpu', duration_ns: 5, timestamp_ns: 10 * i });
    lines.push({ kind: 'span_end', id: `h${i}`, duration_ns: 5 });
  });
  lines.push('{"kind":"span_end","id":"root","duration_ns":1000}');
  return writeTrace('hostile-names.trace6.jsonl', lines);
}

/** Widths that must not change when names turn hostile, and elements that overflow the page. */
async function layout(page) {
  return page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const width = (sel) => Math.round(document.querySelector(sel)?.getBoundingClientRect().width ?? -1);
    // An element wider than the viewport is fine only inside a scroll/clip container that is not.
    const clipped = (el) => {
      for (let p = el.parentElement; p; p = p.parentElement) {
        const o = getComputedStyle(p).overflowX;
        if (o !== 'visible' && p.getBoundingClientRect().width <= vw + 1) return true;
      }
      return false;
    };
    const overflowing = [...document.querySelectorAll('body *')]
      .filter((el) => el.getBoundingClientRect().width > vw + 1 && !clipped(el))
      .map((el) => `${el.tagName.toLowerCase()}${el.dataset.testid ? `[${el.dataset.testid}]` : ''}.${el.className}`);
    return {
      viewport: vw,
      pageScrollWidth: document.documentElement.scrollWidth,
      header: width('[data-testid=run-header]'),
      cards: width('section.cards'),
      overflowing,
    };
  });
}

test('hostile names are inert text and keep the layout', async () => {
  const { page, seen } = await openPage();
  const consoleAll = recordConsole(page);
  // Baseline layout with harmless names of the same structure.
  const plain = writeTrace('plain-names.trace6.jsonl', [META,
    '{"kind":"span_start","id":"root","name":"root","start_ns":0,"span_kind":"function","measured":true}',
    '{"kind":"span_start","id":"a","parent_id":"root","name":"a","start_ns":0,"span_kind":"op"}',
    '{"kind":"span_end","id":"a","duration_ns":5}',
    '{"kind":"span_end","id":"root","duration_ns":1000}']);
  await openByPicker(page, plain);
  const before = await layout(page);

  const file = hostileTrace();
  await openByPicker(page, file);
  assert.deepEqual(await shownDiagnostics(page), []);
  await openTab(page, 'ops');
  // Every hostile name is shown verbatim as text (span table and op table).
  const spanNames = await page.$$eval('[data-testid=span-row] td:first-child', (tds) => tds.map((t) => t.textContent));
  for (const name of HOSTILE) {
    assert.ok(spanNames.includes(name), `span name not shown as text: ${name.slice(0, 60)}`);
  }
  const opNames = await page.$$eval('[data-testid=op-row] td:first-child', (tds) => tds.map((t) => t.textContent));
  for (const name of HOSTILE) {
    assert.ok(opNames.includes(name), `op name not shown as text: ${name.slice(0, 60)}`);
  }
  // No markup from the file reached the DOM.
  for (const sel of ['#injected-b', '#injected-img', '#injected-a', '[data-testid=document] img',
    '[data-testid=document] script', '[data-testid=document] svg', '[data-testid=document] iframe',
    'body a[href^="javascript:"]']) {
    assert.equal(await page.locator(sel).count(), 0, sel);
  }
  // Click every span row (a name that became a link would navigate or run).
  const rows = await page.locator('[data-testid=span-row]').count();
  for (let i = 0; i < rows; i++) await page.click(`[data-testid=span-row] >> nth=${i}`);
  await page.waitForTimeout(300);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(seen.dialogs, []);
  assert.deepEqual(consoleAll.filter((m) => m.includes('PWNED')), []);

  // Layout: the header keeps its width and the summary strip (its width follows its numbers)
  // stays inside the window; nothing makes the page scroll sideways.
  const after = await layout(page);
  assert.equal(after.header, before.header, 'run header width');
  assert.ok(after.cards > 0 && after.cards <= after.viewport, `summary strip width ${after.cards}`);
  assert.ok(after.pageScrollWidth <= after.viewport, `page scrolls sideways: ${after.pageScrollWidth} > ${after.viewport}`);
  assert.deepEqual(after.overflowing, [], 'elements wider than the viewport');
  // A bidi override in a name cannot reorder the text after it: names are isolated.
  const bidi = await page.$$eval('[data-testid=span-row] td:first-child', (tds) =>
    tds.filter((t) => t.textContent.includes('\u202E')).map((t) => getComputedStyle(t).unicodeBidi));
  assert.ok(bidi.length > 0 && bidi.every((b) => b === 'isolate' || b === 'plaintext' || b === 'isolate-override'), `unicode-bidi ${bidi}`);
  await page.screenshot({ path: join(artifacts, 'hostile-names.png') });
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('the CSP blocks inline script and javascript: URLs even if one reached the DOM', async () => {
  const { page, seen } = await openPage();
  const consoleAll = recordConsole(page);
  await openByPicker(page, hostileTrace());
  const violations = await page.evaluate(async () => {
    const seen = [];
    document.addEventListener('securitypolicyviolation', (e) => seen.push(e.violatedDirective));
    // What an injection bug would produce: an inline script, an inline handler, a javascript:
    // link that gets clicked. The CSP must stop all three.
    const s = document.createElement('script');
    s.textContent = 'window.__pwned = "inline"; console.log("PWNED-inline")';
    document.body.appendChild(s);
    const img = document.createElement('img');
    img.setAttribute('onerror', 'window.__pwned = "handler"');
    img.src = 'data:,not-an-image';
    document.body.appendChild(img);
    const a = document.createElement('a');
    a.href = 'javascript:window.__pwned="link"';
    a.textContent = 'x';
    document.body.appendChild(a);
    a.click();
    await new Promise((r) => setTimeout(r, 300));
    return seen;
  });
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.ok(violations.some((v) => v.startsWith('script-src')), `no CSP violation reported: ${violations}`);
  assert.deepEqual(consoleAll.filter((m) => m.includes('PWNED')), []);
  assert.deepEqual(seen.dialogs, []);
  // The only console errors are the CSP's own reports of what it blocked.
  assert.deepEqual(seen.errors.filter((e) => !/Content Security Policy/i.test(e)), []);
  await page.close();
});

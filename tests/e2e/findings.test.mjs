// Browser tests of the findings panel and the steps view (see README.md): the findings shown
// (rule, title, stake, evidence, link, notes, how many left out) equal `candle-trace findings
// --json` on the same files, the steps view equals `candle-trace steps --json`, and clicking a
// finding selects its span in the timeline or outlines the row it names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  useHarness, fixtures, artifacts, cli, openPage, openByPicker, loadSeq, waitNextDocument, openTab, shownValues,
} from './harness.mjs';

useHarness();

/** The files of a step-set fixture directory, in name order. */
const stepFiles = (dir) => readdirSync(join(fixtures, dir))
  .filter((n) => n.endsWith('.jsonl')).sort().map((n) => join(fixtures, dir, n));

/** What the panel shows, in the CLI's JSON shape. */
async function shownFindings(page) {
  return page.$$eval('[data-testid=finding]', (els) => els.map((e) => {
    const d = e.dataset;
    let link = null;
    if (d.linkTo === 'span') link = { to: 'span', id: d.linkId, line: Number(d.linkLine) };
    if (d.linkTo === 'row') link = { to: 'row', table: d.linkTable, key: d.linkKey };
    return {
      rule: d.rule,
      title: e.querySelector('.finding-title').textContent,
      stake: { [d.stakeKind]: Number(d.stake) },
      evidence: [...e.querySelectorAll('[data-testid=finding-evidence]')].map((x) => x.textContent),
      link,
    };
  }));
}

/** The panel equals `findings --json` (`want`). */
async function checkFindings(page, want, label) {
  assert.equal(await page.locator('[data-testid=findings-panel]').count(), 1, `${label}: one panel`);
  assert.deepEqual(await shownFindings(page), want.findings, `${label}: findings`);
  const notes = await page.$$eval('[data-testid=finding-note]', (els) => els.map((e) => e.textContent));
  assert.deepEqual(notes, want.notes, `${label}: notes of rules without enough data`);
  assert.equal(await page.getAttribute('[data-testid=findings-panel]', 'data-left-out'), String(want.left_out),
    `${label}: left out`);
  assert.equal(await page.locator('[data-testid=findings-none]').count(), want.findings.length === 0 ? 1 : 0,
    `${label}: "no findings" line`);
}

/** Click the finding of `rule` (in the findings tab, opened first). */
async function clickFinding(page, rule) {
  await openTab(page, 'findings');
  await page.click(`[data-testid=finding][data-rule=${rule}] [data-testid=finding-link]`);
}

/** The elements outlined as a finding's target: their test ids and `attr`. */
async function outlined(page, attr) {
  return page.$$eval('[data-finding-target]', (els, attr) => els.map((e) => [e.dataset.testid, e.getAttribute(attr)]), attr);
}

/** Whether the element matching `selector` is (at least partly) inside the viewport. */
async function inViewport(page, selector) {
  return page.$eval(selector, (e) => {
    const r = e.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight;
  });
}

test('findings of single files equal findings --json', async () => {
  const files = ['findings_train.trace6.jsonl', 'findings_infer.profile.jsonl', 'train_step.trace6.jsonl',
    'valid_panels.trace6.jsonl', 'broken_no_measured.trace6.jsonl'];
  const { page, seen } = await openPage();
  let found = 0;
  for (const name of files) {
    const file = join(fixtures, name);
    const want = cli('findings', '--json', file);
    await openByPicker(page, file);
    await checkFindings(page, want, name);
    found += want.findings.length;
  }
  // The findings fixtures hold four training findings and the two inference rules.
  assert.ok(found >= 6, `findings checked: ${found}`);
  await page.screenshot({ path: join(artifacts, 'findings.png') });
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('clicking a finding selects its span or outlines its row', async () => {
  const file = join(fixtures, 'findings_train.trace6.jsonl');
  const want = cli('findings', '--json', file);
  const byRule = Object.fromEntries(want.findings.map((f) => [f.rule, f]));
  for (const rule of ['backward_short', 'dominant_module', 'memory_peak', 'gradients_missing']) {
    assert.ok(byRule[rule], `findings_train has ${rule}`);
  }
  const { page, seen } = await openPage();
  await openByPicker(page, file);

  // A span link: the span is selected (its details show) and the timeline shows it.
  const span = byRule.backward_short.link;
  assert.equal(span.to, 'span');
  await clickFinding(page, 'backward_short');
  await page.waitForSelector('[data-testid=span-details] dl.fields');
  const fields = await page.$$eval('[data-testid=span-details] dl.fields div', (ds) =>
    Object.fromEntries(ds.map((d) => [d.querySelector('dt').textContent, d.querySelector('dd').textContent])));
  assert.equal(fields.id, span.id);
  assert.equal(fields.line, String(span.line));
  // The span's start and end, read from the file itself.
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const start = lines.find((l) => l.kind === 'span_start' && l.id === span.id).start_ns;
  const end = start + lines.find((l) => l.kind === 'span_end' && l.id === span.id).duration_ns;
  await page.waitForFunction(([a, b]) => {
    const c = document.querySelector('[data-testid=flame-chart]');
    return Number(c.dataset.viewStartNs) <= a && Number(c.dataset.viewEndNs) >= b;
  }, [start, end]);
  assert.ok(await inViewport(page, '[data-testid=timeline-canvas]'), 'the timeline is scrolled to');

  // Row links: the row is outlined (only it) and scrolled to.
  const rows = [
    ['dominant_module', 'module-row', 'data-key', byRule.dominant_module.link.key],
    ['gradients_missing', 'gradient-group', 'data-module', byRule.gradients_missing.link.key],
    ['memory_peak', 'memory-chart', 'data-device', cli('query', file, '--kind', 'memory', '--json').peak_device],
  ];
  for (const [rule, testid, attr, key] of rows) {
    await clickFinding(page, rule);
    // The row's tab opens first; the row is outlined once it is drawn.
    await page.waitForSelector('[data-finding-target]', { state: 'attached' });
    assert.deepEqual(await outlined(page, attr), [[testid, key]], `${rule} outlines ${testid} ${key}`);
    assert.ok(await inViewport(page, '[data-finding-target]'), `${rule}: scrolled to`);
    assert.equal(await page.locator('[data-testid=finding-missing]').count(), 0, `${rule}: found`);
  }
  await page.screenshot({ path: join(artifacts, 'findings-row.png') });

  // Grouped by leaf name (which the modules tab keeps while another tab is open) the table
  // still has a row keyed `attn` (a top-level module's leaf name is its path), and the
  // finding finds it.
  await openTab(page, 'modules');
  await page.selectOption('[data-testid=modules-by]', 'name');
  await clickFinding(page, 'dominant_module');
  await page.waitForSelector('[data-finding-target]', { state: 'attached' });
  assert.deepEqual(await outlined(page, 'data-key'), [['module-row', 'attn']]);
  assert.equal(await page.getAttribute('[data-testid=modules-by]', 'data-value'), 'name');

  // An inference profile: the request row.
  const infer = join(fixtures, 'findings_infer.profile.jsonl');
  const inferWant = cli('findings', '--json', infer);
  await openByPicker(page, infer);
  const rowFindings = inferWant.findings.filter((f) => f.link?.to === 'row');
  assert.ok(rowFindings.length > 0, 'the profile findings link request rows');
  for (const f of rowFindings) {
    await clickFinding(page, f.rule);
    await page.waitForSelector('[data-finding-target]', { state: 'attached' });
    assert.deepEqual(await outlined(page, 'data-request'), [['request-row', f.link.key]], f.rule);
  }
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('the steps of one run open as the steps view, equal to steps --json and findings --json', async () => {
  const files = stepFiles('steps_outlier');
  const steps = cli('steps', '--json', ...files);
  const want = cli('findings', '--json', ...files);
  const { page, seen } = await openPage();
  const n = await loadSeq(page);
  // Picked in reverse: the view orders them by capture_step.
  await page.setInputFiles('[data-testid=file-input]', [...files].reverse());
  await waitNextDocument(page, n);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'steps');

  await openTab(page, 'steps');
  const rows = await page.$$eval('[data-testid=step-row]', (els) => els.map((e) => ({
    step: e.dataset.step, total: Number(e.dataset.total), phases: e.dataset.phases, outlier: e.dataset.outlier,
  })));
  const outlierPos = new Set(steps.outliers.map((o) => o.step));
  assert.deepEqual(rows, steps.steps.map((s, i) => ({
    step: String(s.capture_step),
    total: s.total_ns,
    phases: s.phases_ns ? s.phases_ns.join(',') : '',
    outlier: String(outlierPos.has(i)),
  })));
  const total = await page.$eval('[data-testid=steps-total]', (e) => [e.dataset.median, e.dataset.p90, e.dataset.mad].map(Number));
  assert.deepEqual(total, [steps.total.median, steps.total.p90, steps.total.mad]);

  const spreads = (testid) => page.$$eval(`[data-testid=${testid}]`, (els) => els.map((e) => ({
    key: e.dataset.key,
    spread: Object.fromEntries(['count', 'min', 'median', 'p90', 'max', 'mad'].map((k) => [k, Number(e.dataset[k])])),
    per_step_ns: e.dataset.perStep.split(',').map((v) => (v === '' ? null : Number(v))),
  })));
  assert.deepEqual(await spreads('steps-phase'), steps.phases);
  assert.deepEqual(await spreads('steps-module'), steps.modules.slice(0, 50));

  const outliers = await page.$$eval('[data-testid=steps-outlier]', (els) => els.map((e) => [e.dataset.step, Number(e.dataset.excess)]));
  assert.deepEqual(outliers, steps.outliers.map((o) => [String(o.capture_step), o.excess_ns]));
  assert.ok(outliers.length > 0, 'steps_outlier has an outlier step');
  const churn = await page.$$eval('[data-testid=steps-churn]', (els) => els.map((e) => e.dataset.path));
  assert.deepEqual(churn, steps.shape_churn.map((c) => c.path));
  assert.ok(churn.length > 0, 'steps_outlier has shape churn');

  // The set's findings, the outlier step's among them; clicking it outlines the step's row.
  await openTab(page, 'findings');
  await checkFindings(page, want, 'steps_outlier');
  const outlier = want.findings.find((f) => f.rule === 'outlier_step');
  assert.ok(outlier, 'an outlier_step finding');
  await clickFinding(page, 'outlier_step');
  await page.waitForSelector('[data-finding-target]', { state: 'attached' });
  assert.deepEqual(await outlined(page, 'data-step'), [['step-row', outlier.link.key]]);
  assert.ok(await inViewport(page, '[data-finding-target]'));
  await page.screenshot({ path: join(artifacts, 'steps.png'), fullPage: true });

  // The outlier finding's link showed the outlier step in detail (its chart and the other tabs).
  assert.equal(await page.getAttribute('[data-testid=steps-detail]', 'data-step'), outlier.link.key);
  assert.equal(await page.getAttribute('[data-testid=steps-heading]', 'data-step'), outlier.link.key);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('any step of a set shows in detail: the outlier row shows step 6, kept in the URL', async () => {
  const files = stepFiles('steps_outlier');
  const title = files.map((f) => f.split('/').pop()).join(' + ');
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  const pick = async () => {
    const n = await loadSeq(page);
    await page.setInputFiles('[data-testid=file-input]', files);
    await waitNextDocument(page, n);
  };
  // What the chart, header and cards show. By hand from the fixtures: step 2's measured step
  // span ends at 1 000 000 ns, step 6's at 1 600 000 ns (backward 1 060 000 ns); five spans each.
  const shown = async () => ({
    step: await page.getAttribute('[data-testid=steps-heading]', 'data-step'),
    picker: await page.$eval('[data-testid=steps-shown]', (e) => e.selectedOptions[0].textContent),
    file: await page.textContent('[data-testid=run-header] .file-name'),
    viewEnd: await page.getAttribute('[data-testid=flame-chart]', 'data-view-end-ns'),
    total: (await shownValues(page)).total_ns,
    spans: (await shownValues(page)).span_count,
  });
  const current = () => page.$$eval('[data-testid=step-row]', (els) =>
    els.filter((e) => e.getAttribute('aria-current') === 'true').map((e) => e.dataset.step));
  await pick();
  assert.deepEqual(await shown(), {
    step: '2', picker: '2 (step-2.trace6.jsonl)', file: 'step-2.trace6.jsonl', viewEnd: '1000000', total: '1000000', spans: '5',
  });
  await openTab(page, 'steps');
  assert.deepEqual(await current(), ['2']);
  assert.match(await page.textContent('[data-testid=steps-detail]'), /^Step 2 in detail \(step-2\.trace6\.jsonl, the first captured\)/);

  // A click on the outlier's row shows step 6: chart, header and cards; the steps tab stays
  // open with its set-wide tables, marking row 6, which keeps the focus.
  let n = await loadSeq(page);
  await page.click('[data-testid=step-row][data-step="6"]');
  await waitNextDocument(page, n);
  assert.deepEqual(await shown(), {
    step: '6', picker: '6 (step-6.trace6.jsonl, outlier)', file: 'step-6.trace6.jsonl', viewEnd: '1600000', total: '1600000', spans: '5',
  });
  assert.equal(await page.getAttribute('[data-testid=tab-steps]', 'aria-selected'), 'true');
  assert.deepEqual(await current(), ['6']);
  assert.equal(await page.locator('[data-testid=step-row]').count(), 5);
  await page.waitForFunction(() => document.activeElement?.dataset.step === '6');
  assert.match(await page.textContent('[data-testid=steps-detail]'), /^Step 6 in detail \(step-6\.trace6\.jsonl\):/);
  // The per-trace tabs read step 6: its backward phase.
  await openTab(page, 'phases');
  assert.equal(await page.getAttribute('[data-testid=phase-backward]', 'data-value'), '1060000');
  await page.screenshot({ path: join(artifacts, 'steps-step6.png') });

  // The URL keeps the step with the tab; a reload (the same files picked again) restores both.
  // (With step 6's `backward` span selected through the URL: the selection is that step's.)
  await page.waitForFunction(() => location.hash.includes('&step=6') && location.hash.includes('&tab=phases'));
  await page.evaluate(() => { location.hash += '&sel=0:b'; });
  await page.reload();
  await page.waitForSelector('[data-testid=file-input]', { state: 'attached' });
  await pick();
  assert.equal((await shown()).step, '6');
  await page.waitForSelector('[data-testid=flame-chart][data-selected=b]');
  assert.equal(await page.getAttribute('[data-testid=tab-phases]', 'aria-selected'), 'true');
  assert.equal(await page.getAttribute('[data-testid=phase-backward]', 'data-value'), '1060000');

  // The keyboard: Enter on a focused row shows its step; the focus stays on the row.
  await openTab(page, 'steps');
  await page.focus('[data-testid=step-row][data-step="4"]');
  n = await loadSeq(page);
  await page.keyboard.press('Enter');
  await waitNextDocument(page, n);
  assert.equal((await shown()).step, '4');
  await page.waitForFunction(() => document.activeElement?.dataset.step === '4');

  // A finding read from step 2 (the memory peak) says so, and its link shows step 2 first.
  await openTab(page, 'findings');
  assert.equal(await page.textContent('[data-testid=finding][data-rule=memory_peak] [data-testid=finding-step]'),
    'Read from step 2 (step-2.trace6.jsonl), the first captured; its link shows that step.');
  assert.equal(await page.textContent('[data-testid=finding][data-rule=outlier_step] [data-testid=finding-step]'),
    'Read from all 5 steps; its link shows step 6 (step-6.trace6.jsonl).');
  n = await loadSeq(page);
  await page.click('[data-testid=finding][data-rule=memory_peak] [data-testid=finding-link]');
  await waitNextDocument(page, n);
  await page.waitForSelector('[data-finding-target]', { state: 'attached' });
  assert.equal((await shown()).step, '2');
  assert.deepEqual(await outlined(page, 'data-device'), [['memory-chart', 'cpu']]);

  // An outlier line shows its step too.
  await openTab(page, 'steps');
  n = await loadSeq(page);
  await page.click('[data-testid=steps-outlier-show]');
  await waitNextDocument(page, n);
  assert.equal((await shown()).step, '6');

  // A step the set does not have falls back to the first captured, with no error.
  // (The selection named with it was another step's: not applied.)
  await page.evaluate((t) => { location.hash = `#files=${encodeURIComponent(t)}&step=99&sel=0:b&tab=steps`; }, title);
  await page.reload();
  await page.waitForSelector('[data-testid=file-input]', { state: 'attached' });
  await pick();
  assert.equal((await shown()).step, '2');
  assert.equal(await page.getAttribute('[data-testid=flame-chart]', 'data-selected'), '');
  assert.equal(await page.getAttribute('[data-testid=tab-steps]', 'aria-selected'), 'true');
  assert.deepEqual(await current(), ['2']);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('showing another step keeps the place: tab, tables, window and range at the same offsets from its start', async () => {
  // steps_outlier with step 6 on a clock 5 ms later (every start_ns and timestamp_ns + 5 000 000),
  // as step files are: each recorder counts from its own start. By hand from the fixtures:
  // step 2 spans 0 – 1 000 000 ns, step 4 0 – 1 010 000 ns, step 6 5 000 000 – 6 600 000 ns.
  const SHIFT = 5_000_000;
  const dir = join(artifacts, 'steps-place');
  mkdirSync(dir, { recursive: true });
  const files = stepFiles('steps_outlier').map((f) => {
    const name = f.split('/').pop();
    let text = readFileSync(f, 'utf8');
    if (name === 'step-6.trace6.jsonl') {
      text = text.replace(/"(start_ns|timestamp_ns)":(\d+)/g, (_, k, v) => `"${k}":${Number(v) + SHIFT}`);
    }
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  });
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  let n = await loadSeq(page);
  await page.setInputFiles('[data-testid=file-input]', files);
  await waitNextDocument(page, n);
  const chart = page.locator('[data-testid=flame-chart]');
  const num = async (name) => Number(await chart.getAttribute(name));
  const place = async () => ({
    view: [await num('data-view-start-ns'), await num('data-view-end-ns')],
    range: [await chart.getAttribute('data-range-start-ns'), await chart.getAttribute('data-range-end-ns')],
  });
  /** Show the step at picker position `pos` (the heading's "showing step"). */
  const show = async (pos, step) => {
    const before = await loadSeq(page);
    await page.selectOption('[data-testid=steps-shown]', String(pos));
    await waitNextDocument(page, before);
    assert.equal(await page.getAttribute('[data-testid=steps-heading]', 'data-step'), step);
  };
  /** Shift+drag over the chart from `a` to `b` (fractions of the canvas's width). */
  const drag = async (a, b) => {
    const box = await page.locator('[data-testid=timeline-canvas]').boundingBox();
    await page.keyboard.down('Shift');
    await page.mouse.move(box.x + box.width * a, box.y + 60);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * (a + b) / 2, box.y + 60, { steps: 4 });
    await page.mouse.move(box.x + box.width * b, box.y + 60, { steps: 4 });
    await page.mouse.up();
    await page.keyboard.up('Shift');
  };
  const sortOf = () => page.$eval('[data-testid=modules-sort-module]', (b) => b.closest('th').getAttribute('aria-sort'));
  const carried = () => page.$$eval('[data-testid=range-carried]', (els) => els.map((e) => e.textContent));

  // Step 2: the modules tab by leaf name, sorted by module; a range over 25% – 50% of the
  // canvas (about 250 – 500 µs); zoomed in twice (W).
  await openTab(page, 'modules');
  await page.selectOption('[data-testid=modules-by]', 'name');
  await page.click('[data-testid=modules-sort-module]');
  const sort = await sortOf();
  assert.ok(sort === 'ascending' || sort === 'descending', `sorted by module: ${sort}`);
  await drag(0.25, 0.5);
  await page.keyboard.press('w');
  await page.keyboard.press('w');
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=flame-chart]').dataset.viewEndNs) < 1_000_000);
  // The panel made taller by a key on its edge.
  const height = Number(await page.getAttribute('[data-testid=tab-panel]', 'data-height'));
  await page.focus('[data-testid=panel-splitter]');
  await page.keyboard.press('ArrowUp');
  await page.waitForFunction((h) => Number(document.querySelector('[data-testid=tab-panel]').dataset.height) > h, height);
  const taller = await page.getAttribute('[data-testid=tab-panel]', 'data-height');
  const a = await place();
  const [rs, re] = a.range.map(Number);
  assert.ok(Math.abs(rs - 250_000) <= 10_000 && Math.abs(re - 500_000) <= 10_000, `dragged ${rs}..${re}`);
  assert.ok(a.view[0] > 0 && a.view[1] < 1_000_000, `zoomed in: ${a.view}`);

  // Step 6 (its own clock, 5 ms later): the same window and range 5 ms later, the same tab,
  // grouping and sort; the URL names step 6 with them.
  await show(4, '6');
  const b = await place();
  assert.ok(Math.abs(b.view[0] - (a.view[0] + SHIFT)) <= 1 && Math.abs(b.view[1] - (a.view[1] + SHIFT)) <= 1,
    `window ${a.view} on step 2, ${b.view} on step 6`);
  assert.deepEqual(b.range, [String(rs + SHIFT), String(re + SHIFT)]);
  assert.equal(await page.getAttribute('[data-testid=range-bar]', 'data-start-ns'), String(rs + SHIFT));
  assert.deepEqual(await carried(), []);
  assert.equal(await page.getAttribute('[data-testid=tab-modules]', 'aria-selected'), 'true');
  assert.equal(await page.getAttribute('[data-testid=modules-by]', 'data-value'), 'name');
  assert.equal(await sortOf(), sort);
  assert.equal(await page.getAttribute('[data-testid=tab-panel]', 'data-height'), taller);
  await page.waitForFunction((r) => location.hash.includes('&step=6') && location.hash.includes('&tab=modules')
    && location.hash.includes(`range=${r}`), `${rs + SHIFT}-${re + SHIFT}`);

  // A range wholly past the next step's end is cleared, and the range bar says so: on step 6
  // fitted, 80% – 95% (about 1.28 – 1.52 ms from its start) is past step 4's 1.01 ms. A view of
  // all of step 6 shows all of step 4.
  await page.click('[data-testid=zoom-fit]');
  await drag(0.8, 0.95);
  const [gs, ge] = (await place()).range.map(Number);
  assert.ok(gs - SHIFT > 1_010_000 && ge - SHIFT < 1_600_000, `dragged ${gs}..${ge}`);
  await show(2, '4');
  const c = await place();
  assert.deepEqual(c, { view: [0, 1_010_000], range: ['', ''] });
  assert.equal(await page.locator('[data-testid=range-bar]').count(), 0);
  const cleared = await carried();
  assert.equal(cleared.length, 1);
  assert.match(cleared[0], /^The range \d[\d.]* ms – \d[\d.]* ms was cleared: step 4 lasts 1\.01 ms$/);
  await page.screenshot({ path: join(artifacts, 'steps-range-cleared.png') });
  await page.waitForFunction(() => location.hash.includes('&step=4') && !location.hash.includes('range='));

  // A range partly past it is clipped to its end: on step 4, 90% – 99.5% (about 909 µs –
  // 1.005 ms) ends past step 2's 1 ms.
  await drag(0.9, 0.995);
  assert.deepEqual(await carried(), [], 'a new range drops the note');
  const [ks, ke] = (await place()).range.map(Number);
  assert.ok(ks < 1_000_000 && ke > 1_000_000, `dragged ${ks}..${ke}`);
  await show(0, '2');
  assert.deepEqual((await place()).range, [String(ks), '1000000']);
  assert.deepEqual(await carried(), ["clipped to step 2's end: it lasts 1.00 ms"]);
  await page.screenshot({ path: join(artifacts, 'steps-range-clipped.png') });
  await page.click('[data-testid=range-clear]');
  assert.deepEqual(await carried(), []);
  assert.equal(await page.getAttribute('[data-testid=tab-modules]', 'aria-selected'), 'true');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a finding naming a span of the first step shows that step, the span selected', async () => {
  // steps_outlier with step 2's backward cut to 100 µs (under half its 400 µs forward): the
  // set's backward_short finding reads step 2 and links its measured span `s`.
  const dir = join(artifacts, 'steps-span');
  mkdirSync(dir, { recursive: true });
  const files = stepFiles('steps_outlier').map((f) => {
    const name = f.split('/').pop();
    let text = readFileSync(f, 'utf8');
    if (name === 'step-2.trace6.jsonl') text = text.replace('"id":"b","duration_ns":490000', '"id":"b","duration_ns":100000');
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  });
  const want = cli('findings', '--json', ...files);
  const short = want.findings.find((f) => f.rule === 'backward_short');
  assert.deepEqual(short?.link, { to: 'span', id: 's', line: 2 });
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  let n = await loadSeq(page);
  await page.setInputFiles('[data-testid=file-input]', files);
  await waitNextDocument(page, n);
  await openTab(page, 'steps');
  n = await loadSeq(page);
  await page.click('[data-testid=step-row][data-step="5"]');
  await waitNextDocument(page, n);
  assert.equal(await page.getAttribute('[data-testid=steps-heading]', 'data-step'), '5');
  // From step 5, the finding's link shows step 2 with its span `s` selected.
  n = await loadSeq(page);
  await clickFinding(page, 'backward_short');
  await waitNextDocument(page, n);
  assert.equal(await page.getAttribute('[data-testid=steps-heading]', 'data-step'), '2');
  await page.waitForSelector('[data-testid=flame-chart][data-selected=s]');
  assert.equal(await page.getAttribute('[data-testid=tab-findings]', 'aria-selected'), 'true');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('two steps say why there are no outliers; files of different runs keep the several-files view', async () => {
  const files = stepFiles('steps_base').slice(0, 2);
  const want = cli('findings', '--json', ...files);
  const steps = cli('steps', '--json', ...files);
  assert.ok(want.notes.some((n) => n.startsWith('outlier_step:')), 'the CLI notes the outlier rule');
  const { page, seen } = await openPage();
  let n = await loadSeq(page);
  await page.setInputFiles('[data-testid=file-input]', files);
  await waitNextDocument(page, n);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'steps');
  await checkFindings(page, want, 'two steps');
  await openTab(page, 'steps');
  assert.equal(await page.textContent('[data-testid=steps-outliers-reason]'), `Not looked for: ${steps.outliers_reason}.`);

  // Steps of two different runs: several files on one axis.
  const mixed = [stepFiles('steps_base')[0], stepFiles('steps_outlier')[1]];
  n = await loadSeq(page);
  await page.setInputFiles('[data-testid=file-input]', mixed);
  await waitNextDocument(page, n);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'multi');
  assert.equal(await page.locator('[data-testid=steps]').count(), 0);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

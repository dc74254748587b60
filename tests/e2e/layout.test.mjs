// Browser tests of the viewer as an application (issue #40): the chart fills the window in
// every view, the tab panel under it (each tab by click and by keyboard, with the CLI's
// numbers), rows and spans linked both ways, a range selection's numbers, the URL keeping tab,
// view, selection and range, the remembered panel height, and the keyboard.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  useHarness, fixtures, artifacts, cli, openPage, openByPicker, loadSeq, waitNextDocument, openTab,
} from './harness.mjs';

useHarness();

const TRAIN = join(fixtures, 'train_step.trace6.jsonl');
const PROFILE = join(fixtures, 'infer_run.profile.jsonl');
const STEPS = readdirSync(join(fixtures, 'steps_outlier')).sort().map((f) => join(fixtures, 'steps_outlier', f));
const BASE = join(fixtures, 'compare', 'base.trace6.jsonl');
const CAND = join(fixtures, 'compare', 'cand.trace6.jsonl');

const attrs = (page, selector, names) => page.$$eval(selector, (els, names) =>
  els.map((e) => Object.fromEntries(names.map((n) => [n, e.getAttribute(n)]))), names);

/** The chart canvas's box and the document's height. */
async function geometry(page) {
  return page.evaluate(() => {
    const c = document.querySelector('[data-testid=timeline-canvas]').getBoundingClientRect();
    return {
      top: c.top, bottom: c.bottom, height: c.height, width: c.width,
      windowHeight: innerHeight, windowWidth: innerWidth,
      documentHeight: Math.max(document.documentElement.scrollHeight, document.body.scrollHeight),
    };
  });
}

/** Open each view on `page`; `open` is an async function that opens it. */
const VIEWS = [
  ['trace', async (page) => openByPicker(page, TRAIN)],
  // A header with every capture source and module names (Llama named by its weights).
  ['trace', async (page) => openByPicker(page, join(fixtures, 'modules', 'llama_modules.trace6.jsonl'))],
  ['trace', async (page) => openByPicker(page, join(fixtures, 'valid_panels.trace6.jsonl'))],
  ['profile', async (page) => openByPicker(page, PROFILE)],
  ['steps', async (page) => {
    const n = await loadSeq(page);
    await page.setInputFiles('[data-testid=file-input]', STEPS);
    await waitNextDocument(page, n);
  }],
  ['compare', async (page) => {
    await page.click('[data-testid=compare-open]');
    await page.setInputFiles('[data-testid=compare-base-input]', BASE);
    const n = await loadSeq(page);
    await page.setInputFiles('[data-testid=compare-cand-input]', CAND);
    await waitNextDocument(page, n);
  }],
  ['multi', async (page) => {
    const n = await loadSeq(page);
    await page.setInputFiles('[data-testid=file-input]', [TRAIN, join(fixtures, 'valid_panels.trace6.jsonl')]);
    await waitNextDocument(page, n);
  }],
];

test('in every view the chart fills the window: canvas whole and ≥ 45% high at 1440×900, the document at most the window + 200 px', async () => {
  for (const [width, height] of [[1440, 900], [1280, 720]]) {
    for (const [name, open] of VIEWS) {
      const { page, seen } = await openPage('/', { width, height });
      await open(page);
      assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), name, name);
      const g = await geometry(page);
      const label = `${name} at ${width}×${height}: ${JSON.stringify(g)}`;
      assert.ok(g.documentHeight <= height + 200, `document too tall: ${label}`);
      if (width === 1440) {
        assert.ok(g.top >= 0 && g.bottom <= g.windowHeight, `canvas not wholly visible: ${label}`);
        assert.ok(g.height >= 0.45 * height, `canvas under 45% of the window: ${label}`);
      }
      // Every tab of the view opens by click, and its panel says which.
      const tabs = await page.$$eval('[role=tab]', (els) => els.map((e) => e.dataset.tab));
      assert.ok(tabs.length >= 2, `${name}: tabs ${tabs}`);
      for (const tab of tabs) {
        await openTab(page, tab);
        assert.equal(await page.getAttribute(`[data-testid=tab-${tab}]`, 'aria-selected'), 'true', `${name}: ${tab}`);
        const after = await geometry(page);
        assert.ok(after.documentHeight <= height + 200, `${name} ${tab}: document ${after.documentHeight}`);
      }
      if (width === 1440) await page.screenshot({ path: join(artifacts, `layout-${name}-${VIEWS.findIndex((v) => v[1] === open)}.png`) });
      assert.deepEqual(seen.errors, [], name);
      await page.close();
    }
  }
});

test('every trace tab opens by keyboard and shows the CLI numbers', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  const file = join(fixtures, 'valid_panels.trace6.jsonl');
  await openByPicker(page, file);
  const tabs = await page.$$eval('[role=tab]', (els) => els.map((e) => e.dataset.tab));
  assert.deepEqual(tabs, ['findings', 'modules', 'ops', 'memory', 'gradients', 'phases', 'efficiency']);
  const view = async () => page.getAttribute('[data-testid=flame-chart]', 'data-view-start-ns')
    + '-' + await page.getAttribute('[data-testid=flame-chart]', 'data-view-end-ns');
  const before = await view();
  // Only the open tab is focusable; arrows move the focus along the list, Enter opens.
  await page.focus('[data-testid=tab-findings]');
  for (let i = 1; i < tabs.length; i++) {
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.evaluate(() => document.activeElement.dataset.tab), tabs[i]);
    // Moving the focus does not open the tab.
    assert.equal(await page.getAttribute(`[data-testid=tab-${tabs[i]}]`, 'aria-selected'), 'false');
    await page.keyboard.press('Enter');
    await page.waitForSelector(`[data-testid=tabpanel][data-tab=${tabs[i]}]`, { state: 'attached' });
    assert.equal(await page.getAttribute(`[data-testid=tab-${tabs[i]}]`, 'aria-selected'), 'true');
    await checkTab(page, file, tabs[i]);
    // Checking may have clicked inside the tab: back to its tab.
    await page.focus(`[data-testid=tab-${tabs[i]}]`);
  }
  // Space opens too; Home goes back to the first.
  await page.keyboard.press('Home');
  await page.keyboard.press(' ');
  assert.equal(await page.getAttribute('[data-testid=tab-findings]', 'aria-selected'), 'true');
  await checkTab(page, file, 'findings');
  // The arrows went to the tab list only: the chart's window did not move.
  assert.equal(await view(), before);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

/** The open tab's numbers against the CLI. */
async function checkTab(page, file, tab) {
  switch (tab) {
    case 'findings': {
      const want = cli('findings', file, '--json');
      assert.equal(await page.locator('[data-testid=finding]').count(), want.findings.length);
      assert.equal(await page.getAttribute('[data-testid=findings-count]', 'data-value'), String(want.findings.length));
      break;
    }
    case 'modules': {
      // The module tree, expanded, node for node in the CLI's order.
      const want = cli('query', file, '--kind', 'modules', '--json', '--limit', '100000').modules;
      await page.click('[data-testid=modules-expand-all]');
      const rows = await attrs(page, '[data-testid=module-row]', ['data-key', 'data-calls', 'data-total', 'data-self', 'data-measured']);
      assert.deepEqual(rows, want.map((r) => ({ 'data-key': r.key, 'data-calls': String(r.calls),
        'data-total': String(r.total_ns), 'data-self': String(r.self_ns), 'data-measured': String(r.measured) })));
      const alloc = await page.$$eval('[data-testid=module-alloc]', (els) => els.map((e) => Number(e.dataset.value)));
      assert.deepEqual(alloc, want.map((r) => r.alloc_bytes));
      break;
    }
    case 'ops': {
      const want = cli('query', file, '--kind', 'ops', '--json', '--limit', '100000');
      const rows = await attrs(page, '[data-testid=op-row]', ['data-op', 'data-count', 'data-total']);
      assert.deepEqual(rows, want.groups.map((o) => ({ 'data-op': o.op_name, 'data-count': String(o.count), 'data-total': String(o.total_ns) })));
      break;
    }
    case 'memory': {
      const summary = cli('summary', '--json', file);
      const peaks = await page.$$eval('[data-testid=memory-device]', (r) => r.map((x) => Number(x.dataset.value)));
      assert.equal(Math.max(...peaks), summary.peak_bytes);
      break;
    }
    case 'gradients': {
      const want = cli('query', file, '--kind', 'gradients', '--json');
      for (const [state, n] of Object.entries(want.counts)) {
        assert.equal(await page.getAttribute(`[data-testid=gradients-${state}]`, 'data-value'), String(n), state);
      }
      break;
    }
    case 'phases': {
      const want = cli('query', file, '--kind', 'phases', '--json');
      assert.equal(await page.getAttribute('[data-testid=phase-region]', 'data-value'), String(want.phases.region_ns));
      assert.equal(await page.getAttribute('[data-testid=phase-backward]', 'data-value'), String(want.phases.backward_ns));
      break;
    }
    case 'efficiency': {
      const want = cli('query', file, '--kind', 'flops', '--json');
      assert.equal(await page.getAttribute('[data-testid=flops-total]', 'data-value'), String(want.flops));
      break;
    }
    default:
      throw new Error(`no check for ${tab}`);
  }
}

test('the profile tabs open by keyboard and show the CLI numbers', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, PROFILE);
  const tabs = await page.$$eval('[role=tab]', (els) => els.map((e) => e.dataset.tab));
  // infer_run has a resource event but no batched forwards: no Iterations tab.
  assert.deepEqual(tabs,
    ['findings', 'requests', 'resources', 'latency', 'modules', 'memory']);
  // By keyboard, as the trace's: the arrows move the focus, Enter opens.
  await page.focus('[data-testid=tab-findings]');
  for (const tab of tabs.slice(1)) {
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.evaluate(() => document.activeElement.dataset.tab), tab);
    await page.keyboard.press('Enter');
    await page.waitForSelector(`[data-testid=tabpanel][data-tab=${tab}]`, { state: 'attached' });
    assert.equal(await page.getAttribute(`[data-testid=tab-${tab}]`, 'aria-selected'), 'true', tab);
  }
  // One lane group per request on the chart.
  const requests = cli('query', PROFILE, '--kind', 'requests', '--json', '--limit', '100000').requests;
  assert.equal(Number(await page.getAttribute('[data-testid=flame-chart]', 'data-groups')), requests.length);
  await openTab(page, 'requests');
  assert.deepEqual((await attrs(page, '[data-testid=request-row]', ['data-request'])).map((r) => r['data-request']),
    requests.map((r) => r.request_id));
  await openTab(page, 'latency');
  const latency = cli('query', PROFILE, '--kind', 'latency', '--json');
  assert.equal(await page.getAttribute('[data-testid=ttft-line-p50]', 'data-value'), String(latency.ttft_us.p50));
  await openTab(page, 'memory');
  const summary = cli('summary', '--json', PROFILE);
  assert.equal(await page.locator('[data-testid=snapshot-row]').count(), summary.memory_snapshot_count);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('rows and spans are linked both ways', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, TRAIN);
  const chart = page.locator('[data-testid=flame-chart]');
  // An op row selects a span its ops ran in, shows it, and outlines every such span.
  await openTab(page, 'ops');
  const row = page.locator('[data-testid=op-row]').first();
  const op = await row.getAttribute('data-op');
  await row.click();
  const selected = await chart.getAttribute('data-selected');
  assert.notEqual(selected, '');
  const opsOfSpan = await page.$$eval('[data-testid=span-details] .ops-in-span tbody td:first-child', (tds) => tds.map((t) => t.textContent));
  assert.ok(opsOfSpan.includes(op), `${op} in ${opsOfSpan}`);
  assert.ok(Number(await chart.getAttribute('data-highlighted')) >= 1);
  assert.equal(await row.getAttribute('data-linked'), 'true');
  // The spans an op ran in, read from the file itself.
  const lines = readFileSync(TRAIN, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  const spansOf = (name) => new Set(lines.filter((l) => l.kind === 'op' && l.op_name === name).map((l) => l.span_id)).size;
  const clicked = await chart.getAttribute('data-highlighted');
  assert.equal(Number(clicked), spansOf(op), `${op}'s spans outlined`);
  // Hovering another row outlines its spans instead; leaving puts the clicked row's back.
  // The first row whose count differs from the clicked row's, so the two are told apart.
  const names = (await attrs(page, '[data-testid=op-row]', ['data-op'])).map((r) => r['data-op']);
  const otherOp = names.find((n) => spansOf(n) !== spansOf(op));
  assert.ok(otherOp, `an op with another number of spans than ${op}: ${names}`);
  const other = page.locator(`[data-testid=op-row][data-op="${otherOp}"]`);
  await other.hover();
  await page.waitForFunction((n) => document.querySelector('[data-testid=flame-chart]').dataset.highlighted === String(n), spansOf(otherOp));
  await page.mouse.move(5, 5);
  await page.waitForFunction((n) => document.querySelector('[data-testid=flame-chart]').dataset.highlighted === n, clicked);
  // A span selected in the chart marks its row in the open tab: the modules tab's row of the
  // selected module span, expanded to.
  await openTab(page, 'modules');
  const canvas = page.locator('[data-testid=timeline-canvas]');
  await canvas.focus();
  await page.keyboard.press('Escape');
  // train_step → forward → fc1 (a module span).
  for (const key of ['ArrowDown', 'ArrowDown', 'ArrowDown']) await page.keyboard.press(key);
  const span = await chart.getAttribute('data-selected');
  const name = await page.textContent('[data-testid=span-details] dl.fields dd');
  const linked = await attrs(page, '[data-testid=module-row][data-linked=true]', ['data-key']);
  assert.equal(linked.length, 1, `span ${span} (${name}): ${JSON.stringify(linked)}`);
  assert.ok(linked[0]['data-key'].endsWith(name), `${linked[0]['data-key']} is ${name}'s row`);
  // And another module row selects and shows its span.
  await page.locator('[data-testid=module-row][data-linked=false]').first().click();
  assert.notEqual(await chart.getAttribute('data-selected'), span);
  assert.equal(await page.locator('[data-testid=module-row][data-linked=true]').count(), 1);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

/** Wait until the chart outlines `n` spans. */
const highlighted = (page, n) => page.waitForFunction(
  (n) => document.querySelector('[data-testid=flame-chart]').dataset.highlighted === String(n), n);

/** Wait until the chart's selected span is `id`. */
const selectedIs = (page, id) => page.waitForFunction(
  (id) => document.querySelector('[data-testid=flame-chart]').dataset.selected === id, id);

test('efficiency, phases, gradients and memory rows link both ways with their spans', async () => {
  // train_step.trace6.jsonl by hand: forward (fwd), backward (bwd), optimizer (opt) under
  // train_step; module spans fc1, relu, fc2, mse_loss in the forward only; matmul ran in
  // fwd.fc1.matmul, fwd.fc2.matmul, bwd.matmul.1 and bwd.matmul.2, add in fwd.fc1.add and
  // fwd.fc2.add; relu.grad was allocated in bwd.relu_backward and is live at the peak.
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, TRAIN);
  const chart = page.locator('[data-testid=flame-chart]');
  const canvas = page.locator('[data-testid=timeline-canvas]');
  const linkedRows = (selector, attr) => page.$$eval(`${selector}[data-linked=true]`, (els, a) => els.map((e) => e.getAttribute(a)), attr);

  // Efficiency: a click selects the op's first span and outlines all four; hovering another
  // row outlines its own; a span selected in the chart marks its op's row.
  await openTab(page, 'efficiency');
  await page.click('[data-testid=flops-row][data-op=matmul]');
  await selectedIs(page, 'fwd.fc1.matmul');
  await highlighted(page, 4);
  assert.deepEqual(await linkedRows('[data-testid=flops-row]', 'data-op'), ['matmul']);
  await page.hover('[data-testid=flops-row][data-op=add]');
  await highlighted(page, 2);
  await page.mouse.move(5, 5);
  await highlighted(page, 4);
  await canvas.focus();
  await page.keyboard.press('Escape');
  // train_step → forward → fc1 → its matmul.
  for (let i = 0; i < 4; i++) await page.keyboard.press('ArrowDown');
  await selectedIs(page, 'fwd.fc1.matmul');
  // Its next sibling: fc1's add.
  await page.keyboard.press(']');
  await selectedIs(page, 'fwd.fc1.add');
  await page.waitForFunction(() => document.querySelector('[data-testid=flops-row][data-op=add]').dataset.linked === 'true');
  assert.deepEqual(await linkedRows('[data-testid=flops-row]', 'data-op'), ['add']);

  // Phases: a phase's row is its outermost span of that step; "other" has none; a module
  // pair's row is its module spans.
  await openTab(page, 'phases');
  await page.click('[data-testid=phase-backward]');
  await selectedIs(page, 'bwd');
  await highlighted(page, 1);
  assert.equal(await page.getAttribute('[data-testid=phase-backward]', 'data-linked'), 'true');
  assert.equal(await page.getAttribute('[data-testid=phase-other]', 'tabindex'), null);
  // A row that stands for no span is no link: not focusable, no pointer, no hover background,
  // and hovering it outlines nothing new (what the click outlined stays).
  const look = (sel) => page.$eval(sel, (e) => ({ cursor: getComputedStyle(e).cursor, bg: getComputedStyle(e).backgroundColor, focusable: e.tabIndex >= 0 }));
  const plain = await look('[data-testid=phase-other]');
  await page.hover('[data-testid=phase-other]');
  assert.deepEqual(await look('[data-testid=phase-other]'), { ...plain, focusable: false });
  assert.notEqual(plain.cursor, 'pointer');
  await highlighted(page, 1);
  assert.equal(await chart.getAttribute('data-selected'), 'bwd');
  await page.hover('[data-testid=phase-optimizer]');
  assert.equal((await look('[data-testid=phase-optimizer]')).cursor, 'pointer');
  // ↑/↓ never land on it: ↓ from optimizer (the last row with spans above it) stays there.
  await page.focus('[data-testid=phase-optimizer]');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), 'phase-optimizer');
  await page.keyboard.press('ArrowUp');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), 'phase-backward');
  await page.hover('[data-testid=phase-forward]');
  await highlighted(page, 1);
  await page.click('[data-testid=module-pair][data-path=fc2]');
  await selectedIs(page, 'fwd.fc2');
  assert.deepEqual(await linkedRows('[data-testid=module-pair]', 'data-path'), ['fc2']);
  assert.equal(await page.getAttribute('[data-testid=phase-forward]', 'data-linked'), 'false');

  // Gradients by module: fc1's row is the fc1 module span (no module span in the backward);
  // head has no module span, so its row links nowhere.
  await openTab(page, 'gradients');
  await page.click('[data-testid=gradient-group][data-module=fc1]');
  await selectedIs(page, 'fwd.fc1');
  await highlighted(page, 1);
  assert.deepEqual(await linkedRows('[data-testid=gradient-group]', 'data-module'), ['fc1']);
  assert.equal(await page.getAttribute('[data-testid=gradient-group][data-module=head]', 'tabindex'), null);

  // Memory: an allocation's row is the span it was allocated in.
  await openTab(page, 'memory');
  await page.click('[data-testid=live-row][data-tensor="relu.grad"]');
  await selectedIs(page, 'bwd.relu_backward');
  await highlighted(page, 1);
  assert.deepEqual(await linkedRows('[data-testid=live-row]', 'data-tensor'), ['relu.grad']);
  assert.equal(await chart.getAttribute('data-selected'), 'bwd.relu_backward');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a gradient group links to the module span the module tree joins it to; one without a span is no link', async () => {
  // mistral_names: every forward linear and norm is a module span named after its module
  // (lm_head is s22, model.norm s21); no span wraps the embedding (model.embed_tokens).
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, join(fixtures, 'modules', 'mistral_names.trace6.jsonl'));
  await openTab(page, 'gradients');
  await page.click('[data-testid=gradient-group][data-module=lm_head]');
  await selectedIs(page, 's22');
  await highlighted(page, 1);
  assert.equal(await page.getAttribute('[data-testid=gradient-group][data-module=lm_head]', 'data-linked'), 'true');
  await page.click('[data-testid=gradient-group][data-module="model.norm"]');
  await selectedIs(page, 's21');
  const embed = '[data-testid=gradient-group][data-module="model.embed_tokens"]';
  assert.equal(await page.getAttribute(embed, 'tabindex'), null);
  assert.notEqual(await page.$eval(embed, (e) => getComputedStyle(e).cursor), 'pointer');
  await page.click(embed);
  assert.equal(await page.getAttribute('[data-testid=flame-chart]', 'data-selected'), 's21');
  const linked = await page.$$eval('[data-testid=gradient-group][tabindex="0"]', (els) => els.length);
  assert.equal(linked, 20);
  // In the module tree the embedding, known only from its weights, says "no span" and shows
  // no time (the CLI's row: `no span`, `–`), beside `model`, a group of measured levels.
  await openTab(page, 'modules');
  await page.click('[data-testid=modules-expand-all]');
  const row = async (key) => page.$eval(`[data-testid=module-row][data-key="${key}"]`,
    (tr) => [...tr.children].slice(0, 6).map((c) => c.textContent.trim()));
  assert.deepEqual(await row('model.embed_tokens'), ['embed_tokens (no span)', '–', '–', '–', '–', '–']);
  assert.match((await row('model'))[0], /^▾?model \(group\)$/);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('op and module rows follow the rows\' rule: one that stands for no span is no link', async () => {
  // tests/fixtures/links/README.md: by total time the op rows are matmul (ran in fc1), add (its
  // span `gone` is none) and relu (ran in act); fc1 and act are module spans.
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, join(fixtures, 'links', 'unlinked_ops.trace6.jsonl'));
  const chart = page.locator('[data-testid=flame-chart]');
  const op = (name) => `[data-testid=op-row][data-op=${name}]`;
  const look = (sel) => page.$eval(sel, (e) => ({ cursor: getComputedStyle(e).cursor, bg: getComputedStyle(e).backgroundColor, focusable: e.tabIndex >= 0 }));
  const focused = () => page.evaluate(() => document.activeElement.dataset.op ?? document.activeElement.dataset.key);
  await openTab(page, 'ops');
  assert.deepEqual(await attrs(page, '[data-testid=op-row]', ['data-op', 'tabindex']), [
    { 'data-op': 'matmul', tabindex: '0' }, { 'data-op': 'add', tabindex: null }, { 'data-op': 'relu', tabindex: '0' },
  ]);
  await page.click(op('matmul'));
  await selectedIs(page, 'fc1');
  await highlighted(page, 1);
  assert.equal(await page.getAttribute(op('matmul'), 'data-linked'), 'true');
  // add: no pointer, no hover background, hovering outlines nothing new, a click selects nothing.
  const plain = await look(op('add'));
  await page.hover(op('add'));
  assert.deepEqual(await look(op('add')), { ...plain, focusable: false });
  assert.notEqual(plain.cursor, 'pointer');
  await highlighted(page, 1);
  await page.click(op('add'));
  assert.equal(await chart.getAttribute('data-selected'), 'fc1');
  assert.equal((await look(op('relu'))).cursor, 'pointer');
  // ↑/↓ step over it.
  await page.focus(op('matmul'));
  await page.keyboard.press('ArrowDown');
  assert.equal(await focused(), 'relu');
  await page.keyboard.press('Enter');
  await selectedIs(page, 'act');
  assert.equal(await focused(), 'relu');
  await page.keyboard.press('ArrowUp');
  assert.equal(await focused(), 'matmul');
  // Modules: each row stands for its span, so each is a link; a click selects it.
  await openTab(page, 'modules');
  const modules = await attrs(page, '[data-testid=module-row]', ['data-key', 'tabindex']);
  assert.equal(modules.length, 2);
  assert.ok(modules.every((m) => m.tabindex === '0'), JSON.stringify(modules));
  const fc1 = modules.find((m) => m['data-key'].endsWith('fc1'))['data-key'];
  assert.equal(await page.getAttribute(`[data-testid=module-row][data-key="${fc1}"]`, 'data-linked'), 'false');
  await page.click(`[data-testid=module-row][data-key="${fc1}"]`);
  await selectedIs(page, 'fc1');
  assert.equal(await page.getAttribute(`[data-testid=module-row][data-key="${fc1}"]`, 'data-linked'), 'true');
  assert.equal(await focused(), fc1);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a row keeps the focus when activated; arrows move it between rows; the clicked row stays in view', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, TRAIN);
  const chart = page.locator('[data-testid=flame-chart]');
  const focused = () => page.evaluate(() => {
    const a = document.activeElement;
    return `${a.tagName}:${a.dataset.testid ?? ''}:${a.dataset.op ?? ''}`;
  });
  await openTab(page, 'ops');
  const ops = (await attrs(page, '[data-testid=op-row]', ['data-op'])).map((r) => r['data-op']);
  // Enter on a focused row selects its span and leaves the focus on it (the rows are built
  // again with their marks).
  await page.locator('[data-testid=op-row]').nth(2).focus();
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('[data-testid=flame-chart]').dataset.selected !== '');
  await page.waitForTimeout(100);
  assert.equal(await focused(), `TR:op-row:${ops[2]}`);
  const selected = await chart.getAttribute('data-selected');
  // ↓ moves the focus to the next row (and neither selects nor scrolls the panel); Enter
  // then selects that row's span.
  const top = await page.$eval('[data-testid=tabpanel]', (e) => e.scrollTop);
  await page.keyboard.press('ArrowDown');
  assert.equal(await focused(), `TR:op-row:${ops[3]}`);
  assert.equal(await chart.getAttribute('data-selected'), selected);
  assert.equal(await page.$eval('[data-testid=tabpanel]', (e) => e.scrollTop), top);
  await page.keyboard.press('ArrowUp');
  await page.keyboard.press('ArrowUp');
  assert.equal(await focused(), `TR:op-row:${ops[1]}`);
  // A click keeps the focus on the clicked row too.
  await page.locator('[data-testid=op-row]').nth(4).click();
  await page.waitForTimeout(100);
  assert.equal(await focused(), `TR:op-row:${ops[4]}`);
  // The clicked row stays wholly in the panel's view, though the top-spans table beside it
  // marks its own row of the span further down.
  for (const i of [1, 5, ops.length - 1]) {
    await page.locator('[data-testid=op-row]').nth(i).click();
    await page.waitForTimeout(150);
    const [row, panel] = await page.evaluate((i) => [
      document.querySelectorAll('[data-testid=op-row]')[i].getBoundingClientRect().toJSON(),
      document.querySelector('[data-testid=tabpanel]').getBoundingClientRect().toJSON(),
    ], i);
    assert.ok(row.top >= panel.top - 0.5 && row.bottom <= panel.bottom + 0.5,
      `row ${i} ${JSON.stringify(row)} in the panel ${JSON.stringify(panel)}`);
  }
  // On an efficiency row too (a table not built again).
  await openTab(page, 'efficiency');
  await page.locator('[data-testid=flops-row][data-op=sum]').click();
  await page.keyboard.press('ArrowDown');
  const next = await page.evaluate(() => document.activeElement.dataset.op);
  assert.ok(next && next !== 'sum', next);
  await page.keyboard.press('Enter');
  await page.waitForFunction((op) => document.querySelector(`[data-testid=flops-row][data-op="${op}"]`).dataset.linked === 'true', next);
  assert.equal(await page.evaluate(() => document.activeElement.dataset.op), next);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

/**
 * A training step written by hand (times in ns), the fixture of
 * `schema::analysis::range`'s tests:
 * step 0..1000 (measured) { forward 0..400 { enc 50..350 { lin 100..300 } lin 360..390 }
 * backward 400..900 { enc 450..850 } optimizer 900..1000 }, ops matmul 100..250, add
 * 250..300, matmul 360..390, matmul 500..800, add 950 (0 ns); cpu memory: +100 B at 100,
 * +300 B at 300, −100 B at 500, +50 B at 700. Every op writes 2×2 f32 (16 B); a matmul reads
 * 48 B = 12 f32 = 1·(2+2)·K, so K = 3: 2·2·2·3 = 24 FLOPs, 64 B moved; an add is 4 FLOPs (one
 * per output element), 16 B moved.
 */
function rangeFixture() {
  const lines = [
    { kind: 'meta', schema: 'candle-graph/trace/6', run_id: 'r', correlation_id: 'c', entrypoint: 'e', phase: 'train', timestamp: '2026-01-01T00:00:00Z', capture_step: 1, warmup_steps: 0, device: 'cpu', timing_mode: 'host', tags: {} },
    { kind: 'span_start', id: 'step', name: 'step', start_ns: 0, span_kind: 'function', measured: true },
    { kind: 'span_start', id: 'fwd', parent_id: 'step', name: 'forward', start_ns: 0, span_kind: 'function', step: 'forward' },
    { kind: 'span_start', id: 'enc', parent_id: 'fwd', name: 'enc', start_ns: 50, span_kind: 'module', step: 'forward' },
    { kind: 'span_start', id: 'lin', parent_id: 'enc', name: 'lin', start_ns: 100, span_kind: 'module', step: 'forward' },
    { kind: 'span_end', id: 'lin', duration_ns: 200 },
    { kind: 'span_end', id: 'enc', duration_ns: 300 },
    { kind: 'span_start', id: 'lin2', parent_id: 'fwd', name: 'lin', start_ns: 360, span_kind: 'module', step: 'forward' },
    { kind: 'span_end', id: 'lin2', duration_ns: 30 },
    { kind: 'span_end', id: 'fwd', duration_ns: 400 },
    { kind: 'span_start', id: 'bwd', parent_id: 'step', name: 'backward', start_ns: 400, span_kind: 'function', step: 'backward' },
    { kind: 'span_start', id: 'benc', parent_id: 'bwd', name: 'enc', start_ns: 450, span_kind: 'module', step: 'backward' },
    { kind: 'span_end', id: 'benc', duration_ns: 400 },
    { kind: 'span_end', id: 'bwd', duration_ns: 500 },
    { kind: 'span_start', id: 'opt', parent_id: 'step', name: 'optimizer', start_ns: 900, span_kind: 'function', step: 'optimizer' },
    { kind: 'span_end', id: 'opt', duration_ns: 100 },
    { kind: 'span_end', id: 'step', duration_ns: 1000 },
    { kind: 'op', span_id: 'lin', op_name: 'matmul', shape: [2, 2], dtype: 'f32', device: 'cpu', input_storage_bytes: 48, duration_ns: 150, timestamp_ns: 100 },
    { kind: 'op', span_id: 'lin', op_name: 'add', shape: [2, 2], dtype: 'f32', device: 'cpu', duration_ns: 50, timestamp_ns: 250 },
    { kind: 'op', span_id: 'lin2', op_name: 'matmul', shape: [2, 2], dtype: 'f32', device: 'cpu', input_storage_bytes: 48, duration_ns: 30, timestamp_ns: 360 },
    { kind: 'op', span_id: 'benc', op_name: 'matmul', shape: [2, 2], dtype: 'f32', device: 'cpu', input_storage_bytes: 48, duration_ns: 300, timestamp_ns: 500 },
    { kind: 'op', span_id: 'opt', op_name: 'add', shape: [2, 2], dtype: 'f32', device: 'cpu', duration_ns: 0, timestamp_ns: 950 },
    { kind: 'memory', timestamp_ns: 100, tensor_id: 'a', span_id: 'lin', device: 'cpu', bytes: 100, action: 'alloc', dtype: 'u8' },
    { kind: 'memory', timestamp_ns: 300, tensor_id: 'b', span_id: 'lin', device: 'cpu', bytes: 300, action: 'alloc', dtype: 'u8' },
    { kind: 'memory', timestamp_ns: 500, tensor_id: 'a', span_id: 'benc', device: 'cpu', bytes: 100, action: 'free', dtype: 'u8' },
    { kind: 'memory', timestamp_ns: 700, tensor_id: 'c', span_id: 'benc', device: 'cpu', bytes: 50, action: 'alloc', dtype: 'u8' },
  ];
  mkdirSync(artifacts, { recursive: true });
  const file = join(artifacts, 'range-step.trace6.jsonl');
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return file;
}

test('a range selection: the tabs show the numbers of the part inside it, worked out by hand', async () => {
  const file = rangeFixture();
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, file);
  // Shift+drag over the chart selects a range (in its time: x 25% to 75% of 0..1000 ns).
  const canvas = page.locator('[data-testid=timeline-canvas]');
  const box = await canvas.boundingBox();
  await page.keyboard.down('Shift');
  await page.mouse.move(box.x + box.width * 0.25, box.y + 60);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, box.y + 60, { steps: 4 });
  await page.mouse.move(box.x + box.width * 0.75, box.y + 60, { steps: 4 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  const chart = page.locator('[data-testid=flame-chart]');
  const start = Number(await chart.getAttribute('data-range-start-ns'));
  const end = Number(await chart.getAttribute('data-range-end-ns'));
  assert.ok(Math.abs(start - 250) <= 5 && Math.abs(end - 750) <= 5, `dragged ${start}..${end}`);
  assert.equal(await page.getAttribute('[data-testid=range-bar]', 'data-start-ns'), String(start));
  // On the efficiency tab, Shift+drag again, 32% to 68% (about 320..680 ns): only the matmul
  // 360..390 (whole: 24 FLOPs in 30 ns) and the matmul 500..800 (crossing the end: its t = end
  // − 500 ns inside, 24·t/300 FLOPs rounded down) ran inside; no add did, so no add row.
  await openTab(page, 'efficiency');
  await page.keyboard.down('Shift');
  await page.mouse.move(box.x + box.width * 0.32, box.y + 60);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, box.y + 60, { steps: 4 });
  await page.mouse.move(box.x + box.width * 0.68, box.y + 60, { steps: 4 });
  // While the drag goes on the chart draws it, and the tabs keep the last range's numbers
  // (they follow on release, not on every move).
  const dragEnd = Number(await chart.getAttribute('data-drag-end-ns'));
  assert.ok(Math.abs(dragEnd - 680) <= 5, `dragging to ${dragEnd}`);
  assert.equal(await chart.getAttribute('data-range-end-ns'), String(end));
  assert.equal(await page.getAttribute('[data-testid=range-bar]', 'data-end-ns'), String(end));
  await page.mouse.up();
  await page.keyboard.up('Shift');
  assert.equal(await chart.getAttribute('data-drag-end-ns'), '');
  const end2 = Number(await chart.getAttribute('data-range-end-ns'));
  const start2 = Number(await chart.getAttribute('data-range-start-ns'));
  assert.ok(Math.abs(start2 - 320) <= 5 && Math.abs(end2 - 680) <= 5, `dragged ${start2}..${end2}`);
  await page.waitForSelector(`[data-testid=range-bar][data-end-ns="${end2}"]`);
  await page.waitForSelector('[data-testid=flops-row][data-op=matmul][data-count="2"]');
  assert.equal(await page.getAttribute('[data-testid=range-note]', 'data-follows'), 'true');
  const t = end2 - 500;
  assert.deepEqual(await attrs(page, '[data-testid=flops-row]', ['data-op', 'data-count', 'data-total', 'data-flops']), [
    { 'data-op': 'matmul', 'data-count': '2', 'data-total': String(30 + t), 'data-flops': String(24 + Math.floor(24 * t / 300)) },
  ]);
  // Exactly 200..600 ns through the URL (the fragment keeps the range), for numbers by hand.
  await page.evaluate(() => { location.hash = '#files=range-step.trace6.jsonl&range=200-600&tab=modules'; });
  await page.reload();
  await page.waitForSelector('[data-testid=file-input]', { state: 'attached' });
  await openByPicker(page, file);
  await page.waitForSelector('[data-testid=range-bar][data-start-ns="200"][data-end-ns="600"]');
  assert.equal(await page.getAttribute('[data-testid=tab-modules]', 'aria-selected'), 'true');
  // Modules (schema::analysis::range::module_rows_in): enc 2 calls, 150 + 150 inside, self
  // 50 + 150; enc/lin 100; lin 30.
  await page.click('[data-testid=modules-expand-all]');
  const modules = await attrs(page, '[data-testid=module-row]', ['data-key', 'data-calls', 'data-total', 'data-self']);
  assert.deepEqual(modules, [
    { 'data-key': 'enc', 'data-calls': '2', 'data-total': '300', 'data-self': '200' },
    { 'data-key': 'enc/lin', 'data-calls': '1', 'data-total': '100', 'data-self': '100' },
    { 'data-key': 'lin', 'data-calls': '1', 'data-total': '30', 'data-self': '30' },
  ]);
  // Ops (op_groups_in): matmul 50 + 30 + 100 in 3 ops, add 50 in one.
  await openTab(page, 'ops');
  assert.deepEqual(await attrs(page, '[data-testid=op-row]', ['data-op', 'data-count', 'data-total']), [
    { 'data-op': 'matmul', 'data-count': '3', 'data-total': '180' },
    { 'data-op': 'add', 'data-count': '1', 'data-total': '50' },
  ]);
  // Memory (live_peak_in, memory_in): 400 B at 300 ns; one alloc of 300 B and one free.
  await openTab(page, 'memory');
  const mem = page.locator('[data-testid=memory-range]');
  assert.equal(await mem.getAttribute('data-alloc-count'), '1');
  assert.equal(await mem.getAttribute('data-alloc-bytes'), '300');
  assert.equal(await mem.getAttribute('data-free-count'), '1');
  assert.deepEqual(await attrs(page, '[data-testid=memory-range-device]', ['data-device', 'data-value', 'data-time']),
    [{ 'data-device': 'cpu', 'data-value': '400', 'data-time': '300' }]);
  // Phases (phases_in): region 400, forward 200, backward 200.
  await openTab(page, 'phases');
  assert.equal(await page.getAttribute('[data-testid=phase-region]', 'data-value'), '400');
  assert.equal(await page.getAttribute('[data-testid=phase-forward]', 'data-value'), '200');
  assert.equal(await page.getAttribute('[data-testid=phase-backward]', 'data-value'), '200');
  // Its rows link to the spans those numbers count (overlapping 200..600): forward is fwd,
  // backward bwd; the optimizer (900..1000) counts 0 and stands for no span, so it is no link;
  // the module pair enc is its forward enc (50..350) and backward benc (450..850).
  assert.equal(await page.getAttribute('[data-testid=phase-optimizer]', 'data-value'), '0');
  assert.equal(await page.getAttribute('[data-testid=phase-optimizer]', 'tabindex'), null);
  await page.click('[data-testid=phase-backward]');
  await selectedIs(page, 'bwd');
  await highlighted(page, 1);
  await page.click('[data-testid=module-pair][data-path=enc]');
  await selectedIs(page, 'enc');
  await highlighted(page, 2);
  // Efficiency (flops::efficiency_in): the matmuls 100..250 and 500..800 cross the edges
  // with a third of their time inside (50 of 150, 100 of 300 ns): 24 / 3 = 8 FLOPs and
  // 64 / 3 = 21.3 → 21 B each; 360..390 is whole: 24 FLOPs, 64 B. matmul: 3 ops, 180 ns,
  // 40 FLOPs → 40e9 / 180 = 222 222 222 FLOP/s, 106 B / 180 ns. add 250..300 whole: 4 FLOPs in
  // 50 ns → 80 M FLOP/s, 16 B / 50 ns; the add at 950 is outside. In all 44 FLOPs in 230 ns.
  await openTab(page, 'efficiency');
  assert.equal(await page.getAttribute('[data-testid=range-note]', 'data-follows'), 'true');
  assert.match(await page.textContent('[data-testid=range-note]'), /one crossing an edge with its part inside, its FLOPs and bytes in proportion \(FLOP\/s unchanged\)/);
  const effCols = ['data-op', 'data-count', 'data-total', 'data-flops', 'data-flops-per-s'];
  assert.deepEqual(await attrs(page, '[data-testid=flops-row]', effCols), [
    { 'data-op': 'matmul', 'data-count': '3', 'data-total': '180', 'data-flops': '40', 'data-flops-per-s': '222222222' },
    { 'data-op': 'add', 'data-count': '1', 'data-total': '50', 'data-flops': '4', 'data-flops-per-s': '80000000' },
  ]);
  const bytesPerNs = await attrs(page, '[data-testid=flops-row]', ['data-bytes-per-ns']);
  assert.deepEqual(bytesPerNs.map((r) => Number(r['data-bytes-per-ns'])), [106 / 180, 16 / 50]);
  assert.equal(await page.getAttribute('[data-testid=flops-total]', 'data-value'), '44');
  assert.equal(await page.getAttribute('[data-testid=flops-rate]', 'data-value'), '191304347');
  // Tabs that do not follow a range say so.
  await openTab(page, 'gradients');
  assert.equal(await page.getAttribute('[data-testid=range-note]', 'data-follows'), 'false');
  await openTab(page, 'findings');
  assert.equal(await page.getAttribute('[data-testid=range-note]', 'data-follows'), 'false');
  // Clearing the range restores the whole run: efficiency of every op (matmuls 3 × 24 FLOPs in
  // 480 ns → 150 M FLOP/s; adds 2 × 4 in 50 ns → 160 M FLOP/s) ...
  await openTab(page, 'efficiency');
  await page.click('[data-testid=range-clear]');
  await page.waitForSelector('[data-testid=range-bar]', { state: 'detached' });
  await page.waitForSelector('[data-testid=flops-row][data-op=add][data-count="2"]');
  assert.deepEqual(await attrs(page, '[data-testid=flops-row]', effCols), [
    { 'data-op': 'matmul', 'data-count': '3', 'data-total': '480', 'data-flops': '72', 'data-flops-per-s': '150000000' },
    { 'data-op': 'add', 'data-count': '2', 'data-total': '50', 'data-flops': '8', 'data-flops-per-s': '160000000' },
  ]);
  // ... and the ops.
  await openTab(page, 'ops');
  assert.deepEqual(await attrs(page, '[data-testid=op-row]', ['data-op', 'data-count', 'data-total']), [
    { 'data-op': 'matmul', 'data-count': '3', 'data-total': '480' },
    { 'data-op': 'add', 'data-count': '2', 'data-total': '50' },
  ]);
  assert.equal(await page.locator('[data-testid=range-bar]').count(), 0);
  // The whole run's optimizer row stands for opt again.
  await openTab(page, 'phases');
  await page.waitForSelector('[data-testid=phase-optimizer][tabindex="0"]');
  await page.click('[data-testid=phase-optimizer]');
  await selectedIs(page, 'opt');
  await page.screenshot({ path: join(artifacts, 'layout-range.png') });
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('the URL keeps the tab, the window, the selection and the range; the panel keeps its height', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, TRAIN);
  const chart = page.locator('[data-testid=flame-chart]');
  await openTab(page, 'phases');
  await page.locator('[data-testid=timeline-canvas]').focus();
  for (const key of ['ArrowDown', 'ArrowDown', 'w', 'w']) await page.keyboard.press(key);
  const before = {
    start: await chart.getAttribute('data-view-start-ns'),
    end: await chart.getAttribute('data-view-end-ns'),
    selected: await chart.getAttribute('data-selected'),
  };
  await page.waitForFunction(() => location.hash.includes('&tab=phases') && location.hash.includes('sel=0:'));
  // Drag the splitter 100 px up: the panel grows by 100 px and stays so after a reload.
  const splitter = await page.locator('[data-testid=panel-splitter]').boundingBox();
  const height = Number(await page.getAttribute('[data-testid=tab-panel]', 'data-height'));
  await page.mouse.move(splitter.x + splitter.width / 2, splitter.y + 3);
  await page.mouse.down();
  await page.mouse.move(splitter.x + splitter.width / 2, splitter.y + 3 - 100, { steps: 5 });
  await page.mouse.up();
  const grown = Number(await page.getAttribute('[data-testid=tab-panel]', 'data-height'));
  assert.ok(Math.abs(grown - height - 100) <= 1, `${height} → ${grown}`);
  await page.waitForTimeout(300);
  await page.reload();
  await page.waitForSelector('[data-testid=file-input]', { state: 'attached' });
  await openByPicker(page, TRAIN);
  assert.equal(await page.getAttribute('[data-testid=tab-phases]', 'aria-selected'), 'true');
  const after = {
    start: await chart.getAttribute('data-view-start-ns'),
    end: await chart.getAttribute('data-view-end-ns'),
    selected: await chart.getAttribute('data-selected'),
  };
  assert.ok(Math.abs(after.start - before.start) <= 1 && Math.abs(after.end - before.end) <= 1, JSON.stringify({ before, after }));
  assert.equal(after.selected, before.selected);
  assert.equal(Number(await page.getAttribute('[data-testid=tab-panel]', 'data-height')), grown);
  // The splitter answers the keyboard too.
  await page.focus('[data-testid=panel-splitter]');
  await page.keyboard.press('ArrowDown');
  assert.equal(Number(await page.getAttribute('[data-testid=tab-panel]', 'data-height')), grown - 24);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('keys work after a click on the minimap or the memory strip; ? lists every shortcut', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, TRAIN);
  const chart = page.locator('[data-testid=flame-chart]');
  const width = async () => Number(await chart.getAttribute('data-view-end-ns')) - Number(await chart.getAttribute('data-view-start-ns'));
  for (const target of ['[data-testid=minimap]', '[data-testid=memory-curve]']) {
    await page.click(target);
    const w0 = await width();
    await page.keyboard.press('w');
    assert.ok(await width() < w0, `W zooms after a click on ${target}`);
    await page.keyboard.press('0');
  }
  // ? opens the list of shortcuts (also from the chart), Escape closes it.
  await page.keyboard.press('?');
  await page.waitForSelector('[data-testid=shortcuts]');
  const keys = await page.$$eval('[data-testid=shortcut] kbd', (els) => els.map((e) => e.textContent));
  for (const k of ['W / S', 'A / D', 'Shift + drag', 'Escape', '[ / ]', 'Page Up', '?']) {
    assert.ok(keys.some((x) => x.includes(k)), `${k} in ${keys}`);
  }
  await page.keyboard.press('Escape');
  assert.equal(await page.locator('[data-testid=shortcuts]').count(), 0);
  // Typing in the search box is text, not keys of the chart.
  const w1 = await width();
  await page.fill('[data-testid=search-input]', 'wsad');
  assert.equal(await width(), w1);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

/** Every header part's height, the header's, the top bar's and where the load timings are. */
async function headerBoxes(page) {
  return page.evaluate(() => {
    const header = document.querySelector('.doc-header');
    // The header's parts: its lines that hold one thing (a line of several parts, such as the
    // numbers' strip beside the capture chips, may wrap between them), each part of a line.
    const parts = [...header.querySelectorAll(':scope > :not(.doc-line), .run-header, .doc-line > *')]
      .filter((e) => e.getClientRects().length > 0)
      .map((e) => ({ what: `${e.tagName.toLowerCase()}.${e.className}`, h: Math.round(e.getBoundingClientRect().height) }));
    const timings = document.querySelector('[data-testid=load-timings]');
    return {
      header: Math.round(header.getBoundingClientRect().height),
      parts,
      timingsInTopbar: Boolean(timings?.closest('.topbar')),
      timingsText: timings?.querySelector('[data-testid=load-timings-breakdown]')?.textContent ?? '',
      timingsHeight: Math.round(timings?.getBoundingClientRect().height ?? -1),
    };
  });
}

test('a compact header in every view at 1280×720: each part one line, the load timings a few words in the top bar', async () => {
  const views = [
    ...VIEWS,
    ['profile', async (page) => openByPicker(page, join(fixtures, 'serving', 'batched.profile.jsonl'))],
  ];
  for (const [name, open] of views) {
    const { page, seen } = await openPage('/', { width: 1280, height: 720 });
    await open(page);
    const b = await headerBoxes(page);
    const label = `${name}: ${JSON.stringify(b)}`;
    // One line is at most 30 px (a 14 px font, a chip's border); no part takes two.
    for (const p of b.parts) assert.ok(p.h <= 30, `${p.what} is ${p.h} px high: ${label}`);
    // At most three lines: identity, numbers, capture chips.
    assert.ok(b.header <= 3 * 30, `header ${b.header} px: ${label}`);
    // One file's view says how long it took to open (a set's views do not time their load).
    if (name === 'trace' || name === 'profile') {
      assert.ok(b.timingsInTopbar && b.timingsHeight <= 30, label);
      // The worker's start is a line of its own when the page had to wait for one.
      assert.match(b.timingsText, /^Opened .* in .*:(worker started in [^:]*)?read .*laid out in /, label);
    }
    assert.deepEqual(seen.errors, [], name);
    await page.close();
  }
});

test('the load timings: a dropdown of the header, opened and closed by keyboard, one line high', async () => {
  const { page, seen } = await openPage('/', { width: 1280, height: 720 });
  await openByPicker(page, join(fixtures, 'modules', 'llama_modules.trace6.jsonl'));
  const height = () => page.evaluate(() => document.documentElement.scrollHeight);
  const before = { doc: await height(), header: await page.$eval('.doc-header', (e) => e.getBoundingClientRect().height) };
  const body = page.locator('[data-testid=load-timings-breakdown]');
  assert.equal(await body.isVisible(), false);
  // Another header dropdown is open: opening the timings closes it (one at a time).
  await page.click('[data-testid=run-details] > summary');
  // Tab order reaches the summary; Enter opens the breakdown, a stage a line.
  await page.focus('[data-testid=load-timings] > summary');
  await page.keyboard.press('Enter');
  assert.equal(await body.isVisible(), true);
  assert.deepEqual(await page.$$eval('details[open]', (els) => els.map((e) => e.dataset.testid)), ['load-timings']);
  const lines = await page.$$eval('[data-testid=load-timings-breakdown] li', (els) => els.map((e) => e.textContent));
  assert.ok(lines.some((l) => /^read .* and analysed .* in the worker$/.test(l)), lines.join(' | '));
  assert.match(lines.at(-1), /^laid out in /);
  assert.match(await page.textContent('[data-testid=load-timings-breakdown] p'), /^Opened .* in .*:$/);
  // Inside the window, over the page: the header and the document keep their heights.
  const box = await body.boundingBox();
  assert.ok(box.x >= 0 && box.x + box.width <= 1280 && box.y + box.height <= 720, JSON.stringify(box));
  assert.equal(await height(), before.doc);
  assert.equal(await page.$eval('.doc-header', (e) => e.getBoundingClientRect().height), before.header);
  assert.ok((await page.locator('[data-testid=load-timings]').boundingBox()).height <= 30);
  // Escape closes it and leaves the focus on its summary; Space opens it again.
  await page.keyboard.press('Escape');
  assert.equal(await body.isVisible(), false);
  assert.equal(await page.evaluate(() => document.activeElement.parentElement.dataset.testid), 'load-timings');
  await page.keyboard.press(' ');
  assert.equal(await body.isVisible(), true);
  await page.keyboard.press('Escape');
  assert.equal(await body.isVisible(), false);
  // Escape closes the header's other dropdowns the same way.
  await page.focus('[data-testid=run-details] > summary');
  await page.keyboard.press('Enter');
  assert.equal(await page.getAttribute('[data-testid=run-details]', 'open'), '');
  await page.keyboard.press('Escape');
  assert.equal(await page.getAttribute('[data-testid=run-details]', 'open'), null);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('the header: a capture warning is a chip, and its dropdowns open one at a time inside the window', async () => {
  const { page, seen } = await openPage('/', { width: 1280, height: 720 });
  await openByPicker(page, join(fixtures, 'modules', 'llama_modules.trace6.jsonl'));
  // The warning is folded into a chip whose dropdown holds the text.
  assert.equal(await page.textContent('[data-testid=capture-alerts] > summary'), '1 capture warning');
  assert.equal(await page.locator('[data-testid=capture-warning]').isVisible(), false);
  await page.click('[data-testid=capture-alerts] > summary');
  assert.equal(await page.locator('[data-testid=capture-warning]').isVisible(), true);
  await page.click('[data-testid=run-details] > summary');
  await page.click('[data-testid=diagnostics] > summary');
  const open = await page.$$eval('.doc-header details[open]', (els) => els.map((e) => e.dataset.testid));
  assert.deepEqual(open, ['diagnostics']);
  // Its table inside the window, its column headers each on one line, none clipped.
  const box = await page.locator('[data-testid=diagnostics] > table').boundingBox();
  assert.ok(box.x >= 0 && box.x + box.width <= 1280, JSON.stringify(box));
  const ths = await page.$$eval('[data-testid=diagnostics] th', (els) => els.map((e) => ({
    t: e.textContent, sw: e.scrollWidth, cw: e.clientWidth, h: e.getBoundingClientRect().height,
  })));
  for (const th of ths) assert.ok(th.sw <= th.cw && th.h <= 30, JSON.stringify(th));
  // With the allocator off, no "0 B" or 0 allocations: not captured.
  for (const f of ['alloc_count', 'free_count', 'peak_bytes']) {
    assert.match(await page.textContent(`[data-testid=summary-${f}]`), /not captured/, f);
  }
  await openTab(page, 'modules');
  // The allocator and the graph were off: the modules' bytes say not captured, not 0 B.
  for (const what of ['alloc', 'graph']) {
    const shown = await page.$$eval(`[data-testid=module-${what}]`, (els) => els.map((e) => e.textContent));
    assert.ok(shown.length > 0 && shown.every((t) => t === 'not captured'), `${what}: ${shown.join()}`);
  }
  assert.deepEqual(seen.errors, []);
  await page.close();
});

/** One-word texts (no space, under 40 characters) in `selector` that take two lines. */
async function brokenWords(page, selector) {
  return page.$$eval(selector, (els) => els.flatMap((e) => {
    const walk = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    const broken = [];
    for (let t = walk.nextNode(); t; t = walk.nextNode()) {
      const text = t.textContent.trim();
      if (!text || /\s/.test(text) || text.length >= 40) continue;
      const r = document.createRange();
      r.selectNodeContents(t);
      const lines = new Set([...r.getClientRects()].map((x) => Math.round(x.top)));
      if (lines.size > 1) broken.push(text);
    }
    return broken;
  }));
}

test('tables break names only between words and never a column header (ops tab, span details, compare, several files)', async () => {
  for (const [width, height] of [[1440, 900], [1280, 720]]) {
    const { page, seen } = await openPage('/', { width, height });
    await openByPicker(page, TRAIN);
    await openTab(page, 'ops');
    // The selected span's details (with its ops table) beside the tab.
    await page.click('[data-testid=op-row]');
    for (const sel of ['.tab-panel th', '.tab-panel td']) {
      assert.deepEqual(await brokenWords(page, sel), [], `${width}: ${sel}`);
    }
    const clipped = await page.$$eval('.tab-panel thead th', (els) => els
      .filter((e) => e.getClientRects().length && e.scrollWidth > e.clientWidth).map((e) => e.textContent));
    assert.deepEqual(clipped, [], `${width}: clipped headers`);
    await page.close();
    const multi = await openPage('/', { width, height });
    const n = await loadSeq(multi.page);
    await multi.page.setInputFiles('[data-testid=file-input]', [join(fixtures, 'modules', 'llama_modules.trace6.jsonl'),
      join(fixtures, 'modules', 'mistral_names.trace6.jsonl')]);
    await waitNextDocument(multi.page, n);
    await openTab(multi.page, 'files');
    assert.deepEqual(await brokenWords(multi.page, '[data-testid=multi-summary] th'), [], `${width}: file names`);
    // Columns are labelled in words, the totals by their rule.
    const heads = await multi.page.$$eval('[data-testid=multi-summary] thead th', (els) => els.map((e) => e.textContent));
    assert.deepEqual(heads, ['file', 'measured total', 'ops', 'spans', 'root spans', 'max depth', 'allocs', 'frees', 'peak memory']);
    assert.match(await multi.page.textContent('[data-testid=multi-total-max_depth]'), /^max \d+$/);
    assert.match(await multi.page.textContent('[data-testid=multi-total-total_ns]'), /^span /);
    assert.match(await multi.page.textContent('[data-testid=multi-0-peak_bytes]'), /not captured/);
    assert.deepEqual(seen.errors.concat(multi.seen.errors), []);
    await multi.page.close();
  }
});

test('the memory lane\'s legend covers no curve and has an opaque background; a range leaves the toolbar in place', async () => {
  for (const theme of ['light', 'dark']) {
    const { page, seen } = await openPage('/', { width: 1280, height: 720 });
    await page.emulateMedia({ colorScheme: theme });
    await openByPicker(page, TRAIN);
    const legend = await page.evaluate(() => {
      const l = document.querySelector('[data-testid=memory-legend]');
      const c = document.querySelector('[data-testid=memory-curve]').getBoundingClientRect();
      const b = l.getBoundingClientRect();
      return { bg: getComputedStyle(l).backgroundColor, overlap: b.top < c.bottom && b.bottom > c.top, h: b.height };
    });
    // rgb(...) is opaque; rgba(..., a < 1) or transparent is not.
    assert.match(legend.bg, /^rgb\(/, `${theme}: ${JSON.stringify(legend)}`);
    assert.ok(!legend.overlap && legend.h <= 20, `${theme}: ${JSON.stringify(legend)}`);
    // A range: the toolbar keeps its height and the chart its place.
    const before = await page.locator('[data-testid=timeline-canvas]').boundingBox();
    const toolbar = await page.locator('.chart-toolbar').boundingBox();
    // Shift+drag over the chart selects a range.
    await page.keyboard.down('Shift');
    await page.mouse.move(before.x + before.width * 0.25, before.y + 60);
    await page.mouse.down();
    await page.mouse.move(before.x + before.width * 0.6, before.y + 60, { steps: 4 });
    await page.mouse.up();
    await page.keyboard.up('Shift');
    await page.waitForSelector('[data-testid=range-bar]');
    assert.equal((await page.locator('.chart-toolbar').boundingBox()).height, toolbar.height, `${theme}: the toolbar grew`);
    assert.equal(await page.locator('[data-testid=range-clear-chart]').isVisible(), true);
    const after = await page.locator('[data-testid=timeline-canvas]').boundingBox();
    assert.equal(after.y, before.y, `${theme}: the chart moved`);
    assert.deepEqual(seen.errors, []);
    await page.close();
  }
});

test('the panel dragged to the top leaves the chart at least 40% of the main area', async () => {
  for (const [width, height] of [[1440, 900], [1280, 720]]) {
    const { page, seen } = await openPage('/', { width, height });
    await openByPicker(page, join(fixtures, 'modules', 'llama_modules.trace6.jsonl'));
    const splitter = await page.locator('[data-testid=panel-splitter]').boundingBox();
    await page.mouse.move(splitter.x + splitter.width / 2, splitter.y + 3);
    await page.mouse.down();
    await page.mouse.move(splitter.x + splitter.width / 2, 0, { steps: 5 });
    await page.mouse.up();
    const g = await page.evaluate(() => ({
      main: document.querySelector('main').getBoundingClientRect().height,
      chart: document.querySelector('.chart-area').getBoundingClientRect().height,
      canvas: document.querySelector('[data-testid=timeline-canvas]').getBoundingClientRect().height,
    }));
    assert.ok(g.chart >= 0.4 * g.main && g.canvas >= 120, `${width}×${height}: ${JSON.stringify(g)}`);
    assert.deepEqual(seen.errors, []);
    await page.close();
  }
});

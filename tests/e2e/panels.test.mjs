// Browser tests of the viewer's panels (phases, memory over time and reconciliation, op
// efficiency, gradient health, inference latency / waterfalls / snapshots / events) on the files
// the capture examples write: every headline number shown (`data-value`) equals what the CLI
// computes with the same schema functions. Screenshots of each panel go to target/e2e/panels/.
//
// The example files are made with
//   cargo run -p candle-trace-capture [--release] --features candle --example train_llama -- --out F
//   cargo run -p candle-trace-capture [--release] --features candle --example serve_llama -- --out F
// (the debug build by default, which `cargo test --workspace --all-features` has already made;
// PANELS_RELEASE=1 for --release) unless PANELS_TRAIN / PANELS_PROFILE name existing files.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useHarness, root, fixtures, artifacts, cli, openPage, openByPicker, openTab } from './harness.mjs';

useHarness();

const shots = join(artifacts, 'panels');
const files = {
  train: process.env.PANELS_TRAIN ?? join(shots, 'train_llama.trace6.jsonl'),
  profile: process.env.PANELS_PROFILE ?? join(shots, 'serve_llama.profile.jsonl'),
  fixture: join(fixtures, 'valid_panels.trace6.jsonl'),
};

function runExample(example, out) {
  const release = process.env.PANELS_RELEASE ? ['--release'] : [];
  const r = spawnSync('cargo', ['run', '-q', ...release, '-p', 'candle-trace-capture', '--features', 'candle',
    '--example', example, '--', '--out', out], { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, `${example}: ${r.stderr}`);
}

before(() => {
  mkdirSync(shots, { recursive: true });
  if (!process.env.PANELS_TRAIN || !existsSync(files.train)) runExample('train_llama', files.train);
  if (!process.env.PANELS_PROFILE || !existsSync(files.profile)) runExample('serve_llama', files.profile);
});

const attrs = (page, selector, names) => page.$$eval(selector, (els, names) =>
  els.map((e) => Object.fromEntries(names.map((n) => [n, e.getAttribute(n)]))), names);
const value = (page, testid) => page.getAttribute(`[data-testid=${testid}]`, 'data-value');
const str = (v) => (v === null || v === undefined ? '' : String(v));

/** The tab each shot panel lives in. */
const TAB_OF = {
  phases: 'phases', 'memory-charts': 'memory', efficiency: 'efficiency', gradients: 'gradients',
  modules: 'modules', 'request-table': 'requests', latency: 'latency', waterfalls: 'requests',
  snapshots: 'memory', 'profile-failures': 'requests', 'profile-modules': 'modules',
};

async function shoot(page, testid, name) {
  if (TAB_OF[testid]) await openTab(page, TAB_OF[testid]);
  const el = page.locator(`[data-testid=${testid}]`).first();
  await el.scrollIntoViewIfNeeded();
  await el.screenshot({ path: join(shots, `${name}.png`) });
}

/** Every trace panel's numbers against the CLI; returns how many values were compared. */
async function checkTracePanels(page, file, label) {
  let checked = 0;
  const eq = (a, b, what) => { assert.equal(str(a), str(b), `${label}: ${what}`); checked++; };

  // Phases.
  await openTab(page, 'phases');
  const phases = cli('query', file, '--kind', 'phases', '--json', '--limit', '1000');
  eq(await value(page, 'phase-region'), phases.phases.region_ns, 'region');
  for (const p of ['forward', 'backward', 'optimizer', 'other']) {
    eq(await value(page, `phase-${p}`), phases.phases[`${p}_ns`], `phase ${p}`);
  }
  const pairs = await attrs(page, '[data-testid=module-pair]', ['data-path', 'data-forward', 'data-backward']);
  assert.equal(pairs.length, phases.module_pairs.length, `${label}: module pairs`);
  phases.module_pairs.forEach((m, i) => {
    eq(pairs[i]['data-path'], m.path, 'module path');
    eq(pairs[i]['data-forward'], m.forward_ns, `${m.path} forward`);
    eq(pairs[i]['data-backward'], m.backward_ns, `${m.path} backward`);
  });

  // Memory over time: the peak, and every checkpoint reconciled.
  await openTab(page, 'memory');
  const summary = cli('summary', '--json', file);
  const memory = cli('query', file, '--kind', 'memory', '--json');
  const peak = page.locator('[data-testid=memory-peak]');
  eq(await peak.getAttribute('data-value'), summary.peak_bytes, 'memory peak');
  eq(await peak.getAttribute('data-time'), memory.peak_timestamp_ns, 'memory peak time');
  eq(await peak.getAttribute('data-device'), memory.peak_device, 'memory peak device');
  const recon = cli('query', file, '--kind', 'reconcile', '--json');
  const rows = await attrs(page, '[data-testid=reconcile-row]', ['data-value', 'data-time', 'data-device', 'data-used', 'data-live']);
  assert.equal(rows.length, recon.points.length, `${label}: reconcile rows`);
  recon.points.forEach((p, i) => {
    eq(rows[i]['data-value'], p.unexplained_bytes, `reconcile ${i} unexplained`);
    eq(rows[i]['data-time'], p.timestamp_ns, `reconcile ${i} time`);
    eq(rows[i]['data-device'], p.device, `reconcile ${i} device`);
    eq(rows[i]['data-used'], p.used_bytes, `reconcile ${i} used`);
    eq(rows[i]['data-live'], p.live_bytes, `reconcile ${i} live`);
  });
  if (recon.max_unexplained !== null) {
    eq(await value(page, 'memory-unexplained-max'), recon.points[recon.max_unexplained].unexplained_bytes, 'largest gap');
  }

  // Clicking a moment moves the timeline there: the peak button, then a point on the chart.
  const flame = page.locator('[data-testid=flame-chart]');
  await peak.click();
  await page.waitForFunction((t) => {
    const c = document.querySelector('[data-testid=flame-chart]');
    return Number(c.dataset.viewStartNs) <= t && Number(c.dataset.viewEndNs) >= t
      && Number(c.dataset.viewEndNs) - Number(c.dataset.viewStartNs) < 1e12;
  }, memory.peak_timestamp_ns);
  const before = Number(await flame.getAttribute('data-view-start-ns'));
  const chart = page.locator('[data-testid=memory-chart] svg').first();
  const box = await chart.boundingBox();
  await chart.click({ position: { x: box.width * 0.25, y: box.height / 2 } });
  await page.waitForFunction((b) => Number(document.querySelector('[data-testid=flame-chart]').dataset.viewStartNs) !== b, before);
  checked += 2;

  // Op efficiency.
  await openTab(page, 'efficiency');
  const flops = cli('query', file, '--kind', 'flops', '--json', '--limit', '1000');
  eq(await value(page, 'flops-total'), flops.flops, 'total FLOPs');
  if (flops.flops_per_s !== null) eq(await value(page, 'flops-rate'), flops.flops_per_s, 'FLOP/s');
  const effRows = await attrs(page, '[data-testid=flops-row]', ['data-op', 'data-flops', 'data-flops-per-s', 'data-bytes-per-ns']);
  assert.equal(effRows.length, flops.rows.length, `${label}: efficiency rows`);
  flops.rows.forEach((r, i) => {
    eq(effRows[i]['data-op'], r.op_name, 'op');
    eq(effRows[i]['data-flops'], r.flops, `${r.op_name} FLOPs`);
    eq(effRows[i]['data-flops-per-s'], r.flops_per_s, `${r.op_name} FLOP/s`);
    const shown = effRows[i]['data-bytes-per-ns'];
    assert.equal(shown === '' ? null : Number(shown), r.bytes_per_ns, `${label}: ${r.op_name} bytes/ns`);
    checked++;
  });

  // Gradient health: counts, the histogram, the table and its filter and sort.
  await openTab(page, 'gradients');
  const grads = cli('query', file, '--kind', 'gradients', '--json', '--limit', '100000');
  for (const [state, n] of Object.entries(grads.counts)) eq(await value(page, `gradients-${state}`), n, `gradients ${state}`);
  const bins = await attrs(page, '[data-testid=norm-bin]', ['data-exponent', 'data-value']);
  assert.equal(bins.length, grads.norm_histogram.bins.length, `${label}: norm bins`);
  grads.norm_histogram.bins.forEach((b, i) => {
    eq(bins[i]['data-exponent'], b.exponent, 'bin exponent');
    eq(bins[i]['data-value'], b.count, `bin 1e${b.exponent}`);
  });
  const gradRows = await attrs(page, '[data-testid=gradient-row]', ['data-parameter', 'data-state']);
  assert.equal(gradRows.length, grads.gradients.length, `${label}: gradient rows`);
  grads.gradients.forEach((g, i) => eq(gradRows[i]['data-parameter'], `${g.root}/${g.key}`, `review order ${i}`));
  await page.check('[data-testid=gradients-only-problems]');
  const problems = grads.counts.missing + grads.counts.zero + grads.counts.non_finite;
  eq(await page.locator('[data-testid=gradient-row]').count(), problems, 'only problems');
  assert.ok((await attrs(page, '[data-testid=gradient-row]', ['data-state'])).every((r) => r['data-state'] !== 'present'));
  await page.uncheck('[data-testid=gradients-only-problems]');
  // keyboard: focus the norm header's button and press Enter → descending by norm
  await page.focus('[data-testid=gradients-sort-norm]');
  await page.keyboard.press('Enter');
  const norms = (await attrs(page, '[data-testid=gradient-row]', ['data-norm']))
    .map((r) => r['data-norm']).filter((n) => n !== '').map(Number);
  assert.deepEqual(norms, [...norms].sort((a, b) => b - a), `${label}: sorted by norm`);
  checked++;

  // Modules: every row by path and by leaf name, as `query --kind modules` has them.
  await openTab(page, 'modules');
  for (const by of ['path', 'name']) {
    const want = cli('query', file, '--kind', 'modules', '--by', by, '--json', '--limit', '100000').modules;
    if (by === 'path') {
      const byDefault = cli('query', file, '--kind', 'modules', '--json', '--limit', '100000').modules;
      assert.deepEqual(want, byDefault, `${label}: modules by path is the default`);
    }
    checked += await checkModuleRows(page, want, by, `${label} modules by ${by}`);
  }
  await page.selectOption('[data-testid=modules-by]', 'path');

  // What was captured: each source of `summary --json`'s extra.capture_sources, and its warnings.
  checked += await checkCaptureSources(page, summary.extra.capture_sources, label);
  return checked;
}

/**
 * The modules tab grouped `by` against `query --kind modules --by BY --json`'s `modules`;
 * returns the count. By path both are the module tree, every node expanded, in the same
 * order (pre-order, each level heaviest first), group nodes included; by leaf name a flat
 * list in the CLI's order.
 */
async function checkModuleRows(page, want, by, label) {
  if (want.length === 0) {
    assert.match(await page.textContent('[data-testid=modules-empty]'), /no module spans: install candle-trace before building the model/, label);
    assert.equal(await page.locator('[data-testid=module-row]').count(), 0, label);
    return 1;
  }
  await page.selectOption('[data-testid=modules-by]', by);
  assert.equal(await page.getAttribute('[data-testid=modules-by]', 'data-value'), by, label);
  await page.click('[data-testid=modules-expand-all]');
  const names = ['data-key', 'data-calls', 'data-total', 'data-self'];
  if (by === 'path') names.push('data-measured');
  const rows = await attrs(page, '[data-testid=module-row]', names);
  const expected = want.map((r) => ({
    'data-key': by === 'path' ? r.key : r.name, 'data-calls': String(r.calls),
    'data-total': String(r.total_ns), 'data-self': String(r.self_ns),
    ...(by === 'path' ? { 'data-measured': String(r.measured) } : {}),
  }));
  assert.deepEqual(rows, expected, label);
  return rows.length;
}

/**
 * The profile's modules tab grouped `by` against the CLI's `modules`; returns the count. By
 * path the module tree (expanded, in the CLI's order), by leaf name a flat list (every row
 * shown) with mean and requests.
 */
async function checkProfileModuleRows(page, want, by, label) {
  await page.selectOption('[data-testid=profile-modules-by]', by);
  assert.equal(await page.getAttribute('[data-testid=profile-modules-by]', 'data-value'), by, label);
  if (by === 'path') {
    await page.click('[data-testid=profile-modules-expand-all]');
    const rows = await attrs(page, '[data-testid=profile-module-row]', ['data-key', 'data-calls', 'data-total', 'data-self', 'data-measured']);
    assert.deepEqual(rows, want.map((r) => ({ 'data-key': r.key, 'data-calls': String(r.calls), 'data-total': String(r.total_ns),
      'data-self': String(r.self_ns), 'data-measured': String(r.measured) })), label);
    // A level no span has says "(group)", as the trace's modules tab and the CLI (Σ children).
    const notes = await page.$$eval('[data-testid=profile-module-row] th', (ths) => ths.map((th) => th.textContent.endsWith(' (group)')));
    assert.deepEqual(notes, want.map((r) => !r.measured), label);
    return rows.length;
  }
  const all = page.locator('[data-testid=profile-modules-all]');
  if (want.length > 50 && (await all.textContent()).includes('Show all')) await all.click();
  const rows = await attrs(page, '[data-testid=profile-module-row]', ['data-key', 'data-calls', 'data-total', 'data-mean', 'data-requests']);
  const expected = want.map((r) => ({ 'data-key': r.name, 'data-calls': String(r.calls), 'data-total': String(r.total_ns),
    'data-mean': String(r.mean_ns), 'data-requests': String(r.requests) }));
  assert.deepEqual(rows, expected, label);
  return rows.length;
}

/** The "captured" line against `summary --json`'s `extra.capture_sources` (`null`: not stated). */
async function checkCaptureSources(page, sources, label) {
  const shown = await attrs(page, '[data-testid=capture-source]', ['data-source', 'data-on', 'data-value']);
  const warnings = await page.$$eval('[data-testid=capture-warning]', (els) => els.map((e) => e.textContent));
  if (sources === null || sources === undefined) {
    assert.equal(await page.getAttribute('[data-testid=capture-sources]', 'data-stated'), 'false', label);
    assert.match(await page.textContent('[data-testid=capture-sources]'), /capture sources not stated/, label);
    assert.equal(shown.length, 0, label);
    return 1;
  }
  assert.equal(await page.getAttribute('[data-testid=capture-sources]', 'data-stated'), 'true', label);
  assert.deepEqual(shown, sources.sources.map((s) => ({ 'data-source': s.source, 'data-on': String(s.on), 'data-value': String(s.events) })), `${label}: capture sources`);
  assert.equal(warnings.length, sources.warnings.length, `${label}: capture warnings`);
  sources.warnings.forEach((w, i) => assert.ok(warnings[i].includes(w), `${label}: capture warning ${i}`));
  return shown.length + warnings.length;
}

test('training panels of train_llama and of the panels fixture match the CLI', async () => {
  const { page, seen } = await openPage();
  let checked = 0;
  for (const [name, file] of [['train_llama', files.train], ['fixture', files.fixture]]) {
    await openByPicker(page, file);
    checked += await checkTracePanels(page, file, name);
    await openTab(page, 'gradients');
    await page.check('[data-testid=gradients-only-problems]');
    for (const [testid, shot] of [['phases', 'phases'], ['memory-charts', 'memory'], ['efficiency', 'efficiency'], ['gradients', 'gradients']]) {
      await shoot(page, testid, `${name}-${shot}`);
    }    await shoot(page, 'modules', `${name}-modules`);
    await shoot(page, 'capture-sources', `${name}-captured`);
  }
  // The dark theme: the same panels, for a contrast check by eye.
  await page.click('[data-testid=theme-toggle]');
  await page.click('[data-testid=theme-toggle]');
  assert.equal(await page.getAttribute('html', 'data-theme'), 'dark');
  for (const [testid, shot] of [['phases', 'phases'], ['memory-charts', 'memory'], ['efficiency', 'efficiency'], ['gradients', 'gradients']]) {
    await shoot(page, testid, `fixture-dark-${shot}`);
  }
  console.log(`training panels: ${checked} values compared`);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('inference panels of serve_llama match the CLI', async () => {
  const file = files.profile;
  const { page, seen } = await openPage();
  await openByPicker(page, file);
  let checked = 0;
  const eq = (a, b, what) => { assert.equal(str(a), str(b), what); checked++; };

  const latency = cli('query', file, '--kind', 'latency', '--json');
  await openTab(page, 'latency');
  eq(await value(page, 'profile-detail-level'), latency.detail_level ?? 'not stated', 'detail level');
  eq(await value(page, 'profile-sample-rate'), latency.sample_rate ?? 'not stated', 'sample rate');
  eq(await value(page, 'profile-detail-level'), 'latency', 'serve_llama runs at detail latency');
  eq(Number(await value(page, 'profile-sample-rate')), 1, 'serve_llama samples every request');
  for (const [id, key, hist] of [['ttft', 'ttft_us', 'ttft_histogram'], ['itl', 'itl_nanos', 'itl_histogram']]) {
    const bins = await page.$$eval(`[data-testid=histogram-${id}] [data-testid=hist-bin]`, (els) => els.map((e) => Number(e.dataset.value)));
    assert.deepEqual(bins, latency[hist].counts, `${id} histogram`);
    checked += bins.length;
    for (const p of ['p50', 'p90', 'p99', 'max']) eq(await value(page, `${id}-line-${p}`), latency[key][p], `${id} ${p}`);
  }

  const requests = cli('query', file, '--kind', 'requests', '--json', '--limit', '100000').requests;
  await openTab(page, 'requests');
  const rows = await attrs(page, '[data-testid=request-row]', ['data-request', 'data-status', 'data-duration', 'data-ttft', 'data-itl', 'data-tokens']);
  assert.equal(rows.length, requests.length, 'request rows');
  requests.forEach((r, i) => {
    eq(rows[i]['data-request'], r.request_id, 'request id');
    eq(rows[i]['data-status'], r.status, `${r.request_id} status`);
    eq(rows[i]['data-duration'], r.duration_us, `${r.request_id} duration`);
    eq(rows[i]['data-ttft'], r.ttft_us, `${r.request_id} ttft`);
    eq(rows[i]['data-itl'], r.itl_us_avg, `${r.request_id} itl`);
    eq(rows[i]['data-tokens'], r.output_tokens, `${r.request_id} tokens`);
  });
  const waterfalls = await attrs(page, '[data-testid=waterfall]', ['data-request', 'data-commits', 'data-stages']);
  assert.equal(waterfalls.length, requests.length, 'one waterfall per request');
  requests.forEach((r, i) => {
    eq(waterfalls[i]['data-request'], r.request_id, 'waterfall request');
    eq(waterfalls[i]['data-commits'], r.output_tokens ?? 0, `${r.request_id} commits drawn`);
  });
  assert.ok(waterfalls.some((w) => Number(w['data-stages']) > 0), 'decode-stage intervals drawn');

  const summary = cli('summary', '--json', file);
  await openTab(page, 'memory');
  eq(await page.locator('[data-testid=snapshot-row]').count(), summary.memory_snapshot_count, 'snapshots');
  await openTab(page, 'requests');
  eq(await value(page, 'profile-failures'), latency.failures, 'failures listed');
  eq(await value(page, 'profile-diagnostic-only-events'), latency.diagnostic_only, 'diagnostic-only listed');
  assert.ok(latency.failures > 0, 'serve_llama refuses one request');

  // Modules: every row across requests by path and by leaf name, in `query --kind modules`'
  // order, and each request's forward calls and module spans.
  for (const by of ['path', 'name']) {
    const want = cli('query', file, '--kind', 'modules', '--by', by, '--json', '--limit', '100000');
    if (by === 'path') {
      const byDefault = cli('query', file, '--kind', 'modules', '--json', '--limit', '100000');
      assert.deepEqual(want.modules, byDefault.modules, 'profile modules by path is the default');
      assert.ok(want.modules.length > 0, 'serve_llama writes module spans');
      await openTab(page, 'requests');
      const counts = await attrs(page, '[data-testid=request-row]', ['data-request', 'data-forwards', 'data-module-spans']);
      const perRequest = new Map(want.requests.map((r) => [r.request_id, r]));
      for (const row of counts) {
        const r = perRequest.get(row['data-request']);
        // The CLI lists each forward call (with its coverage).
        eq(row['data-forwards'], r ? r.forward_calls.length : 0, `${row['data-request']} forward calls`);
        // The request's module spans: its tree's measured nodes' calls.
        eq(row['data-module-spans'], r ? r.modules.filter((m) => m.measured).reduce((n, m) => n + m.calls, 0) : 0, `${row['data-request']} module spans`);
      }
      assert.ok(counts.some((r) => Number(r['data-forwards']) > 1), 'a request with prefill and decode forward calls');
    }
    await openTab(page, 'modules');
    checked += await checkProfileModuleRows(page, want.modules, by, `serve_llama modules by ${by}`);
  }
  await page.selectOption('[data-testid=profile-modules-by]', 'path');

  for (const [testid, shot] of [['request-table', 'requests'], ['latency', 'latency'], ['waterfalls', 'waterfalls'], ['snapshots', 'snapshots'], ['profile-failures', 'failures'], ['profile-modules', 'modules']]) {
    await shoot(page, testid, `serve_llama-${shot}`);
  }
  console.log(`inference panels: ${checked} values compared`);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a profile without module spans says what is missing and how to get them, as the CLI finds none', async () => {
  const file = join(fixtures, 'infer_run.profile.jsonl');
  assert.deepEqual(cli('query', file, '--kind', 'modules', '--json', '--limit', '100000').modules, []);
  const { page, seen } = await openPage();
  await openByPicker(page, file);
  await openTab(page, 'modules');
  assert.match(await page.textContent('[data-testid=profile-modules-empty]'),
    /no module spans: serve with `InferenceProfiler::builder\(\.\.\)\.install\(\)` before building the model and run forward calls through `RequestHandle::prefill_step` \/ `decode_step` at detail latency or above/);
  assert.equal(await page.locator('[data-testid=profile-module-row]').count(), 0);
  // Nothing captured to count: the request rows carry no forward-call numbers (not 0).
  await openTab(page, 'requests');
  const counts = await attrs(page, '[data-testid=request-row]', ['data-forwards', 'data-module-spans']);
  assert.ok(counts.length > 0);
  assert.ok(counts.every((r) => !r['data-forwards'] && !r['data-module-spans']));
  await shoot(page, 'profile-modules', 'infer_run-modules-empty');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a profile with more module paths than the table shows: the heaviest 50, then all on request, as the CLI orders them', async () => {
  // Two requests, each one prefill forward call: a `model` function span holding 60 `layer`
  // modules (paths layer[0] … layer[59]); request b's layers are 1 ns shorter.
  const event = (request, attributes, nanos) => ({ schema_version: 1, event_kind: 'timed_span',
    ts_unix_nanos: 1767225600000000000, timestamp: '2026-01-01T00:00:00Z',
    event_id: `${request}-${attributes.span_id ?? 'req'}`, request_id: request, correlation_id: 'c',
    entrypoint: 'serve', backend: 'cpu', runtime_preset_hash: 'sha256:ab',
    phase: attributes.span_id === undefined ? 'request' : 'module', status: 'ok',
    duration_us: Math.floor(nanos / 1000), shape: { batch: 1 },
    ...(attributes.span_id === undefined ? {} : { attributes }) });
  const lines = [];
  for (const [request, less] of [['a', 0], ['b', 1]]) {
    lines.push(event(request, {}, 9000));
    const common = { span_kind: 'module', forward: 'prefill', forward_index: 0 };
    lines.push(event(request, { ...common, span_id: 1, name: 'model', span_kind: 'function',
      start_nanos_since_request_start: 0, duration_nanos: 200000 }, 200000));
    for (let m = 0; m < 60; m++) {
      const nanos = 1000 + m * 10 - less;
      lines.push(event(request, { ...common, span_id: m + 2, parent_span_id: 1, name: 'layer',
        start_nanos_since_request_start: 1 + m * 2000, duration_nanos: nanos }, nanos));
    }
  }
  mkdirSync(artifacts, { recursive: true });
  const file = join(artifacts, 'many-modules.profile.jsonl');
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

  // By path: the tree's 60 roots, heaviest first as the CLI orders them.
  const byPath = cli('query', file, '--kind', 'modules', '--json', '--limit', '100000');
  assert.equal(byPath.modules.length, 60);
  assert.ok(byPath.modules.every((r) => r.calls === 2 && r.depth === 0));
  const { page, seen } = await openPage();
  await openByPicker(page, file);
  await openTab(page, 'modules');
  assert.deepEqual((await attrs(page, '[data-testid=profile-module-row]', ['data-key'])).map((r) => r['data-key']),
    byPath.modules.map((r) => r.key));
  await checkProfileModuleRows(page, byPath.modules, 'path', 'many profile modules by path');
  const byName = cli('query', file, '--kind', 'modules', '--by', 'name', '--json', '--limit', '100000').modules;
  assert.deepEqual(byName.map((r) => [r.name, r.calls]), [['layer', 120]]);
  await checkProfileModuleRows(page, byName, 'name', 'many profile modules by name');
  await openTab(page, 'requests');
  const counts = await attrs(page, '[data-testid=request-row]', ['data-request', 'data-forwards', 'data-module-spans']);
  assert.deepEqual(counts, [{ 'data-request': 'a', 'data-forwards': '1', 'data-module-spans': '60' },
    { 'data-request': 'b', 'data-forwards': '1', 'data-module-spans': '60' }]);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a model with more module paths than the table shows: the heaviest 50, then all on request, as the CLI orders them', async () => {
  // 60 modules, each a forward and a backward span under the measured step's `forward` and
  // `backward` function spans (which add no path segment), so 60 paths.
  const meta = { kind: 'meta', schema: 'candle-graph/trace/6', run_id: 'r', correlation_id: 'c',
    entrypoint: 'train::step', phase: 'train', timestamp: '2026-01-01T00:00:00Z', capture_step: 2,
    warmup_steps: 1, device: 'cpu', timing_mode: 'host', tags: {} };
  const lines = [meta, { kind: 'span_start', id: 'root', name: 'step', start_ns: 0, span_kind: 'function', measured: true }];
  let t = 0;
  for (const step of ['forward', 'backward']) {
    const start = t;
    lines.push({ kind: 'span_start', id: step, parent_id: 'root', name: step, start_ns: t, span_kind: 'function', measured: false, step });
    for (let m = 0; m < 60; m++) {
      const id = `${step}-${m}`;
      lines.push({ kind: 'span_start', id, parent_id: step, name: `layer${m}`, start_ns: t, span_kind: 'module', measured: false, step });
      // Distinct durations, so the order is decided by time alone.
      lines.push({ kind: 'span_end', id, duration_ns: 1000 + m * 10 + (step === 'backward' ? 3 : 0) });
      t += 2000;
    }
    lines.push({ kind: 'span_end', id: step, duration_ns: t - start });
  }
  lines.push({ kind: 'span_end', id: 'root', duration_ns: t });
  mkdirSync(artifacts, { recursive: true });
  const file = join(artifacts, 'many-modules.trace6.jsonl');
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

  const want = cli('query', file, '--kind', 'phases', '--json', '--limit', '1000').module_pairs;
  assert.equal(want.length, 60);
  const { page, seen } = await openPage();
  await openByPicker(page, file);
  await openTab(page, 'phases');
  const shown = async () => (await attrs(page, '[data-testid=module-pair]', ['data-path', 'data-forward', 'data-backward']))
    .map((r) => [r['data-path'], r['data-forward'], r['data-backward']]);
  const expected = want.map((m) => [m.path, String(m.forward_ns), String(m.backward_ns)]);
  assert.deepEqual(await shown(), expected.slice(0, 50));
  assert.match(await page.textContent('[data-testid=module-pairs-shown]'), /The 50 module paths with the most time, of 60/);
  await page.click('[data-testid=module-pairs-all]');
  assert.deepEqual(await shown(), expected);
  await page.click('[data-testid=module-pairs-all]');
  assert.equal((await shown()).length, 50);
  // The modules tab: 60 paths of two calls each (forward and backward), all of them roots
  // of the tree, heaviest first as the CLI orders them; sorted by name on a click.
  const byPath = cli('query', file, '--kind', 'modules', '--json', '--limit', '100000').modules;
  assert.equal(byPath.length, 60);
  assert.ok(byPath.every((r) => r.calls === 2));
  await openTab(page, 'modules');
  assert.deepEqual((await attrs(page, '[data-testid=module-row]', ['data-key'])).map((r) => r['data-key']),
    byPath.map((r) => r.key));
  await page.click('[data-testid=modules-sort-module]');
  assert.deepEqual((await attrs(page, '[data-testid=module-row]', ['data-key'])).map((r) => r['data-key']),
    byPath.map((r) => r.key).sort());
  await page.click('[data-testid=modules-sort-total]');
  await checkModuleRows(page, byPath, 'path', 'many modules by path');
  await checkModuleRows(page, cli('query', file, '--kind', 'modules', '--by', 'name', '--json', '--limit', '100000').modules, 'name', 'many modules by name');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('sources that were off say "not captured", never 0, as the CLI does; a trace without module spans says how to capture them', async () => {
  // layer_ops, allocator and gradients off; tracing on with one span; a capture warning.
  const meta = { kind: 'meta', schema: 'candle-graph/trace/6', run_id: 'r', correlation_id: 'c',
    entrypoint: 'train::step', phase: 'train', timestamp: '2026-01-01T00:00:00Z', capture_step: 2,
    warmup_steps: 1, device: 'cpu', timing_mode: 'host', tags: {} };
  const sources = { kind: 'capture_sources', events_dropped: 0,
    sources: [{ source: 'tracing', on: true, events: 2 }, { source: 'layer_ops', on: false, events: 0 },
      { source: 'allocator', on: false, events: 0 }, { source: 'gradients', on: false, events: 0 }],
    warnings: ['the captured step saw no module spans'] };
  const lines = [meta, { kind: 'span_start', id: 'root', name: 'step', start_ns: 0, span_kind: 'function', measured: true },
    { kind: 'span_end', id: 'root', duration_ns: 5000 }, sources];
  mkdirSync(artifacts, { recursive: true });
  const file = join(artifacts, 'sources-off.trace6.jsonl');
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

  // The CLI's wording, from its text summary.
  const bin = process.env.CANDLE_TRACE_BIN;
  const [cmd, argv] = bin ? [bin, ['summary', file]]
    : ['cargo', ['run', '-q', '--release', '-p', 'candle-trace-cli', '--bin', 'candle-trace', '--', 'summary', file]];
  const text = spawnSync(cmd, argv, { cwd: root, encoding: 'utf8' }).stdout;
  for (const why of ['not captured (layer_ops off)', 'not captured (allocator off)', 'not captured (gradients off)']) {
    assert.ok(text.includes(why), `the CLI says ${why}: ${text}`);
  }

  const summary = cli('summary', '--json', file);
  const { page, seen } = await openPage();
  await openByPicker(page, file);
  // The cards keep the exact integers of summary --json, and say why they are 0.
  const ops = page.locator('[data-testid=summary-op_count]');
  assert.equal(await ops.getAttribute('data-value'), String(summary.op_count));
  assert.equal(await ops.getAttribute('data-not-captured'), 'not captured (layer_ops off)');
  assert.match(await ops.textContent(), /not captured \(layer_ops off\)/);
  const peak = page.locator('[data-testid=summary-peak_bytes]');
  assert.equal(await peak.getAttribute('data-value'), '0');
  assert.match(await peak.textContent(), /not captured \(allocator off\)/);
  assert.doesNotMatch(await peak.textContent(), /0 B/);
  for (const [what, why, tab] of [['memory', 'allocator', 'memory'], ['ops', 'layer_ops', 'ops'],
    ['ops', 'layer_ops', 'efficiency'], ['gradients', 'gradients', 'gradients']]) {
    await openTab(page, tab);
    assert.equal(await page.textContent(`[data-testid=not-captured][data-what=${what}]`), `not captured (${why} off)`, tab);
  }
  // No per-state gradient counts without gradients.
  await openTab(page, 'gradients');
  assert.equal(await page.locator('[data-testid^=gradients-]').count(), 0);
  await checkCaptureSources(page, summary.extra.capture_sources, 'sources off');
  assert.equal(await page.locator('[data-testid=capture-warning]').count(), 1);
  await openTab(page, 'modules');
  assert.match(await page.textContent('[data-testid=modules-empty]'),
    /no module spans: install candle-trace before building the model \(`Recorder::builder\(\.\.\)\.install\(\)`.*candle_trace_capture::nn::/);
  await shoot(page, 'capture-sources', 'sources-off-captured');
  await page.locator('section.cards').screenshot({ path: join(shots, 'sources-off-cards.png') });
  await shoot(page, 'gradients', 'sources-off-gradients');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('a file without a capture_sources line: "capture sources not stated", and "not captured" for what it lacks', async () => {
  const file = join(fixtures, 'candle_tracing.chrome.json');
  const summary = cli('summary', '--json', file);
  const { page, seen } = await openPage();
  await openByPicker(page, file);
  await checkCaptureSources(page, summary.extra.capture_sources, 'chrome import');
  assert.equal(await value(page, 'summary-op_count'), String(summary.op_count));
  assert.equal(await page.getAttribute('[data-testid=summary-op_count]', 'data-not-captured'), 'not captured');
  await openTab(page, 'memory');
  assert.equal(await page.textContent('[data-testid=not-captured][data-what=memory]'), 'not captured');
  assert.deepEqual(seen.errors, []);
  await page.close();
});

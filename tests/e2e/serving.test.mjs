// Browser tests of batched serving (issue #39) on tests/fixtures/serving/batched.profile.jsonl:
// the chart draws the engine's forwards above one lane group per request, by worker thread, on
// one time axis; the Iterations and Resources tabs show `query --kind iterations / resources`;
// the serving findings link to their rows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { useHarness, fixtures, cli, openPage, openByPicker, openTab } from './harness.mjs';

useHarness();

const FILE = join(fixtures, 'serving', 'batched.profile.jsonl');

const attrs = (page, selector, names) => page.$$eval(selector, (els, names) =>
  els.map((e) => Object.fromEntries(names.map((n) => [n, e.getAttribute(n)]))), names);

test('engines and requests on one chart, the Iterations and Resources tabs against the CLI', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, FILE);
  assert.equal(await page.getAttribute('[data-testid=document]', 'data-format'), 'profile');
  assert.deepEqual(await page.$$eval('[role=tab]', (els) => els.map((e) => e.dataset.tab)),
    ['findings', 'requests', 'iterations', 'resources', 'latency', 'modules', 'memory']);

  // A lane group per engine, then one per request.
  const iterations = cli('query', FILE, '--kind', 'iterations', '--json', '--limit', '100000');
  const engines = new Set(iterations.iterations.map((i) => i.engine));
  const requests = cli('query', FILE, '--kind', 'requests', '--json', '--limit', '100000').requests;
  assert.equal(Number(await page.getAttribute('[data-testid=flame-chart]', 'data-groups')),
    engines.size + requests.length);

  await openTab(page, 'iterations');
  const panel = page.locator('[data-testid=iterations]');
  assert.equal(await panel.getAttribute('data-value'), String(iterations.count));
  assert.equal(await panel.getAttribute('data-batch-p50'), String(iterations.batch_size.p50));
  assert.equal(await panel.getAttribute('data-batch-p90'), String(iterations.batch_size.p90));
  assert.equal(await panel.getAttribute('data-duration-p50'), String(iterations.duration_ns.p50));
  const rows = await attrs(page, '[data-testid=iteration-row]', ['data-key', 'data-batch-size', 'data-prefill', 'data-decode', 'data-duration']);
  assert.deepEqual(rows, iterations.iterations.map((i) => ({
    'data-key': `${i.engine}/${i.iteration}`,
    'data-batch-size': String(i.batch_size),
    'data-prefill': String(i.prefill_tokens),
    'data-decode': String(i.decode_tokens),
    'data-duration': String(i.duration_ns),
  })));

  await openTab(page, 'resources');
  const resources = cli('query', FILE, '--kind', 'resources', '--json').resources;
  const kinds = await attrs(page, '[data-testid=resource-kind]', ['data-kind', 'data-capacity', 'data-peak', 'data-deferrals', 'data-rejections']);
  assert.deepEqual(kinds, resources.map((k) => ({
    'data-kind': k.resource_kind,
    'data-capacity': String(k.capacity),
    'data-peak': String(k.peak.level),
    'data-deferrals': String(k.deferrals),
    'data-rejections': String(k.rejections),
  })));
  const holders = await attrs(page, '[data-testid=resource-holder]', ['data-holder', 'data-held']);
  assert.deepEqual(holders, resources.flatMap((k) => k.holders.map((h) => ({ 'data-holder': h.holder, 'data-held': String(h.held) }))));
  const problems = await attrs(page, '[data-testid=resource-problem]', ['data-kind', 'data-holder']);
  assert.deepEqual(problems, resources.flatMap((k) => [
    ...k.underflows.map((u) => ({ 'data-kind': 'underflow', 'data-holder': u.holder })),
    ...k.leaks.map((l) => ({ 'data-kind': 'never released', 'data-holder': l.holder })),
  ]));

  // Each request's waterfall lists the batched forwards that served it.
  await openTab(page, 'requests');
  assert.equal(await page.locator('[data-testid=waterfall]').count(), requests.length);
  assert.deepEqual(seen.errors, []);
  await page.close();
});

test('the serving findings link to the iteration row and the resource kind', async () => {
  const { page, seen } = await openPage('/', { width: 1440, height: 900 });
  await openByPicker(page, FILE);
  const want = cli('findings', '--json', FILE);
  const links = want.findings.filter((f) => f.link?.to === 'row' && ['iterations', 'resources'].includes(f.link.table));
  assert.ok(links.length >= 2, JSON.stringify(want.findings.map((f) => f.rule)));
  for (const f of links) {
    await openTab(page, 'findings');
    await page.click(`[data-testid=finding][data-rule=${f.rule}] [data-testid=finding-link]`);
    await page.waitForSelector('[data-finding-target]', { state: 'attached' });
    const [testid, attr] = f.link.table === 'iterations' ? ['iteration-row', 'data-key'] : ['resource-kind', 'data-kind'];
    const outlined = await page.$$eval('[data-finding-target]', (els, attr) => els.map((e) => [e.dataset.testid, e.getAttribute(attr)]), attr);
    assert.deepEqual(outlined, [[testid, f.link.key]], f.rule);
  }
  assert.deepEqual(seen.errors, []);
  await page.close();
});

// Every file of tests/fixtures/malformed opened in the viewer: the page shows exactly the
// diagnostics `candle-trace validate --json` prints (line, severity, category, in order), files
// the CLI cannot read (exit 2) are shown as unsupported with the CLI's reason, and no page
// error or console error happens along the way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { useHarness, fixtures, root, openPage, openByPicker } from './harness.mjs';

useHarness();

const dir = join(fixtures, 'malformed');
const expected = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8'));
const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort();

/** `validate --json FILE` with its exit code (2: not readable, then stderr says why). */
function validate(file) {
  const bin = process.env.CANDLE_TRACE_BIN;
  const [cmd, argv] = bin
    ? [bin, ['validate', '--json', file]]
    : ['cargo', ['run', '-q', '--release', '-p', 'candle-trace-cli',
        '--bin', 'candle-trace', '--', 'validate', '--json', file]];
  const r = spawnSync(cmd, argv, { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status === 2) return { code: 2, reason: r.stderr.trim().split(`${file}: `).pop() };
  assert.ok(r.status === 0 || r.status === 1, `${file}: exit ${r.status}: ${r.stderr}`);
  return { code: r.status, json: JSON.parse(r.stdout) };
}

async function shownRows(page) {
  return page.$$eval('[data-testid=diagnostic]', (rows) => rows.map((r) => ({
    line: Number(r.dataset.line),
    severity: r.dataset.severity,
    category: r.querySelectorAll('td')[2]?.textContent,
    message: r.querySelectorAll('td')[3]?.textContent,
  })));
}

test('every malformed file shows what the CLI says, and no page error', async () => {
  assert.ok(files.length >= 30, `${files.length} malformed files`);
  const { page, seen } = await openPage();
  for (const name of files) {
    const file = join(dir, name);
    const cli = validate(file);
    assert.equal(cli.code, expected[name].exit, `${name}: CLI exit code`);
    await openByPicker(page, file);
    const rows = await shownRows(page);
    const format = await page.getAttribute('[data-testid=document]', 'data-format');
    if (cli.code === 2) {
      assert.equal(format, 'unsupported', name);
      assert.equal(rows.length, 1, name);
      assert.equal(rows[0].line, 1, name);
      assert.equal(rows[0].severity, 'error', name);
      assert.ok(rows[0].message.includes(cli.reason), `${name}: page says "${rows[0].message}", CLI "${cli.reason}"`);
    } else {
      // The page shows an imported Chrome file as a trace.
      const want = expected[name].format === 'chrome' ? 'trace' : expected[name].format;
      assert.equal(format, want, name);
      const diagnostics = cli.json.diagnostics.map((d) => ({ line: d.line, severity: d.severity, category: d.category, message: d.message }));
      assert.deepEqual(rows, diagnostics, `${name}: diagnostics`);
      const banner = await page.locator('[data-testid=untrusted-banner]').count();
      assert.equal(banner > 0, cli.json.errors > 0, `${name}: untrusted banner`);
    }
    assert.deepEqual(seen.errors, [], `${name}: page or console errors`);
    assert.deepEqual(seen.dialogs, [], `${name}: dialogs`);
  }
  await page.close();
});

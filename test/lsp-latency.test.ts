// Latency of the diagnostics path on a real TypeScript project (this repository): cold time to
// the first fresh answer for src/shadow/shadow.ts, then sync + diagnostics for ~30 one-line edits.
// The numbers are printed; the assertions only check that every answer was fresh and right.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { builtinServers } from '../src/lsp/servers';
import { LanguageServerSession } from '../src/lsp/session';

describe('lsp: latency on this repository', function () {
  this.timeout(300_000);
  const root = path.resolve(__dirname, '..', '..');
  const rel = 'src/shadow/shadow.ts';
  let s: LanguageServerSession | undefined;

  after(async () => {
    await s?.dispose();
  });

  it('measures cold first answer and warm sync+diagnostics p50/p95 for one-line edits', async () => {
    const spec = builtinServers(root).find((x) => x.id === 'typescript');
    assert.ok(spec);
    const base = fs.readFileSync(path.join(root, rel), 'utf8');
    const t0 = performance.now();
    const session = await LanguageServerSession.start(spec, root);
    s = session;
    const v1 = session.sync(rel, 'typescript', base);
    const first = await session.diagnostics(rel, v1, 120_000);
    const cold = performance.now() - t0;
    assert.strictEqual(first.status, 'fresh', first.error);
    const baseErrors = first.diagnostics.filter((d) => d.severity === 1).length;
    const times: number[] = [];
    for (let i = 0; i < 30; i++) {
      // Alternate a clean edit and an edit that adds one type error, at the end of the file.
      const line = i % 2 ? `export const lspProbe${i}: number = ${i};\n` : `export const lspProbe${i}: number = '${i}';\n`;
      const t = performance.now();
      const v = session.sync(rel, 'typescript', base + line);
      const r = await session.diagnostics(rel, v, 30_000);
      times.push(performance.now() - t);
      assert.strictEqual(r.status, 'fresh', r.error);
      assert.strictEqual(r.diagnostics.filter((d) => d.severity === 1).length, baseErrors + (i % 2 ? 0 : 1));
    }
    const sorted = [...times].sort((a, b) => a - b);
    const pct = (p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
    console.log(
      `      cold start to first fresh answer: ${cold.toFixed(0)} ms; warm sync+diagnostics over ${times.length} edits: ` +
        `p50 ${pct(50).toFixed(1)} ms, p95 ${pct(95).toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms`,
    );
  });
});

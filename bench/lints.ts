// The lints section of `npm run bench`: end-to-end time of `lints` (RPC call to answer, through
// the daemon, a shadow of this repository at HEAD, typescript-language-server + tsserver
// inside it) for a one-line edit of src/shadow/shadow.ts: cold (server start included), warm, and two
// agents interleaving on one shadow; side by side with the same server driven directly on the
// folder itself (no shadow, no daemon, no layer switch), reported as ratios. Issue 13's target:
// p50 under 200 ms warm. It reports; every answer is checked to be fresh and right.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { LanguageServerSession } from '../src/lsp/session';
import { builtinServers, serverFor } from '../src/lsp/servers';

export interface LintsRow {
  what: string;
  calls: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
}

export interface LintsBench {
  file: string;
  coldMs: number;
  directColdMs: number;
  rows: LintsRow[];
}

const FILE = 'src/shadow/shadow.ts';

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

function row(what: string, xs: number[]): LintsRow {
  return { what, calls: xs.length, p50Ms: pct(xs, 50), p95Ms: pct(xs, 95), maxMs: Math.max(...xs) };
}

/** The file with one line added: a type error on odd i, a clean line on even i. */
function edited(base: string, i: number, agent: string): string {
  return `${base}\nexport const benchProbe_${agent}_${i}: number = ${i % 2 ? "'not a number'" : i};\n`;
}

export async function lintsBench(repo: string, edits: number, log: (l: string) => void): Promise<LintsBench> {
  const base = fs.readFileSync(path.join(repo, FILE), 'utf8');
  // The direct baseline: the same server on the folder itself, documents synced in memory.
  const m = serverFor(builtinServers(repo), FILE)!;
  let t = performance.now();
  const direct = await LanguageServerSession.start(m.spec, repo);
  const direct0 = await direct.diagnostics(FILE, direct.sync(FILE, m.languageId, edited(base, 0, 'd')), 120_000);
  const directColdMs = performance.now() - t;
  if (direct0.status !== 'fresh') throw new Error(`direct: ${direct0.status} ${direct0.error ?? ''}`);
  const directMs: number[] = [];
  try {
    for (let i = 1; i <= edits; i++) {
      t = performance.now();
      const r = await direct.diagnostics(FILE, direct.sync(FILE, m.languageId, edited(base, i, 'd')), 60_000);
      directMs.push(performance.now() - t);
      if (r.status !== 'fresh') throw new Error(`direct edit ${i}: ${r.status} ${r.error ?? ''}`);
    }
  } finally {
    await direct.dispose();
  }
  // Through the daemon, on a shadow of the repository: a private daemon for this run.
  const runtime = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-bench-rt-'));
  fs.chmodSync(runtime, 0o700);
  const savedRuntime = process.env.XDG_RUNTIME_DIR;
  process.env.XDG_RUNTIME_DIR = runtime;
  const client = await ShadowClient.connect({ clientName: 'bench lints' });
  const daemonPid = client.daemonPid;
  try {
    await client.request('mount', { folder: repo, name: 'bench-lints' });
    const ask = async (agent: string, i: number): Promise<number> => {
      const t0 = performance.now();
      const r = await client.request('lints', {
        shadow: 'bench-lints',
        agent,
        edits: [{ path: FILE, content: edited(base, i, agent) }],
        timeoutMs: 120_000,
      });
      const ms = performance.now() - t0;
      const f = r.files[0];
      const errors = f.introduced.filter((d) => d.severity === 1).length;
      if (f.status !== 'fresh' || errors !== i % 2)
        throw new Error(`lints ${agent} #${i}: ${f.status} with ${errors} introduced errors: ${JSON.stringify(f).slice(0, 300)}`);
      return ms;
    };
    const coldMs = await ask('a', 0);
    log(`lints: cold ${coldMs.toFixed(0)} ms (direct ${directColdMs.toFixed(0)} ms)`);
    const warm: number[] = [];
    for (let i = 1; i <= edits; i++) warm.push(await ask('a', i));
    const two: number[] = [];
    await ask('b', 0); // b's first answer includes its first layer switch and baseline
    await Promise.all(
      ['a', 'b'].map(async (agent) => {
        for (let i = 1; i <= edits / 2; i++) two.push(await ask(agent, edits + i));
      }),
    );
    await client.request('unmount', { shadow: 'bench-lints' });
    const rows = [
      row('direct: tsserver on the folder (no shadow)', directMs),
      row('lints via RPC, one agent (warm)', warm),
      row('lints via RPC, two agents interleaving', two),
    ];
    for (const r of rows) log(`lints: ${r.what}: p50 ${r.p50Ms.toFixed(0)} ms, p95 ${r.p95Ms.toFixed(0)} ms`);
    return { file: FILE, coldMs, directColdMs, rows };
  } finally {
    client.close();
    try {
      process.kill(daemonPid, 'SIGTERM');
    } catch {
      // gone
    }
    process.env.XDG_RUNTIME_DIR = savedRuntime;
  }
}

export function lintsMarkdown(b: LintsBench, quick: boolean): string[] {
  const direct = b.rows[0];
  return [
    '## Lints for a change (issue 13)',
    '',
    `A one-line edit of \`${b.file}\` in a shadow of this repository (typescript-language-server with tsserver, inside the shadow), timed from the RPC call to the answer; every answer checked fresh and with the right introduced errors. "direct" drives the same server on the folder itself, with the document synced in memory: what a tool without a shadow, a daemon or layer switches would pay.${quick ? ' Quick mode: fewer edits.' : ''} Target: p50 under 200 ms warm.`,
    '',
    '| | calls | p50 ms | p95 ms | max ms | p50 vs direct |',
    '|---|---|---|---|---|---|',
    ...b.rows.map(
      (r) =>
        `| ${r.what} | ${r.calls} | ${r.p50Ms.toFixed(0)} | ${r.p95Ms.toFixed(0)} | ${r.maxMs.toFixed(0)} | ${(r.p50Ms / direct.p50Ms).toFixed(2)}× |`,
    ),
    '',
    `Cold (server start to the first answer): ${b.coldMs.toFixed(0)} ms through the daemon, ${b.directColdMs.toFixed(0)} ms direct.`,
    '',
  ];
}

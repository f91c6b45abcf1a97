// The LSP client layer against real language servers (typescript-language-server, pyright) on
// temporary project folders: answers must be fresh for the version asked, or say they are not.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { Diagnostic, TextEdit } from 'vscode-languageserver-protocol';
import { builtinServers, loadServerConfig, LspConfigError, serverFor } from '../src/lsp/servers';
import type { ServerSpec } from '../src/lsp/servers';
import { LanguageServerSession } from '../src/lsp/session';
import { ServerPool } from '../src/lsp/pool';
import { running } from './helpers/hooks';

const tmpDirs: string[] = [];
const sessions: LanguageServerSession[] = [];
const pools: ServerPool[] = [];

function project(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-lsp-'));
  tmpDirs.push(dir);
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  return dir;
}

async function start(spec: ServerSpec, root: string): Promise<LanguageServerSession> {
  const s = await LanguageServerSession.start(spec, root);
  sessions.push(s);
  return s;
}

/** Process ids in a process group (the session's server and everything it started). */
function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // fields: state ppid pgrp ...; a zombie is already dead
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') out.push(Number(name));
    } catch {
      // gone while we looked
    }
  }
  return out;
}

/** Waits (up to 30 s) until a process group is empty; returns what is left. */
async function groupGone(pgid: number): Promise<number[]> {
  const until = Date.now() + 30_000;
  let left = groupMembers(pgid);
  while (left.length > 0 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
    left = groupMembers(pgid);
  }
  return left;
}

function applyEdits(text: string, edits: TextEdit[]): string {
  const lines = text.split('\n');
  const offset = (p: { line: number; character: number }): number =>
    lines.slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + p.character;
  const sorted = [...edits].sort((a, b) => offset(b.range.start) - offset(a.range.start));
  let out = text;
  for (const e of sorted) out = out.slice(0, offset(e.range.start)) + e.newText + out.slice(offset(e.range.end));
  return out;
}

const errorsOnly = (ds: Diagnostic[]): Diagnostic[] => ds.filter((d) => d.severity === 1);

const TSCONFIG = JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', module: 'commonjs', noEmit: true } });

after(async function () {
  this.timeout(30_000);
  await Promise.all(pools.map((p) => p.dispose()));
  await Promise.all(sessions.map((s) => s.dispose()));
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('lsp: server specs and config', () => {
  it('maps files to servers by ending and picks the folder’s own tsserver when it has one', () => {
    const root = project({ 'node_modules/typescript/lib/tsserver.js': '', 'node_modules/typescript/package.json': '{}' });
    const specs = builtinServers(root);
    assert.strictEqual(serverFor(specs, 'src/a.ts')?.languageId, 'typescript');
    assert.strictEqual(serverFor(specs, 'src/a.tsx')?.languageId, 'typescriptreact');
    assert.strictEqual(serverFor(specs, 'a.mjs')?.languageId, 'javascript');
    assert.strictEqual(serverFor(specs, 'pkg/m.py')?.spec.id, 'pyright');
    assert.strictEqual(serverFor(specs, 'README.md'), undefined);
    assert.strictEqual(serverFor(specs, '.ts'), undefined);
    const ts = specs.find((s) => s.id === 'typescript');
    assert.deepStrictEqual(ts?.initializationOptions, {
      tsserver: { path: path.join(root, 'node_modules/typescript/lib/tsserver.js') },
      disableAutomaticTypingAcquisition: true,
    });
    assert.strictEqual(ts?.command, process.execPath);
    const bare = builtinServers(project({})).find((s) => s.id === 'typescript');
    const p = (bare?.initializationOptions as { tsserver: { path: string } }).tsserver.path;
    assert.ok(fs.existsSync(p), p);
  });

  it('reads .shadowfs/lsp.json and rejects bad shapes with the field named', () => {
    assert.deepStrictEqual(loadServerConfig(project({})), []);
    const good = project({
      '.shadowfs/lsp.json': JSON.stringify({
        servers: [
          {
            id: 'rust',
            command: 'rust-analyzer',
            languages: [{ languageId: 'rust', extensions: ['.rs'] }],
            initializationOptions: { a: 1 },
          },
        ],
      }),
    });
    const specs = loadServerConfig(good);
    assert.deepStrictEqual(specs, [
      {
        id: 'rust',
        command: 'rust-analyzer',
        args: [],
        languages: [{ languageId: 'rust', extensions: ['.rs'] }],
        initializationOptions: { a: 1 },
      },
    ]);
    assert.strictEqual(serverFor(specs, 'src/main.rs')?.spec.id, 'rust');
    const bad = (doc: unknown, re: RegExp): void => {
      const root = project({ '.shadowfs/lsp.json': typeof doc === 'string' ? doc : JSON.stringify(doc) });
      assert.throws(
        () => loadServerConfig(root),
        (e: unknown) => e instanceof LspConfigError && re.test(e.message),
      );
    };
    bad('{', /not valid JSON/);
    bad({ server: [] }, /"servers"/);
    bad({ servers: [{ command: 'x', languages: [{ languageId: 'x', extensions: ['.x'] }] }] }, /servers\[0\]\.id/);
    bad({ servers: [{ id: 'x', command: 'x', args: [1], languages: [{ languageId: 'x', extensions: ['.x'] }] }] }, /servers\[0\]\.args/);
    bad({ servers: [{ id: 'x', command: 'x', languages: [{ languageId: 'x', extensions: ['x'] }] }] }, /languages\[0\]\.extensions/);
    bad({ servers: [{ id: 'x', command: 'x', languages: [] }] }, /servers\[0\]\.languages/);
  });
});

describe('lsp: typescript-language-server', function () {
  this.timeout(120_000);
  let root: string;
  let ts: LanguageServerSession;

  before(async () => {
    root = project({
      'tsconfig.json': TSCONFIG,
      'src/lib.ts': 'export function greet(name: string): string {\n  return `hi ${name}`;\n}\n',
      'src/main.ts': "import { greet } from './lib';\n\nexport const a = greet('x');\nexport const b = greet('y');\n",
      'src/plain.js': '// @ts-check\nconst n = 1;\nn = 2;\n',
    });
    const spec = builtinServers(root).find((s) => s.id === 'typescript');
    assert.ok(spec);
    ts = await start(spec, root);
  });

  it('returns a type error fresh with its range, and an empty fresh list once fixed', async () => {
    const v1 = ts.sync('src/err.ts', 'typescript', 'export const x: number = "s";\n');
    const r1 = await ts.diagnostics('src/err.ts', v1, 60_000);
    assert.strictEqual(r1.status, 'fresh', r1.error);
    const errs = errorsOnly(r1.diagnostics);
    assert.strictEqual(errs.length, 1, JSON.stringify(r1));
    assert.match(String(errs[0].message), /not assignable to type 'number'/);
    assert.deepStrictEqual(errs[0].range, { start: { line: 0, character: 13 }, end: { line: 0, character: 14 } });
    assert.strictEqual(errs[0].code, 2322);
    const v2 = ts.sync('src/err.ts', 'typescript', 'export const x: number = 1;\n');
    assert.strictEqual(v2, v1 + 1);
    assert.strictEqual(ts.sync('src/err.ts', 'typescript', 'export const x: number = 1;\n'), v2, 'unchanged text keeps the version');
    const r2 = await ts.diagnostics('src/err.ts', v2, 30_000);
    assert.deepStrictEqual([r2.status, r2.diagnostics], ['fresh', []]);
  });

  it('answers for the last version after quick edits, and never with an older version’s', async () => {
    const texts = (i: number): string => (i % 2 ? `export const q: number = ${i};\n` : `export const q: number = "${i}";\n`);
    // A burst without waiting: only the last version counts.
    let v = 0;
    for (let i = 0; i < 8; i++) v = ts.sync('src/quick.ts', 'typescript', texts(i));
    const last = await ts.diagnostics('src/quick.ts', v, 60_000);
    assert.strictEqual(last.status, 'fresh', last.error);
    assert.deepStrictEqual(errorsOnly(last.diagnostics), [], 'text 7 is clean');
    // Asking for a superseded version is an error, not the newer version's list.
    const old = await ts.diagnostics('src/quick.ts', v - 1, 5_000);
    assert.strictEqual(old.status, 'error');
    // Edit-ask alternation: every answer matches the text just sent (clean -> error -> clean ...).
    for (let i = 8; i < 20; i++) {
      const vi = ts.sync('src/quick.ts', 'typescript', texts(i));
      const r = await ts.diagnostics('src/quick.ts', vi, 30_000);
      assert.strictEqual(r.status, 'fresh', r.error);
      assert.strictEqual(errorsOnly(r.diagnostics).length, i % 2 ? 0 : 1, `edit ${i}: ${JSON.stringify(r.diagnostics)}`);
    }
    // A request in flight when the next edit arrives does not come back as fresh.
    const vA = ts.sync('src/quick.ts', 'typescript', texts(1));
    const pending = ts.diagnostics('src/quick.ts', vA, 30_000);
    const vB = ts.sync('src/quick.ts', 'typescript', texts(2));
    const [ra, rb] = await Promise.all([pending, ts.diagnostics('src/quick.ts', vB, 30_000)]);
    assert.notStrictEqual(ra.status, 'fresh', JSON.stringify(ra));
    assert.strictEqual(rb.status, 'fresh', rb.error);
    assert.strictEqual(errorsOnly(rb.diagnostics).length, 1);
  });

  it('checks a JavaScript file', async () => {
    const text = fs.readFileSync(path.join(root, 'src/plain.js'), 'utf8');
    const v = ts.sync('src/plain.js', 'javascript', text);
    const r = await ts.diagnostics('src/plain.js', v, 30_000);
    assert.strictEqual(r.status, 'fresh', r.error);
    const errs = errorsOnly(r.diagnostics);
    assert.strictEqual(errs.length, 1, JSON.stringify(r.diagnostics));
    assert.match(String(errs[0].message), /Cannot assign to 'n' because it is a constant/);
    assert.strictEqual(errs[0].range.start.line, 2);
  });

  it('finds definition, references and hover at positions', async () => {
    const main = fs.readFileSync(path.join(root, 'src/main.ts'), 'utf8');
    const lib = fs.readFileSync(path.join(root, 'src/lib.ts'), 'utf8');
    ts.sync('src/lib.ts', 'typescript', lib);
    ts.sync('src/main.ts', 'typescript', main);
    const callAt = { line: 2, character: 17 }; // inside "greet" of `export const a = greet('x');`
    const def = await ts.definition('src/main.ts', callAt, 30_000);
    assert.strictEqual(def.status, 'fresh', def.error);
    assert.deepStrictEqual(
      def.value.map((p) => [p.relPath, p.range.start]),
      [['src/lib.ts', { line: 0, character: 16 }]],
    );
    const refs = await ts.references('src/lib.ts', { line: 0, character: 18 }, 30_000);
    assert.strictEqual(refs.status, 'fresh', refs.error);
    const at = refs.value.map((p) => `${p.relPath}:${p.range.start.line}:${p.range.start.character}`).sort();
    assert.deepStrictEqual(at, ['src/lib.ts:0:16', 'src/main.ts:0:9', 'src/main.ts:2:17', 'src/main.ts:3:17']);
    const hover = await ts.hover('src/main.ts', callAt, 30_000);
    assert.strictEqual(hover.status, 'fresh', hover.error);
    assert.match(hover.value?.text ?? '', /greet\(name: string\): string/);
    assert.deepStrictEqual(hover.value?.range?.start, { line: 2, character: 17 });
  });

  it('offers a code action whose edit fixes the diagnostic (unused variable)', async () => {
    const text = 'export function f(): number {\n  const unused = 1;\n  return 2;\n}\n';
    const v = ts.sync('src/fixme.ts', 'typescript', text);
    const r = await ts.diagnostics('src/fixme.ts', v, 30_000);
    assert.strictEqual(r.status, 'fresh', r.error);
    const unused = r.diagnostics.find((d) => d.code === 6133);
    assert.ok(unused, JSON.stringify(r.diagnostics));
    assert.deepStrictEqual(unused.tags, [1], 'marked unnecessary');
    const actions = await ts.codeActions('src/fixme.ts', unused.range, [unused], 30_000);
    assert.strictEqual(actions.status, 'fresh', actions.error);
    const fix = actions.value.find((a) => /remove unused/i.test(a.title) && a.edits.length > 0);
    assert.ok(fix, JSON.stringify(actions.value.map((a) => a.title)));
    assert.strictEqual(fix.kind, 'quickfix');
    assert.strictEqual(fix.edits[0].relPath, 'src/fixme.ts');
    const fixed = applyEdits(text, fix.edits[0].edits);
    assert.doesNotMatch(fixed, /unused/);
    const v2 = ts.sync('src/fixme.ts', 'typescript', fixed);
    const r2 = await ts.diagnostics('src/fixme.ts', v2, 30_000);
    assert.deepStrictEqual([r2.status, r2.diagnostics], ['fresh', []]);
  });

  it('sees a dependency changed on disk after filesChanged and a re-sync', async () => {
    const v = ts.sync('src/dep-user.ts', 'typescript', "import { k } from './dep';\nexport const m: number = k;\n");
    fs.writeFileSync(path.join(root, 'src/dep.ts'), 'export const k = 1;\n');
    ts.filesChanged([{ relPath: 'src/dep.ts', type: 'created' }]);
    const v2 = ts.sync('src/dep-user.ts', 'typescript', "import { k } from './dep';\nexport const m: number = k;\n");
    assert.strictEqual(v2, v + 1, 'filesChanged makes the next sync a new version');
    const r = await ts.diagnostics('src/dep-user.ts', v2, 30_000);
    assert.deepStrictEqual([r.status, errorsOnly(r.diagnostics)], ['fresh', []]);
    fs.writeFileSync(path.join(root, 'src/dep.ts'), "export const k = 'now a string';\n");
    ts.filesChanged([{ relPath: 'src/dep.ts', type: 'changed' }]);
    const v3 = ts.sync('src/dep-user.ts', 'typescript', "import { k } from './dep';\nexport const m: number = k;\n");
    const r3 = await ts.diagnostics('src/dep-user.ts', v3, 30_000);
    assert.strictEqual(r3.status, 'fresh', r3.error);
    assert.strictEqual(errorsOnly(r3.diagnostics).length, 1, JSON.stringify(r3.diagnostics));
  });
});

describe('lsp: pyright', function () {
  this.timeout(120_000);

  it('returns a Python type error fresh and follows edits by version', async () => {
    const root = project({ 'm.py': '' });
    const spec = builtinServers(root).find((s) => s.id === 'pyright');
    assert.ok(spec);
    const py = await start(spec, root);
    const bad = 'def f(a: int) -> int:\n    return "s"\n';
    const good = 'def f(a: int) -> int:\n    return a\n';
    const v1 = py.sync('m.py', 'python', bad);
    const r1 = await py.diagnostics('m.py', v1, 60_000);
    assert.strictEqual(r1.status, 'fresh', r1.error);
    const errs = errorsOnly(r1.diagnostics);
    assert.strictEqual(errs.length, 1, JSON.stringify(r1.diagnostics));
    assert.match(String(errs[0].message), /not assignable to return type "int"/);
    assert.deepStrictEqual(errs[0].range.start, { line: 1, character: 11 });
    // a burst: only the last version's publish is awaited, and it is the clean text
    let v = v1;
    for (let i = 0; i < 6; i++) v = py.sync('m.py', 'python', i % 2 ? good : bad + `# ${i}\n`);
    const r = await py.diagnostics('m.py', v, 30_000);
    assert.deepStrictEqual([r.status, errorsOnly(r.diagnostics)], ['fresh', []]);
    const v2 = py.sync('m.py', 'python', bad);
    const r2 = await py.diagnostics('m.py', v2, 30_000);
    assert.strictEqual(r2.status, 'fresh', r2.error);
    assert.strictEqual(errorsOnly(r2.diagnostics).length, 1);
  });
});

describe('lsp: failures are reported, processes do not outlive their session', function () {
  this.timeout(120_000);

  it('a killed server gives status error, and the pool restarts it on the next use', async () => {
    const root = project({ 'tsconfig.json': TSCONFIG, 'a.ts': 'export const a = 1;\n' });
    const spec = builtinServers(root).find((s) => s.id === 'typescript');
    assert.ok(spec);
    const pool = new ServerPool(root);
    pools.push(pool);
    const s1 = await pool.get(spec);
    const v = s1.sync('a.ts', 'typescript', 'export const a: number = 1;\n');
    assert.strictEqual((await s1.diagnostics('a.ts', v, 60_000)).status, 'fresh');
    // Kill it while a diagnostics request is in flight.
    const v2 = s1.sync('a.ts', 'typescript', 'export const a: number = 2;\n');
    const pending = s1.diagnostics('a.ts', v2, 30_000);
    process.kill(s1.pid, 'SIGKILL');
    const r = await pending;
    assert.strictEqual(r.status, 'error', JSON.stringify(r));
    assert.match(r.error ?? '', /exited/);
    assert.deepStrictEqual(r.diagnostics, []);
    await new Promise<void>((resolve) => s1.onExit(() => resolve()));
    assert.deepStrictEqual(await groupGone(s1.pid), [], 'tsserver went with its language server');
    const after = await s1.diagnostics('a.ts', v2, 1000);
    assert.strictEqual(after.status, 'error');
    const s2 = await pool.get(spec);
    assert.notStrictEqual(s2, s1);
    const v3 = s2.sync('a.ts', 'typescript', 'export const a: number = "x";\n');
    const r3 = await s2.diagnostics('a.ts', v3, 60_000);
    assert.strictEqual(r3.status, 'fresh', r3.error);
    assert.strictEqual(errorsOnly(r3.diagnostics).length, 1);
    assert.strictEqual(await pool.get(spec), s2, 'kept warm');
    await pool.dispose();
    assert.ok(s2.exited);
    assert.deepStrictEqual(await groupGone(s2.pid), []);
  });

  it('a server that never answers diagnostics gives a timeout at the deadline, and dispose kills it', async () => {
    const root = project({ 'a.txt': '' });
    const spec: ServerSpec = {
      id: 'hang',
      command: process.execPath,
      args: [path.join(__dirname, 'fixtures', 'lsp', 'hang-server.js')],
      languages: [{ languageId: 'plaintext', extensions: ['.txt'] }],
    };
    const s = await start(spec, root);
    const v = s.sync('a.txt', 'plaintext', 'hello');
    const t0 = Date.now();
    const r = await s.diagnostics('a.txt', v, 500);
    const took = Date.now() - t0;
    assert.strictEqual(r.status, 'timeout');
    assert.deepStrictEqual(r.diagnostics, []);
    // It waited for the deadline (not less); how much longer depends on the machine, so that is
    // printed, not asserted.
    assert.ok(took >= 450, `gave up after ${took} ms, before the 500 ms deadline`);
    console.log(`      (timeout reported after ${took} ms for a 500 ms deadline)`);
    const h = await s.hover('a.txt', { line: 0, character: 0 }, 300);
    assert.strictEqual(h.status, 'timeout');
    await s.dispose(500);
    assert.ok(s.exited);
    assert.deepStrictEqual(await groupGone(s.pid), []);
  });

  it('dispose shuts real servers down and leaves no process of theirs', async () => {
    const root = project({ 'tsconfig.json': TSCONFIG, 'a.ts': 'export const a = 1;\n', 'm.py': 'x = 1\n' });
    const pool = new ServerPool(root);
    pools.push(pool);
    const [tsSpec, pySpec] = builtinServers(root);
    const a = await pool.get(tsSpec);
    const b = await pool.get(pySpec);
    const va = a.sync('a.ts', 'typescript', 'export const a = 1;\n');
    const vb = b.sync('m.py', 'python', 'x = 1\n');
    assert.strictEqual((await a.diagnostics('a.ts', va, 60_000)).status, 'fresh');
    assert.strictEqual((await b.diagnostics('m.py', vb, 60_000)).status, 'fresh');
    const pids = [...groupMembers(a.pid), ...groupMembers(b.pid)];
    assert.ok(pids.length >= 3, `tsls + tsserver(s) + pyright: ${pids.join(',')}`);
    await pool.dispose();
    const living = (): number[] => pids.filter(running);
    // Killed processes may take a moment to go on a busy machine.
    const until = Date.now() + 30_000;
    while (living().length > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.deepStrictEqual(living(), []);
    await assert.rejects(pool.get(tsSpec), /disposed/);
  });

  it('a server’s temporary files go with it (typescript-language-server’s cancellation folders)', async () => {
    const root = project({ 'tsconfig.json': TSCONFIG, 'a.ts': 'export const a = 1;\n' });
    const spec = builtinServers(root).find((x) => x.id === 'typescript');
    assert.ok(spec);
    // The system's temporary directory, as this process and the server would see it: an empty
    // one of the test's own, for the start only (the session makes the server's directory in it
    // before start() first waits).
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-lsp-tmpdir-'));
    tmpDirs.push(tmp);
    // What a killed daemon left (its pid is gone), and what a running one has (its parent's).
    const gone = spawnSync(process.execPath, ['-e', '0']).pid;
    fs.mkdirSync(path.join(tmp, `shadowfs-server-tmp-${gone}-abcdef`, 'x'), { recursive: true });
    const live = `shadowfs-server-tmp-${process.ppid}-abcdef`;
    fs.mkdirSync(path.join(tmp, live));
    const was = process.env.TMPDIR;
    let started: Promise<LanguageServerSession>;
    process.env.TMPDIR = tmp;
    try {
      started = LanguageServerSession.start(spec, root);
    } finally {
      if (was === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = was;
    }
    const s = await started;
    sessions.push(s);
    const v = s.sync('a.ts', 'typescript', 'export const a = 1;\n');
    assert.strictEqual((await s.diagnostics('a.ts', v, 60_000)).status, 'fresh');
    const own = fs.readdirSync(tmp).filter((n) => n !== live);
    assert.strictEqual(own.length, 1, `the server's own directory and nothing else (a gone daemon's removed): ${own.join(', ')}`);
    assert.match(own[0], new RegExp(`^shadowfs-server-tmp-${process.pid}-`));
    assert.ok(fs.readdirSync(path.join(tmp, own[0])).length > 0, 'tsserver made its folders in the server’s directory');
    await s.dispose();
    assert.deepStrictEqual(await groupGone(s.pid), []);
    // Removed once the server's pipes close, which may come a moment after dispose.
    const until = Date.now() + 30_000;
    while (fs.readdirSync(tmp).length > 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.deepStrictEqual(fs.readdirSync(tmp), [live], 'nothing of the server’s left in the temporary directory');
  });

  it('the pool stops a server idle for idleMs', async () => {
    const root = project({ 'm.py': 'x = 1\n' });
    const pool = new ServerPool(root, { idleMs: 300 });
    pools.push(pool);
    const spec = builtinServers(root)[1];
    const s = await pool.get(spec);
    await new Promise<void>((resolve) => s.onExit(() => resolve()));
    assert.deepStrictEqual(pool.running(), []);
    const s2 = await pool.get(spec);
    assert.notStrictEqual(s2, s);
    await pool.dispose();
  });
});

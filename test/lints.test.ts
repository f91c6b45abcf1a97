// The lints service on real language servers (typescript-language-server with tsserver,
// pyright) running inside real shadows: introduced vs existing diagnostics, undo, agents that
// never see each other's edits, Python, a crashed and a hanging server, definition/references/
// hover as the agent's layer shows the code, and the CLI. The folder is guarded throughout.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { LintsService } from '../src/lints/service';
import { FolderChanges } from '../src/shadow/folder-changes';
import { writeText } from '../src/work/files';
import type { Shadow } from '../src/shadow';
import { eventually, repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const A_TS = 'export function add(a: number, b: number): number {\n  return a + b;\n}\n';
const B_TS = "import { add } from './a';\n\nexport const three = add(1, 2);\n";
const OLD_TS = "export const wrong: number = 'not a number';\n";

/** A small strict TypeScript project with one error of its own (src/old.ts), and a Python file. */
function makeTsProject(): string {
  const dir = tempDir('lsp-lower');
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "name": "lsp-fixture", "private": true }\n');
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify(
      { compilerOptions: { strict: true, noUnusedLocals: true, target: 'ES2022', module: 'commonjs', noEmit: true }, include: ['src'] },
      null,
      2,
    ),
  );
  fs.writeFileSync(path.join(dir, 'src', 'a.ts'), A_TS);
  fs.writeFileSync(path.join(dir, 'src', 'b.ts'), B_TS);
  fs.writeFileSync(path.join(dir, 'src', 'old.ts'), OLD_TS);
  fs.writeFileSync(path.join(dir, 'calc.py'), 'def double(x: int) -> int:\n    return x * 2\n\n\nresult = double(4)\n');
  return dir;
}

async function withService<T>(fn: (svc: LintsService, shadow: Shadow) => Promise<T>, lower = makeTsProject()): Promise<T> {
  return withShadow(lower, async (shadow) => {
    const svc = new LintsService(shadow);
    try {
      return await fn(svc, shadow);
    } finally {
      await svc.dispose();
    }
  });
}

/**
 * Writes `content` to `rel` in the folder itself (as you would), and returns once the shadow
 * shows it and a change feed of the test's own has reported it: the service's feed (the same
 * journal on fuse_ll, an fs.watch fed by the same kernel event otherwise) has it by then, so a
 * question asked next comes after the edit, never racing it.
 */
async function editInFolder(shadow: Shadow, lower: string, rel: string, content: string): Promise<void> {
  const probe = new FolderChanges(shadow);
  const seen = new Set<string>();
  fs.writeFileSync(path.join(lower, rel), content);
  try {
    await eventually(
      () => {
        probe.take().paths.forEach((p) => seen.add(p));
        return seen.has(rel) && fs.readFileSync(path.join(shadow.mountPoint, rel), 'utf8') === content;
      },
      20_000,
      'the edit to be reported and shown by the mount',
    );
  } finally {
    probe.dispose();
  }
  await new Promise((r) => setImmediate(r));
}

describe('lints: diagnostics from warm language servers inside the shadow', function () {
  this.timeout(180_000);
  after(() => stopTestDaemon());

  it("an agent's type error is introduced (with its range), the folder's own error is existing, and undoing clears it", async () => {
    await withService(async (svc) => {
      const r = await svc.lints({
        shadow: 's',
        agent: 'alice',
        edits: [{ path: 'src/b.ts', content: B_TS.replace('add(1, 2)', "add('1', 2)") }],
        paths: ['src/b.ts', 'src/old.ts'],
        timeoutMs: 60_000,
      });
      const [b, old] = r.files;
      assert.strictEqual(b.status, 'fresh', JSON.stringify(b));
      assert.strictEqual(b.introduced.length, 1, JSON.stringify(b));
      const d = b.introduced[0];
      assert.strictEqual(d.severity, 1);
      assert.match(d.message, /string.*not assignable.*number/i);
      assert.deepStrictEqual(d.range.start, { line: 2, character: 25 }, 'the range of the argument');
      assert.strictEqual(old.status, 'fresh', JSON.stringify(old));
      assert.strictEqual(old.introduced.length, 0, JSON.stringify(old));
      assert.strictEqual(old.existing.length, 1, 'the error the folder already has');
      const undone = await svc.lints({ shadow: 's', agent: 'alice', edits: [{ path: 'src/b.ts', content: B_TS }], timeoutMs: 60_000 });
      assert.strictEqual(undone.files[0].status, 'fresh');
      assert.deepStrictEqual(undone.files[0].introduced, [], JSON.stringify(undone.files[0]));
      // A range edit on the agent's content, and a file no server takes.
      const ranged = await svc.lints({
        shadow: 's',
        agent: 'alice',
        edits: [
          { path: 'src/b.ts', edits: [{ range: { start: { line: 2, character: 25 }, end: { line: 2, character: 26 } }, newText: 'true' }] },
        ],
        paths: ['src/b.ts', 'package.json'],
        timeoutMs: 60_000,
      });
      assert.strictEqual(ranged.files[0].introduced.length, 1, JSON.stringify(ranged.files[0]));
      assert.match(ranged.files[0].introduced[0].message, /boolean/);
      assert.strictEqual(ranged.files[1].status, 'unsupported');
    });
  });

  it("servers run confined like runs, with none of the daemon's environment, and never a tsserver from an agent's layer", async () => {
    const ns = (pid: number | string, kind: string): string => fs.readlinkSync(`/proc/${pid}/ns/${kind}`);
    const childrenOf = (pid: number): number[] =>
      fs
        .readdirSync('/proc')
        .filter((e) => /^\d+$/.test(e))
        .filter((e) => {
          try {
            return Number(fs.readFileSync(`/proc/${e}/stat`, 'utf8').split(') ')[1].split(' ')[1]) === pid;
          } catch {
            return false;
          }
        })
        .map(Number);
    process.env.SHADOWFS_TEST_SECRET = 'daemon-only';
    try {
      await withService(async (svc) => {
        // A TypeScript of the agent's own making: it would end the server at once if it were run.
        await svc.lints({
          shadow: 's',
          agent: 'mallory',
          edits: [
            { path: 'node_modules/typescript/package.json', content: '{ "name": "typescript", "version": "9.9.9" }\n' },
            { path: 'node_modules/typescript/lib/tsserver.js', content: 'process.exit(3);\n' },
          ],
          timeoutMs: 60_000,
        });
        const r = await svc.lints({
          shadow: 's',
          agent: 'mallory',
          edits: [{ path: 'src/b.ts', content: B_TS.replace('add(1, 2)', "add('1', 2)") }],
          timeoutMs: 60_000,
        });
        assert.strictEqual(r.files[0].status, 'fresh', JSON.stringify(r.files[0]));
        assert.strictEqual(r.files[0].introduced.length, 1, JSON.stringify(r.files[0]));
        const [server] = svc.runningServers();
        assert.ok(server, 'a server runs');
        // The launcher (outside) starts the run's init, in a PID namespace of its own, whose
        // child, the server, is in a user namespace of its own too.
        const [init] = childrenOf(server.pid);
        assert.ok(init, 'the launcher has started the init of the namespace');
        assert.notStrictEqual(ns(init, 'pid_for_children'), ns('self', 'pid'), 'the server has a PID namespace of its own');
        const [proc] = childrenOf(init);
        assert.ok(proc, 'the init has started the server');
        assert.notStrictEqual(ns(proc, 'user'), ns('self', 'user'));
        assert.notStrictEqual(ns(proc, 'mnt'), ns('self', 'mnt'));
        const environ = fs.readFileSync(`/proc/${proc}/environ`, 'latin1');
        assert.ok(!environ.includes('SHADOWFS_TEST_SECRET'), 'the daemon environment is not passed on');
      });
    } finally {
      delete process.env.SHADOWFS_TEST_SECRET;
    }
  });

  it('two agents with conflicting edits on one shadow get answers that never mix', async () => {
    await withService(async (svc) => {
      // alice makes add() take strings (so the folder's b.ts breaks for her); bob passes strings
      // to the folder's add() (so his b.ts breaks against numbers). Asked at the same time, over
      // and over, each must see only their own world.
      const alice = { path: 'src/a.ts', content: A_TS.replace(/number/g, 'string') };
      const bob = { path: 'src/b.ts', content: B_TS.replace('add(1, 2)', "add('x', 'y')") };
      for (let round = 0; round < 3; round++) {
        const [ra, rb] = await Promise.all([
          svc.lints({ shadow: 's', agent: 'alice', edits: round === 0 ? [alice] : undefined, paths: ['src/b.ts'], timeoutMs: 60_000 }),
          svc.lints({ shadow: 's', agent: 'bob', edits: round === 0 ? [bob] : undefined, paths: ['src/b.ts'], timeoutMs: 60_000 }),
        ]);
        const a = ra.files[0];
        const b = rb.files[0];
        assert.strictEqual(a.status, 'fresh', JSON.stringify(a));
        assert.strictEqual(b.status, 'fresh', JSON.stringify(b));
        assert.ok(a.introduced.length >= 1, JSON.stringify(a));
        assert.ok(b.introduced.length >= 1, JSON.stringify(b));
        for (const d of a.introduced) assert.match(d.message, /number.*not assignable.*string/i, `alice sees her own a.ts: ${d.message}`);
        for (const d of b.introduced)
          assert.match(d.message, /string.*not assignable.*number/i, `bob sees the folder's a.ts: ${d.message}`);
      }
    });
  });

  it("an edit you make in the folder itself reaches the agent's answers (documents the server has open follow the mount)", async () => {
    const lower = makeTsProject();
    await withShadow(
      lower,
      async (shadow) => {
        const svc = new LintsService(shadow);
        try {
          // The agent's b.ts calls add(1, 2); a.ts is opened by the server while the agent's
          // layer holds it, then the agent drops its copy.
          const layer = shadow.layer('u');
          await layer.write('src/a.ts', A_TS);
          const r1 = await svc.lints({ shadow: 's', agent: 'u', paths: ['src/a.ts', 'src/b.ts'], timeoutMs: 60_000 });
          assert.deepStrictEqual(r1.files[1].introduced, [], JSON.stringify(r1.files[1]));
          await layer.reset();
          // You change add() in your folder to take strings: the agent's unchanged b.ts now breaks.
          await editInFolder(shadow, lower, 'src/a.ts', A_TS.replace(/number/g, 'string'));
          const r2 = await svc.lints({ shadow: 's', agent: 'u', paths: ['src/b.ts'], timeoutMs: 60_000 });
          const b = r2.files[0];
          assert.strictEqual(b.status, 'fresh', JSON.stringify(b));
          assert.ok(
            [...b.introduced, ...b.existing].some((d) => /number.*not assignable.*string/i.test(d.message)),
            JSON.stringify(b),
          );
        } finally {
          await svc.dispose();
        }
      },
      { guard: false }, // this test writes the folder itself, as you would
    );
  });

  it('an edit in the folder to a file the server only read (never opened) reaches it, and the cached baseline follows', async () => {
    const lower = makeTsProject();
    await withShadow(
      lower,
      async (shadow) => {
        const svc = new LintsService(shadow);
        try {
          // The agent touches b.ts only; the server reads a.ts through b.ts's import.
          const edits = [{ path: 'src/b.ts', content: B_TS + '// the agent was here\n' }];
          const r1 = await svc.lints({ shadow: 's', agent: 'u', edits, timeoutMs: 60_000 });
          assert.strictEqual(r1.files[0].status, 'fresh', JSON.stringify(r1.files[0]));
          assert.deepStrictEqual([...r1.files[0].introduced, ...r1.files[0].existing], [], JSON.stringify(r1.files[0]));
          const r1b = await svc.lints({ shadow: 's', agent: 'u', paths: ['src/b.ts'], timeoutMs: 60_000 });
          assert.strictEqual(r1b.files[0].baseline, 'cached', 'the baseline is cached while the folder holds still');
          // You change add() in your folder to take strings: b.ts (yours and the agent's) breaks.
          await editInFolder(shadow, lower, 'src/a.ts', A_TS.replace(/number/g, 'string'));
          const r2 = await svc.lints({ shadow: 's', agent: 'u', paths: ['src/b.ts'], timeoutMs: 60_000 });
          const b = r2.files[0];
          assert.strictEqual(b.status, 'fresh', JSON.stringify(b));
          assert.notStrictEqual(b.baseline, 'cached', 'the folder changed: its baseline is computed again');
          assert.deepStrictEqual(b.introduced, [], `the folder has the same error, so it is not the agent's: ${JSON.stringify(b)}`);
          assert.ok(
            b.existing.some((d) => /number.*not assignable.*string/i.test(d.message)),
            `the server saw the folder's new a.ts: ${JSON.stringify(b)}`,
          );
        } finally {
          await svc.dispose();
        }
      },
      { guard: false }, // this test writes the folder itself, as you would
    );
  });

  it('a Python type error through pyright', async () => {
    await withService(async (svc) => {
      const r = await svc.lints({
        shadow: 's',
        agent: 'py',
        edits: [{ path: 'calc.py', content: 'def double(x: int) -> int:\n    return x * 2\n\n\nresult = double("four")\n' }],
        timeoutMs: 90_000,
      });
      const f = r.files[0];
      assert.strictEqual(f.status, 'fresh', JSON.stringify(f));
      assert.strictEqual(f.server, 'pyright');
      assert.ok(
        f.introduced.some((d) => d.severity === 1 && /four.*int/s.test(d.message)),
        JSON.stringify(f),
      );
    });
  });

  it("definition, references and hover answer as the agent's layer shows the code", async () => {
    await withService(async (svc) => {
      // The agent moves add() down three lines: positions must follow its layer, not the folder.
      await svc.lints({
        shadow: 's',
        agent: 'nav',
        edits: [{ path: 'src/a.ts', content: `// one\n// two\n// three\n${A_TS}` }],
        timeoutMs: 60_000,
      });
      const at = { line: 2, character: 21 }; // "add" in src/b.ts
      const def = await svc.at('definition', { agent: 'nav', path: 'src/b.ts', position: at, timeoutMs: 60_000 });
      assert.strictEqual(def.status, 'fresh', JSON.stringify(def));
      assert.deepStrictEqual(
        def.locations.map((l) => [l.path, l.range.start.line]),
        [['src/a.ts', 3]],
      );
      const refs = await svc.at('references', { agent: 'nav', path: 'src/b.ts', position: at, timeoutMs: 60_000 });
      assert.strictEqual(refs.status, 'fresh');
      const where = refs.locations.map((l) => `${l.path}:${l.range.start.line}`).sort();
      assert.ok(where.includes('src/a.ts:3') && where.includes('src/b.ts:2'), where.join(' '));
      const hover = await svc.at('hover', { agent: 'nav', path: 'src/b.ts', position: at, timeoutMs: 60_000 });
      assert.strictEqual(hover.status, 'fresh');
      assert.match(hover.contents, /add\(a: number, b: number\): number/);
    });
  });

  it('a killed server comes back on the next request; a server that never answers gives timeout, never "no problems"', async () => {
    await withService(async (svc) => {
      const edit = { path: 'src/b.ts', content: B_TS.replace('add(1, 2)', 'add(1)') };
      const first = await svc.lints({ shadow: 's', agent: 'k', edits: [edit], timeoutMs: 60_000 });
      assert.strictEqual(first.files[0].introduced.length, 1, JSON.stringify(first.files[0]));
      const [ts] = svc.runningServers().filter((x) => x.id === 'typescript');
      assert.ok(ts, JSON.stringify(svc.runningServers()));
      process.kill(ts.pid, 'SIGKILL');
      await eventually(() => !svc.runningServers().some((x) => x.pid === ts.pid), 20_000, 'the service to see its server gone');
      const again = await svc.lints({ shadow: 's', agent: 'k', paths: ['src/b.ts'], timeoutMs: 60_000 });
      assert.strictEqual(again.files[0].status, 'fresh', JSON.stringify(again.files[0]));
      assert.strictEqual(again.files[0].introduced.length, 1);
      assert.notStrictEqual(svc.runningServers().find((x) => x.id === 'typescript')?.pid, ts.pid, 'a new server');
    });
    // A server configured in the folder (.shadowfs/lsp.json) that never answers.
    const lower = makeTsProject();
    fs.mkdirSync(path.join(lower, '.shadowfs'));
    const hang = path.join(__dirname, 'fixtures', 'lsp', 'hang-server.js');
    fs.writeFileSync(
      path.join(lower, '.shadowfs', 'lsp.json'),
      JSON.stringify({
        servers: [{ id: 'hang', command: process.execPath, args: [hang], languages: [{ languageId: 'plaintext', extensions: ['.txt'] }] }],
      }),
    );
    fs.writeFileSync(path.join(lower, 'notes.txt'), 'hello\n');
    await withService(async (svc) => {
      const r = await svc.lints({ shadow: 's', agent: 'h', edits: [{ path: 'notes.txt', content: 'changed\n' }], timeoutMs: 1500 });
      assert.strictEqual(r.files[0].status, 'timeout', JSON.stringify(r.files[0]));
      assert.deepStrictEqual(r.files[0].introduced, []);
      assert.strictEqual(r.files[0].server, 'hang');
    }, lower);
    // The same from the daemon-wide config ($SHADOWFS_LSP_CONFIG), and a malformed one named.
    const userConfig = path.join(tempDir('lspconf'), 'lsp.json');
    fs.writeFileSync(
      userConfig,
      JSON.stringify({
        servers: [
          { id: 'hang-user', command: process.execPath, args: [hang], languages: [{ languageId: 'markdown', extensions: ['.md'] }] },
        ],
      }),
    );
    process.env.SHADOWFS_LSP_CONFIG = userConfig;
    try {
      await withService(async (svc) => {
        const r = await svc.lints({ shadow: 's', agent: 'h', edits: [{ path: 'NOTES.md', content: '# hi\n' }], timeoutMs: 1500 });
        assert.strictEqual(r.files[0].status, 'timeout', JSON.stringify(r.files[0]));
        assert.strictEqual(r.files[0].server, 'hang-user');
      });
      fs.writeFileSync(userConfig, JSON.stringify({ servers: [{ id: 'x', command: 3 }] }));
      await withService(async (svc) => {
        await assert.rejects(svc.lints({ shadow: 's', agent: 'h', paths: ['src/a.ts'] }), (e: { code?: string; message?: string }) => {
          assert.strictEqual(e.code, 'INVALID_ARGUMENT');
          assert.match(e.message ?? '', /lsp\.json/);
          return true;
        });
      });
    } finally {
      delete process.env.SHADOWFS_LSP_CONFIG;
    }
  });

  it('a check or a definition/references/hover question that never gets the shared mount says queued and whose job held it, not timeout; a missing file is NOT_FOUND', async () => {
    await withService(async (svc, shadow) => {
      // Agent a holds the shared mount (a run of its own would) for as long as b's question lasts.
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let holding!: () => void;
      const got = new Promise<void>((r) => (holding = r));
      const a = shadow.withLayer('a', async () => {
        holding();
        await held;
      });
      await got;
      try {
        const r = await svc.lints({ shadow: 's', agent: 'b', paths: ['src/a.ts'], timeoutMs: 1000 });
        assert.deepStrictEqual(
          r.files.map((f) => [f.path, f.status, f.waitingFor, f.introduced, f.existing]),
          [['src/a.ts', 'queued', 'a', [], []]],
        );
        // Definition, references and hover say the same when they never got the mount.
        const position = { line: 2, character: 20 };
        for (const kind of ['definition', 'references', 'hover'] as const) {
          const q = await svc.at(kind, { agent: 'b', path: 'src/b.ts', position, timeoutMs: 1000 });
          assert.deepStrictEqual([kind, q.status, q.waitingFor, q.locations, q.contents], [kind, 'queued', 'a', [], '']);
        }
      } finally {
        release();
        await a;
      }
      await assert.rejects(
        svc.lints({ shadow: 's', agent: 'b', paths: ['src/nope.ts'], timeoutMs: 1000 }),
        (e: { code?: string; message?: string }) => e.code === 'NOT_FOUND' && /src\/nope\.ts/.test(e.message ?? ''),
      );
    });
  });

  it('an agent with a view of its own is checked there at once while another agent holds the shared mount; its servers stop with the view', async () => {
    await withService(async (svc, shadow) => {
      const view = await shadow.openView('v');
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let holding!: () => void;
      const got = new Promise<void>((r) => (holding = r));
      const a = shadow.withLayer('a', async () => {
        holding();
        await held;
      });
      await got;
      try {
        const r = await svc.lints({
          shadow: 's',
          agent: 'v',
          edits: [{ path: 'src/b.ts', content: `${B_TS}export const bad: string = add(2, 2);\n` }],
          timeoutMs: 60_000,
        });
        // Checked in the view; the folder's own check (not cached yet) was not waited for.
        assert.deepStrictEqual(
          r.files.map((f) => [f.path, f.status, f.baseline, f.existing]),
          [['src/b.ts', 'fresh', 'queued', []]],
        );
        assert.deepStrictEqual(
          r.files[0].introduced.map((d) => [d.range.start.line, /not assignable to type 'string'/.test(d.message)]),
          [[3, true]],
        );
        const def = await svc.at('definition', { agent: 'v', path: 'src/b.ts', position: { line: 0, character: 10 }, timeoutMs: 60_000 });
        assert.deepStrictEqual([def.status, def.locations.map((l) => l.path)], ['fresh', ['src/a.ts']]);
        // One server, rooted at the view: none started on the shared mount (the folder's check never ran there).
        assert.strictEqual(svc.runningServers().length, 1);
        assert.strictEqual((await shadow.stats()).scheduler.running, 'a');
      } finally {
        release();
        await a;
      }
      // Once the shared mount is free, the folder's check runs (and its diagnostics count again).
      const after = await svc.lints({ shadow: 's', agent: 'v', paths: ['src/b.ts'], timeoutMs: 60_000 });
      assert.deepStrictEqual(
        after.files.map((f) => [f.status, f.baseline, f.introduced.length]),
        [['fresh', 'fresh', 1]],
      );
      assert.strictEqual(svc.runningServers().length, 2);
      // The view closed, its servers go with it, and the agent's questions are the shared mount's jobs again.
      await view.close();
      await svc.releaseClosedViews(); // what the daemon's view.close does
      assert.strictEqual(svc.runningServers().length, 1);
      const shared = await svc.lints({ shadow: 's', agent: 'v', paths: ['src/b.ts'], timeoutMs: 60_000 });
      assert.deepStrictEqual(
        shared.files.map((f) => [f.status, f.baseline, f.introduced.length]),
        [['fresh', 'cached', 1]],
      );
      assert.strictEqual(svc.runningServers().length, 1);
    });
  });

  it("never reads where an agent's link points: a link to a file of your home, or through a linked directory, is not handed to a server (review)", async () => {
    // What the host holds outside the folder: text a TypeScript server would quote back in "Cannot
    // find name" diagnostics, were the daemon (unconfined) to read it for the server.
    const host = tempDir('lints-host');
    fs.writeFileSync(path.join(host, 'credentials.ts'), 'hostSecretAlpha\n');
    fs.mkdirSync(path.join(host, 'keys'));
    fs.writeFileSync(path.join(host, 'keys', 'token.ts'), 'hostSecretBeta\n');
    await withService(async (svc, shadow) => {
      // Made as an agent's run makes them: through the mount, with its layer showing.
      await shadow.withLayer('evil', async () => {
        fs.symlinkSync(path.join(host, 'credentials.ts'), path.join(shadow.mountPoint, 'src', 'leak.ts'));
        fs.symlinkSync(path.join(host, 'keys'), path.join(shadow.mountPoint, 'src', 'keys'));
        fs.symlinkSync(path.join(host, 'nothing-here.ts'), path.join(shadow.mountPoint, 'src', 'dangling.ts'));
      });
      const r = await svc.lints({ shadow: 's', agent: 'evil', paths: ['src/leak.ts', 'src/dangling.ts'], timeoutMs: 60_000 });
      const text = JSON.stringify(r);
      assert.doesNotMatch(text, /hostSecret/, text);
      // Each is answered without the host's text: an error naming the link, or the server's own
      // reading through its confined view (where your home and this directory do not exist).
      for (const f of r.files) assert.ok(f.status === 'error' || f.status === 'fresh', JSON.stringify(f));
      // A link whose target exists and one whose target does not are answered alike: no oracle
      // for what the host has.
      const shape = (f: (typeof r.files)[number]): string => `${f.status}:${(f.error ?? '').replace(f.path, 'P')}`;
      assert.strictEqual(shape(r.files[0]), shape(r.files[1]), text);
      // A path through the linked directory is refused as a path of the layer, nothing read.
      const through = await svc
        .lints({ shadow: 's', agent: 'evil', paths: ['src/keys/token.ts'], timeoutMs: 60_000 })
        .catch((e: Error) => e);
      assert.doesNotMatch(through instanceof Error ? through.message : JSON.stringify(through), /hostSecret/);
      const hover = await svc
        .at('hover', { agent: 'evil', path: 'src/leak.ts', position: { line: 0, character: 3 }, timeoutMs: 60_000 })
        .catch((e: Error) => e);
      assert.doesNotMatch(JSON.stringify(hover instanceof Error ? hover.message : hover), /hostSecret/);
    });
  });

  it("a server never reads a file masked for the agent, not even by the folder's real path (review)", async () => {
    const lower = makeTsProject();
    fs.mkdirSync(path.join(lower, 'cfg'));
    fs.writeFileSync(path.join(lower, 'cfg', 'secrets.ts'), "export const dbPassword = 'hunter2-db-pass' as const;\n");
    await withService(async (svc, shadow) => {
      await shadow.setMask('evil', ['cfg/secrets.ts']);
      // The agent imports the masked file by the folder's absolute path, and by the mount's.
      const text = [
        `import { dbPassword } from '${path.join(lower, 'cfg', 'secrets')}';`,
        `import { dbPassword as viaMount } from '${path.join(shadow.mountPoint, 'cfg', 'secrets')}';`,
        'export const n: 1 = dbPassword;',
        'export const m: 1 = viaMount;',
        '',
      ].join('\n');
      const r = await svc.lints({ shadow: 's', agent: 'evil', edits: [{ path: 'src/imp.ts', content: text }], timeoutMs: 60_000 });
      assert.strictEqual(r.files[0].status, 'fresh', JSON.stringify(r));
      assert.doesNotMatch(JSON.stringify(r), /hunter2/, JSON.stringify(r));
      // Both imports fail as for a file that does not exist.
      assert.strictEqual(r.files[0].introduced.filter((d) => /Cannot find module/.test(d.message)).length, 2, JSON.stringify(r));
      const hover = await svc.at('hover', { agent: 'evil', path: 'src/imp.ts', position: { line: 2, character: 21 }, timeoutMs: 60_000 });
      assert.doesNotMatch(JSON.stringify(hover), /hunter2/);
    }, lower);
  });

  it("another agent's layer cannot fail my checks: a file of the folder made a directory there, a path too long for the system (review)", async () => {
    await withService(async (svc, shadow) => {
      await shadow.withLayer('dos', async () => {
        fs.rmSync(path.join(shadow.mountPoint, 'src', 'a.ts'));
        fs.mkdirSync(path.join(shadow.mountPoint, 'src', 'a.ts'));
        fs.writeFileSync(path.join(shadow.mountPoint, 'src', 'a.ts', 'z.ts'), 'export const z = 1;\n');
      });
      // Deeper than PATH_MAX (4,096 bytes) once joined to the folder: written through the layer.
      await writeText(shadow.layer('dos'), `${'d/'.repeat(2100)}x.ts`, 'export const x = 1;\n');
      const r = await svc.lints({
        shadow: 's',
        agent: 'bob',
        edits: [{ path: 'src/b.ts', content: B_TS.replace('add(1, 2)', "add('1', 2)") }],
        timeoutMs: 60_000,
      });
      assert.deepStrictEqual(
        r.files.map((f) => [f.path, f.status, f.introduced.length]),
        [['src/b.ts', 'fresh', 1]],
        JSON.stringify(r),
      );
    });
  });

  it('quick fixes come back as edits for the introduced diagnostics only', async () => {
    await withService(async (svc) => {
      const r = await svc.lints({
        shadow: 's',
        agent: 'fixer',
        edits: [{ path: 'src/b.ts', content: `${B_TS}const unused = 1;\n` }],
        quickFixes: true,
        timeoutMs: 60_000,
      });
      const f = r.files[0];
      assert.strictEqual(f.status, 'fresh', JSON.stringify(f));
      assert.strictEqual(f.introduced.length, 1, JSON.stringify(f));
      assert.strictEqual(f.introduced[0].code, 6133, 'declared but never read');
      const fix = (f.quickFixes ?? []).find((q) => /unused/i.test(q.title));
      assert.ok(fix, JSON.stringify(f.quickFixes));
      assert.strictEqual(fix.diagnostic, 0);
      assert.ok(fix.edits.every((e) => e.path === 'src/b.ts'));
      // Applied to the agent's layer, the fix leaves no introduced diagnostic.
      const fixed = await svc.lints({
        shadow: 's',
        agent: 'fixer',
        edits: [{ path: 'src/b.ts', edits: fix.edits.map((e) => ({ range: e.range, newText: e.newText })) }],
        timeoutMs: 60_000,
      });
      assert.deepStrictEqual(fixed.files[0].introduced, [], JSON.stringify(fixed.files[0]));
    });
  });

  it('the CLI reports introduced errors with exit status 4, as JSON too, and the folder is never written', () => {
    const lower = makeTsProject();
    const cli = path.join(repoRoot, 'bin', 'shadowfs.js');
    const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 120_000 });
    const m = run('mount', lower, '--name', 'lintcli', '--json');
    assert.strictEqual(m.status, 0, m.stderr);
    try {
      const content = path.join(tempDir('edit'), 'b.ts');
      fs.writeFileSync(content, B_TS.replace('add(1, 2)', 'add(1)'));
      const r = run('lints', 'lintcli', '--agent', 'carol', '--edit', `src/b.ts=${content}`, '--timeout', '60000', '--json');
      assert.strictEqual(r.status, 4, r.stdout + r.stderr);
      const out = JSON.parse(r.stdout) as { files: Array<{ path: string; status: string; introduced: Array<{ message: string }> }> };
      assert.strictEqual(out.files[0].status, 'fresh');
      assert.match(out.files[0].introduced[0].message, /Expected 2 arguments/);
      const human = run('lints', 'lintcli', '--agent', 'carol', '--timeout', '60000');
      assert.strictEqual(human.status, 4);
      assert.match(human.stdout, /src\/b\.ts:3:\d+ error/);
      assert.strictEqual(fs.readFileSync(path.join(lower, 'src', 'b.ts'), 'utf8'), B_TS, 'the folder keeps its file');
    } finally {
      run('unmount', 'lintcli');
    }
  });
});

// The audit trail (issue #32 item 4, docs/audit-trail.md) through real mounts and real programs
// (bash, cat, cp, mv, rm, mkdir, ln, node, a script executed), on both FUSE backends and fuse_ll's
// two ways of serving opens: the agent's layer lists exactly what its programs did, with the
// right ops, paths, byte counts and process names; another agent's work and the developer's edits
// in the folder are not in it; the bound drops the oldest and says how many; a checkpoint (and
// autosave, what a restarted daemon restores from) keeps it. Then the daemon: layer.audit over
// RPC, scoped to the agent's own record on a restricted connection, and `shadowfs audit --json`.
// The folder is hashed before and after each mount (withShadow's FolderGuard) and must not change.
import * as assert from 'assert';
import * as crypto from 'crypto';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ShadowClient, ShadowError } from '../src/client';
import type { AuditEntry } from '../src/shadow/audit';
import type { IoMode, Shadow } from '../src/shadow';
import { CheckpointStore } from '../src/work/checkpoints';
import { WorkService } from '../src/work/service';
import { FolderGuard, repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

function makeFolder(): string {
  const dir = tempDir('audit');
  fs.writeFileSync(path.join(dir, 'a.txt'), 'hello\n');
  fs.writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\necho ran\n', { mode: 0o755 });
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'src', 'x.js'), 'module.exports = 1;\n');
  return dir;
}

/** One program in `cwd`; fails the test unless it exits 0. */
function sh(cwd: string, script: string): string {
  const r = spawnSync('bash', ['-c', script], { cwd, encoding: 'utf8', timeout: 30_000 });
  assert.strictEqual(r.status, 0, `${script}: ${r.stderr}`);
  return r.stdout;
}

/** What an entry says, without its time and seq. */
const brief = (e: AuditEntry): string =>
  [e.op, e.write ? 'w' : '', e.path, e.to, e.bytes ? String(e.bytes) : ''].filter((x, i) => i === 0 || x !== '').join(' ');

const BACKENDS: Array<{ backend: string; io?: IoMode; opens: boolean }> = [
  { backend: 'fuse_hl', opens: true },
  { backend: 'fuse_ll', io: 'open', opens: true },
  // fuse_ll's default: the kernel opens files without asking, so opens and execs are not seen.
  { backend: 'fuse_ll', opens: false },
];

describe('the audit trail', function () {
  this.timeout(120_000);

  for (const { backend, io, opens } of BACKENDS) {
    describe(`${backend}${io ? ` (io ${io})` : ''}`, () => {
      const options = { backend, ...(io ? { io } : {}) };

      it("lists exactly what the agent's programs did: open, create, write, rename, unlink, exec, mkdir, symlink; not another agent's", async () => {
        const folder = makeFolder();
        await withShadow(
          folder,
          async (shadow, mp) => {
            await shadow.createLayer('a');
            await shadow.createLayer('b');
            await shadow.activate('a');
            sh(mp, 'cat a.txt > /dev/null');
            sh(mp, 'echo hi > b.txt');
            sh(mp, 'echo more >> a.txt');
            sh(mp, 'mv b.txt c.txt');
            sh(mp, 'rm a.txt');
            assert.strictEqual(sh(mp, './run.sh'), 'ran\n');
            sh(mp, 'mkdir d');
            sh(mp, 'ln -s ../c.txt d/link');
            sh(mp, 'cp c.txt d/copy.txt');
            sh(mp, `${JSON.stringify(process.execPath)} -e "require('fs').writeFileSync('d/n.txt', 'xyz')"`);
            // Another agent's work, while its own layer is shown.
            await shadow.activate('b');
            sh(mp, 'echo b > b-only.txt && rm src/x.js');

            const a = await shadow.layer('a').audit();
            const got = a.entries.map(brief);
            const expected = opens
              ? [
                  'open a.txt',
                  'create w b.txt 3',
                  'open w a.txt 5',
                  'rename b.txt c.txt',
                  'unlink a.txt',
                  'exec run.sh',
                  'open run.sh', // the interpreter reading the script
                  'mkdir d',
                  'symlink d/link ../c.txt',
                  'open c.txt',
                  'create w d/copy.txt 3',
                  'create w d/n.txt 3',
                ]
              : [
                  // Created with no handle kept (fuse_ll's CREATE without opens), written by node: the bytes join the create.
                  'create w b.txt 3',
                  'write w a.txt 5',
                  'rename b.txt c.txt',
                  'unlink a.txt',
                  'mkdir d',
                  'symlink d/link ../c.txt',
                  'create w d/copy.txt 3',
                  'create w d/n.txt 3',
                ];
            assert.deepStrictEqual(got, expected, JSON.stringify(a.entries, null, 1));
            assert.strictEqual(a.dropped, 0);
            // Who: the process that asked, by pid and command name.
            const by = (op: string, p: string): AuditEntry => a.entries.find((e) => e.op === op && e.path === p)!;
            assert.strictEqual(by('rename', 'b.txt').comm, 'mv');
            assert.strictEqual(by('unlink', 'a.txt').comm, 'rm');
            assert.strictEqual(by('mkdir', 'd').comm, 'mkdir');
            assert.strictEqual(by('create', 'd/copy.txt').comm, 'cp');
            assert.strictEqual(by('create', 'd/n.txt').comm, 'node');
            for (const e of a.entries) assert.ok(e.pid > 0 && e.timeMs > 0, JSON.stringify(e));
            // Seqs number the entries in order.
            assert.deepStrictEqual(
              a.entries.map((e) => e.seq),
              a.entries.map((_e, i) => i + 1),
            );

            // Agent b's record has its own, and a's none of them.
            const b = (await shadow.layer('b').audit()).entries.map(brief);
            assert.deepStrictEqual(b, ['create w b-only.txt 2', 'unlink src/x.js']);
            assert.ok(!got.some((l) => /b-only|src\/x\.js/.test(l)));

            // Queries: a path glob (either name of a rename), ops, the newest N.
            assert.deepStrictEqual((await shadow.layer('a').audit({ path: 'c.txt' })).entries.map(brief), [
              'rename b.txt c.txt',
              ...(opens ? ['open c.txt'] : []),
            ]);
            assert.deepStrictEqual((await shadow.layer('a').audit({ path: 'd/**' })).entries.length, 3);
            assert.deepStrictEqual((await shadow.layer('a').audit({ ops: ['unlink', 'rename'] })).entries.map(brief), [
              'rename b.txt c.txt',
              'unlink a.txt',
            ]);
            const last2 = await shadow.layer('a').audit({ limit: 2 });
            assert.deepStrictEqual(last2.entries, a.entries.slice(-2));
            assert.strictEqual(last2.matched, a.entries.length);
            const later = await shadow.layer('a').audit({ sinceMs: Date.now() + 60_000 });
            assert.deepStrictEqual(later.entries, []);
          },
          options,
        );
      });

      it("the agent's own view is recorded in its layer; the developer's edits in the folder are not", async () => {
        const folder = makeFolder();
        // The developer edits the folder during this test: no guard here (the other tests have one).
        await withShadow(
          folder,
          async (shadow) => {
            await shadow.createLayer('a');
            const view = await shadow.openView('a');
            try {
              sh(view.mountPoint, 'echo v > v.txt');
              fs.writeFileSync(path.join(folder, 'dev.txt'), 'the developer\n');
              fs.appendFileSync(path.join(folder, 'a.txt'), 'edited\n');
              fs.renameSync(path.join(folder, 'src', 'x.js'), path.join(folder, 'src', 'y.js'));
              assert.match(sh(folder, 'cat a.txt'), /edited/);
              const got = (await shadow.layer('a').audit()).entries.map(brief);
              assert.deepStrictEqual(got, ['create w v.txt 2']);
            } finally {
              await view.close();
            }
          },
          { ...options, guard: false },
        );
      });

      it('is bounded: past the limit the oldest entries go, and it says how many', async () => {
        await withShadow(
          makeFolder(),
          async (shadow, mp) => {
            await shadow.setAuditLimits({ maxEntries: 5, maxBytes: 1 << 20 });
            await shadow.createLayer('a');
            await shadow.activate('a');
            // Empty files: data written through the page cache reaches the mount when the kernel
            // flushes it, from its own thread, so a write entry of an early file could land after
            // f8's (seen under load); creates alone arrive in order.
            sh(mp, 'for i in 1 2 3 4 5 6 7 8; do : > f$i; done');
            const r = await shadow.layer('a').audit();
            assert.deepStrictEqual(
              r.entries.map((e) => e.path),
              ['f4', 'f5', 'f6', 'f7', 'f8'],
            );
            assert.deepStrictEqual(
              r.entries.map((e) => e.seq),
              [4, 5, 6, 7, 8],
            );
            assert.strictEqual(r.dropped, 3);
            assert.strictEqual(r.kept, 5);
            assert.deepStrictEqual(r.limits, { maxEntries: 5, maxBytes: 1 << 20 });
            // A byte limit too: entries of long paths count their bytes.
            await shadow.setAuditLimits({ maxEntries: 1000, maxBytes: 600 });
            const small = await shadow.layer('a').audit();
            assert.ok(small.kept < 5 && small.kept >= 1, JSON.stringify(small));
            assert.strictEqual(small.dropped, 3 + (5 - small.kept));
          },
          options,
        );
      });
    });
  }

  it('a checkpoint keeps the record and restoring brings it back; so does autosave, across a new mount of the folder', async () => {
    const folder = makeFolder();
    const guard = new FolderGuard(folder);
    let saved: AuditEntry[] = [];
    const withW = async (fn: (w: WorkService, shadow: Shadow, mp: string) => Promise<void>): Promise<void> =>
      withShadow(
        folder,
        async (shadow, mp) => {
          const w = new WorkService(shadow);
          try {
            await fn(w, shadow, mp);
          } finally {
            await w.dispose();
          }
        },
        { guard: false },
      );
    try {
      await withW(async (w, shadow, mp) => {
        await shadow.createLayer('a');
        await shadow.activate('a');
        sh(mp, 'echo one > one.txt && mv one.txt two.txt');
        saved = (await shadow.layer('a').audit()).entries;
        assert.deepStrictEqual(saved.map(brief), ['create w one.txt 4', 'rename one.txt two.txt']);
        await w.checkpoint('a', 'cp1');
        // A checkpoint whose record was forged (a blob of the right hash, but not a record) is refused whole.
        const store = new CheckpointStore(shadow.folder);
        const manifestFile = path.join(store.root, 'a', 'cp1.json');
        const manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8')) as { audit?: string };
        assert.match(manifest.audit ?? '', /^[0-9a-f]{64}$/);
        const forged = Buffer.from(JSON.stringify({ entries: [{ seq: 1, op: 'rm -rf /' }] }));
        const forgedId = crypto.createHash('sha256').update(forged).digest('hex');
        fs.writeFileSync(path.join(store.root, 'blobs', forgedId), forged);
        fs.writeFileSync(path.join(store.root, 'a', 'forged.json'), JSON.stringify({ ...manifest, name: 'forged', audit: forgedId }));
        await assert.rejects(w.restore('a', 'forged'), (e: unknown) => e instanceof ShadowError && e.code === 'STATE_CORRUPT');
        assert.deepStrictEqual((await shadow.layer('a').audit()).entries, saved);
        sh(mp, 'rm two.txt && echo three > three.txt');
        assert.strictEqual((await shadow.layer('a').audit()).entries.length, 4);
        const before = (await shadow.layer('a').audit()).entries;
        await shadow.activate(null);
        await w.restore('a', 'cp1');
        // The checkpoint's record, then what was done since: a restore takes nothing out (review).
        assert.deepStrictEqual((await shadow.layer('a').audit()).entries, before);
        // Restoring wrote the files through the API: that is not in the record either.
        assert.strictEqual((await shadow.layer('a').readFile('two.txt')).toString(), 'one\n');
        // Recording goes on after the restored entries, numbered after them.
        await shadow.activate('a');
        sh(mp, 'rm two.txt');
        const after = (await shadow.layer('a').audit()).entries;
        assert.deepStrictEqual(after.map(brief).slice(4), ['unlink two.txt']);
        assert.strictEqual(after[4].seq, 5);
        saved = after;
        await shadow.activate(null);
        assert.deepStrictEqual(await w.autosave(), ['a']);
      });
      // A new mount (as a daemon that came back after a crash): the layer from its autosave, record included.
      await withW(async (w, shadow) => {
        await w.restore('a', 'autosave');
        assert.deepStrictEqual((await shadow.layer('a').audit()).entries, saved);
      });
      // A new mount where the agent works before a checkpoint is restored: its record began again
      // (numbered from 1), and the restore keeps what it did, numbered on after the checkpoint's
      // (review: it was taken out, uncounted).
      await withW(async (w, shadow, mp) => {
        await shadow.createLayer('a');
        await shadow.activate('a');
        sh(mp, 'echo four > four.txt');
        assert.deepStrictEqual(
          (await shadow.layer('a').audit()).entries.map((e) => e.seq),
          [1],
        );
        await shadow.activate(null);
        await w.restore('a', 'autosave');
        const r = await shadow.layer('a').audit();
        assert.deepStrictEqual(r.entries.slice(0, saved.length), saved);
        assert.deepStrictEqual(
          r.entries.slice(saved.length).map((e) => [e.seq, brief(e)]),
          [[saved[saved.length - 1].seq + 1, 'create w four.txt 5']],
        );
        assert.strictEqual(r.dropped, 0);
      });
      await guard.check();
    } finally {
      guard.stop();
    }
  });

  describe('through the daemon', () => {
    let user: ShadowClient;
    const clients: ShadowClient[] = [];
    before(async () => {
      user = await ShadowClient.connect({ clientName: 'audit-test user' });
    });
    after(async () => {
      for (const c of clients) c.close();
      await user.request('unmount', { shadow: 'audit-d', lazy: true }).catch(() => undefined);
      user.close();
      stopTestDaemon();
    });

    it('layer.audit answers the agent its own record only; shadowfs audit --json prints the same', async () => {
      const folder = makeFolder();
      const guard = new FolderGuard(folder);
      await user.request('mount', { folder, name: 'audit-d' });
      const run = async (agent: string, script: string): Promise<void> => {
        const r = await user.request('run', { shadow: 'audit-d', agent, argv: ['sh', '-c', script] });
        assert.strictEqual(r.exitCode, 0, r.stderr);
      };
      await run('alice', 'echo x > f && mv f g && rm src/x.js');
      await run('bob', 'echo y > h');
      await guard.check();
      guard.stop();

      const r = await user.request('layer.audit', { shadow: 'audit-d', agent: 'alice', ops: ['create', 'rename', 'unlink'] });
      assert.deepStrictEqual(
        r.entries.map((e) => [e.op, e.path, e.to ?? '', e.bytes ?? 0]),
        [
          ['create', 'f', '', 2],
          ['rename', 'f', 'g', 0],
          ['unlink', 'src/x.js', '', 0],
        ],
      );
      assert.strictEqual(r.entries[1].comm, 'mv');
      assert.ok(!Number.isNaN(Date.parse(r.entries[0].time)));
      assert.strictEqual(r.dropped, 0);
      const one = await user.request('layer.audit', { shadow: 'audit-d', agent: 'alice', path: 'g', limit: 1 });
      assert.deepStrictEqual(
        one.entries.map((e) => e.op),
        ['rename'],
      );

      // The agent's restricted connection reads its own record, never another agent's.
      const me = await ShadowClient.connect({ clientName: 'audit-test agent', scope: { shadow: 'audit-d', agent: 'alice' } });
      clients.push(me);
      const mine = await me.request('layer.audit', { shadow: 'audit-d', agent: 'alice', ops: ['create', 'rename', 'unlink'] });
      assert.deepStrictEqual(mine.entries, r.entries);
      await assert.rejects(
        me.request('layer.audit', { shadow: 'audit-d', agent: 'bob' }),
        (e: unknown) => e instanceof ShadowError && e.code === 'SCOPE_DENIED',
      );

      // The CLI: --json is the RPC's answer; the human form names the process and both paths.
      const cli = path.join(repoRoot, 'bin', 'shadowfs.js');
      const json = spawnSync(
        process.execPath,
        [cli, 'audit', 'audit-d', '--agent', 'alice', '--op', 'create', 'rename', 'unlink', '--json'],
        {
          encoding: 'utf8',
        },
      );
      assert.strictEqual(json.status, 0, json.stderr);
      assert.deepStrictEqual(JSON.parse(json.stdout), r);
      const human = spawnSync(process.execPath, [cli, 'audit', 'audit-d', '--agent', 'alice', '--since', '1h', '--path', 'g'], {
        encoding: 'utf8',
      });
      assert.strictEqual(human.status, 0, human.stderr);
      assert.match(human.stdout, /mv\[\d+\]\s+rename\s+f -> g/);
      const none = spawnSync(process.execPath, [cli, 'audit', 'audit-d', '--agent', 'nobody'], { encoding: 'utf8' });
      assert.notStrictEqual(none.status, 0);
      assert.match(none.stderr, /UNKNOWN_AGENT/);

      // The agent's MCP server: the read-only audit tool shows its own record.
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [cli, 'mcp', '--shadow', 'audit-d', '--agent', 'alice'],
        env,
        stderr: 'pipe',
      });
      const mcp = new Client({ name: 'audit-test', version: '1.0.0' });
      await mcp.connect(transport);
      try {
        const tools = await mcp.listTools();
        const tool = tools.tools.find((t) => t.name === 'audit');
        assert.strictEqual(tool?.annotations?.readOnlyHint, true);
        const res = (await mcp.callTool({ name: 'audit', arguments: { ops: ['rename'] } })) as {
          isError?: boolean;
          content: Array<{ text?: string }>;
        };
        assert.ok(!res.isError, JSON.stringify(res));
        const text = res.content.map((c) => c.text ?? '').join('\n');
        assert.match(text, /mv\[\d+\] rename f -> g/);
        // Everything it has: alice's own entries, none of bob's (his file h).
        const all = (await mcp.callTool({ name: 'audit', arguments: {} })) as { content: Array<{ text?: string }> };
        const allText = all.content.map((c) => c.text ?? '').join('\n');
        assert.match(allText, /create\(w\) f 2B/);
        assert.ok(!/ h( |$)/m.test(allText), allText);
      } finally {
        await mcp.close();
      }
    });
  });
});

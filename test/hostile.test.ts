// Hostile content is just content, and bases survive restores (issue 27, deliverables 4 and 5),
// on real mounts: a sparse file of more than 4 GiB in a layer is read in ranges by every read path
// (whole reads of it used to abort the process with a double free): layer cat, the layer.read RPC,
// diff, patch (streamed), checkpoints (its data extents only) and their restores, autosave;
// checkpoints refuse a file with more data than their cap before reading it; a FIFO in a layer never hangs the diagnostics
// service; a catastrophic regular expression given to grep never blocks the main thread; and a
// restored checkpoint still reports the user's edit of a file as a conflict.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { LintsService } from '../src/lints/service';
import type { Shadow } from '../src/shadow';
import { grep, readLayerRange } from '../src/work/files';
import { WorkService } from '../src/work/service';
import { ShadowClient } from '../src/client';
import { mountedPaths } from '../src/platform';
import { repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const GiB = 1024 * 1024 * 1024;
const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

/** A CLI command against the test run's daemon (started on demand), with --json. */
function cli(...args: string[]): { status: number | null; out: Record<string, unknown> | null; text: string } {
  const r = spawnSync(process.execPath, [cliPath, ...args, '--json'], { encoding: 'utf8', timeout: 60_000, maxBuffer: 256 * 1024 * 1024 });
  let out: Record<string, unknown> | null = null;
  try {
    out = JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    // not JSON: the text says why
  }
  return { status: r.status, out, text: `${r.stdout}${r.stderr}` };
}

/** A small folder to shadow: one text file and a TypeScript project the lints service knows. */
function makeFolder(): string {
  const dir = tempDir('hostile-lower');
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'the user wrote this\n');
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "name": "hostile-fixture", "private": true }\n');
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, noEmit: true }, include: ['src'] }));
  fs.writeFileSync(path.join(dir, 'src', 'a.ts'), 'export const a = 1;\n');
  return dir;
}

async function withWork<T>(
  lower: string,
  fn: (w: WorkService, shadow: Shadow, mp: string, log: string[]) => Promise<T>,
  guard = true,
): Promise<T> {
  return withShadow(
    lower,
    async (shadow, mp) => {
      const log: string[] = [];
      const w = new WorkService(shadow, { log: (l) => log.push(l) });
      try {
        return await fn(w, shadow, mp, log);
      } finally {
        await w.dispose();
      }
    },
    { guard },
  );
}

/** Bytes the files under `dir` take on disk (allocated blocks, not sizes). */
function diskBytes(dir: string): number {
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const st = fs.lstatSync(path.join(e.parentPath, e.name));
    if (st.isFile()) n += st.blocks * 512;
  }
  return n;
}

/** Makes `rel` a sparse file of `size` bytes in the active layer, through the mount (no data is written). */
function sparse(mp: string, rel: string, size: number): void {
  const fd = fs.openSync(path.join(mp, rel), 'w');
  try {
    fs.ftruncateSync(fd, size);
  } finally {
    fs.closeSync(fd);
  }
}

describe('hostile content: huge sparse files, FIFOs, catastrophic regexes, restored bases', function () {
  this.timeout(120_000);

  it('a sparse file over 4 GiB is read in ranges, diffed, patched, checkpointed sparsely, restored and autosaved, in little memory', async () => {
    await withWork(makeFolder(), async (w, shadow, mp, log) => {
      const layer = await shadow.createLayer('agent');
      await shadow.activate('agent');
      const size = 5 * GiB;
      sparse(mp, 'huge.bin', size);
      // A few KiB of data in it: at the start, past 4 GiB, and at the very end.
      const marks: Array<[number, Buffer]> = [
        [0, Buffer.from('head of the huge file\n')],
        [4 * GiB + 12345, Buffer.from('past four GiB\n')],
        [size - 8, Buffer.from('the end!')],
      ];
      const fd = fs.openSync(path.join(mp, 'huge.bin'), 'r+');
      try {
        for (const [at, data] of marks) fs.writeSync(fd, data, 0, data.length, at);
      } finally {
        fs.closeSync(fd);
      }
      fs.writeFileSync(path.join(mp, 'small.txt'), 'small\n');
      const mem0 = process.memoryUsage();
      assert.strictEqual((await layer.stat('huge.bin')).size, size);
      // A whole read cannot be made into one Buffer: a clear error, never a crash.
      await assert.rejects(layer.readFile('huge.bin'), { code: 'FILE_TOO_LARGE' });
      // Ranged reads see every byte, and the extents say where the data is (holes are not stored).
      for (const [at, data] of marks) assert.deepStrictEqual((await layer.readRange('huge.bin', at, data.length)).data, data);
      const r = await layer.readRange('huge.bin', size - 4, 100);
      assert.strictEqual(r.size, size);
      assert.strictEqual(r.data.toString(), 'end!');
      const ext = await layer.dataExtents('huge.bin');
      assert.strictEqual(ext.size, size);
      assert.ok(
        ext.extents.reduce((t, [, len]) => t + len, 0) < 1024 * 1024,
        `the data extents of a sparse file are small: ${JSON.stringify(ext.extents)}`,
      );
      // The RPC's read (layer.read) in ranges: every answer carries the size; a whole read is FILE_TOO_LARGE with the way out.
      const piece = await readLayerRange(layer, 'huge.bin', { offset: 4 * GiB + 12345, length: 14 });
      assert.deepStrictEqual(
        { ...piece, data: Buffer.from(piece.data, 'base64').toString() },
        {
          path: 'huge.bin',
          data: 'past four GiB\n',
          size,
          offset: 4 * GiB + 12345,
        },
      );
      await assert.rejects(readLayerRange(layer, 'huge.bin'), (err: { code?: string; message?: string }) => {
        assert.strictEqual(err.code, 'FILE_TOO_LARGE');
        assert.match(String(err.message), /in ranges/);
        return true;
      });
      // diff: binary, never read whole.
      const d = await w.diff('agent');
      assert.match(d.text, /Binary files \/dev\/null and b\/huge\.bin differ/);
      assert.ok(d.text.includes('+small'));
      // patch: a streamed literal (holes deflate to almost nothing) for git apply.
      const p = await w.patch('agent');
      assert.match(p.text, /GIT binary patch\nliteral 5368709120\n/);
      assert.ok(p.text.length < 64 * 1024 * 1024, `the patch is small: ${p.text.length} characters`);
      // checkpoint: the data only, on disk too.
      const info = await w.checkpoint('agent', 'big');
      assert.ok(info.bytes < 1024 * 1024, `the checkpoint stores the data, not the holes: ${info.bytes} bytes`);
      assert.ok(diskBytes(w.store.root) < 4 * 1024 * 1024, `the checkpoint's files on disk are small: ${diskBytes(w.store.root)} bytes`);
      // restore: same size and bytes, sparse again.
      await layer.remove('huge.bin');
      await assert.rejects(layer.stat('huge.bin'), { code: 'NOT_FOUND' });
      await w.restore('agent', 'big');
      assert.strictEqual((await layer.stat('huge.bin')).size, size);
      for (const [at, data] of marks) assert.deepStrictEqual((await layer.readRange('huge.bin', at, data.length)).data, data);
      assert.deepStrictEqual((await layer.readRange('huge.bin', 3 * GiB, 16)).data, Buffer.alloc(16), 'holes read as zeros');
      const back = await layer.dataExtents('huge.bin');
      assert.ok(back.extents.reduce((t, [, len]) => t + len, 0) < 64 * 1024 * 1024, `restored sparse: ${JSON.stringify(back.extents)}`);
      assert.strictEqual((await w.patch('agent')).text, p.text, 'the restored layer makes the same patch');
      // autosave
      await w.autosave();
      assert.ok(
        w.checkpoints('agent').some((c) => c.name === 'autosave' && c.bytes < 1024 * 1024),
        JSON.stringify([w.checkpoints('agent'), log]),
      );
      // Memory stayed small all along (a whole read of the file would take 5 GiB).
      const mem1 = process.memoryUsage();
      assert.ok(
        mem1.arrayBuffers - mem0.arrayBuffers < 512 * 1024 * 1024,
        `array buffers grew ${mem1.arrayBuffers - mem0.arrayBuffers} bytes`,
      );
      assert.ok(mem1.rss - mem0.rss < 2 * GiB, `resident memory grew ${mem1.rss - mem0.rss} bytes`);
      assert.strictEqual((await layer.readFile('small.txt')).toString(), 'small\n');
    });
  });

  it('a large sparse file (over the in-memory limit) patches to what git apply reproduces, and apply writes it to the folder sparsely', async () => {
    const lower = makeFolder();
    assert.strictEqual(spawnSync('git', ['init', '-q', lower]).status, 0);
    await withWork(
      lower,
      async (w, shadow, mp) => {
        const layer = await shadow.createLayer('agent');
        await shadow.activate('agent');
        const size = 40 * 1024 * 1024;
        sparse(mp, 'mid.bin', size);
        const fd = fs.openSync(path.join(mp, 'mid.bin'), 'r+');
        try {
          fs.writeSync(fd, Buffer.from('middle'), 0, 6, 20 * 1024 * 1024);
        } finally {
          fs.closeSync(fd);
        }
        const want = crypto.createHash('sha256');
        for (let at = 0; at < size; at += 8 * 1024 * 1024) want.update((await layer.readRange('mid.bin', at, 8 * 1024 * 1024)).data);
        const digest = want.digest('hex');
        const p = await w.patch('agent');
        const copy = tempDir('hostile-apply-copy');
        assert.strictEqual(spawnSync('git', ['init', '-q', copy]).status, 0);
        const ap = spawnSync('git', ['-C', copy, 'apply', '-'], { input: p.text, encoding: 'utf8' });
        assert.strictEqual(ap.status, 0, ap.stderr);
        assert.strictEqual(
          crypto
            .createHash('sha256')
            .update(fs.readFileSync(path.join(copy, 'mid.bin')))
            .digest('hex'),
          digest,
        );
        // apply: streamed into the folder, its hole left a hole.
        const r = await w.apply('agent', { paths: ['mid.bin'] });
        assert.deepStrictEqual(
          r.applied.map((a) => a.path),
          ['mid.bin'],
          JSON.stringify(r),
        );
        const st = fs.statSync(path.join(lower, 'mid.bin'));
        assert.strictEqual(st.size, size);
        assert.ok(st.blocks * 512 < 8 * 1024 * 1024, `written sparsely: ${st.blocks * 512} bytes on disk`);
        assert.strictEqual(
          crypto
            .createHash('sha256')
            .update(fs.readFileSync(path.join(lower, 'mid.bin')))
            .digest('hex'),
          digest,
        );
      },
      false, // apply writes the folder
    );
  });

  it('through the daemon, `layer cat` reads ranges of a sparse file over 4 GiB, a whole read answers FILE_TOO_LARGE, and diff, patch and checkpoint work; the daemon lives on', async () => {
    const lower = makeFolder();
    const at = path.join(tempDir('hostile-dmnt'), 'm');
    try {
      assert.strictEqual(cli('mount', lower, '--at', at, '--name', 'hostile').status, 0);
      assert.strictEqual(cli('activate', 'hostile', 'agent').status, 0);
      sparse(at, 'huge.bin', 5 * GiB);
      const fd = fs.openSync(path.join(at, 'huge.bin'), 'r+');
      try {
        fs.writeSync(fd, Buffer.from('deep inside'), 0, 11, 4 * GiB + 7);
      } finally {
        fs.closeSync(fd);
      }
      // Whole: too large for one answer, with the way out.
      const whole = cli('layer', 'cat', 'hostile', 'agent', 'huge.bin');
      assert.strictEqual(whole.status, 1, whole.text);
      assert.strictEqual((whole.out as { error?: { code?: string } } | null)?.error?.code, 'FILE_TOO_LARGE', whole.text);
      // A range, through the real CLI, in JSON and raw.
      const ranged = cli('layer', 'cat', 'hostile', 'agent', 'huge.bin', '--offset', String(4 * GiB + 7), '--length', '11');
      assert.strictEqual(ranged.status, 0, ranged.text);
      const o = ranged.out as { data?: string; size?: number; offset?: number };
      assert.strictEqual(Buffer.from(String(o.data), 'base64').toString(), 'deep inside', ranged.text);
      assert.strictEqual(o.size, 5 * GiB);
      const raw = spawnSync(
        process.execPath,
        [cliPath, 'layer', 'cat', 'hostile', 'agent', 'huge.bin', '--offset', String(4 * GiB), '--length', String(20 * 1024 * 1024)],
        { timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
      );
      assert.strictEqual(raw.status, 0, String(raw.stderr));
      assert.strictEqual(raw.stdout.length, 20 * 1024 * 1024, 'a range over two answers comes out whole');
      assert.strictEqual(raw.stdout.subarray(7, 18).toString(), 'deep inside');
      const diff = cli('diff', 'hostile', '--agent', 'agent');
      assert.strictEqual(diff.status, 0, diff.text);
      assert.match(JSON.stringify(diff.out), /Binary files \/dev\/null and b\/huge\.bin differ/);
      const patch = cli('patch', 'hostile', '--agent', 'agent');
      assert.strictEqual(patch.status, 0, patch.text.slice(0, 2000));
      assert.match(JSON.stringify(patch.out), /literal 5368709120/);
      const cp = cli('checkpoint', 'hostile', '--agent', 'agent');
      assert.strictEqual(cp.status, 0, cp.text);
      const list = cli('list');
      assert.strictEqual(list.status, 0, `the daemon still answers: ${list.text}`);
    } finally {
      try {
        const c = await ShadowClient.connect({ autostart: false });
        await c.request('unmount', { shadow: 'hostile', lazy: true }).catch(() => undefined);
        c.close();
      } catch {
        // no daemon (it died: the bug)
      }
      for (const m of mountedPaths()) if (m === at) spawnSync('umount', ['-l', m]);
      stopTestDaemon();
    }
  });

  it("a checkpoint's cap counts stored data, not holes: a sparse 1 GiB file is stored in little space, more data than the cap is refused before it is read", async () => {
    await withWork(makeFolder(), async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      sparse(mp, 'gig.bin', GiB);
      w.store.maxFileBytes = 1024 * 1024;
      const info = await w.checkpoint('agent', 'holes');
      assert.strictEqual(info.files, 1);
      assert.ok(info.bytes < 64 * 1024, `${info.bytes} bytes stored`);
      // 2 MiB of data in it: over the 1 MiB cap.
      const fd = fs.openSync(path.join(mp, 'gig.bin'), 'r+');
      try {
        fs.writeSync(fd, crypto.randomBytes(2 * 1024 * 1024), 0, 2 * 1024 * 1024, 512 * 1024 * 1024);
      } finally {
        fs.closeSync(fd);
      }
      const before = process.memoryUsage();
      await assert.rejects(w.checkpoint('agent', 'capped'), (err: { code?: string; message?: string }) => {
        assert.strictEqual(err.code, 'FILE_TOO_LARGE', String(err.message));
        assert.match(String(err.message), /gig\.bin/);
        assert.match(String(err.message), /SHADOWFS_CHECKPOINT_MAX_FILE_BYTES/, 'the error names the option that raises the cap');
        return true;
      });
      const after = process.memoryUsage();
      assert.ok(
        after.arrayBuffers - before.arrayBuffers < 64 * 1024 * 1024,
        `not read into memory (${after.arrayBuffers - before.arrayBuffers} bytes)`,
      );
      assert.deepStrictEqual(
        w.checkpoints('agent').map((c) => c.name),
        ['holes'],
      );
      w.store.maxFileBytes = 4 * 1024 * 1024;
      assert.strictEqual((await w.checkpoint('agent', 'raised')).files, 1);
      // The raised checkpoint restores the data where it was.
      fs.rmSync(path.join(mp, 'gig.bin'));
      await w.restore('agent', 'raised');
      const st = fs.statSync(path.join(mp, 'gig.bin'));
      assert.strictEqual(st.size, GiB);
    });
  });

  it('names that are not UTF-8 are refused to the agent (EILSEQ): a rename to one could not be diffed or applied, only lost', async () => {
    // Changes, diffs, apply and checkpoints carry paths as Unicode strings, where such a name
    // becomes another (its bad bytes as U+FFFD) or none: `mv notes.txt notes\xff.txt` was
    // applied as a deletion alone. The folder's own such files are still read.
    const lower = makeFolder();
    fs.writeFileSync(path.join(lower, 'notes.txt'), 'notes\n');
    const bad = Buffer.from('caf\xe9.txt', 'latin1');
    const lowerBad = Buffer.concat([Buffer.from(lower + '/'), bad]);
    fs.writeFileSync(lowerBad, 'latin-1 name\n');
    // (FolderGuard reads names as strings: the folder is compared by hand, names as bytes.)
    const names = (): string[] =>
      fs
        .readdirSync(lower, { encoding: 'buffer' })
        .map((n) => n.toString('hex'))
        .sort();
    const before = names();
    await withShadow(
      lower,
      async (shadow, mp) => {
        const w = new WorkService(shadow);
        try {
          const sh = (script: string) => spawnSync('sh', ['-c', script], { cwd: mp, encoding: 'latin1' });
          for (const script of [
            'mv notes.txt "$(printf \'notes\\377.txt\')"',
            'echo x > "$(printf \'new\\377\')"',
            'mkdir "$(printf \'dir\\377\')"',
            'ln -s "$(printf \'target\\377\')" link',
            'ln notes.txt "$(printf \'hard\\377\')"',
            'rm "$(printf \'caf\\351.txt\')"',
            'echo more >> "$(printf \'caf\\351.txt\')"',
          ]) {
            const r = sh(script);
            assert.notStrictEqual(r.status, 0, script);
            // (A write to an open file without an open round trip (fuse_ll) fails at the write: EIO.)
            assert.match(r.stderr, /Invalid or incomplete multibyte or wide character|I\/O error/, `${script}: ${r.stderr}`);
          }
          assert.strictEqual(sh('cat "$(printf \'caf\\351.txt\')"').stdout, 'latin-1 name\n', "the folder's file is read");
          assert.deepStrictEqual(await shadow.layer('default').changes(), []);
          assert.deepStrictEqual((await w.diff('default')).files, []);
        } finally {
          await w.dispose();
        }
      },
      { guard: false },
    );
    assert.deepStrictEqual(names(), before);
    assert.strictEqual(fs.readFileSync(path.join(lower, 'notes.txt'), 'utf8'), 'notes\n');
    assert.strictEqual(fs.readFileSync(lowerBad, 'utf8'), 'latin-1 name\n');
  });

  it('grep with a catastrophic regular expression answers TIMEOUT (or a result) while the main thread keeps running', async () => {
    await withShadow(makeFolder(), async (shadow, mp) => {
      const layer = await shadow.createLayer('agent');
      await shadow.activate('agent');
      fs.writeFileSync(path.join(mp, 'evil.txt'), 'a'.repeat(32) + '!\n');
      let ticks = 0;
      const timer = setInterval(() => ticks++, 20);
      let outcome: string;
      try {
        outcome = await grep(layer, '^(a+)+$', { timeoutMs: 1500 }).then(
          (r) => `result ${r.matches.length}`,
          (err: { code?: string }) => String(err.code),
        );
      } finally {
        clearInterval(timer);
      }
      assert.ok(outcome === 'TIMEOUT' || outcome === 'result 0', outcome);
      assert.ok(ticks >= 5, `the main thread ran timers while grep searched (${ticks} ticks)`);
      // An ordinary grep still answers, after the worker of the one above was stopped.
      const ok = await grep(layer, 'a+!$');
      assert.deepStrictEqual(
        ok.matches.map((m) => m.path),
        ['evil.txt'],
      );
    });
  });

  it('a FIFO in a layer handed to lints is an error for that file, never a hung read', async () => {
    await withShadow(makeFolder(), async (shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      const fifo = path.join(mp, 'src', 'pipe.ts');
      const { spawnSync } = await import('child_process');
      assert.strictEqual(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo through the mount');
      const svc = new LintsService(shadow);
      try {
        const r = await svc.lints({ shadow: mp, agent: 'agent', paths: ['src/pipe.ts', 'src/pipe.ts'], timeoutMs: 20_000 });
        const f = r.files.find((x) => x.path === 'src/pipe.ts');
        assert.strictEqual(f?.status, 'error', JSON.stringify(r));
        assert.match(String(f?.error), /not a regular file/);
        // The libuv pool is free: an ordinary asynchronous read answers.
        assert.strictEqual(await fs.promises.readFile(path.join(mp, 'notes.txt'), 'utf8'), 'the user wrote this\n');
      } finally {
        // Should a reader still hang on the FIFO (the bug), give it an end of file.
        try {
          fs.closeSync(fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
        } catch {
          // no reader: nothing hangs
        }
        await svc.dispose();
      }
    });
  });

  it("a restored checkpoint keeps its bases: the user's later edits of files the agent changed, created or deleted are conflicts", async () => {
    const lower = makeFolder();
    fs.writeFileSync(path.join(lower, 'doomed.txt'), 'the agent deletes this\n');
    await withWork(
      lower,
      async (w, shadow, mp) => {
        await shadow.createLayer('agent');
        await shadow.activate('agent');
        fs.writeFileSync(path.join(mp, 'notes.txt'), 'the agent wrote this\n');
        fs.writeFileSync(path.join(mp, 'new.txt'), 'the agent made this\n');
        fs.rmSync(path.join(mp, 'doomed.txt'));
        await w.checkpoint('agent', 'cp');
        // The user edits (or creates) the files in the folder, then the agent's layer is restored.
        await new Promise((r) => setTimeout(r, 20));
        for (const rel of ['notes.txt', 'new.txt', 'doomed.txt']) fs.writeFileSync(path.join(lower, rel), "the user's own edit\n");
        await w.restore('agent', 'cp');
        const r = await w.apply('agent', { dryRun: true });
        assert.deepStrictEqual(
          r.conflicts.map((c) => c.path).sort(),
          ['doomed.txt', 'new.txt', 'notes.txt'],
          `apply must not overwrite the user's edits: ${JSON.stringify(r)}`,
        );
        // A checkpoint of the restored layer keeps those bases too.
        await w.checkpoint('agent', 'again');
        await w.restore('agent', 'again');
        const again = await w.apply('agent', { dryRun: true });
        assert.deepStrictEqual(again.conflicts.map((c) => c.path).sort(), ['doomed.txt', 'new.txt', 'notes.txt']);
        for (const rel of ['notes.txt', 'new.txt', 'doomed.txt'])
          assert.strictEqual(fs.readFileSync(path.join(lower, rel), 'utf8'), "the user's own edit\n");
      },
      false,
    );
  });
});

// Hostile content is just content, and bases survive restores (issue 27, deliverables 4 and 5),
// on real mounts: a sparse file of more than 4 GiB in a layer is refused with FILE_TOO_LARGE by
// every read path (it used to abort the process with a double free); checkpoints refuse a file
// above their size cap before reading it; a FIFO in a layer never hangs the diagnostics
// service; a catastrophic regular expression given to grep never blocks the main thread; and a
// restored checkpoint still reports the user's edit of a file as a conflict.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { DiagnosticsService } from '../src/diagnostics/service';
import type { Shadow } from '../src/shadow';
import { grep } from '../src/work/files';
import { WorkService } from '../src/work/service';
import { ShadowClient } from '../src/client';
import { mountedPaths } from '../src/platform';
import { repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const GiB = 1024 * 1024 * 1024;
const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

/** A CLI command against the test run's daemon (started on demand), with --json. */
function cli(...args: string[]): { status: number | null; out: Record<string, unknown> | null; text: string } {
  const r = spawnSync(process.execPath, [cliPath, ...args, '--json'], { encoding: 'utf8', timeout: 60_000 });
  let out: Record<string, unknown> | null = null;
  try {
    out = JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    // not JSON: the text says why
  }
  return { status: r.status, out, text: `${r.stdout}${r.stderr}` };
}

/** A small folder to shadow: one text file and a TypeScript project the diagnostics service knows. */
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

  it('a sparse file over 4 GiB is refused with FILE_TOO_LARGE by layer reads, diff, patch, checkpoint and autosave, and the process lives on', async () => {
    await withWork(makeFolder(), async (w, shadow, mp, log) => {
      const layer = await shadow.createLayer('agent');
      await shadow.activate('agent');
      sparse(mp, 'huge.bin', 5 * GiB);
      fs.writeFileSync(path.join(mp, 'small.txt'), 'small\n');
      assert.strictEqual((await layer.stat('huge.bin')).size, 5 * GiB);
      // layer.readFile is what `layer cat`, `file read` and the VS Code diff read through.
      await assert.rejects(layer.readFile('huge.bin'), (err: { code?: string; message?: string }) => {
        assert.strictEqual(err.code, 'FILE_TOO_LARGE', String(err.message));
        assert.match(String(err.message), /huge\.bin/);
        return true;
      });
      await assert.rejects(w.diff('agent'), { code: 'FILE_TOO_LARGE' });
      await assert.rejects(w.patch('agent'), { code: 'FILE_TOO_LARGE' });
      await assert.rejects(w.checkpoint('agent', 'big'), (err: { code?: string; message?: string }) => {
        assert.strictEqual(err.code, 'FILE_TOO_LARGE', String(err.message));
        assert.match(String(err.message), /SHADOWFS_CHECKPOINT_MAX_FILE_BYTES/, 'the error names the option that raises the cap');
        return true;
      });
      await w.autosave();
      assert.ok(
        log.some((l) => /autosave of agent .*huge\.bin/.test(l)),
        `autosave reports the file it could not save: ${JSON.stringify(log)}`,
      );
      assert.deepStrictEqual(w.checkpoints('agent'), [], 'no checkpoint half made');
      // Everything else still works.
      assert.strictEqual((await layer.readFile('small.txt')).toString(), 'small\n');
      fs.rmSync(path.join(mp, 'huge.bin'));
      assert.ok((await w.diff('agent')).text.includes('+small'));
    });
  });

  it('through the daemon, `layer cat`, diff, patch and checkpoint of a sparse file over 4 GiB answer FILE_TOO_LARGE and the daemon lives on', async () => {
    const lower = makeFolder();
    const at = path.join(tempDir('hostile-dmnt'), 'm');
    try {
      assert.strictEqual(cli('mount', lower, '--at', at, '--name', 'hostile').status, 0);
      assert.strictEqual(cli('activate', 'hostile', 'agent').status, 0);
      sparse(at, 'huge.bin', 5 * GiB);
      for (const args of [
        ['layer', 'cat', 'hostile', 'agent', 'huge.bin'],
        ['diff', 'hostile', '--agent', 'agent'],
        ['patch', 'hostile', '--agent', 'agent'],
        ['checkpoint', 'hostile', '--agent', 'agent'],
      ]) {
        const r = cli(...args);
        assert.strictEqual(r.status, 1, `${args.join(' ')}: ${r.text}`);
        assert.strictEqual((r.out as { error?: { code?: string } } | null)?.error?.code, 'FILE_TOO_LARGE', `${args.join(' ')}: ${r.text}`);
      }
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

  it('a checkpoint refuses a 1 GiB sparse file above its cap without reading it, and honours the cap set on its store', async () => {
    await withWork(makeFolder(), async (w, shadow, mp) => {
      await shadow.createLayer('agent');
      await shadow.activate('agent');
      sparse(mp, 'gig.bin', GiB);
      const before = process.memoryUsage();
      await assert.rejects(w.checkpoint('agent', 'gig'), (err: { code?: string; message?: string }) => {
        assert.strictEqual(err.code, 'FILE_TOO_LARGE', String(err.message));
        assert.match(String(err.message), /gig\.bin/);
        return true;
      });
      const after = process.memoryUsage();
      assert.ok(
        after.arrayBuffers - before.arrayBuffers < 64 * 1024 * 1024,
        `the file was not read into memory (array buffers grew ${after.arrayBuffers - before.arrayBuffers} bytes)`,
      );
      assert.deepStrictEqual(w.checkpoints('agent'), []);
      // A small file under the cap is saved as before.
      fs.rmSync(path.join(mp, 'gig.bin'));
      sparse(mp, 'hole.bin', 1024 * 1024);
      const info = await w.checkpoint('agent', 'small');
      assert.strictEqual(info.files, 1);
      // The cap is an option of the store.
      w.store.maxFileBytes = 512 * 1024;
      await assert.rejects(w.checkpoint('agent', 'capped'), { code: 'FILE_TOO_LARGE' });
      w.store.maxFileBytes = 2 * 1024 * 1024;
      assert.strictEqual((await w.checkpoint('agent', 'raised')).files, 1);
    });
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
      const svc = new DiagnosticsService(shadow);
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

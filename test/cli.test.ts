// The CLI end to end: `shadowfs mount --foreground --json` and `shadowfs demo`.
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as readline from 'readline';
import { mountedPaths } from '../src/platform';
import { FolderGuard, makeProject, repoRoot, tempDir } from './helpers/fixtures';

const cli = path.join(repoRoot, 'bin', 'shadowfs.js');

function run(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('shadowfs CLI', function () {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`mount --foreground --json serves until ${signal}, then unmounts cleanly`, async () => {
      const lower = makeProject();
      const guard = new FolderGuard(lower);
      const args = [cli, 'mount', lower, '--foreground', '--json'];
      const at = signal === 'SIGTERM' ? path.join(tempDir('cli'), 'mnt') : undefined;
      if (at) args.push('--at', at);
      // One run names the backend, the other takes the default ($SHADOWFS_BACKEND of this pass).
      if (signal === 'SIGTERM') args.push('--backend', 'fuse_hl');
      const backend = signal === 'SIGTERM' ? 'fuse_hl' : process.env.SHADOWFS_BACKEND || 'fuse_ll';
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      const lines = readline.createInterface({ input: child.stdout });
      const events: Array<Record<string, string>> = [];
      const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      try {
        const mounted = await new Promise<Record<string, string>>((resolve, reject) => {
          lines.on('line', (l) => {
            const e = JSON.parse(l) as Record<string, string>;
            events.push(e);
            if (e.event === 'mounted') resolve(e);
          });
          child.on('exit', () => reject(new Error(`exited before mounting: ${JSON.stringify(events)}`)));
        });
        assert.strictEqual(mounted.folder, fs.realpathSync(lower));
        assert.strictEqual(mounted.lower, mounted.folder, 'lower: the former name, kept for one protocol version');
        assert.strictEqual(mounted.backend, backend);
        if (at) assert.strictEqual(mounted.mountPoint, fs.realpathSync(at));
        assert.ok(mountedPaths().has(mounted.mountPoint));
        assert.strictEqual(
          fs.readFileSync(path.join(mounted.mountPoint, 'README.md'), 'utf8'),
          fs.readFileSync(path.join(lower, 'README.md'), 'utf8'),
        );
        fs.writeFileSync(path.join(mounted.mountPoint, 'README.md'), 'shadow only');
        child.kill(signal);
        assert.strictEqual(await exited, 0);
        assert.deepStrictEqual(events.at(-1), { event: 'unmounted', mountPoint: mounted.mountPoint, signal });
        assert.ok(!mountedPaths().has(mounted.mountPoint));
        if (!at) assert.ok(!fs.existsSync(mounted.mountPoint), 'the mount point it created is removed');
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
        // Never leave a mount behind, even when an assertion above failed.
        for (const m of mountedPaths()) if (m.includes(path.basename(lower))) spawnSync('umount', ['-l', m]);
      }
      await guard.check();
    });
  }

  it('reports errors with a code and exit status 1, usage errors with 2', () => {
    const missing = run('mount', '/nonexistent/folder', '--foreground', '--json');
    assert.strictEqual(missing.status, 1);
    assert.strictEqual((JSON.parse(missing.stdout) as { error: { code: string } }).error.code, 'FOLDER_NOT_FOUND');
    const human = run('mount', '/nonexistent/folder', '--foreground');
    assert.strictEqual(human.status, 1);
    assert.match(human.stderr, /error FOLDER_NOT_FOUND: the folder \/nonexistent\/folder does not exist/);
    const badBackend = run('mount', makeProject(), '--backend', 'winfsp', '--foreground', '--json');
    assert.strictEqual(badBackend.status, 1);
    assert.strictEqual((JSON.parse(badBackend.stdout) as { error: { code: string } }).error.code, 'UNKNOWN_BACKEND');
    const badIo = run('mount', makeProject(), '--io', 'fast', '--foreground');
    assert.strictEqual(badIo.status, 2);
    assert.match(badIo.stderr, /Invalid values:[\s\S]*io[\s\S]*Choices: "cached", "open", "passthrough"/);
    assert.strictEqual(run().status, 2);
    assert.strictEqual(run('no-such-command').status, 2);
  });

  it('demo on the bundled example: two agents take turns on one shadow, one breaks the tests, folder unchanged', () => {
    const r = run('demo', '--json');
    assert.strictEqual(r.status, 0, r.stderr);
    const s = JSON.parse(r.stdout) as {
      folderUnchanged: boolean;
      testsInFolder: number;
      agents: Record<string, { tests: number; changes: Array<{ path: string; kind: string }> }>;
    };
    assert.strictEqual(s.folderUnchanged, true);
    assert.strictEqual(s.testsInFolder, 0);
    assert.strictEqual(s.agents.alice.tests, 0);
    assert.strictEqual(s.agents.bob.tests, 1);
    assert.deepStrictEqual(
      s.agents.alice.changes.map((c) => `${c.kind} ${c.path}`),
      ['deleted notes/todo.txt', 'added test/mean-more.test.js'],
    );
    assert.deepStrictEqual(
      s.agents.bob.changes.map((c) => `${c.kind} ${c.path}`),
      ['modified src/math.js'],
    );
  });

  it('demo on a folder of yours edits and deletes only inside the shadow', async () => {
    const lower = makeProject();
    const guard = new FolderGuard(lower);
    const r = run('demo', lower);
    assert.strictEqual(r.status, 0, r.stderr);
    assert.match(r.stdout, /unchanged, not a byte written/);
    await guard.check();
  });
});

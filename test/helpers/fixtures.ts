// Shared test fixtures: private temp folders, the guard that proves the user's folder is never
// written (fingerprint before/after + inotify watch during), and withShadow(), which always
// unmounts what it mounted.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { mount, MountOptions, Shadow } from '../../src';
import { mountedPaths } from '../../src/platform';
import { fingerprintTree } from '../../src/common/fingerprint';
import { WorkService } from '../../src/work/service';

export const repoRoot = path.join(__dirname, '..', '..', '..');
export const exampleProject = path.join(repoRoot, 'examples', 'demo-project');
export const testRootPrefix = path.join(os.tmpdir(), 'shadowfs-test-');

const created: string[] = [];

export function tempDir(label = 'tmp'): string {
  const dir = fs.mkdtempSync(`${testRootPrefix}${label}-`);
  created.push(dir);
  return dir;
}

/** Removes the temporary folders this run made (never one that is still a mount point). */
export function removeTempDirs(): void {
  const mounted = mountedPaths();
  for (const dir of created.splice(0)) {
    if ([...mounted].some((m) => m === dir || m.startsWith(`${dir}/`))) continue;
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function leakedTestMounts(): string[] {
  // The test run's runtime directory (daemons' mounts) is its own too; the daemon is stopped first.
  return [...mountedPaths()].filter((p) => ownsTestPath(p));
}

/**
 * Whether `p` lies in a temporary directory this test process made, or in its runtime directory.
 * Other runs of the suite may be mounting beside this one (a developer's run beside CI's): their
 * mounts are never this run's to judge or to clean.
 */
export function ownsTestPath(p: string): boolean {
  const runtime = process.env.XDG_RUNTIME_DIR;
  return [...created, ...(runtime?.startsWith(testRootPrefix) ? [runtime] : [])].some((d) => p === d || p.startsWith(`${d}/`));
}

/**
 * Mounts under the tests' prefix left by a run that is gone: their server is dead, so any access
 * fails with ENOTCONN (checked in a child with a time limit). A live mount belongs to a run
 * still going, and is left alone.
 */
export function deadTestMounts(): string[] {
  return [...mountedPaths()].filter((p) => {
    if (!p.startsWith(testRootPrefix)) return false;
    const r = spawnSync(
      process.execPath,
      ['-e', "try{require('fs').statSync(process.argv[1])}catch(e){process.stdout.write(String(e.code))}", p],
      {
        encoding: 'utf8',
        timeout: 5000,
      },
    );
    return r.stdout === 'ENOTCONN';
  });
}
/** A copy of the example project plus a few extra shapes (nested dirs, symlink, empty dir). */
export function makeProject(label = 'lower'): string {
  const dir = tempDir(label);
  fs.cpSync(exampleProject, dir, { recursive: true });
  fs.mkdirSync(path.join(dir, 'deep/a/b/c'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'deep/a/b/c/leaf.txt'), 'leaf\n');
  fs.writeFileSync(path.join(dir, 'deep/a/top.txt'), 'top\n');
  fs.mkdirSync(path.join(dir, 'empty'));
  fs.symlinkSync('src/math.js', path.join(dir, 'link-to-math'));
  fs.writeFileSync(path.join(dir, 'script.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
  return dir;
}

/**
 * Watches `dir` (every directory in it, via inotify) and fingerprints it. check() fails if
 * anything was created, modified, deleted or renamed, or if the fingerprint differs.
 */
export class FolderGuard {
  private readonly before: string;
  private readonly events: string[] = [];
  private readonly watchers: fs.FSWatcher[] = [];

  /** Every guard made in this run, for the root hook to stop. */
  static readonly all = new Set<FolderGuard>();

  constructor(private readonly dir: string) {
    FolderGuard.all.add(this);
    this.before = fingerprintTree(dir).digest;
    const watch = (d: string): void => {
      // Not persistent: a guard a failing test never stopped must not keep mocha from exiting
      // (the root hook stops every guard at the end too).
      this.watchers.push(fs.watch(d, { persistent: false }, (ev, name) => this.events.push(`${ev} ${path.join(d, String(name))}`)));
      for (const e of fs.readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) watch(path.join(d, e.name));
    };
    watch(dir);
  }

  async check(): Promise<void> {
    // inotify events arrive asynchronously: give them a moment to be delivered.
    await new Promise((r) => setTimeout(r, 50));
    for (const w of this.watchers) w.close();
    assert.deepStrictEqual(this.events, [], `the user's folder ${this.dir} was written to`);
    assert.strictEqual(fingerprintTree(this.dir).digest, this.before, `the user's folder ${this.dir} changed`);
  }

  stop(): void {
    for (const w of this.watchers) w.close();
  }
}

/** Mounts a shadow of `lower`, runs `fn`, and always unmounts; checks the folder guard too. */
export async function withShadow<T>(
  lower: string,
  fn: (shadow: Shadow, mp: string) => Promise<T> | T,
  options: MountOptions & { guard?: boolean } = {},
): Promise<T> {
  const guard = options.guard === false ? undefined : new FolderGuard(lower);
  const mp = options.mountPoint ?? path.join(tempDir('mnt'), 'm');
  let shadow: Shadow | undefined;
  try {
    shadow = await mount(lower, { ...options, mountPoint: mp });
    const out = await fn(shadow, shadow.mountPoint);
    await shadow.unmount();
    if (guard) await guard.check();
    return out;
  } finally {
    guard?.stop();
    if (shadow?.mounted) await shadow.unmount({ lazy: true });
  }
}

/** withShadow with the shadow's work service (diffs, apply, checkpoints), disposed after `fn`. */
export async function withWork<T>(
  lower: string,
  fn: (w: WorkService, shadow: Shadow, mp: string) => Promise<T>,
  guard = true,
  options: MountOptions = {},
): Promise<T> {
  return withShadow(
    lower,
    async (shadow, mp) => {
      const w = new WorkService(shadow);
      try {
        return await fn(w, shadow, mp);
      } finally {
        await w.dispose();
      }
    },
    { ...options, guard },
  );
}

/** What this process holds open at or under `dir` (its descriptors' targets, sorted). */
export function openUnder(dir: string): string[] {
  return fs
    .readdirSync('/proc/self/fd')
    .map((fd) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return ''; // closed meanwhile (readdir's own descriptor)
      }
    })
    .filter((l) => l === dir || l.startsWith(dir + '/'))
    .sort();
}

/** Polls `probe` until it returns true or `ms` pass; returns the time it took. */
export async function eventually(probe: () => boolean, ms: number, what: string): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (probe()) return Date.now() - start;
    if (Date.now() - start > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function errCode(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'unknown';
  }
  return 'OK';
}

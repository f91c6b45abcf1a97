// POSIX conformance: the checks of test/conformance/posix.cc (open, create, read/write, holes,
// mmap, truncate, fallocate, copy_file_range, mkdir/rmdir, readdir while deleting, seekdir,
// rename and renameat2, link, symlink, chmod/chown/utimens, times, access, xattrs, inode
// numbers, fifos, devices, sockets, statfs, locks, large files) run in a plain directory of this
// machine's file system, which is the reference, and through shadows; every check must print
// the same line. The fixtures of each check are made in the user's folder (so each change in
// the shadow goes through copy-up), or inside the shadow (so they live in the layer).
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as path from 'path';
import { conformanceBinary } from './helpers/probe';
import { tempDir, withShadow } from './helpers/fixtures';
import { asNobody, nobodyDir, NOBODY, NOGROUP } from './helpers/unprivileged';

function posix(...args: string[]): string {
  return execFileSync(conformanceBinary(), args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
}

/** Check name -> result line, from the output of `posix check`. */
function parseChecks(output: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of output.split('\n').filter(Boolean)) {
    const i = line.indexOf(': ');
    out.set(line.slice(0, i), line.slice(i + 2));
  }
  return out;
}

/** Runs every check in `dir`; returns check name -> result line. */
function runChecks(dir: string): Map<string, string> {
  return parseChecks(posix('check', dir));
}

/** The same as the unprivileged user nobody (no capabilities, no other groups). */
async function runChecksAsNobody(dir: string): Promise<Map<string, string>> {
  const r = await asNobody([conformanceBinary(), 'check', dir]);
  assert.strictEqual(r.status, 0, `posix check as nobody failed: ${r.stderr}`);
  return parseChecks(r.stdout);
}

/**
 * Where the portable backend answers differently by design of the path-based FUSE API. Each
 * entry gives the exact line it must print instead, so a change in either direction is noticed.
 */
const knownDifferences: Record<string, Record<string, (reference: string) => string>> = {
  fuse_hl: {
    // The kernel sends fstat() without a file handle; libfuse's high-level layer then needs a
    // path, an open file whose every name is gone has none, and it answers ESTALE before
    // shadowfs sees the call. Reads and writes through the descriptor still work.
    'unlink-open-file': (ref) => {
      assert.ok(ref.includes('| nlink=0 |'), ref);
      return ref.replace('| nlink=0 |', '| fstat ESTALE |');
    },
  },
};

function compareChecks(names: string[], reference: Map<string, string>, got: Map<string, string>, where: string, backend: string): void {
  const diffs: string[] = [];
  for (const n of names) {
    const ref = reference.get(n) ?? '';
    const expected = knownDifferences[backend]?.[n]?.(ref) ?? ref;
    const label = expected === ref ? 'plain directory' : `${backend} (known) `;
    if (got.get(n) !== expected) diffs.push(`${n}\n    ${label}: ${expected}\n    shadow:          ${got.get(n)}`);
  }
  assert.deepStrictEqual(diffs, [], `${diffs.length} of ${names.length} checks differ ${where}:\n  ${diffs.join('\n  ')}`);
}

describe("POSIX conformance: a shadow answers every check as the folder's own file system does", function () {
  let names: string[];
  let reference: Map<string, string>;

  before(() => {
    names = posix('list').split('\n').filter(Boolean);
    const dir = tempDir('conformance-ref');
    posix('setup', dir);
    reference = runChecks(dir);
    // The reference itself must have run every check (a suite that ran nothing would pass).
    assert.deepStrictEqual([...reference.keys()], names);
    assert.ok(names.length >= 45, `only ${names.length} checks`);
  });

  function compare(got: Map<string, string>, where: string, backend: string): void {
    compareChecks(names, reference, got, where, backend);
  }

  it('with the fixtures in the folder: every change goes through copy-up', async () => {
    const lower = tempDir('conformance-lower');
    posix('setup', lower);
    await withShadow(lower, (s, mp) => compare(runChecks(mp), 'with the fixtures in the folder', s.backend));
  });

  it('with the fixtures in the folder and no kernel caching: every lookup reaches the overlay', async () => {
    const lower = tempDir('conformance-lower');
    posix('setup', lower);
    await withShadow(lower, (s, mp) => compare(runChecks(mp), 'without kernel caching', s.backend), { cacheTimeout: 0 });
  });

  it('with the fixtures made inside the shadow: they live in the layer', async () => {
    const lower = tempDir('conformance-empty');
    await withShadow(lower, (s, mp) => {
      posix('setup', mp);
      compare(runChecks(mp), 'with the fixtures in the layer', s.backend);
    });
  });

  it('in an agent view, with the fixtures in the folder', async () => {
    const lower = tempDir('conformance-lower');
    posix('setup', lower);
    await withShadow(lower, async (shadow) => {
      const view = await shadow.openView('agent', { mountPoint: path.join(tempDir('conformance-view'), 'v') });
      try {
        compare(runChecks(view.mountPoint), 'in an agent view', shadow.backend);
      } finally {
        await view.close();
      }
    });
  });
});

// The same checks run by an unprivileged user (nobody) on a shadow that root mounted with
// allowOther, against a plain directory whose fixtures belong to nobody in the same way (and
// root's where a check is about another user's files, see `posix setup --owner`): every
// permission the kernel grants or refuses must be the same.
describe('POSIX conformance as an unprivileged user, on a shadow mounted with allowOther', function () {
  let names: string[];
  let reference: Map<string, string>;
  const owner = `${NOBODY}:${NOGROUP}`;

  before(async () => {
    names = posix('list').split('\n').filter(Boolean);
    const dir = nobodyDir('conformance-nobody-ref');
    posix('setup', dir, '--owner', owner);
    reference = await runChecksAsNobody(dir);
    assert.deepStrictEqual([...reference.keys()], names);
    // The permission checks must really have been refused something, or they test nothing.
    assert.match(reference.get('perm-modes') ?? '', /EACCES/);
    assert.match(reference.get('perm-other-owner') ?? '', /EPERM/);
    assert.match(reference.get('perm-sticky') ?? '', /EPERM/);
  });

  it('with the fixtures in the folder: every change goes through copy-up', async () => {
    const lower = nobodyDir('conformance-nobody-lower');
    posix('setup', lower, '--owner', owner);
    const mountPoint = path.join(nobodyDir('conformance-nobody-mnt'), 'm');
    const got = await withShadow(lower, (_s, mp) => runChecksAsNobody(mp), { allowOther: true, mountPoint });
    compareChecks(names, reference, got, 'as nobody, with the fixtures in the folder', backendOf());
  });

  it('with the fixtures made inside the shadow: they live in the layer', async () => {
    const lower = nobodyDir('conformance-nobody-empty');
    const mountPoint = path.join(nobodyDir('conformance-nobody-mnt'), 'm');
    const got = await withShadow(
      lower,
      (_s, mp) => {
        posix('setup', mp, '--owner', owner);
        return runChecksAsNobody(mp);
      },
      { allowOther: true, mountPoint },
    );
    compareChecks(names, reference, got, 'as nobody, with the fixtures in the layer', backendOf());
  });
});

function backendOf(): string {
  return process.env.SHADOWFS_BACKEND || 'fuse_ll';
}

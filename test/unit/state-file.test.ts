// Unit tests of the daemon's state file across the rename of its `lower` key to `folder` (issue
// #30): a daemon writes `folder`, and reads both shapes, so that a daemon upgraded while shadows
// are mounted recovers what its predecessor recorded before it crashed.
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { Logger } from 'winston';
import { readState, writeState } from '../../src/daemon/state';

/** A logger that keeps its warnings, as much of winston's Logger as readState uses. */
function warnings(): { log: Logger; said: string[] } {
  const said: string[] = [];
  return { log: { warn: (message: string) => said.push(message) } as unknown as Logger, said };
}

describe("unit: the daemon's state file, folder and its former name lower", () => {
  let dir: string;
  let statePath: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-unit-state-'));
    statePath = path.join(dir, 'state.json');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const entry = {
    name: 'proj',
    mountPoint: '/run/shadowfs/mounts/proj-1',
    createdMountPoint: true,
    backend: 'fuse_ll',
    io: 'cached' as const,
  };

  it('writes folder, never lower, and reads it back as written', () => {
    writeState(statePath, { pid: 4242, shadows: [{ ...entry, folder: '/home/u/proj', views: [] }] });
    const raw = JSON.parse(fs.readFileSync(statePath, 'utf8')) as { shadows: Array<Record<string, unknown>> };
    assert.strictEqual(raw.shadows[0].folder, '/home/u/proj');
    assert.ok(!('lower' in raw.shadows[0]), JSON.stringify(raw));
    const { log, said } = warnings();
    assert.deepStrictEqual(readState(statePath, log), { pid: 4242, shadows: [{ ...entry, folder: '/home/u/proj', views: [] }] });
    assert.deepStrictEqual(said, []);
  });

  it('reads a state file a daemon before the rename wrote (lower for folder) as the same shadows, views and all', () => {
    const view = { mountPoint: '/run/shadowfs/mounts/proj-view-1', createdMountPoint: true };
    fs.writeFileSync(
      statePath,
      JSON.stringify({
        pid: 4242,
        shadows: [
          { ...entry, lower: '/home/u/proj', views: [view], active: 'alice' },
          { ...entry, name: 'other', lower: '/home/u/other', mountPoint: '/mnt/other' },
        ],
      }),
    );
    const { log, said } = warnings();
    assert.deepStrictEqual(readState(statePath, log), {
      pid: 4242,
      shadows: [
        { ...entry, folder: '/home/u/proj', views: [view], active: 'alice' },
        { ...entry, name: 'other', folder: '/home/u/other', mountPoint: '/mnt/other', views: [] },
      ],
    });
    assert.deepStrictEqual(said, []);
  });

  it('checks a former-shape entry as strictly as a current one, and refuses an entry that names both', () => {
    fs.writeFileSync(
      statePath,
      JSON.stringify({
        pid: 4242,
        shadows: [
          { ...entry, name: 'relative', lower: 'home/u/proj' },
          { ...entry, name: 'both', folder: '/home/u/proj', lower: '/home/u/other' },
          { ...entry, name: 'neither' },
          { ...entry, name: 'good', lower: '/home/u/proj' },
        ],
      }),
    );
    const { log, said } = warnings();
    assert.deepStrictEqual(
      readState(statePath, log)?.shadows.map((s) => [s.name, s.folder]),
      [['good', '/home/u/proj']],
    );
    assert.strictEqual(said.length, 3, said.join('\n'));
    assert.match(said[0], /shadow #0 is not valid \(folder: /);
    assert.match(said[1], /shadow #1 is not valid .*lower/);
    assert.match(said[2], /shadow #2 is not valid \(folder: /);
  });
});

// Unit tests of how a process without XDG_RUNTIME_DIR (an MCP server started by an MCP client,
// which passes only HOME, LOGNAME, PATH, SHELL, TERM and USER) finds the daemon's runtime
// directory: the record the daemon leaves under HOME, trusted only when it is this user's,
// nobody else may write it, and the daemon it names is alive.
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { announceRuntimeDir, recordedRuntimeDir, runtimeDir, runtimePointerPath } from '../../src/platform/linux-runtime';

describe('unit: the runtime directory without XDG_RUNTIME_DIR', () => {
  const saved = {
    HOME: process.env.HOME,
    XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR,
    SHADOWFS_RUNTIME_RECORD: process.env.SHADOWFS_RUNTIME_RECORD,
  };
  let home: string;
  let dir: string;
  beforeEach(() => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-unit-home-'));
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-unit-rt-'));
    fs.chmodSync(dir, 0o700);
    process.env.HOME = home;
    delete process.env.XDG_RUNTIME_DIR;
    delete process.env.SHADOWFS_RUNTIME_RECORD;
  });
  afterEach(() => {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("finds the directory a live daemon recorded under HOME, and forgets it when that daemon's record is removed", () => {
    const undo = announceRuntimeDir(dir);
    assert.strictEqual(runtimePointerPath(), path.join(home, '.local', 'state', 'shadowfs', 'daemon-runtime.json'));
    assert.strictEqual(fs.statSync(runtimePointerPath()).mode & 0o777, 0o600);
    assert.strictEqual(recordedRuntimeDir(), dir);
    assert.strictEqual(runtimeDir(), dir);
    undo();
    assert.ok(!fs.existsSync(runtimePointerPath()));
    assert.notStrictEqual(runtimeDir(), dir);
  });

  it('does not trust a record others may write, one of a dead daemon, nor one naming a directory others may write', () => {
    announceRuntimeDir(dir);
    fs.chmodSync(runtimePointerPath(), 0o666);
    assert.strictEqual(recordedRuntimeDir(), undefined, 'a file others may write');
    fs.chmodSync(runtimePointerPath(), 0o600);
    fs.chmodSync(path.dirname(runtimePointerPath()), 0o777);
    assert.strictEqual(recordedRuntimeDir(), undefined, 'in a directory others may write');
    fs.chmodSync(path.dirname(runtimePointerPath()), 0o700);
    fs.chmodSync(dir, 0o777);
    assert.strictEqual(recordedRuntimeDir(), undefined, 'naming a directory others may write');
    fs.chmodSync(dir, 0o700);
    fs.writeFileSync(runtimePointerPath(), JSON.stringify({ dir, pid: 2 ** 22 + 12345 }), { mode: 0o600 });
    assert.strictEqual(recordedRuntimeDir(), undefined, 'of a daemon that is gone');
  });

  it("leaves another live daemon's record alone", () => {
    announceRuntimeDir(dir);
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-unit-rt2-'));
    try {
      fs.chmodSync(other, 0o700);
      announceRuntimeDir(other)();
      assert.strictEqual(recordedRuntimeDir(), dir);
    } finally {
      fs.rmSync(other, { recursive: true, force: true });
    }
  });

  it('keeps the record where SHADOWFS_RUNTIME_RECORD says (the test suite), and nothing under HOME', () => {
    const file = path.join(dir, 'record.json');
    process.env.SHADOWFS_RUNTIME_RECORD = file;
    const undo = announceRuntimeDir(dir);
    assert.strictEqual(runtimePointerPath(), file);
    assert.strictEqual(recordedRuntimeDir(), dir);
    assert.ok(!fs.existsSync(path.join(home, '.local', 'state', 'shadowfs', 'daemon-runtime.json')));
    undo();
    assert.ok(!fs.existsSync(file));
  });
});

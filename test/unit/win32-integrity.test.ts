// Unit tests of the parts of src/platform/win32-integrity.ts that need no Windows: the bytes of
// an integrity SID, the TOKEN_MANDATORY_LABEL block handed to SetTokenInformation, the level
// names, the per-run temporary directory's path and its removal, which never follows a link.
// The Win32 calls themselves are tested under wine (test/windows/integrity-win32.test.ts). The
// run directory is made and removed here through Linux's Beneath (src/work/beneath.ts), which
// stands for BeneathWin32 (same operations and errors; BeneathWin32 itself runs under wine).
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import {
  INTEGRITY_RID,
  integrityName,
  integrityRid,
  integritySid,
  lowRunEnv,
  lowRunTemp,
  lowRunTempPath,
  mandatoryLabel,
  parseMandatoryLabel,
  removeLowRunTemp,
  SE_GROUP_INTEGRITY,
  TOKEN_MANDATORY_LABEL_SIZE,
  type BeneathOps,
} from '../../src/platform/win32-integrity';
import { Beneath } from '../../src/work/beneath';

describe('unit: Windows integrity levels (pure parts)', () => {
  it('builds S-1-16-4096 as revision 1, one sub-authority, authority 16, RID 0x1000 little-endian', () => {
    assert.strictEqual(integritySid(INTEGRITY_RID.low).toString('hex'), '01' + '01' + '000000000010' + '00100000');
    assert.strictEqual(integritySid(INTEGRITY_RID.medium).toString('hex'), '010100000000001000200000');
    assert.strictEqual(integritySid(INTEGRITY_RID.untrusted).toString('hex'), '010100000000001000000000');
  });

  it('reads the RID back from an integrity SID and refuses any other SID', () => {
    for (const rid of Object.values(INTEGRITY_RID)) assert.strictEqual(integrityRid(integritySid(rid)), rid);
    // S-1-5-18 (LocalSystem): authority 5.
    assert.throws(() => integrityRid(Buffer.from('010100000000000512000000', 'hex')), /not an integrity SID.*authority 5/);
    // Two sub-authorities.
    assert.throws(() => integrityRid(Buffer.from('01020000000000100010000000000000', 'hex')), /2 sub-authorities/);
    assert.throws(() => integrityRid(integritySid(0x1000).subarray(0, 10)), /10 bytes/);
    assert.throws(() => integritySid(-1), /not a RID/);
  });

  it('names the levels; a level between them is named by its SID', () => {
    assert.strictEqual(integrityName(0x0000), 'untrusted');
    assert.strictEqual(integrityName(0x1000), 'low');
    assert.strictEqual(integrityName(0x2000), 'medium');
    assert.strictEqual(integrityName(0x3000), 'high');
    assert.strictEqual(integrityName(0x4000), 'system');
    assert.strictEqual(integrityName(0x1100), 'S-1-16-4352');
  });

  it('lays TOKEN_MANDATORY_LABEL out as x64 does: Sid pointer at 0, Attributes at 8, padding to 16, then the SID', () => {
    const at = 0x7ff6_1234_5670n;
    const block = mandatoryLabel(INTEGRITY_RID.low, at);
    assert.strictEqual(TOKEN_MANDATORY_LABEL_SIZE, 16);
    assert.strictEqual(block.length, 28);
    assert.strictEqual(block.readBigUInt64LE(0), at + 16n, 'the Sid pointer names the SID right after the structure');
    assert.strictEqual(block.readUInt32LE(8), SE_GROUP_INTEGRITY);
    assert.strictEqual(SE_GROUP_INTEGRITY, 0x20);
    assert.strictEqual(block.readUInt32LE(12), 0, 'padding');
    assert.deepStrictEqual(block.subarray(16), integritySid(0x1000));
    assert.deepStrictEqual(parseMandatoryLabel(block, at), { rid: 0x1000, attributes: 0x20 });
  });

  it('refuses a label answer whose SID pointer leaves the answer', () => {
    const at = 0x10000n;
    const block = mandatoryLabel(INTEGRITY_RID.high, at);
    assert.throws(() => parseMandatoryLabel(block, at + 8n), /not inside the 28 bytes/);
    assert.throws(() => parseMandatoryLabel(block, at - 8n), /not inside the 28 bytes/);
    assert.throws(() => parseMandatoryLabel(block.subarray(0, 20), at), /less than the label/);
  });

  it('puts a run temp directory at <LocalLow>/shadowfs/runs/<id> and refuses ids that are not plain names', () => {
    assert.strictEqual(lowRunTempPath('r-12_a.b', 'L'), path.join('L', 'shadowfs', 'runs', 'r-12_a.b'));
    for (const bad of ['', '.', '..', '..x', 'a/b', 'a\\b', 'C:x', 'a b', 'x'.repeat(65)])
      assert.throws(() => lowRunTempPath(bad, 'L'), /is not a run id/, JSON.stringify(bad));
    assert.deepStrictEqual(lowRunEnv('D'), { TEMP: 'D', TMP: 'D' });
  });

  describe('run temp directory on disk', () => {
    let root = '';
    beforeEach(() => {
      root = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-lowtemp-'));
    });
    afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

    it('makes it empty (emptying what an earlier run of the id left) and removes it', () => {
      const dir = lowRunTemp('run1', root, Beneath.open);
      assert.strictEqual(dir, path.join(root, 'shadowfs', 'runs', 'run1'));
      fs.mkdirSync(path.join(dir, 'sub'));
      fs.writeFileSync(path.join(dir, 'sub', 'f'), 'x');
      assert.strictEqual(lowRunTemp('run1', root, Beneath.open), dir);
      assert.deepStrictEqual(fs.readdirSync(dir), []);
      fs.writeFileSync(path.join(dir, 'g'), 'y');
      removeLowRunTemp('run1', root, Beneath.open);
      assert.ok(!fs.existsSync(dir));
      removeLowRunTemp('run1', root, Beneath.open); // gone already: nothing
    });

    it('removes links the command left without following them', () => {
      const outside = path.join(root, 'users-files');
      fs.mkdirSync(outside);
      fs.writeFileSync(path.join(outside, 'keep'), 'precious');
      const dir = lowRunTemp('run2', root, Beneath.open);
      fs.symlinkSync(outside, path.join(dir, 'to-dir'), 'dir');
      fs.symlinkSync(path.join(outside, 'keep'), path.join(dir, 'to-file'), 'file');
      fs.mkdirSync(path.join(dir, 'deep'));
      fs.symlinkSync(outside, path.join(dir, 'deep', 'again'), 'dir');
      removeLowRunTemp('run2', root, Beneath.open);
      assert.ok(!fs.existsSync(dir));
      assert.strictEqual(fs.readFileSync(path.join(outside, 'keep'), 'utf8'), 'precious');
    });

    // Another run swaps a directory for a link to the user's files while the daemon removes
    // this run's directory (review: by path, the removal followed it and deleted what it names).
    it('a directory swapped for a link during the removal is removed as the link, and nothing it names', () => {
      const outside = path.join(root, 'users-files');
      fs.mkdirSync(path.join(outside, 'docs'), { recursive: true });
      fs.writeFileSync(path.join(outside, 'docs', 'thesis.txt'), 'precious');
      const dir = lowRunTemp('run3', root, Beneath.open);
      for (const d of ['a', 'b']) {
        fs.mkdirSync(path.join(dir, d, 'docs'), { recursive: true });
        fs.writeFileSync(path.join(dir, d, 'docs', 'tmp.txt'), 'x');
      }
      const swaps: string[] = [];
      // Right after the removal has seen `a` (and `b/docs`) as a directory, the swap. The wrapper
      // follows the removal into the directories it opens (sub), to know each name's full path.
      const swapAfterLstat = new Set(['shadowfs/runs/run3/a', 'shadowfs/runs/run3/b/docs']);
      const wrap = (b: Beneath, at: string): BeneathOps => {
        const full = (rel: string): string => (at && rel ? `${at}/${rel}` : at || rel);
        return {
          lstat: (rel) => {
            const st = b.lstat(rel);
            const name = full(rel);
            if (swapAfterLstat.delete(name)) {
              const p = path.join(root, ...name.split('/'));
              fs.rmSync(p, { recursive: true });
              fs.symlinkSync(name.endsWith('docs') ? path.join(outside, 'docs') : outside, p);
              swaps.push(name);
            }
            return st;
          },
          readdir: (rel) => b.readdir(rel),
          mkdir: (rel) => b.mkdir(rel),
          unlink: (rel) => b.unlink(rel),
          rmdir: (rel) => b.rmdir(rel),
          sub: (rel) => wrap(b.sub(rel), full(rel)),
          close: () => b.close(),
        };
      };
      const racing = (r: string): BeneathOps => wrap(Beneath.open(r), '');
      removeLowRunTemp('run3', root, racing);
      assert.deepStrictEqual(swaps.sort(), ['shadowfs/runs/run3/a', 'shadowfs/runs/run3/b/docs']);
      assert.ok(!fs.existsSync(dir));
      assert.strictEqual(fs.readFileSync(path.join(outside, 'docs', 'thesis.txt'), 'utf8'), 'precious');
    });

    it('removes a deep tree opening each level once (review: walked from the top for every entry)', () => {
      const dir = lowRunTemp('run5', root, Beneath.open);
      let p = dir;
      for (let i = 0; i < 200; i++) {
        p = path.join(p, 'd');
        fs.mkdirSync(p);
        fs.writeFileSync(path.join(p, 'f'), 'x');
      }
      let opens = 0;
      const counting = (b: Beneath): BeneathOps => ({
        lstat: (rel) => b.lstat(rel),
        readdir: (rel) => b.readdir(rel),
        mkdir: (rel) => b.mkdir(rel),
        unlink: (rel) => b.unlink(rel),
        rmdir: (rel) => b.rmdir(rel),
        sub: (rel) => (opens++, counting(b.sub(rel))),
        close: () => b.close(),
      });
      removeLowRunTemp('run5', root, (r) => counting(Beneath.open(r)));
      assert.ok(!fs.existsSync(dir));
      assert.strictEqual(opens, 202, 'the runs directory, the run directory and each of its 200 levels once');
      // Deeper than the removal goes: it stops there, and says so.
      const deep = lowRunTemp('run6', root, Beneath.open);
      p = deep;
      for (let i = 0; i < 300; i++) fs.mkdirSync((p = path.join(p, 'd')));
      assert.throws(() => removeLowRunTemp('run6', root, Beneath.open), /deeper than 256 levels/);
    });

    it('a link a run left above the run directories stops the removal (nothing removed through it) and is itself replaced when the next run is made', () => {
      const outside = path.join(root, 'users-files');
      fs.mkdirSync(path.join(outside, 'run4'), { recursive: true });
      fs.writeFileSync(path.join(outside, 'run4', 'keep'), 'precious');
      lowRunTemp('run4', root, Beneath.open);
      const runs = path.join(root, 'shadowfs', 'runs');
      fs.rmSync(runs, { recursive: true });
      fs.symlinkSync(outside, runs);
      assert.throws(
        () => removeLowRunTemp('run4', root, Beneath.open),
        (err: { code?: string }) => err.code === 'PATH_THROUGH_SYMLINK',
      );
      assert.strictEqual(fs.readFileSync(path.join(outside, 'run4', 'keep'), 'utf8'), 'precious');
      const dir = lowRunTemp('run4', root, Beneath.open);
      assert.ok(fs.lstatSync(runs).isDirectory(), 'the link is gone, a directory of ours in its place');
      assert.deepStrictEqual(fs.readdirSync(dir), []);
      assert.strictEqual(fs.readFileSync(path.join(outside, 'run4', 'keep'), 'utf8'), 'precious');
    });
  });
});

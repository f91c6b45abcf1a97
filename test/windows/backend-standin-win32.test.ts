// The Windows backend end to end short of a kernel: on a Windows node.exe under wine, a shadow
// is mounted with the module cross-built for Windows (fuse_hl over WinFsp's FUSE3 API, the
// Win32 LowerFs reading a real folder), and a stand-in winfsp-x64.dll (registered where WinFsp's
// installer would put it) plays WinFsp's part: it records the options and the operations table
// it is handed, then calls init, getattr, readdir and open/read/release the way WinFsp's
// dispatcher would. This shows what the backend hands WinFsp and that its operations answer on
// Windows; it is not a mount: WinFsp's driver cannot run under wine, so no program could see one.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const repoRoot = path.join(__dirname, '..', '..', '..');
const moduleFile = path.join(repoRoot, 'build-win', 'Release', 'shadowfs.node');
const standin = path.join(repoRoot, 'build-win', 'standin', 'full');
const KEY = 'HKLM\\SOFTWARE\\WOW6432Node\\WinFsp';

type Entry = Record<string, unknown> & { call: string };

describe('the Windows backend driven by a stand-in for WinFsp (under wine; no kernel, no mount a program can see)', function () {
  this.timeout(120_000);
  before(function () {
    if (process.platform !== 'win32') throw new Error('these tests run on a Windows node.exe: npm run test:windows');
    assert.ok(fs.existsSync(moduleFile), `${moduleFile} is missing: build it with npm run build:win`);
  });

  it('hands WinFsp its options and the FUSE3 operations, and answers init, getattr, readdir and read from the folder', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-standin-'));
    const lower = path.join(dir, 'project');
    fs.mkdirSync(path.join(lower, 'src'), { recursive: true });
    fs.writeFileSync(path.join(lower, 'package.json'), '{ "name": "from-the-folder" }\n');
    fs.writeFileSync(path.join(lower, 'src', 'a.js'), 'a\n');
    const log = path.join(dir, 'standin.log');
    const mp = path.join(dir, 'mnt');
    const script = `
      const { mount } = require(${JSON.stringify(path.join(repoRoot, 'dist', 'src', 'shadow', 'index.js'))});
      const fs = require('fs');
      (async () => {
        const s = await mount(${JSON.stringify(lower)}, { mountPoint: ${JSON.stringify(mp)}, backend: 'fuse_hl' });
        // The stand-in runs its calls on the backend's loop thread: wait until it has read.
        for (let i = 0; i < 400 && !/"call":"read"/.test(fs.existsSync(${JSON.stringify(log)}) ? fs.readFileSync(${JSON.stringify(log)}, 'utf8') : ''); i++)
          await new Promise((r) => setTimeout(r, 25));
        await s.layer('agent').write('new.txt', 'layer');
        // Case-insensitive names (the default here): the folder's src/a.js, spelt as the folder spells it.
        await s.layer('agent').write('SRC/A.JS', 'agent');
        const changes = (await s.layer('agent').changes()).map((c) => c.kind + ' ' + c.path);
        await s.unmount();
        console.log(JSON.stringify({ ok: true, changes }));
      })().catch((e) => { console.error(e); process.exit(1); });`;
    try {
      const reg = spawnSync('reg', ['add', KEY, '/v', 'InstallDir', '/t', 'REG_SZ', '/d', `${standin}\\`, '/f'], { encoding: 'utf8' });
      assert.strictEqual(reg.status, 0, reg.stdout + reg.stderr);
      const r = spawnSync(process.execPath, ['-e', script], {
        encoding: 'utf8',
        timeout: 90_000,
        env: { ...process.env, SHADOWFS_NATIVE_MODULE: moduleFile, SHADOWFS_STANDIN_LOG: log, SHADOWFS_STANDIN_READ: '/Package.JSON' },
      });
      assert.strictEqual(r.status, 0, `${r.stdout}\n${r.stderr}`);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { changes: string[] };
      assert.deepStrictEqual(out.changes, ['added new.txt', 'modified src/a.js']);
      const entries = fs
        .readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Entry);
      const of = (call: string) => entries.find((e) => e.call === call);
      const created = of('new')!;
      assert.strictEqual(created.env, 'W', 'a Windows C runtime environment');
      assert.strictEqual(created.opsize, 40 * 8, 'the size of the FUSE3 operations table WinFsp expects');
      // Names match ignoring case by default on Windows (MountOptions.caseInsensitive).
      assert.deepStrictEqual(created.argv, [
        'shadowfs',
        '-o',
        'uid=-1,gid=-1,umask=022,FileInfoTimeout=0,volname=shadowfs,CaseInsensitiveSearch',
      ]);
      for (const op of ['getattr', 'readdir', 'open', 'read', 'write', 'create', 'rename', 'unlink', 'init', 'statfs', 'utimens'])
        assert.ok((created.ops as string[]).includes(op), `${op} is handed over`);
      assert.strictEqual(of('mount')!.mountpoint, mp);
      const init = of('init')!;
      assert.deepStrictEqual([init.use_ino, init.hard_remove, init.attr_timeout], [1, 1, 0]);
      assert.ok(((init.want as number) & (1 << 29)) !== 0, 'FUSE_CAP_CASE_INSENSITIVE is asked for');
      assert.strictEqual(of('getattr')!.rc, 0);
      assert.strictEqual((of('getattr')!.mode as number) & 0o170000, 0o040000, 'the root is a directory');
      const names = of('readdir')!.names as string[];
      assert.ok(names.includes('package.json') && names.includes('src'), JSON.stringify(names));
      // Read under another case than the folder's: found (by the folder and by the core alike).
      const read = of('read')!;
      assert.deepStrictEqual([read.rc, read.text], [0, '{ "name": "from-the-folder" }\n']);
      assert.ok(of('exit') && of('loop-ended'), 'unmount ends the loop through fuse_exit');
      assert.ok(!fs.existsSync(path.join(lower, 'new.txt')), 'the folder is never written');
      assert.strictEqual(fs.readFileSync(path.join(lower, 'src', 'a.js'), 'utf8'), 'a\n');
    } finally {
      spawnSync('reg', ['delete', KEY, '/f']);
      try {
        fs.rmSync(dir, { recursive: true, force: true });
      } catch {
        // wine may hold a file for a moment
      }
    }
  });
});

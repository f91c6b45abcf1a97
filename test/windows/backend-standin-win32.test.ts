// The Windows backend end to end short of a kernel: on a Windows node.exe under wine, a shadow
// is mounted with the module cross-built for Windows (fuse_hl over WinFsp's FUSE3 API, the
// Win32 LowerFs reading a real folder), and a test double of WinFsp's FUSE3 layer
// (test/native/win32/winfsp_standin.cc, registered where WinFsp's installer puts winfsp-x64.dll)
// plays WinFsp's part. The double is written from WinFsp's headers and sources and shares none
// of our declarations: it parses the options against WinFsp's option table, copies the
// operations table, and starts as WinFsp's loop does (init with WinFsp's capabilities, statfs and
// getattr of the root, the symlink and extended-attribute probes, a mount-point directory that
// must not exist yet), then calls readdir and open/getattr/read/release from another thread, as
// a dispatcher thread would. What it cannot model: the driver and the translation of Windows I/O
// into these calls. This is not a mount: no program could see one under wine.
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

describe("the Windows backend driven by a test double of WinFsp's FUSE3 layer (under wine; no kernel, no mount a program can see)", function () {
  this.timeout(120_000);
  before(function () {
    if (process.platform !== 'win32') throw new Error('these tests run on a Windows node.exe: npm run test:windows');
    assert.ok(fs.existsSync(moduleFile), `${moduleFile} is missing: build it with npm run build:win`);
  });

  it('hands WinFsp options it knows and the FUSE3 operations, passes its start-up probes, and answers readdir, getattr and read from the folder on a dispatcher thread', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-standin-'));
    const lower = path.join(dir, 'project');
    fs.mkdirSync(path.join(lower, 'src'), { recursive: true });
    fs.writeFileSync(path.join(lower, 'package.json'), '{ "name": "from-the-folder" }\n');
    // Times apart from each other and from now, so that a field out of place in fuse_stat shows.
    fs.utimesSync(path.join(lower, 'package.json'), new Date(1_000_000_000_000), new Date(1_500_000_000_250));
    fs.writeFileSync(path.join(lower, 'src', 'a.js'), 'a\n');
    const log = path.join(dir, 'standin.log');
    const mp = path.join(dir, 'mnt');
    const script = `
      const { mount } = require(${JSON.stringify(path.join(repoRoot, 'dist', 'src', 'shadow', 'index.js'))});
      const fs = require('fs');
      (async () => {
        const s = await mount(${JSON.stringify(lower)}, { mountPoint: ${JSON.stringify(mp)}, backend: 'fuse_hl' });
        // The double calls readdir and read on its dispatcher thread: wait until it has read.
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
      assert.deepStrictEqual(
        entries.filter((e) => e.call === 'misuse'),
        [],
        'every call on a live object fsp_fuse3_new returned',
      );
      const created = of('new')!;
      assert.strictEqual(created.env, 'W', 'a Windows C runtime environment');
      assert.strictEqual(created.opsize, 40 * 8, 'the size of the FUSE3 operations table WinFsp expects');
      assert.deepStrictEqual(created.argv, ['shadowfs', '-o', 'uid=-1,gid=-1,umask=022,FileInfoTimeout=0,volname=shadowfs']);
      // WinFsp keeps an option it does not know and never acts on it: each one we pass must be in its table.
      assert.deepStrictEqual(created.ignored, [], 'options WinFsp would ignore');
      for (const op of ['getattr', 'readdir', 'open', 'read', 'write', 'create', 'rename', 'unlink', 'init', 'statfs', 'utimens'])
        assert.ok((created.ops as string[]).includes(op), `${op} is handed over`);
      assert.strictEqual(of('mount')!.mountpoint, mp);
      const init = of('init')!;
      // Names match ignoring case by default on Windows (MountOptions.caseInsensitive): WinFsp learns it from want alone.
      assert.strictEqual(init.caseInsensitive, true, `FUSE_CAP_CASE_INSENSITIVE in want: ${JSON.stringify(init)}`);
      assert.strictEqual(init.readOnly, false, 'not a read-only volume');
      assert.strictEqual(init.privateDataIsData, true, "init hands back the data given to fuse_new (WinFsp's private_data from then on)");
      // The start fails unless statfs and getattr of the root answer.
      assert.strictEqual(of('statfs')!.rc, 0);
      assert.ok((of('statfs')!.namemax as number) > 0, 'a name length limit for the volume');
      assert.strictEqual(of('getattr')!.rc, 0);
      assert.strictEqual((of('getattr')!.mode as number) & 0o170000, 0o040000, 'the root is a directory');
      // WinFsp's symlink probe: readlink of the root fails with EINVAL (the Windows C runtime's 22) when links are supported.
      assert.deepStrictEqual([of('readlink')!.rc, of('readlink')!.symlinks], [-22, true]);
      assert.strictEqual(of('xattr-probe')!.extendedAttributes, true, JSON.stringify(of('xattr-probe')));
      assert.deepStrictEqual(of('mountpoint'), { call: 'mountpoint', kind: 'directory' }, 'a directory WinFsp can create');
      const listing = of('readdir')!;
      assert.strictEqual(listing.rc, 0);
      const names = listing.names as string[];
      assert.ok(names.includes('package.json') && names.includes('src'), JSON.stringify(names));
      assert.strictEqual(listing.plusWithoutStat, false, 'FUSE_FILL_DIR_PLUS only with a stat');
      // Read under another case than the folder's: found (by the folder and by the core alike), with its attributes in WinFsp's layout.
      const read = of('read')!;
      const text = '{ "name": "from-the-folder" }\n';
      assert.deepStrictEqual([read.rc, read.text], [0, text]);
      const st = read.stat as Record<string, number>;
      assert.deepStrictEqual(
        [st.rc, st.mode & 0o170000, st.size, st.nlink, st.mtime, st.mtimeNs, st.atime],
        [0, 0o100000, text.length, 1, 1_500_000_000, 250_000_000, 1_000_000_000],
        JSON.stringify(st),
      );
      assert.deepStrictEqual(read.fstat, { rc: 0, size: text.length }, 'getattr with the open handle');
      assert.ok(of('exit') && of('loop-ended'), 'unmount ends the loop through fuse_exit');
      assert.ok(!fs.existsSync(mp), 'the mount point WinFsp made is gone with the file system');
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

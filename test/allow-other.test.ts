// Other users and a shadow: allowOther (FUSE allow_other) lets them in, with the kernel checking
// their permissions; without it they are kept out; a mounter other than root needs
// user_allow_other in /etc/fuse.conf and is told so. The permission checks themselves are in
// test/conformance.test.ts (the suite run as nobody on an allowOther shadow).
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { eventually, FolderGuard, makeProject, repoRoot } from './helpers/fixtures';
import { asNobody, chownTree, nobodyDir } from './helpers/unprivileged';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');
const cli = (...args: string[]) => spawnSync(process.execPath, [cliPath, ...args], { encoding: 'utf8', timeout: 60_000 });

/** A project folder that belongs to nobody, as the folder of a user who is not root. */
function nobodyProject(label: string): string {
  const lower = makeProject(label);
  chownTree(lower);
  fs.chmodSync(lower, 0o755);
  return lower;
}

describe('other users: allowOther', function () {
  it('shadowfs mount --allow-other (daemon, RPC) lets another user read and, by permission, write; without it they are kept out', async () => {
    const lower = nobodyProject('ao-lower');
    const guard = new FolderGuard(lower);
    const open = path.join(nobodyDir('ao-open'), 'm');
    const closed = path.join(nobodyDir('ao-closed'), 'm');
    try {
      assert.strictEqual(cli('mount', lower, '--name', 'ao-open', '--at', open, '--allow-other').status, 0);
      assert.strictEqual(cli('mount', lower, '--name', 'ao-closed', '--at', closed).status, 0);
      const script = [
        `cat ${open}/README.md >/dev/null && echo open-read`,
        `echo agent > ${open}/by-nobody.txt && echo open-write`,
        `stat -c %U ${open}/by-nobody.txt`,
        `cat ${closed}/README.md >/dev/null 2>&1 || echo closed-refused`,
      ].join('; ');
      const r = await asNobody(['sh', '-c', script]);
      assert.deepStrictEqual(r.stdout.trim().split('\n'), ['open-read', 'open-write', 'nobody', 'closed-refused'], r.stderr);
      assert.strictEqual(cli('layer', 'cat', 'ao-open', 'default', 'by-nobody.txt').stdout, 'agent\n');
    } finally {
      cli('unmount', 'ao-open', '--lazy');
      cli('unmount', 'ao-closed', '--lazy');
    }
    await guard.check();
  });

  it('a mounter other than root without user_allow_other in /etc/fuse.conf gets ALLOW_OTHER_DENIED (API and CLI), with the fix', async () => {
    const lower = nobodyProject('ao-denied');
    const mp = path.join(nobodyDir('ao-denied-mnt'), 'm');
    const script = `
      const { mount } = require(${JSON.stringify(path.join(repoRoot, 'dist', 'src'))});
      const { spawnSync } = require('child_process');
      (async () => {
        let api;
        try {
          const s = await mount(${JSON.stringify(lower)}, { mountPoint: ${JSON.stringify(mp)}, allowOther: true });
          await s.unmount({ lazy: true });
          api = { mounted: true };
        } catch (e) {
          api = { code: e.code, message: e.message };
        }
        const c = spawnSync(process.execPath, [${JSON.stringify(cliPath)}, 'mount', ${JSON.stringify(lower)}, '--foreground', '--allow-other', '--json', '--at', ${JSON.stringify(mp)}], { encoding: 'utf8' });
        const plain = await mount(${JSON.stringify(lower)}, { mountPoint: ${JSON.stringify(mp)} });
        await plain.unmount();
        console.log(JSON.stringify({ api, cli: { status: c.status, stdout: c.stdout } }));
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const r = await asNobody([process.execPath, '-e', script], { fuseConf: '# mount_max = 1000\n#user_allow_other\n' });
    assert.strictEqual(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { api: { code: string; message: string }; cli: { status: number; stdout: string } };
    assert.strictEqual(out.api.code, 'ALLOW_OTHER_DENIED');
    assert.match(out.api.message, /\/etc\/fuse\.conf has a line "user_allow_other"; add that line/);
    assert.strictEqual(out.cli.status, 1);
    assert.strictEqual((JSON.parse(out.cli.stdout) as { error: { code: string } }).error.code, 'ALLOW_OTHER_DENIED');
  });

  it("with user_allow_other, an unprivileged user's allowOther shadow lets root in; without allowOther even root is kept out", async () => {
    const lower = nobodyProject('ao-user');
    const guard = new FolderGuard(lower);
    const home = nobodyDir('ao-user-home');
    const open = path.join(nobodyDir('ao-user-open'), 'm');
    const closed = path.join(nobodyDir('ao-user-closed'), 'm');
    // nobody mounts both, says so, and holds them until the test is done looking.
    const script = `
      const { mount } = require(${JSON.stringify(path.join(repoRoot, 'dist', 'src'))});
      const fs = require('fs');
      (async () => {
        const a = await mount(${JSON.stringify(lower)}, { mountPoint: ${JSON.stringify(open)}, allowOther: true });
        const b = await mount(${JSON.stringify(lower)}, { mountPoint: ${JSON.stringify(closed)} });
        fs.writeFileSync(${JSON.stringify(path.join(home, 'mounted'))}, '');
        const deadline = Date.now() + 60000;
        while (!fs.existsSync(${JSON.stringify(path.join(home, 'done'))}) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        await a.unmount({ lazy: true });
        await b.unmount({ lazy: true });
      })().catch((e) => { console.error(e); process.exit(1); });`;
    let pid = 0;
    let ended = false;
    const ran = asNobody([process.execPath, '-e', script], { fuseConf: 'user_allow_other\n', onStart: (p) => (pid = p) }).finally(
      () => (ended = true),
    );
    try {
      await eventually(() => fs.existsSync(path.join(home, 'mounted')) || ended, 30_000, 'the unprivileged mounts');
      if (ended) assert.fail(`the unprivileged mounter ended early: ${(await ran).stderr}`);
      // The mounts live in nobody's private mount namespace: root looks in through /proc/<pid>/root.
      const inside = (p: string) => `/proc/${pid}/root${p}`;
      assert.strictEqual(
        fs.readFileSync(inside(path.join(open, 'README.md')), 'utf8'),
        fs.readFileSync(path.join(lower, 'README.md'), 'utf8'),
      );
      assert.throws(() => fs.readFileSync(inside(path.join(closed, 'README.md'))), /EACCES/);
    } finally {
      fs.writeFileSync(path.join(home, 'done'), '');
    }
    const r = await ran;
    assert.strictEqual(r.status, 0, r.stderr);
    await guard.check();
  });
});

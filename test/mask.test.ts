// Masked paths (issue #32, docs/masked-paths.md) through real mounts, with real programs, on both
// FUSE backends: for an agent with a mask, `cat .env` fails, `ls -a` and `grep -r` pass it by,
// `git status` says nothing of it, `echo x > .env` is refused, its file tools, diffs, views and
// runs do not show it; another agent, the shared mount with no layer shown and the developer's
// folder still see it, and the folder is never written (withShadow's FolderGuard). Then the
// daemon: layer.mask set and read by the user, refused to the agent's restricted connection.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient, ShadowError } from '../src/client';
import { mount } from '../src/shadow';
import { DEFAULT_MASK } from '../src/shadow/mask';
import { runAs } from '../src/shadow/run-as';
import { LintsService } from '../src/lints/service';
import { runInShadow } from '../src/run/runner';
import { glob, grep, list, readText } from '../src/work/files';
import { WorkService } from '../src/work/service';
import { FolderGuard, makeProject, withShadow } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const SECRET = 'SECRET=hunter2';

/** The example project as a git repository, with secrets git does not track. */
function secretProject(): string {
  const dir = makeProject('mask-lower');
  fs.writeFileSync(path.join(dir, '.env'), `${SECRET}\n`);
  fs.mkdirSync(path.join(dir, 'config'));
  fs.writeFileSync(path.join(dir, 'config/secrets.json'), `{"token": "${SECRET}"}\n`);
  fs.writeFileSync(path.join(dir, 'config/app.json'), '{"port": 8080}\n');
  fs.writeFileSync(path.join(dir, 'id.pem'), `-----BEGIN ${SECRET}-----\n`);
  const git = (...args: string[]): void => {
    const r = spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, encoding: 'utf8' });
    assert.strictEqual(r.status, 0, r.stderr);
  };
  git('init', '-q');
  git('add', 'README.md', 'src', 'config/app.json');
  git('commit', '-qm', 'start');
  return dir;
}

const GLOBS = ['.env', '*.pem', 'config/secrets.json'];

/** A program run in `cwd`: its exit status and output. */
function sh(cwd: string, script: string): { status: number | null; out: string; err: string } {
  const r = spawnSync('sh', ['-c', script], { cwd, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

describe('masked paths', function () {
  this.timeout(120_000);

  for (const backend of ['fuse_ll', 'fuse_hl']) {
    describe(backend, () => {
      it('do not exist for the masked agent: cat, ls -a, grep -r, git status, echo >, file tools, diff, views and runs', async () => {
        const lower = secretProject();
        await withShadow(
          lower,
          async (shadow, mp) => {
            const a = shadow.layer('a');
            // Written by agent a before the mask: its own .env, which the mask hides from then on.
            await a.write('.env', 'MINE=1\n');
            await a.write('src/new.js', 'export const x = 1;\n');
            const info = await shadow.setMask('a', GLOBS);
            assert.deepStrictEqual(info, { globs: GLOBS, source: 'agent' });
            assert.deepStrictEqual(a.mask, { globs: GLOBS, source: 'agent' });
            assert.deepStrictEqual(shadow.maskOf('b'), { globs: [], source: 'none' });
            await shadow.createLayer('b');
            await shadow.activate('a');

            const cat = sh(mp, 'cat .env');
            assert.notStrictEqual(cat.status, 0);
            assert.match(cat.err, /No such file or directory/);
            assert.match(sh(mp, 'cat config/secrets.json').err, /No such file or directory/);
            assert.match(sh(mp, 'cat id.pem').err, /No such file or directory/);
            const ls = sh(mp, 'ls -a . config').out;
            assert.ok(!/^\.env$/m.test(ls) && !/^id\.pem$/m.test(ls) && !/^secrets\.json$/m.test(ls), ls);
            assert.match(ls, /^README\.md$/m);
            assert.match(ls, /^app\.json$/m);
            assert.ok(!fs.existsSync(path.join(mp, '.env')));
            const g = sh(mp, 'grep -r hunter2 .');
            assert.strictEqual(g.status, 1, `grep found: ${g.out}${g.err}`);
            assert.strictEqual(g.out, '');
            const status = sh(mp, 'git status --porcelain --untracked-files=all');
            assert.strictEqual(status.status, 0, status.err);
            assert.ok(!/\.env|id\.pem|secrets/.test(status.out), status.out);
            assert.match(status.out, /src\/new\.js/);
            const echo = sh(mp, 'echo x > .env');
            assert.notStrictEqual(echo.status, 0);
            assert.match(echo.err, /Permission denied/);
            assert.match(sh(mp, 'echo x > web.pem').err, /Permission denied/);
            assert.match(sh(mp, 'mv README.md .env').err, /Permission denied/);
            assert.match(sh(mp, 'ln -s README.md .env').err, /Permission denied/);
            // rm -rf deletes what a sees, and stops at the directory that still holds the secret.
            assert.match(sh(mp, 'rm -rf config').err, /not empty/i);
            assert.ok(fs.existsSync(path.join(mp, 'config')) && !fs.existsSync(path.join(mp, 'config/app.json')));
            // Nor may it move such a directory, or put another over it: applied, either would
            // delete the secret with the old name.
            assert.match(sh(mp, 'mv config conf2').err, /Permission denied/);
            assert.match(sh(mp, 'mkdir -p out/in && mv config out/in/').err, /Permission denied/);
            assert.match(sh(mp, 'mkdir empty2 && mv -T empty2 config').err, /Permission denied|not empty/i);
            assert.ok(!fs.existsSync(path.join(mp, 'conf2')) && !fs.existsSync(path.join(mp, 'out/in/config')));

            // The file tools read the layer: nothing of the secrets.
            await assert.rejects(readText(a, '.env'), (e: unknown) => e instanceof ShadowError && e.code === 'NOT_FOUND');
            await assert.rejects(readText(a, 'config/secrets.json'), (e: unknown) => e instanceof ShadowError && e.code === 'NOT_FOUND');
            const found = await grep(a, 'hunter2', { includeIgnored: true });
            assert.deepStrictEqual(found.matches, []);
            assert.deepStrictEqual((await glob(a, '**/*.pem', { includeIgnored: true })).paths, []);
            assert.deepStrictEqual((await glob(a, '**/.env', { includeIgnored: true })).paths, []);
            const names = (await list(a, '', { includeIgnored: true })).entries.map((e) => e.path);
            assert.ok(!names.includes('.env') && names.includes('README.md'), names.join(' '));
            await assert.rejects(a.write('.env', 'x'), (e: unknown) => e instanceof ShadowError && e.code === 'PATH_MASKED');
            await assert.rejects(a.remove('config'), (e: unknown) => e instanceof ShadowError && e.code === 'PATH_MASKED');

            // Diff, patch and checkpoints start from the layer's changes: the masked .env is not one.
            const work = new WorkService(shadow);
            try {
              const d = await work.diff('a');
              const text = JSON.stringify(d);
              assert.ok(!text.includes('.env') && !text.includes('hunter2') && !text.includes('MINE'), text);
              assert.ok(text.includes('src/new.js'), text);
              const cp = await work.checkpoint('a', 'cp1');
              assert.ok(!JSON.stringify(cp).includes('.env'), JSON.stringify(cp));
            } finally {
              await work.dispose();
            }

            // A view of agent a, and a run of agent a (confined, in its view or the shared mount).
            const v = await shadow.openView('a');
            try {
              assert.match(sh(v.mountPoint, 'cat .env').err, /No such file or directory/);
              assert.strictEqual(sh(v.mountPoint, 'grep -r hunter2 .').status, 1);
            } finally {
              await v.close();
            }
            const run = await runInShadow(shadow, { agent: 'a', argv: ['sh', '-c', 'cat .env; grep -r hunter2 . ; ls -a'] });
            assert.match(run.stderr, /No such file or directory/);
            assert.ok(!run.stdout.includes('hunter2') && !/^\.env$/m.test(run.stdout), run.stdout);
            assert.match(run.stdout, /^README\.md$/m);

            // Agent b (no mask), the shared mount with no layer shown and the folder see it all.
            await shadow.activate('b');
            assert.strictEqual(sh(mp, 'cat .env').out, `${SECRET}\n`);
            assert.match(sh(mp, 'git status --porcelain').out, /\?\? \.env/);
            assert.match(sh(mp, 'grep -r hunter2 .').out, /\.env/);
            assert.strictEqual((await readText(shadow.layer('b'), '.env')).content, `${SECRET}\n`);
            assert.strictEqual(sh(mp, 'cat config/secrets.json').status, 0);
            await shadow.activate(null);
            assert.strictEqual(sh(mp, 'cat .env').out, `${SECRET}\n`);
            assert.strictEqual(fs.readFileSync(path.join(lower, '.env'), 'utf8'), `${SECRET}\n`);

            // Unmasked, agent a sees its own .env again (it was kept, hidden, all along).
            await shadow.setMask('a', null);
            await shadow.activate('a');
            assert.strictEqual(sh(mp, 'cat .env').out, 'MINE=1\n');
          },
          { backend },
        );
      });

      it('a secret that appears in the folder under a directory the agent removed or moved is in none of its diffs, and apply leaves it', async () => {
        // The agent's changes name the directory only; what the folder holds there is read when
        // the diff is made, and must pass the agent's mask as its view does.
        const lower = secretProject();
        fs.mkdirSync(path.join(lower, 'conf'));
        fs.writeFileSync(path.join(lower, 'conf/app.json'), '{}\n');
        await withShadow(
          lower,
          async (shadow, mp) => {
            await shadow.createLayer('a');
            await shadow.setMask('a', GLOBS);
            await shadow.activate('a');
            assert.strictEqual(sh(mp, 'rm -r conf && mv src src2').status, 0);
            // The user's tooling writes secrets there now.
            fs.writeFileSync(path.join(lower, 'conf/.env'), `${SECRET}\n`);
            fs.writeFileSync(path.join(lower, 'src/id.pem'), `${SECRET}\n`);
            const work = new WorkService(shadow);
            try {
              const all = JSON.stringify([await work.diff('a'), await work.patch('a'), await work.hunks('a'), await work.changes('a')]);
              assert.ok(!all.includes('hunter2') && !all.includes('.env') && !all.includes('id.pem'), all);
              assert.ok(all.includes('conf/app.json') && all.includes('src2/'), all);
              const r = await work.apply('a');
              // The directories that still hold the secrets stay, and so does what else they
              // hold: the folder changed them after the agent started (apply-integrity.test.ts).
              assert.deepStrictEqual(
                r.conflicts.map((c) => c.path),
                ['conf', 'conf/app.json', 'src', 'src/math.js'],
              );
            } finally {
              await work.dispose();
            }
            assert.strictEqual(fs.readFileSync(path.join(lower, 'conf/.env'), 'utf8'), `${SECRET}\n`);
            assert.strictEqual(fs.readFileSync(path.join(lower, 'src/id.pem'), 'utf8'), `${SECRET}\n`);
            assert.ok(fs.existsSync(path.join(lower, 'src2/math.js')));
          },
          { backend, guard: false },
        );
      });

      it('a mask set while the layer is shown takes effect at once, and the default covers agents without their own', async () => {
        const lower = secretProject();
        await withShadow(
          lower,
          async (shadow, mp) => {
            await shadow.createLayer('a');
            await shadow.activate('a');
            // Fill the kernel's caches with the secret first.
            assert.strictEqual(sh(mp, 'cat .env && ls -a').out.includes(SECRET), true);
            const d = await shadow.setMask(null, [...DEFAULT_MASK]);
            assert.strictEqual(d.source, 'default');
            assert.deepStrictEqual(shadow.maskOf('a'), { globs: [...DEFAULT_MASK], source: 'default' });
            assert.match(sh(mp, 'cat .env').err, /No such file or directory/);
            assert.ok(!/^\.env$/m.test(sh(mp, 'ls -a').out));
            // A layer made later gets the default too; one with its own mask keeps its own.
            await shadow.setMask('c', []);
            await shadow.createLayer('b');
            await shadow.createLayer('c');
            assert.match(sh(mp, 'cat id.pem').err, /No such file or directory/);
            await shadow.activate('b');
            assert.match(sh(mp, 'cat .env').err, /No such file or directory/);
            await shadow.activate('c');
            assert.strictEqual(sh(mp, 'cat .env').out, `${SECRET}\n`);
            // A copy of b's layer (what a run with discardWrites works on) hides what b hides.
            await shadow.cloneLayer('b', 'b2');
            assert.strictEqual(shadow.maskOf('b2').source, 'inherited');
            // Saved as such, so a copy comes back masked after a stop or a crash (review: it came
            // back with no mask and read the secret).
            assert.deepStrictEqual(shadow.maskState.copied, { b2: 'b' });
            await shadow.activate('b2');
            assert.match(sh(mp, 'cat .env').err, /No such file or directory/);
            await shadow.setMask(null, null);
            assert.strictEqual(sh(mp, 'cat .env').out, `${SECRET}\n`);
          },
          { backend },
        );
      });
    });
  }

  it('a copy of a masked layer is masked again from the saved masks; a run that discards its writes leaves no autosave', async () => {
    const lower = makeProject('mask-saved');
    fs.writeFileSync(path.join(lower, '.env'), 'SECRET=1\n');
    await withShadow(lower, async (shadow, mp) => {
      await shadow.setMask('a', ['.env']);
      await shadow.createLayer('a');
      await shadow.cloneLayer('a', 'a2');
      const kept = shadow.maskState;
      // What a daemon gives a shadow mounted again (MaskState from masks.json or the state file).
      const again = await mount(lower, { mountPoint: path.join(path.dirname(mp), 'again') });
      try {
        again.maskState = kept;
        assert.deepStrictEqual(again.maskOf('a2'), { globs: ['.env'], source: 'inherited' });
      } finally {
        await again.unmount();
      }
      // A discarded run's scratch layer is never autosaved (review: an autosave during the run
      // saved it, and the next daemon brought the "discarded" writes back, ready to apply).
      const w = new WorkService(shadow);
      try {
        const saved = await runAs(
          shadow,
          'a',
          async ({ dir }) => {
            fs.writeFileSync(path.join(dir, 'discarded.txt'), 'x\n');
            return w.autosave();
          },
          { discardWrites: true, scratchId: 'masktest' },
        );
        assert.deepStrictEqual(saved, []);
        assert.deepStrictEqual(
          w.store.agents().filter((x) => x.includes('~run-')),
          [],
        );
      } finally {
        await w.dispose();
        for (const x of w.store.agents()) w.store.remove(x, 'autosave');
      }
    });
  });

  it('lints of a masked file are refused as of a missing one, and say nothing of it; another agent gets its diagnostics', async function () {
    this.timeout(180_000);
    const dir = makeProject('mask-lints');
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, noEmit: true }, include: ['src'] }),
    );
    // A diagnostic that quotes the secret: Type '"hunter2"' is not assignable to type '"a"'.
    fs.writeFileSync(path.join(dir, 'src/secret.ts'), "export const token: 'a' = 'hunter2';\n");
    await withShadow(dir, async (shadow) => {
      // Agent a changed the file before the mask came: its own copy is hidden from then on too.
      await shadow.layer('a').write('src/secret.ts', "export const token: 'a' = 'hunter2'; // a\n");
      await shadow.setMask('a', ['src/secret.ts']);
      await shadow.createLayer('b');
      const svc = new LintsService(shadow);
      try {
        // Not checked at all, not even in the folder's own pass (the baseline): NOT_FOUND up front.
        await assert.rejects(
          svc.lints({ shadow: 'x', agent: 'a', paths: ['src/secret.ts'], timeoutMs: 120_000 }),
          (e: unknown) => e instanceof ShadowError && e.code === 'NOT_FOUND' && !e.message.includes('hunter2'),
        );
        // Nor among a's changes, which lints check when no path is named.
        const own = await svc.lints({ shadow: 'x', agent: 'a', timeoutMs: 120_000 });
        assert.ok(!JSON.stringify(own).includes('secret'), JSON.stringify(own));
        const theirs = await svc.lints({ shadow: 'x', agent: 'b', paths: ['src/secret.ts'], timeoutMs: 120_000 });
        assert.strictEqual(theirs.files[0].status, 'fresh', JSON.stringify(theirs));
        assert.ok(JSON.stringify(theirs).includes('hunter2'), JSON.stringify(theirs));
      } finally {
        await svc.dispose();
      }
    });
  });

  describe('through the daemon', () => {
    let user: ShadowClient | undefined;
    let agent: ShadowClient | undefined;
    let guard: FolderGuard | undefined;
    after(async () => {
      agent?.close();
      await user?.request('unmount', { shadow: 'masked', lazy: true }).catch(() => undefined);
      guard?.stop();
      user?.close();
      stopTestDaemon();
    });

    it("layer.mask is the user's: set and read by them, refused to the agent's restricted connection, which cannot see or write a masked path", async () => {
      const lower = secretProject();
      guard = new FolderGuard(lower);
      user = await ShadowClient.connect({ clientName: 'mask-test user' });
      await user.request('mount', { folder: lower, name: 'masked' });
      const set = await user.request('layer.mask', { shadow: 'masked', agent: 'me', offered: true });
      assert.deepStrictEqual(set.globs, [...DEFAULT_MASK]);
      assert.strictEqual(set.source, 'agent');
      const read = await user.request('layer.mask', { shadow: 'masked', agent: 'me' });
      assert.deepStrictEqual(read.globs, [...DEFAULT_MASK]);
      const other = await user.request('layer.mask', { shadow: 'masked', agent: 'other' });
      assert.strictEqual(other.source, 'none');
      await assert.rejects(
        user.request('layer.mask', { shadow: 'masked', agent: 'me', globs: ['..'] }),
        (e: unknown) => e instanceof ShadowError && e.code === 'INVALID_ARGUMENT',
      );

      await user.request('layer.create', { shadow: 'masked', agent: 'me' });
      agent = await ShadowClient.connect({ clientName: 'mask-test agent', scope: { shadow: 'masked', agent: 'me', allowApply: false } });
      for (const params of [
        { shadow: 'masked', agent: 'me' },
        { shadow: 'masked', agent: 'me', clear: true },
        { shadow: 'masked', agent: null, globs: [] },
      ]) {
        await assert.rejects(agent.request('layer.mask', params), (e: unknown) => e instanceof ShadowError && e.code === 'SCOPE_DENIED');
      }
      await assert.rejects(
        agent.request('file.read', { shadow: 'masked', agent: 'me', path: '.env' }),
        (e: unknown) => e instanceof ShadowError && e.code === 'NOT_FOUND',
      );
      await assert.rejects(
        agent.request('layer.write', { shadow: 'masked', agent: 'me', path: '.env', data: Buffer.from('x').toString('base64') }),
        (e: unknown) => e instanceof ShadowError && e.code === 'PATH_MASKED',
      );
      const g = await agent.request('file.grep', { shadow: 'masked', agent: 'me', pattern: 'hunter2', includeIgnored: true });
      // The offered list hides .env and keys; a secret of another shape needs a glob of its own.
      assert.deepStrictEqual(
        g.matches.map((m) => m.path),
        ['config/secrets.json'],
      );
      // The user clears it; the agent's layer shows the folder's .env again.
      await user.request('layer.mask', { shadow: 'masked', agent: 'me', clear: true });
      const r = await agent.request('file.read', { shadow: 'masked', agent: 'me', path: '.env' });
      assert.match(JSON.stringify(r), /hunter2/);
      agent.close();
      agent = undefined;
      await user.request('unmount', { shadow: 'masked' });
      await guard.check();
    });
  });
});

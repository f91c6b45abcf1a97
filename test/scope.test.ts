// A connection restricted to one agent's layer (session.restrict), against a real daemon and real
// mounts: every request that reaches beyond that agent on that shadow (apply without allowApply,
// mount, unmount, views of other agents or at a place it picks, another agent's layer, another
// shadow, runs with weaker protection or as another agent, cancelling another client's run,
// widening the restriction, status) is refused by the daemon with SCOPE_DENIED and changes
// nothing; the agent's own work (its layer, a run in scope, a view of its own) goes through; what
// it hears and lists is its own; and the user's folder is never written.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient, ShadowError } from '../src/client';
import { MAX_AGENT_VIEWS } from '../src/daemon/scope';
import { FolderGuard, makeProject, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const text = (b: string): string => Buffer.from(b, 'base64').toString('utf8');

/** Awaits a request that must be refused for the scope, and returns the daemon's sentence. */
async function denied(what: string, p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ShadowError, `${what}: ${String(err)}`);
    assert.strictEqual(err.code, 'SCOPE_DENIED', `${what}: ${err.code}: ${err.message}`);
    assert.match(err.message, /restricted to agent "me" on shadow "scoped"/, what);
    return err.message;
  }
  assert.fail(`${what} went through on a restricted connection`);
}

describe('a connection restricted to one agent (session.restrict)', function () {
  this.timeout(120_000);
  let user: ShadowClient | undefined;
  const clients: ShadowClient[] = [];
  const mounted: string[] = [];
  let lower = '';
  let guard: FolderGuard | undefined;

  /** A client restricted to agent "me" on shadow "scoped". */
  const restricted = async (allowApply = false): Promise<ShadowClient> => {
    const c = await ShadowClient.connect({ clientName: 'scope-test agent', scope: { shadow: 'scoped', agent: 'me', allowApply } });
    clients.push(c);
    return c;
  };

  before(async () => {
    user = await ShadowClient.connect({ clientName: 'scope-test user' });
    lower = makeProject('scope-lower');
    guard = new FolderGuard(lower);
    await user.request('mount', { folder: lower, name: 'scoped' });
    mounted.push('scoped');
    await user.request('mount', { folder: makeProject('scope-other'), name: 'elsewhere' });
    mounted.push('elsewhere');
    await user.request('layer.write', { shadow: 'scoped', agent: 'other', path: 'secret.txt', data: b64('other agent\n') });
  });
  after(async () => {
    for (const c of clients.splice(0)) c.close();
    for (const s of mounted.splice(0)) await user?.request('unmount', { shadow: s, lazy: true }).catch(() => undefined);
    guard?.stop();
    user?.close();
    stopTestDaemon();
  });

  it('refuses everything beyond its agent and shadow with SCOPE_DENIED, and changes nothing', async () => {
    const me = await restricted();
    assert.deepStrictEqual(me.scope, { shadow: 'scoped', agent: 'me', allowApply: false, folder: fs.realpathSync(lower) });
    // Bound to that folder (a front end connecting again after a daemon restart passes it): the
    // name showing another folder then is another shadow, refused, on a new connection or this one.
    const otherFolder = (await user!.request('list')).shadows.find((x) => x.name === 'elsewhere')!.folder;
    const another = async (p: Promise<unknown>): Promise<void> =>
      assert.rejects(p, (err: ShadowError) => {
        assert.strictEqual(err.code, 'UNKNOWN_SHADOW', err.message);
        assert.match(err.message, /shadow "scoped" shows .*scope-lower.* now, not .*scope-other.*, the folder this connection is for/);
        return true;
      });
    await another(ShadowClient.connect({ clientName: 'scope-test rebind', scope: { shadow: 'scoped', agent: 'me', folder: otherFolder } }));
    await another(me.request('session.restrict', { shadow: 'scoped', agent: 'me', folder: otherFolder }));
    const again = await ShadowClient.connect({
      clientName: 'scope-test rebind',
      scope: { shadow: 'scoped', agent: 'me', folder: fs.realpathSync(lower) },
    });
    clients.push(again);
    assert.strictEqual(again.scope?.folder, fs.realpathSync(lower));
    const u = user!;
    const before = await u.request('list');

    assert.match(await denied('apply', me.request('layer.apply', { shadow: 'scoped', agent: 'me' })), /allow-apply/);
    await denied('apply, dry run', me.request('layer.apply', { shadow: 'scoped', agent: 'me', dryRun: true }));
    await denied('unmount', me.request('unmount', { shadow: 'scoped' }));
    await denied('unmount, lazy', me.request('unmount', { shadow: 'scoped', lazy: true }));
    await denied('mount', me.request('mount', { folder: makeProject('scope-mount'), name: 'sneaky' }));
    await denied(
      'view.open',
      me.request('view.open', { shadow: 'scoped', agent: 'me', mountPoint: path.join(tempDir('scope-view'), 'v') }),
    );
    await denied('view.close', me.request('view.close', { shadow: 'scoped', view: 0 }));
    await denied('status', me.request('status'));
    await denied('stats', me.request('stats', { shadow: 'scoped' }));
    // Another agent's layer, by every door.
    const other = { shadow: 'scoped', agent: 'other' };
    await denied('layer.write to another agent', me.request('layer.write', { ...other, path: 'secret.txt', data: b64('overwritten\n') }));
    await denied('file.write to another agent', me.request('file.write', { ...other, path: 'x.txt', content: 'x' }));
    await denied('layer.read of another agent', me.request('layer.read', { ...other, path: 'secret.txt' }));
    await denied('file.read of another agent', me.request('file.read', { ...other, path: 'secret.txt' }));
    await denied('layer.reset of another agent', me.request('layer.reset', other));
    await denied('layer.drop of another agent', me.request('layer.drop', other));
    await denied('layer.create of another agent', me.request('layer.create', { shadow: 'scoped', agent: 'new-one' }));
    await denied('layer.clone into another agent', me.request('layer.clone', { shadow: 'scoped', agent: 'me', to: 'copy' }));
    await denied('layer.clone from another agent', me.request('layer.clone', { shadow: 'scoped', agent: 'other', to: 'me' }));
    await denied('layer.checkpoint of another agent', me.request('layer.checkpoint', { ...other, name: 'theirs' }));
    await denied('layer.restore of another agent', me.request('layer.restore', other));
    await denied('layer.diff of another agent', me.request('layer.diff', other));
    await denied('activate another agent', me.request('activate', other));
    await denied('activate the folder', me.request('activate', { shadow: 'scoped', agent: null }));
    // Its own agent on another shadow, by name and by mount point.
    const elsewhere = before.shadows.find((s) => s.name === 'elsewhere')!;
    await denied('another shadow', me.request('layer.write', { shadow: 'elsewhere', agent: 'me', path: 'a.txt', data: b64('a') }));
    await denied('another shadow by path', me.request('file.read', { shadow: elsewhere.mountPoint, agent: 'me', path: 'package.json' }));
    await denied('a shadow that does not exist', me.request('layer.list', { shadow: 'nosuch' }));
    // Runs with weaker protection, or as somebody else.
    const argv = ['sh', '-c', 'echo pwned > pwned.txt'];
    assert.match(
      await denied('run unprotected', me.request('run', { shadow: 'scoped', agent: 'me', argv, unprotected: true })),
      /unprotected/,
    );
    assert.match(
      await denied('run without originalPath', me.request('run', { shadow: 'scoped', agent: 'me', argv, originalPath: false })),
      /originalPath/,
    );
    await denied('run as another agent', me.request('run', { shadow: 'scoped', agent: 'other', argv }));
    await denied('run on another shadow', me.request('run', { shadow: 'elsewhere', agent: 'me', argv }));
    // A restriction never widens.
    await denied('restrict to another agent', me.request('session.restrict', { shadow: 'scoped', agent: 'other' }));
    await denied('restrict to another shadow', me.request('session.restrict', { shadow: 'elsewhere', agent: 'me' }));
    await denied('restrict with apply allowed', me.request('session.restrict', { shadow: 'scoped', agent: 'me', allowApply: true }));
    await denied('apply, after trying to widen', me.request('layer.apply', { shadow: 'scoped', agent: 'me', dryRun: true }));

    // Nothing of it happened.
    const after = await u.request('list');
    assert.deepStrictEqual(
      after.shadows.map((s) => [s.name, s.mounted, s.views.length, [...s.agents].sort()]),
      before.shadows.map((s) => [s.name, s.mounted, s.views.length, [...s.agents].sort()]),
    );
    assert.strictEqual(text((await u.request('layer.read', { ...other, path: 'secret.txt' })).data), 'other agent\n');
    assert.ok(!after.shadows.some((s) => s.agents.some((a) => ['new-one', 'copy'].includes(a))));
    assert.ok(!after.shadows.some((s) => s.agents.includes('me')), 'no run, write or clone made a layer for it');
    assert.deepStrictEqual(
      (await u.request('layer.checkpoints', other)).checkpoints.filter((c) => !c.auto),
      [],
    );
    // And the connection still serves what is in scope.
    assert.strictEqual((await me.request('health')).ok, true);
    await guard!.check();
    guard = new FolderGuard(lower);
  });

  it('serves its own layer and a run in scope; lists and hears only its own shadow and agent', async () => {
    const me = await restricted();
    const u = user!;
    const heard: string[] = [];
    me.on('layer/changed', (p) => heard.push(`${p.shadow} ${p.agent} ${p.event} ${p.path ?? ''}`));

    await me.request('layer.create', { shadow: 'scoped', agent: 'me' });
    assert.strictEqual(
      (await me.request('layer.write', { shadow: 'scoped', agent: 'me', path: 'mine.txt', data: b64('mine\n') })).bytes,
      5,
    );
    assert.strictEqual(text((await me.request('layer.read', { shadow: 'scoped', agent: 'me', path: 'mine.txt' })).data), 'mine\n');
    assert.strictEqual((await me.request('file.read', { shadow: 'scoped', agent: 'me', path: 'mine.txt' })).content, 'mine\n');
    const run = await me.request('run', {
      shadow: 'scoped',
      agent: 'me',
      argv: ['sh', '-c', 'cat mine.txt; echo made by the run > made.txt'],
    });
    assert.strictEqual(run.exitCode, 0, run.stderr);
    assert.strictEqual(run.stdout, 'mine\n');
    assert.strictEqual(
      text((await u.request('layer.read', { shadow: 'scoped', agent: 'me', path: 'made.txt' })).data),
      'made by the run\n',
    );
    // Keeping the same restriction is allowed (and changes nothing).
    assert.deepStrictEqual(await me.request('session.restrict', { shadow: 'scoped', agent: 'me' }), {
      shadow: 'scoped',
      agent: 'me',
      allowApply: false,
      folder: fs.realpathSync(lower),
    });

    // What it lists is its own: the user sees both shadows and every agent.
    const all = await u.request('list');
    assert.deepStrictEqual(all.shadows.map((s) => s.name).sort(), ['elsewhere', 'scoped']);
    assert.ok(all.shadows.find((s) => s.name === 'scoped')!.agents.includes('other'));
    const mine = await me.request('list');
    assert.deepStrictEqual(
      mine.shadows.map((s) => [s.name, s.agents]),
      [['scoped', ['me']]],
    );
    assert.deepStrictEqual((await me.request('layer.list', { shadow: 'scoped' })).agents, ['me']);

    // It hears of its own agent only: the user's write to another agent comes first on the wire,
    // so once its own event is here, the other one would have been too.
    await u.request('layer.write', { shadow: 'scoped', agent: 'other', path: 'more.txt', data: b64('x') });
    await u.request('layer.write', { shadow: 'scoped', agent: 'me', path: 'from-user.txt', data: b64('y') });
    const deadline = Date.now() + 30_000;
    while (!heard.some((h) => h.includes('from-user.txt')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(heard.includes('scoped me written from-user.txt'), heard.join('\n'));
    assert.ok(!heard.some((h) => h.includes('other') || h.includes('elsewhere')), heard.join('\n'));

    // A view of its own it may open, where the daemon puts it, and close; another agent's, neither.
    const theirs = await u.request('view.open', { shadow: 'scoped', agent: 'other' });
    try {
      await denied('view.open for another agent', me.request('view.open', { shadow: 'scoped', agent: 'other' }));
      assert.match(
        await denied('view.close of another agent', me.request('view.close', { shadow: 'scoped', view: theirs.view })),
        /not a view of its agent/,
      );
      const own = await me.request('view.open', { shadow: 'scoped', agent: 'me' });
      assert.strictEqual(own.agent, 'me');
      // A few, not without end (review: 20 asks made 20 mounts, 3 daemon threads each).
      const more = [];
      for (let i = 1; i < MAX_AGENT_VIEWS; i++) more.push(await me.request('view.open', { shadow: 'scoped', agent: 'me' }));
      assert.match(
        await denied('a view past the cap', me.request('view.open', { shadow: 'scoped', agent: 'me' })),
        /its agent has 4 views of this shadow open already/,
      );
      for (const v of more) await me.request('view.close', { shadow: 'scoped', view: v.view });
      // Asked all at once, from this connection and others of the agent, still no more than the cap
      // (review: the views being opened were not counted, and 6 passed).
      const others = [me, await restricted(), await restricted()];
      const burst = await Promise.allSettled(
        Array.from({ length: 9 }, (_, i) => others[i % 3].request('view.open', { shadow: 'scoped', agent: 'me' })),
      );
      const made = burst.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      assert.strictEqual(made.length, MAX_AGENT_VIEWS - 1, 'the open one and three more');
      for (const r of burst)
        if (r.status === 'rejected') assert.match(String((r.reason as Error).message), /its agent has 4 views of this shadow open already/);
      for (const v of made) await me.request('view.close', { shadow: 'scoped', view: v.view });
      assert.deepStrictEqual(
        (await me.request('list')).shadows[0].views.map((v) => [v.id, v.agent]),
        [[own.view, 'me']],
      );
      assert.strictEqual(fs.readFileSync(path.join(own.mountPoint, 'mine.txt'), 'utf8'), 'mine\n');
      assert.deepStrictEqual(await me.request('view.close', { shadow: 'scoped', view: own.view }), { view: own.view });
    } finally {
      await u.request('view.close', { shadow: 'scoped', view: theirs.view });
    }

    // The user's own connection is not restricted, and status says which connections are.
    const st = await u.request('status');
    assert.ok(st.clients.some((c) => c.client === 'scope-test user' && c.scope === undefined));
    assert.ok(st.clients.some((c) => c.client === 'scope-test agent' && c.scope?.agent === 'me' && c.scope.shadow === 'scoped'));
    await u.request('layer.reset', { shadow: 'scoped', agent: 'me' });
    await guard!.check();
    guard = new FolderGuard(lower);
  });

  it("the user's choice of what the shared mount shows holds: an agent's run switches it back afterwards, and the agent may not activate over it", async () => {
    const me = await restricted();
    const u = user!;
    const active = async (): Promise<string | null> => (await u.request('list')).shadows.find((s) => s.name === 'scoped')!.active;
    await u.request('layer.write', { shadow: 'scoped', agent: 'me', path: 'run.sh', data: b64('echo agent code\n') });
    // The user looks at the folder itself.
    await u.request('activate', { shadow: 'scoped', agent: null });
    const run = await me.request('run', { shadow: 'scoped', agent: 'me', argv: ['sh', 'run.sh'] });
    assert.strictEqual(run.stdout, 'agent code\n', run.stderr);
    // The run had the agent's layer; once it ended, the mount shows the folder again (the switch
    // back is a job of its own, queued as the run ends).
    const deadline = Date.now() + 30_000;
    while ((await active()) !== null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.strictEqual(await active(), null, 'the shared mount shows the folder again');
    const mp = (await u.request('list')).shadows.find((s) => s.name === 'scoped')!.mountPoint;
    assert.ok(!fs.existsSync(path.join(mp, 'run.sh')), "the agent's file is not in what the user looks at");
    assert.match(
      await denied("activate its own layer over the user's choice", me.request('activate', { shadow: 'scoped', agent: 'me' })),
      /the user chose what the shared mount shows/,
    );
    assert.strictEqual(await active(), null);
    // The user's own choice of the agent's layer holds too; then the agent may activate it (a no-op).
    await u.request('activate', { shadow: 'scoped', agent: 'me' });
    await me.request('activate', { shadow: 'scoped', agent: 'me' });
    assert.strictEqual(await active(), 'me');
    // The user's choice made while a run has the mount waits for it: the run keeps its layer to
    // the end (it read and wrote another layer when the switch came at once).
    await u.request('layer.write', { shadow: 'scoped', agent: 'other', path: 'who.txt', data: b64('other\n') });
    await u.request('layer.write', { shadow: 'scoped', agent: 'me', path: 'who.txt', data: b64('me\n') });
    const slow = me.request('run', {
      shadow: 'scoped',
      agent: 'me',
      argv: ['sh', '-c', 'while [ ! -e go ]; do sleep 0.05; done; cat who.txt; echo late > late.txt'],
    });
    for (let i = 0; i < 600 && (await active()) !== 'me'; i++) await new Promise((r) => setTimeout(r, 20));
    const during = await u.request('activate', { shadow: 'scoped', agent: 'other' });
    assert.deepStrictEqual([during.active, during.pinned], ['me', 'other'], 'the running job keeps the mount');
    await u.request('layer.write', { shadow: 'scoped', agent: 'me', path: 'go', data: b64('') });
    const done = await slow;
    assert.strictEqual(done.stdout, 'me\n', done.stderr);
    assert.strictEqual(text((await u.request('layer.read', { shadow: 'scoped', agent: 'me', path: 'late.txt' })).data), 'late\n');
    await assert.rejects(u.request('layer.read', { shadow: 'scoped', agent: 'other', path: 'late.txt' }));
    const until = Date.now() + 30_000;
    while ((await active()) !== 'other' && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    assert.strictEqual(await active(), 'other', 'and the choice comes once it ends');
    // A pinned layer dropped (while a run had the mount) leaves the folder pinned: the mount
    // does not come back to a new layer of that name.
    await u.request('layer.write', { shadow: 'scoped', agent: 'me', path: 'go', data: b64('') });
    await u.request('layer.remove', { shadow: 'scoped', agent: 'me', path: 'go' });
    const again = me.request('run', { shadow: 'scoped', agent: 'me', argv: ['sh', '-c', 'while [ ! -e go ]; do sleep 0.05; done'] });
    for (let i = 0; i < 600 && (await active()) !== 'me'; i++) await new Promise((r) => setTimeout(r, 20));
    await u.request('layer.drop', { shadow: 'scoped', agent: 'other' });
    await u.request('layer.write', { shadow: 'scoped', agent: 'other', path: 'new.txt', data: b64('a new layer\n') });
    await u.request('layer.write', { shadow: 'scoped', agent: 'me', path: 'go', data: b64('') });
    await again;
    const by = Date.now() + 30_000;
    while ((await active()) === 'me' && Date.now() < by) await new Promise((r) => setTimeout(r, 20));
    assert.strictEqual(await active(), null, 'the folder, not the new layer of the dropped name');
    await u.request('layer.reset', { shadow: 'scoped', agent: 'me' });
    await guard!.check();
    guard = new FolderGuard(lower);
  });

  it("cancels its own runs, never another client's", async () => {
    const me = await restricted();
    const u = user!;
    const started = (c: ShadowClient, runId: string): Promise<void> =>
      new Promise((resolve) => {
        const off = c.on('run/output', (p) => {
          if (p.runId === runId) {
            off();
            resolve();
          }
        });
      });
    const argv = ['sh', '-c', 'echo started; exec sleep 60'];
    // The user's run, on another shadow (a shadow's runs take turns).
    const userStarted = started(u, 'user-run');
    const userRun = u.request('run', { shadow: 'elsewhere', agent: 'u', argv, runId: 'user-run' });
    await userStarted;
    await denied('cancelling the user run', me.request('run.cancel', { runId: 'user-run' }));
    // Its own run it may cancel.
    const mineStarted = started(me, 'my-run');
    const myRun = me.request('run', { shadow: 'scoped', agent: 'me', argv, runId: 'my-run' });
    await mineStarted;
    assert.deepStrictEqual(await me.request('run.cancel', { runId: 'my-run' }), { runId: 'my-run', cancelled: true });
    const mine = await myRun.catch((err: unknown) => err);
    assert.ok(!(mine instanceof Error) || (mine as ShadowError).code === 'ABORTED', String(mine));
    // The user's run was still running all along: the user cancels it.
    assert.deepStrictEqual(await u.request('run.cancel', { runId: 'user-run' }), { runId: 'user-run', cancelled: true });
    await userRun.catch(() => undefined);
  });

  it('with allowApply it may apply its own layer, until it narrows itself; it never widens again', async () => {
    const me = await restricted(true);
    assert.strictEqual(me.scope?.allowApply, true);
    await me.request('file.write', { shadow: 'scoped', agent: 'me', path: 'to-apply.txt', content: 'apply me\n' });
    // A dry run writes nothing to the folder, and shows the apply is open to it.
    const dry = await me.request('layer.apply', { shadow: 'scoped', agent: 'me', dryRun: true });
    assert.deepStrictEqual(
      dry.applied.map((a) => a.path),
      ['to-apply.txt'],
    );
    await denied('apply of another agent', me.request('layer.apply', { shadow: 'scoped', agent: 'other', dryRun: true }));
    // Type changes and links out of the folder are the user's to confirm, never the agent's.
    await denied(
      'apply confirming type changes',
      me.request('layer.apply', { shadow: 'scoped', agent: 'me', dryRun: true, allowTypeChanges: true }),
    );
    assert.deepStrictEqual(await me.request('session.restrict', { shadow: 'scoped', agent: 'me', allowApply: false }), {
      shadow: 'scoped',
      agent: 'me',
      allowApply: false,
      folder: fs.realpathSync(lower),
    });
    await denied('apply after narrowing', me.request('layer.apply', { shadow: 'scoped', agent: 'me', dryRun: true }));
    await denied('widening again', me.request('session.restrict', { shadow: 'scoped', agent: 'me', allowApply: true }));
    assert.ok(!fs.existsSync(path.join(lower, 'to-apply.txt')));
    await user!.request('layer.reset', { shadow: 'scoped', agent: 'me' });
    await guard!.check();
    guard = new FolderGuard(lower);
  });
});

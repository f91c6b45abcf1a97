// `status` says who is running what (issue #31 item 7): a shell session, a run holding the shared
// mount, another agent's run queued behind it (whom it waits for, for how long), the view the
// session opened, and the queue of the shared mount; `shadowfs status` prints the same in words.
// Everything runs against a real daemon and mount; the folder is hashed and watched.
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { FolderGuard, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

describe('status: who is running what', function () {
  this.timeout(60_000);
  let folder: string;
  let guard: FolderGuard;
  let client: ShadowClient;

  beforeEach(async () => {
    folder = tempDir('activity');
    fs.writeFileSync(path.join(folder, 'a.txt'), 'a\n');
    guard = new FolderGuard(folder);
    client = await ShadowClient.connect();
  });

  afterEach(async () => {
    try {
      for (const s of (await client.request('list')).shadows) await client.request('unmount', { shadow: s.name });
    } finally {
      client.close();
      stopTestDaemon();
      await guard.check();
    }
  });

  it('lists sessions, runs (running and queued behind whom), views and the shared mount queue', async () => {
    const shadow = (await client.request('mount', { folder })).name;
    const session = await client.request('shell.open', { shadow, agent: 'carol', argv: ['sleep', '1000'], cols: 80, rows: 24 });
    // Alice's run holds the shared mount until its marker file is gone; bob's waits behind it.
    const holder = client.request('run', {
      shadow,
      agent: 'alice',
      runId: 'alice-run',
      argv: ['sh', '-c', 'touch /tmp/held; while [ ! -e stop ]; do sleep 0.05; done'],
    });
    let st = await client.request('status');
    for (let i = 0; i < 200 && !st.activity.runs.some((r) => r.runId === 'alice-run' && r.state === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      st = await client.request('status');
    }
    const waiter = client.request('run', { shadow, agent: 'bob', runId: 'bob-run', argv: ['true'] });
    for (let i = 0; i < 200 && !st.activity.runs.some((r) => r.runId === 'bob-run' && r.state === 'queued'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      st = await client.request('status');
    }
    const runs = Object.fromEntries(st.activity.runs.map((r) => [r.runId, r]));
    assert.strictEqual(runs['alice-run']?.state, 'running');
    assert.deepStrictEqual(
      runs['bob-run'] && { state: runs['bob-run'].state, waitingFor: runs['bob-run'].waitingFor, agent: runs['bob-run'].agent },
      {
        state: 'queued',
        waitingFor: 'alice',
        agent: 'bob',
      },
    );
    assert.deepStrictEqual(
      st.activity.shells.map((s) => [s.sessionId, s.agent, s.running]),
      [[session.sessionId, 'carol', true]],
    );
    const q = st.activity.queues.find((x) => x.shadow === shadow);
    assert.strictEqual(q?.running, 'alice');
    assert.deepStrictEqual(
      q?.waiting.map((w) => [w.agent, w.waitingFor]),
      [['bob', 'alice']],
    );
    assert.ok(st.shadows.find((s) => s.name === shadow)?.views.some((v) => v.agent === 'carol'));
    // The CLI says the same in words.
    const text = execFileSync(process.execPath, [cliPath, 'status'], { encoding: 'utf8' });
    assert.match(text, new RegExp(`session ${session.sessionId}: agent carol in ${shadow}: sleep 1000`));
    assert.match(text, /run alice-run: agent alice .* \(running \d+ s\)/);
    assert.match(text, /run bob-run: agent bob .* \(queued \d+ s behind alice\)/);
    assert.match(text, new RegExp(`shared mount of ${shadow}: alice holds it .*waiting: bob \\d+ s behind alice`));
    assert.match(text, /view \d+: agent carol of /);
    // Let alice finish: bob runs, and both leave the list.
    await client.request('file.write', { shadow, agent: 'alice', path: 'stop', content: '' });
    assert.strictEqual((await holder).exitCode, 0);
    assert.strictEqual((await waiter).exitCode, 0);
    await client.request('shell.close', { sessionId: session.sessionId });
    st = await client.request('status');
    assert.deepStrictEqual(st.activity.runs, []);
    assert.deepStrictEqual(
      st.activity.shells.map((s) => s.running),
      [false],
    );
  });
});

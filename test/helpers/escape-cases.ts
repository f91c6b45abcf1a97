// The escape corpus of issue 26: what an agent's process tries in order to write the user's
// folder, the host, the daemon or another agent's layer, each as a command run in a real shadow.
// test/escape.test.ts runs every case as root (in-process, as the daemon does) and as nobody (a
// node process of that user that mounts and runs, see runCaseAsScript), and asserts.
//
// The world a case runs in (made by the test, JSON so that nobody's process gets it too):
//   lower   A, the user's folder, mounted as a shadow; every case runs as agent "agent" in it.
//   other   B, a second folder with a shadow of its own (mounted by the same process).
//   canary  a directory beside A, writable by anyone: a confined run must not get anything in.
//   hostTmp a directory in the host's /tmp, writable by anyone: the same.
//   home    HOME of the daemon during the run (.bashrc, .gitconfig, .config/shadowfs/lsp.json).
//   state, runtime: $SHADOWFS_STATE_DIR and $XDG_RUNTIME_DIR of the daemon during the run.
// Besides the shared mount, a view of the agent "victim" is open, and "victim" (on A) and
// "other" (on B) have layers holding one file each, which no case may change.
import * as assert from 'assert';
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as inspector from 'inspector';
import * as path from 'path';
import { mount } from '../../src';
import type { RunOptions } from '../../src/run/runner';
import { runInShadow } from '../../src/run/runner';

export interface World {
  lower: string;
  other: string;
  canary: string;
  hostTmp: string;
  home: string;
  state: string;
  runtime: string;
  mounts: { shadow: string; second: string; view: string };
  /** test/native/escape/probe.c, built. */
  probe: string;
  /** test/native/escape/preload.c, built for this world (it writes canary and hostTmp). */
  preload: string;
  /** A TCP port served on 127.0.0.1 outside the run. */
  port: number;
  /** An abstract Unix socket name served outside the run. */
  abstractName: string;
  /** A pathname Unix socket served outside the run, beside A. */
  unixSocket: string;
  /** In every case's command line: no process carrying it may outlive the run. */
  marker: string;
  /** Put in the daemon's environment during the run: the run must not see it. */
  secret: string;
  /** The file handle ("type:hex", name_to_handle_at) of A/src/math.js. */
  handle: string;
  /** Major and minor of the device A's file system is on. */
  dev: { major: number; minor: number };
}

/** What a case's run did, as the daemon saw it; JSON. */
export interface Outcome {
  result?: {
    exitCode: number | null;
    signal: string | null;
    stdout: string;
    stderr: string;
    protected: boolean;
    protections: string[];
    leftoverProcesses: number;
  };
  error?: { code: string; message: string };
  /** The victim's file, read from its layer and through its view, and the other shadow's. */
  victimLayer: string;
  victimView: string;
  otherLayer: string;
  /** Processes carrying the marker once the run returned. */
  survivors: number[];
  /** What Command.user printed, and its exit status. */
  user?: { status: number | null; stdout: string; stderr: string };
  /** The daemon's inspector (a SIGUSR1 opens one). */
  inspector: string | null;
}

export interface Command {
  /** sh -c text; or argv. */
  shell?: string;
  argv?: string[];
  env?: Record<string, string>;
  noNetwork?: boolean;
  runId?: string;
  /** Fake tools (unshare, sh, mount, ...) and the preload library in the agent's layer, in .tools. */
  tools?: boolean;
  /**
   * sh text the daemon's user runs after the run, outside any confinement, in the shared mount
   * with the agent's layer active (as `shadowfs use agent` then the user's own tools would):
   * what the agent left for the user's programs to follow. Its output is Outcome.user.
   */
  user?: string;
}

export interface EscapeCase {
  name: string;
  /** One sentence: what the agent tries. */
  tries: string;
  command: (w: World, daemonPid: number) => Command;
  /** What, besides the shared checks, shows the attempt failed. */
  check?: (o: Outcome, w: World) => void;
  /** The run is expected to be refused before it starts, with this error code. */
  refused?: string;
  /** Probe lines ending in ": ok" that are not escapes (e.g. the run tracing its own process). */
  allowOk?: RegExp;
}

export const VICTIM = 'victim\n';
export const OTHER = 'other\n';
export const VICTIM_VIEW_FILE = 'victim-view.txt';

const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** sh text: runs `cmd`, prints "<label>: ok" if it succeeded and "<label>: refused" if not. */
export function attempt(label: string, cmd: string): string {
  return `if ( ${cmd} ) >/dev/null 2>&1; then echo ${q(`${label}: ok`)}; else echo ${q(`${label}: refused`)}; fi`;
}

/** Every script ends so: a run that did not get that far (a typo, a missing tool) fails the case. */
const DONE = 'echo DONE';
const script = (...lines: string[]): string => [...lines, DONE].join('\n');

const fakeTool = (w: World, name: string, real: string): string =>
  [
    '#!/bin/sh',
    `echo "fake ${name} ran" >> /tmp/escape-fake-ran`,
    `echo escaped >> ${q(path.join(w.canary, `fake-${name}`))} 2>/dev/null && echo ${q(`fake ${name} wrote the canary: ok`)}`,
    `echo escaped >> ${q(path.join(w.hostTmp, `fake-${name}`))} 2>/dev/null && echo ${q(`fake ${name} wrote the host tmp: ok`)}`,
    `exec ${real} "$@"`,
    '',
  ].join('\n');

export const FAKE_TOOLS: Record<string, string> = {
  sh: '/bin/sh',
  unshare: '/usr/bin/unshare',
  mount: '/bin/mount',
  nsenter: '/usr/bin/nsenter',
  setpriv: '/usr/bin/setpriv',
  env: '/usr/bin/env',
  node: '/usr/bin/node',
};

/** The corpus: one line each, in the order of the issue's table, then the rest. */
export const CASES: EscapeCase[] = [
  {
    name: 'umount-reveals-A',
    tries: "umount -l A (by the tool and by umount2) to uncover the real folder under the shadow, then writes A's path",
    command: (w) => ({
      shell: script(
        attempt('umount -l A', `umount -l ${q(w.lower)}`),
        attempt('umount A', `umount ${q(w.lower)}`),
        `${q(w.probe)} umount ${q(w.lower)}`,
        `echo x > ${q(path.join(w.lower, 'escape-umount'))}`,
        `cat ${q(path.join(w.lower, 'escape-umount'))}`,
      ),
    }),
    check: (o) => assertLines(o, ['x'], 'the write after the umount attempts landed in the shadow'),
  },
  {
    name: 'proc-daemon-links',
    tries: "/proc/<daemon pid>/root/A/f, /proc/<daemon>/cwd/f and /proc/<daemon>/fd/N/f, by the daemon's host pid",
    command: (w, d) => ({
      shell: script(
        attempt('see the daemon in /proc', `test -e /proc/${d}`),
        `${q(w.probe)} write /proc/${d}/root${w.lower}/escape-root /proc/${d}/root${w.canary}/escape-root /proc/${d}/cwd/escape-cwd /proc/${d}/root/tmp/escape-root`,
        `for n in $(seq 0 64); do ${q(w.probe)} write /proc/${d}/fd/$n/escape-fd /proc/${d}/fd/$n 2>&1; done | grep ': ok' || true`,
      ),
    }),
  },
  {
    name: 'proc-init-and-self-root',
    tries: '/proc/1/root, /proc/1/cwd, /proc/1/fd/N, /proc/1/mem and /proc/self/root towards the canary, the host /tmp and A',
    command: (w) => ({
      shell: script(
        `${q(w.probe)} write /proc/1/root${w.canary}/escape /proc/1/cwd${w.canary}/escape /proc/self/root${w.canary}/escape /proc/1/root/tmp/${w.marker}-init /proc/1/root${w.hostTmp}/escape /proc/1/mem /proc/1/environ`,
        `for n in $(seq 0 16); do ${q(w.probe)} write /proc/1/fd/$n /proc/1/fd/$n/escape 2>&1; done | grep ': ok' || true`,
        attempt('read /proc/1/root', 'ls /proc/1/root/'),
        attempt('cd /proc/1/cwd', 'cd /proc/1/cwd'),
        `echo x > /proc/self/root${w.lower}/escape-self-root; cat ${q(path.join(w.lower, 'escape-self-root'))}`,
      ),
    }),
    check: (o) => assertLines(o, ['x'], "/proc/self/root/A is the shadow: the write is the layer's"),
  },
  {
    name: 'env-path-and-preload',
    tries:
      'PATH at fake unshare/sh/mount/nsenter/setpriv/env/node in the shadow, and LD_PRELOAD of a library in the shadow: only the final command may use them',
    command: (w) => ({
      tools: true,
      argv: ['sh', '-c', script('cat /tmp/escape-fake-ran', attempt('control preload ran in the run', 'test -e /tmp/escape-preload-ran'))],
      env: {
        PATH: `${path.join(w.lower, '.tools')}:/usr/local/bin:/usr/bin:/bin`,
        LD_PRELOAD: path.join(w.lower, '.tools', 'evil.so'),
        LD_LIBRARY_PATH: path.join(w.lower, '.tools'),
        NODE_OPTIONS: `--require ${path.join(w.lower, '.tools', 'evil.js')}`,
        BASH_ENV: path.join(w.lower, '.tools', 'evil.sh'),
        ENV: path.join(w.lower, '.tools', 'evil.sh'),
      },
    }),
    check: (o) => {
      // The command itself is the agent's to choose: its own PATH found the fake sh, confined.
      assertLines(o, ['fake sh ran', 'control preload ran in the run: ok'], 'the final command used the environment it was given');
    },
  },
  {
    name: 'runid-shell-text',
    tries: 'a runId holding shell text (it names the cgroup): refused before anything starts',
    command: (w) => ({ shell: 'true', runId: `x; touch ${w.canary}/runid $(touch ${w.canary}/runid2)` }),
    refused: 'INVALID_ARGUMENT',
  },
  {
    name: 'runid-path',
    tries: 'a runId that climbs out of the cgroup directory',
    command: () => ({ shell: 'true', runId: '../../../escape' }),
    refused: 'INVALID_ARGUMENT',
  },
  {
    name: 'open-by-handle',
    tries: "open_by_handle_at with the file handle of A's own file (taken outside), for writing and reading",
    command: (w) => ({ argv: [w.probe, 'handle-open', path.dirname(w.lower), w.handle] }),
  },
  {
    name: 'pipe-page-merge',
    tries:
      "Dirty Pipe's pattern on a folder file read through the shadow: a pipe primed for merging, the file's page spliced in, a write after it (the shadow's own READ replies are spliced from the folder's pages too)",
    command: (w) => ({ argv: [w.probe, 'pipe-merge', path.join(w.lower, 'src', 'math.js')] }),
    allowOk: /^(splice a page of the file into the pipe|write after it into the pipe): ok$/,
    // The attempt was made (splice is not among the calls a run is refused) and failed.
    check: (o, w) =>
      assertLines(
        o,
        [
          'splice a page of the file into the pipe: ok',
          'write after it into the pipe: ok',
          `${path.join(w.lower, 'src', 'math.js')} page: unchanged`,
        ],
        'the pipe-merge attempt',
      ),
  },
  {
    name: 'signal-daemon',
    tries: 'kill -USR1 the daemon (Node opens its inspector), kill -0 it, and SIGSTOP it',
    command: (w, d) => ({
      shell: script(
        attempt('kill -USR1 daemon', `kill -USR1 ${d}`),
        attempt('kill -0 daemon', `kill -0 ${d}`),
        `${q(w.probe)} kill ${d} 10`,
        `${q(w.probe)} kill ${d} 19`,
      ),
    }),
    check: (o) => assert.strictEqual(o.inspector, null, 'the daemon opened its inspector'),
  },
  {
    name: 'ptrace',
    tries: "PTRACE_ATTACH to the run's init and to the daemon; /proc lists only the run's own processes",
    command: (w, d) => ({
      shell: script(
        `${q(w.probe)} pids`,
        `${q(w.probe)} ptrace 1 ${d}`,
        attempt('strace -p 1', 'timeout 5 strace -qq -p 1 -o /dev/null; test $? = 124'),
      ),
    }),
    check: (o) => {
      const pids = (o.result?.stdout.match(/^pids:(.*)$/m)?.[1] ?? '').trim().split(/\s+/).map(Number);
      assert.ok(pids.length > 0 && pids.every((p) => p < 64), `the run sees processes outside its own: ${pids.join(' ')}`);
    },
  },
  {
    name: 'setsid-survivor',
    tries: 'setsid, nohup and a double fork leave processes that would write A and the canary after the run',
    command: (w) => {
      const late = `sleep 30; echo late >> ${q(path.join(w.lower, 'late'))}; echo late >> ${q(path.join(w.canary, 'late'))}`;
      return {
        shell: script(
          `setsid sh -c ${q(late)} ${w.marker} </dev/null >/dev/null 2>&1 &`,
          `nohup sh -c ${q(late)} ${w.marker} </dev/null >/dev/null 2>&1 &`,
          `( ( sh -c ${q(late)} ${w.marker} </dev/null >/dev/null 2>&1 & ) & )`,
          `sleep 0.2`,
        ),
      };
    },
    check: (o) => assert.ok((o.result?.leftoverProcesses ?? 0) >= 1, 'the processes left behind were not reported'),
  },
  {
    name: 'other-mounts',
    tries: "reads and writes the second shadow's mount point, the victim's view, and A's shared mount point from the run",
    command: (w) => ({
      shell: script(
        `ls -A ${q(w.mounts.second)} ${q(w.mounts.view)} 2>/dev/null | grep -v ':$' | grep . && echo 'other mounts listed: ok'`,
        attempt('read the other shadow', `cat ${q(path.join(w.mounts.second, 'other.txt'))}`),
        attempt('read the view', `cat ${q(path.join(w.mounts.view, VICTIM_VIEW_FILE))}`),
        `${q(w.probe)} write ${q(path.join(w.mounts.second, 'other.txt'))} ${q(path.join(w.mounts.second, 'escape'))} ${q(path.join(w.mounts.view, VICTIM_VIEW_FILE))} ${q(path.join(w.mounts.view, 'escape'))}`,
        `${q(w.probe)} write /proc/1/root${w.mounts.view}/escape`,
      ),
    }),
  },
  {
    name: 'daemon-env',
    tries: "env, /proc/self/environ and the init's /proc/1/environ and cmdline: no variable of the daemon's but the passed few",
    command: () => ({
      shell: script(
        'env',
        'tr "\\0" "\\n" < /proc/self/environ',
        'tr "\\0" "\\n" < /proc/1/environ 2>/dev/null',
        'tr "\\0" " " < /proc/1/cmdline; echo',
      ),
    }),
    check: (o, w) => {
      assert.ok(!o.result?.stdout.includes(w.secret), 'the run saw the secret in the daemon environment');
      assert.ok(!/^(XDG_RUNTIME_DIR|SHADOWFS_STATE_DIR|SHADOWFS_TEST_SECRET)=/m.test(o.result?.stdout ?? ''), o.result?.stdout);
    },
  },
  {
    name: 'no-network-setns',
    tries: 'in a --no-network run: nsenter -t 1 -n / -t <daemon> -n, setns to every namespace of pid 1, then a TCP connect to a host port',
    command: (w, d) => ({
      noNetwork: true,
      shell: script(
        attempt('nsenter -t 1 -n', `nsenter -t 1 -n ${q(w.probe)} connect ${w.port} | grep -q ': ok'`),
        attempt('nsenter -t daemon -n', `nsenter -t ${d} -n true`),
        `${q(w.probe)} namespaces 1`,
        `${q(w.probe)} connect ${w.port}`,
      ),
    }),
  },
  {
    name: 'home-config-state',
    tries:
      "writes ~/.bashrc (the run's private home), ~/.gitconfig (read-only), ~/.config/shadowfs/lsp.json, $SHADOWFS_STATE_DIR and the runtime dir; reads the state; rewrites /etc/hosts and creates a file in /etc",
    command: (w) => ({
      shell: script(
        // The run's home is a private tmpfs: what it writes there is its own (reported as
        // "private", not "ok"); the daemon's home, guarded outside, must not change.
        attempt('read the real .bashrc', `grep -q '# bashrc' "$HOME/.bashrc"`),
        `${q(w.probe)} write "$HOME/.bashrc" "$HOME/.profile" | sed 's/: ok$/: private/'`,
        `${q(w.probe)} write "$HOME/.gitconfig" "$HOME/.config/shadowfs/lsp.json"`,
        `${q(w.probe)} write ${q(path.join(w.state, 'state.json'))} ${q(path.join(w.state, 'escape'))} ${q(path.join(w.runtime, 'shadowfs', 'escape'))} ${q(path.join(w.runtime, 'escape'))}`,
        attempt('read the state', `grep -q secret-state ${q(path.join(w.state, 'state.json'))}`),
        attempt('read lsp.json', `cat ${q(path.join(w.home, '.config', 'shadowfs', 'lsp.json'))}`),
        `${q(w.probe)} rewrite /etc/hosts`,
        `${q(w.probe)} write /etc/${w.marker}`,
        'echo "HOME=$HOME"',
      ),
    }),
    check: (o, w) =>
      assertLines(
        o,
        [`HOME=${w.home}`, `${w.home}/.bashrc: private`, `${w.home}/.profile: private`],
        "the run's HOME is the daemon's path, a private directory",
      ),
  },
  {
    name: 'mount-family-tools',
    tries: 'mount, mount -o remount,rw /, mount --bind, pivot_root, unshare -r, unshare -m, unshare -U, chroot, nsenter -t 1 -m',
    command: (w) => ({
      shell: script(
        attempt('mount tmpfs', 'mount -t tmpfs none /mnt'),
        attempt('remount / rw', 'mount -o remount,rw /'),
        attempt('remount A rw', `mount -o remount,rw ${q(w.lower)}`),
        attempt('remount canary rw', `mount -o remount,bind,rw ${q(path.dirname(w.canary))}`),
        attempt('bind the parent of A', `mount --bind ${q(path.dirname(w.lower))} /tmp`),
        attempt('pivot_root', 'mkdir -p /tmp/new && pivot_root /tmp /tmp/new'),
        attempt('unshare -r', 'unshare -r true'),
        attempt('unshare -m', 'unshare -m true'),
        attempt('unshare -U', 'unshare -U true'),
        attempt('unshare -p -f', 'unshare -p -f true'),
        attempt('chroot', 'chroot / true'),
        attempt('nsenter -t 1 -m', 'nsenter -t 1 -m true'),
        attempt('nsenter -t 1 -U', 'nsenter -t 1 -U true'),
      ),
    }),
  },
  {
    name: 'namespace-syscalls',
    tries: 'the same by system call: unshare and clone with namespace flags, clone3, setns, chroot, pivot_root, mount, open_tree, fsopen',
    command: (w) => ({ argv: [w.probe, 'namespaces', '1'] }),
  },
  {
    name: 'links-to-A',
    tries: "hard links and symlinks from the shadow to A's files and to the canary, then writes through them; links across mounts",
    command: (w) => ({
      shell: script(
        `cd ${q(w.lower)}`,
        'ln src/math.js hard-math && echo "// agent" >> hard-math',
        `ln -s ${q(path.join(w.lower, 'src/math.js'))} sym-math && echo "// agent" >> sym-math`,
        `ln -s ${q(w.canary)} sym-canary; ${q(w.probe)} write sym-canary/escape`,
        `ln -s ${q(path.join(w.canary, 'sentinel'))} sym-sentinel; ${q(w.probe)} write sym-sentinel`,
        attempt('hard link from outside the shadow', `ln ${q(path.join(w.canary, 'sentinel'))} hard-sentinel`),
        attempt('hard link from the run tmp', `echo t > /tmp/t && ln /tmp/t hard-tmp`),
        attempt('rename A away', `mv ${q(w.lower)} ${q(`${w.lower}.moved`)}`),
        'tail -1 src/math.js',
      ),
    }),
    check: (o) => assertLines(o, ['// agent'], "the writes through the links landed in the agent's layer"),
  },
  {
    name: 'links-for-the-user',
    tries:
      "symbolic links to A's real path (which the run sees as the shadow), through /proc, climbing above the shadow and back, and to A's parent, left for the user's own programs in the mount to write through",
    command: (w) => ({
      shell: script(
        `cd ${q(w.lower)}`,
        `ln -s ${q(path.join(w.lower, 'src/math.js'))} lnk-file`,
        `ln -s ${q(path.join(w.lower, 'src'))} lnk-dir`,
        `ln -s ${q(`../${path.basename(w.lower)}/src/math.js`)} lnk-climb`,
        attempt('link through /proc', `ln -s ${q(`/proc/1/root${w.lower}/src/math.js`)} lnk-proc`),
        attempt('link to the folder above A', `ln -s ${q(path.dirname(w.lower))} lnk-parent`),
        attempt('link to /', 'ln -s / lnk-root'),
        'readlink lnk-file lnk-dir lnk-climb',
      ),
      user: [
        'for l in lnk-file lnk-dir lnk-climb; do test -L "$l" || echo "missing $l"; done',
        'echo "// user 1" >> lnk-file',
        'echo "// user 2" >> lnk-dir/math.js',
        'echo "// user 3" >> lnk-climb',
        'tail -3 src/math.js',
      ].join('\n'),
    }),
    check: (o, w) => {
      assert.ok(!fs.readFileSync(path.join(w.lower, 'src', 'math.js'), 'utf8').includes('// user'), "the user's writes reached A");
      assert.deepStrictEqual(o.user?.stdout.trim().split('\n'), ['// user 1', '// user 2', '// user 3'], JSON.stringify(o.user));
      // Stored so that they lead to the same place from the mount as from the run: inside the shadow.
      assertLines(o, ['src/math.js', 'src', 'src/math.js'], 'the links as stored');
    },
  },
  {
    name: 'git-control-files',
    tries:
      "makes a repository in the shadow (a .git directory, a .git file, one moved into place, a symlink) for the user's own git in the mount to obey (test/git-guard.test.ts plants config and hooks in a real one)",
    command: (w) => ({
      shell: script(
        `cd ${q(w.lower)}`,
        attempt('.git directory', 'mkdir .git'),
        attempt('.git file', 'echo "gitdir: /tmp/planted" > .git'),
        attempt('.git moved into place', 'mkdir -p planted/hooks && mv planted .git'),
        attempt('.git symlink', 'ln -s /tmp .git'),
        attempt('nested .git', 'mkdir -p src/lib/.git/hooks'),
      ),
    }),
    check: (o) => {
      for (const what of ['.git directory', '.git file', '.git moved into place', '.git symlink', 'nested .git'])
        assert.match(o.result?.stdout ?? '', new RegExp(`${what.replace('.', '\\.')}: refused`), what);
    },
  },
  {
    name: 'metadata-and-deletes',
    tries:
      "chmod, chown, touch, truncate, setfattr, rename and rm -rf of A's own files, and a reopen of a read-only descriptor for writing",
    command: (w) => ({
      shell: script(
        `cd ${q(w.lower)}`,
        'exec 3< src/math.js',
        'echo via-fd >> /proc/self/fd/3; echo via-fd > /dev/fd/3',
        'chmod 600 /proc/self/fd/3; chmod 777 package.json; chown 1:1 package.json; touch -d 2001-01-01 package.json',
        'truncate -s 0 README.md 2>/dev/null; setfattr -n user.escape -v 1 package.json 2>/dev/null',
        'mv deep/a/top.txt moved.txt; rm -rf src deep empty script.sh',
        'ls -A | tr "\\n" " "; echo',
      ),
    }),
  },
  {
    name: 'inherited-descriptors',
    tries: 'lists its descriptors: only 0, 1 and 2, none of them a file of the daemon (no /dev/fuse, socket or state file)',
    command: (w) => ({ argv: [w.probe, 'fds'] }),
    check: (o) => {
      const line = o.result?.stdout.match(/^fds:(.*)$/m)?.[1].trim() ?? '';
      const fds = line.split(/\s+/).map((e) => e.split('=')[0]);
      assert.deepStrictEqual(fds, ['0', '1', '2'], `descriptors: ${line}`);
      for (const e of line.split(/\s+/)) assert.ok(/=(pipe:|socket:|\/dev\/null)/.test(e), `a descriptor the run should not hold: ${e}`);
    },
  },
  {
    name: 'proc-sys',
    tries:
      '/proc/sys writes (each file given its own content back, so nothing changes if it works): core_pattern, hostname, ip_forward, overcommit',
    command: (w) => ({
      argv: [
        w.probe,
        'rewrite',
        '/proc/sys/kernel/core_pattern',
        '/proc/sys/kernel/hostname',
        '/proc/sys/net/ipv4/ip_forward',
        '/proc/sys/vm/overcommit_memory',
        '/proc/sys/kernel/modprobe',
        '/proc/sys/fs/protected_symlinks',
      ],
    }),
  },
  {
    name: 'cgroup-fs',
    tries: "writes /sys/fs/cgroup: moves itself to the root cgroup, makes a cgroup, and rewrites the run's own limits",
    command: (w) => ({
      shell: script(
        'for f in $(find /sys/fs/cgroup -maxdepth 2 -name cgroup.procs 2>/dev/null); do ' +
          attempt('move to a cgroup.procs', 'echo $$ > "$f"') +
          '; done',
        'for d in $(find /sys/fs/cgroup -maxdepth 1 -mindepth 1 -type d 2>/dev/null) /sys/fs/cgroup; do ' +
          attempt('mkdir a cgroup', `mkdir "$d/${w.marker}"`) +
          '; done',
        `cg=$(sed -n 's/^0:://p' /proc/self/cgroup); ${q(w.probe)} rewrite "/sys/fs/cgroup$cg/pids.max" "/sys/fs/cgroup/unified$cg/pids.max" 2>/dev/null | grep -v unreadable || true`,
      ),
    }),
  },
  {
    name: 'tiocsti',
    tries: "TIOCSTI on the run's stdio and on /dev/tty: typing into another program's terminal",
    command: (w) => ({ argv: [w.probe, 'tiocsti'] }),
  },
  {
    name: 'mknod',
    tries: "mknod of /dev/null's twin and of the block device A lives on, in the shadow and in /tmp, then opens them",
    command: (w) => ({
      shell: script(
        `${q(w.probe)} mknod ${q(path.join(w.lower, 'null-twin'))} c 1 3`,
        `${q(w.probe)} mknod ${q(path.join(w.lower, 'disk'))} b ${w.dev.major} ${w.dev.minor}`,
        `${q(w.probe)} mknod /tmp/disk b ${w.dev.major} ${w.dev.minor}`,
        `${q(w.probe)} mknod /dev/shm/disk b ${w.dev.major} ${w.dev.minor}`,
      ),
    }),
  },
  {
    name: 'private-tmp',
    tries: "the host's /tmp, /var/tmp and /dev/shm are not the run's: it sees none of their files, and what it writes there stays private",
    command: (w) => ({
      shell: script(
        attempt('see the host tmp', `ls ${q(path.join(w.hostTmp, 'host-file'))}`),
        `echo private > /tmp/${w.marker}-tmp; echo private > /var/tmp/${w.marker}-vartmp; echo private > /dev/shm/${w.marker}-shm`,
        `cat /tmp/${w.marker}-tmp`,
        `${q(w.probe)} write ${q(path.join(w.hostTmp, 'escape'))}`,
      ),
    }),
    check: (o, w) => {
      assertLines(o, ['private'], 'the run writes its own /tmp');
      for (const f of [`/tmp/${w.marker}-tmp`, `/var/tmp/${w.marker}-vartmp`, `/dev/shm/${w.marker}-shm`])
        assert.ok(!fs.existsSync(f), `the run's write reached the host: ${f}`);
    },
  },
  {
    name: 'abstract-socket',
    tries: 'connects to an abstract Unix socket served outside the run (the daemon or a desktop bus could listen on one)',
    command: (w) => ({ argv: [w.probe, 'connect-abstract', w.abstractName] }),
  },
  {
    name: 'block-device',
    tries: 'opens the disk A lives on for writing (raw writes would bypass every file system check); nothing is written',
    command: (w) => ({
      shell: script(`${q(w.probe)} opendev /dev/block/${w.dev.major}:${w.dev.minor} /dev/vda /dev/sda /dev/nvme0n1 2>&1 | grep -v ENOENT`),
    }),
  },
  {
    name: 'host-devices',
    tries:
      "opens the host's loop, KVM, FUSE and console devices for writing (a loop device over an image is a disk); the view has none of them",
    command: (w) => ({
      shell: script(
        `${q(w.probe)} opendev /dev/loop0 /dev/loop1 /dev/loop-control /dev/kvm /dev/fuse /dev/console /dev/tty0 /dev/mem /dev/vda 2>&1 | grep -v ENOENT; ls /dev`,
      ),
    }),
  },
  {
    name: 'unix-socket-outside',
    tries:
      "connects to a Unix socket served beside A and to a socket in the daemon's home (a rootless docker.sock, an ssh agent): neither is in the view",
    command: (w) => ({
      shell: script(`${q(w.probe)} connect-unix ${q(w.unixSocket)}; ${q(w.probe)} connect-unix ${q(path.join(w.home, 'agent.sock'))}`),
    }),
  },
];

/** The run printed each of `lines` as a whole line. */
export function assertLines(o: Outcome, lines: string[], what: string): void {
  const out = (o.result?.stdout ?? '').split('\n');
  for (const l of lines) assert.ok(out.includes(l), `${what}: no line ${JSON.stringify(l)} in\n${o.result?.stdout}${o.result?.stderr}`);
}

/** Pids of processes whose command line holds `needle`. */
export function processesWith(needle: string): number[] {
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

/**
 * What the test's daemon lets runs read besides the system (SHADOWFS_RUN_READABLE): the targets
 * the cases aim at (the canary beside A, the other folder B), the probes and shadowfs itself (the
 * CLI cases). Not the home directory, the state or the socket beside A: those stay out of view.
 */
export function runReadable(w: World): string {
  const repo = path.resolve(__dirname, '..', '..', '..');
  const shadowfs = ['bin', 'dist', 'node_modules', 'package.json', path.join('build', 'Release')].map((p) => path.join(repo, p));
  return [w.canary, w.other, path.dirname(w.probe), w.preload, ...shadowfs].join(':');
}

async function withDaemonEnv<T>(w: World, fn: () => Promise<T>): Promise<T> {
  const keys = [
    'HOME',
    'XDG_RUNTIME_DIR',
    'SHADOWFS_STATE_DIR',
    'SHADOWFS_TEST_SECRET',
    'XDG_CONFIG_HOME',
    'SHADOWFS_RUN_READABLE',
  ] as const;
  const saved = keys.map((k) => process.env[k]);
  // A run sees the system and its shadow only; the user lets it read the world (its canary, B,
  // the home, the sockets: each case's targets), the probes and shadowfs itself (the CLI cases).
  process.env.SHADOWFS_RUN_READABLE = runReadable(w);
  process.env.HOME = w.home;
  process.env.XDG_RUNTIME_DIR = w.runtime;
  process.env.SHADOWFS_STATE_DIR = w.state;
  process.env.SHADOWFS_TEST_SECRET = w.secret;
  delete process.env.XDG_CONFIG_HOME;
  try {
    return await fn();
  } finally {
    keys.forEach((k, i) => {
      if (saved[i] === undefined) delete process.env[k];
      else process.env[k] = saved[i];
    });
  }
}

/**
 * Mounts A and B, opens the victim's view, runs the case as agent "agent" (the daemon is this
 * process), and reports; always unmounts.
 */
export async function runCase(w: World, name: string): Promise<Outcome> {
  const c = CASES.find((x) => x.name === name);
  if (!c) throw new Error(`no escape case ${name}`);
  const cmd = c.command(w, process.pid);
  const s = await mount(w.lower, { mountPoint: w.mounts.shadow });
  let s2: Awaited<ReturnType<typeof mount>> | undefined;
  try {
    s2 = await mount(w.other, { mountPoint: w.mounts.second });
    await s2.layer('other').write('other.txt', OTHER);
    await s.layer('victim').write('victim.txt', VICTIM);
    await s.layer('victim').write(VICTIM_VIEW_FILE, VICTIM);
    const view = await s.openView('victim', { mountPoint: w.mounts.view });
    if (cmd.tools) {
      const agent = s.layer('agent');
      for (const [tool, real] of Object.entries(FAKE_TOOLS)) await agent.write(`.tools/${tool}`, fakeTool(w, tool, real), { mode: 0o755 });
      await agent.write('.tools/evil.so', fs.readFileSync(w.preload), { mode: 0o755 });
      const js = `require('fs').appendFileSync(${JSON.stringify(path.join(w.canary, 'node-options'))}, 'escaped\\n');\n`;
      await agent.write('.tools/evil.js', js);
      await agent.write('.tools/evil.sh', `echo escaped >> ${q(path.join(w.canary, 'bash-env'))}\n`);
    }
    const opts: RunOptions = {
      agent: 'agent',
      argv: cmd.argv ?? ['sh', '-c', cmd.shell ?? 'false', w.marker],
      env: cmd.env,
      noNetwork: cmd.noNetwork,
      runId: cmd.runId,
      timeoutMs: 60_000,
    };
    const out: Outcome = { victimLayer: '', victimView: '', otherLayer: '', survivors: [], inspector: null };
    try {
      const r = await withDaemonEnv(w, () => runInShadow(s, opts));
      out.result = {
        exitCode: r.exitCode,
        signal: r.signal,
        stdout: r.stdout,
        stderr: r.stderr,
        protected: r.protected,
        protections: r.protections ?? [],
        leftoverProcesses: r.leftoverProcesses,
      };
    } catch (err) {
      const e = err as { code?: string; message?: string };
      out.error = { code: e.code ?? 'unknown', message: e.message ?? String(err) };
    }
    out.survivors = processesWith(w.marker);
    if (cmd.user !== undefined) {
      await s.activate('agent');
      const u = spawnSync('sh', ['-c', cmd.user], { cwd: s.mountPoint, encoding: 'utf8', timeout: 60_000 });
      out.user = { status: u.status, stdout: u.stdout, stderr: u.stderr };
    }
    out.inspector = inspector.url() ?? null;
    if (out.inspector) inspector.close();
    out.victimLayer = (await s.layer('victim').readFile('victim.txt')).toString();
    out.victimView = fs.readFileSync(path.join(view.mountPoint, VICTIM_VIEW_FILE), 'utf8');
    out.otherLayer = (await s2.layer('other').readFile('other.txt')).toString();
    await view.close();
    return out;
  } finally {
    for (const pid of processesWith(w.marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    for (const v of [...s.views]) await v.close({ lazy: true }).catch(() => undefined);
    if (s2?.mounted) await s2.unmount({ lazy: true });
    if (s.mounted) await s.unmount({ lazy: true });
  }
}

/** For nobody's node process: `node -e "require(<this file>).main()"` with the world and case in argv. */
export async function main(): Promise<void> {
  const [worldJson, name] = process.argv.slice(-2);
  const out = await runCase(JSON.parse(worldJson) as World, name);
  process.stdout.write(`OUTCOME ${JSON.stringify(out)}\n`);
}

function cc(args: string[]): void {
  try {
    execFileSync('cc', args, { stdio: 'pipe' });
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    throw new Error(`the escape corpus needs a C compiler (cc) to build its probes: ${e.stderr?.toString() || e.message}`);
  }
}

const sources = (repoRoot: string): string => path.join(repoRoot, 'test', 'native', 'escape');

/** Builds test/native/escape/probe.c into `outDir`; a missing compiler fails clearly. */
export function buildProbe(repoRoot: string, outDir: string): string {
  const probe = path.join(outDir, 'escape-probe');
  cc(['-O1', '-Wall', '-o', probe, path.join(sources(repoRoot), 'probe.c')]);
  return probe;
}

/** Builds the LD_PRELOAD library of a world (it names the world's canary and host directory). */
export function buildPreload(repoRoot: string, outFile: string, targets: { canary: string; hostTmp: string }): string {
  cc([
    '-O1',
    '-shared',
    '-fPIC',
    `-DCANARY="${targets.canary}"`,
    `-DHOSTTMP="${targets.hostTmp}"`,
    '-o',
    outFile,
    path.join(sources(repoRoot), 'preload.c'),
  ]);
  return outFile;
}

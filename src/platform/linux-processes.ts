// Process trees on Linux. A run's group finds and kills every process the run started, including
// ones that left its process group (daemonised, setsid): a cgroup v2 per run, killed with
// cgroup.kill; where no writable cgroup v2 hierarchy exists, a marker in the environment of every
// process of the run, found by scanning /proc. (A process that clears its environment escapes the
// fallback only.) A language server's tree is its process group and its descendants, read from
// /proc/<pid>/stat by the same scan.
//
// Resource limits (memory, processes, CPU) go on the run's cgroup v2 where its parent hands the
// controller down (cgroup.subtree_control; shadowfs enables it there when the parent has it but
// has not delegated it yet). Systems that still keep a controller on a cgroup v1 hierarchy (hybrid
// layouts, many containers) get a cgroup of that hierarchy per run instead, made beneath the
// daemon's own cgroup there, which the launcher joins too. A limit that can be set nowhere refuses
// the run (NOT_SUPPORTED): a run never starts with less than it asked for.
//
// Cgroups are named shadowfs-run-<daemon pid>-<run id>. Those of a daemon that died (killed, or a
// machine that lost power) are empty and removed by the next daemon's first run.
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { RUN_MARKER } from './common';
import { mountTable } from './linux-mounts';
import type { LimitHit, ProcessGroup, ProcessSnapshot, ProcessTrees, RunLimits } from './types';
import { processAlive } from '../common/pid';

function cgroup2Root(): string | undefined {
  return mountTable().find((m) => m.fstype === 'cgroup2' && !m.options.includes('ro'))?.mountPoint;
}

/** The CFS period a CPU limit is expressed in (µs): the kernel's default. */
const CPU_PERIOD_US = 100_000;

/** The cgroup files of each limit: [cgroup v2 controller, v1 controller]. */
const CONTROLLER: Record<keyof RunLimits, string> = { memoryBytes: 'memory', processes: 'pids', cpus: 'cpu' };

/** The writable cgroup v1 hierarchy that holds `controller`, and this process's cgroup in it. */
function v1Parent(controller: string): string | undefined {
  if (process.env.SHADOWFS_NO_CGROUP === '1') return undefined;
  const m = mountTable().find((x) => x.fstype === 'cgroup' && !x.options.includes('ro') && x.options.includes(controller));
  if (!m) return undefined;
  let own = '/';
  try {
    // "hierarchy-ID:controller,list:/path" for each v1 hierarchy.
    for (const line of fs.readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const [, list, p] = line.split(/:(.*?):/);
      if (list !== undefined && list.split(',').includes(controller)) own = p ?? '/';
    }
  } catch {
    // no /proc: the hierarchy's root
  }
  return path.join(m.mountPoint, own);
}

/** Controllers `dir`'s children get (cgroup v2), enabling those `want` asks for that `dir` has but does not hand down yet. */
function delegate(dir: string, want: string[]): Set<string> {
  const read = (f: string): Set<string> => {
    try {
      return new Set(fs.readFileSync(path.join(dir, f), 'utf8').trim().split(/\s+/).filter(Boolean));
    } catch {
      return new Set();
    }
  };
  const given = read('cgroup.subtree_control');
  const has = read('cgroup.controllers');
  const missing = want.filter((c) => has.has(c) && !given.has(c));
  if (missing.length > 0) {
    try {
      fs.writeFileSync(path.join(dir, 'cgroup.subtree_control'), missing.map((c) => `+${c}`).join(' '));
    } catch {
      // a parent with processes of its own cannot hand controllers down (EBUSY): v1 or nothing
    }
  }
  return read('cgroup.subtree_control');
}

const swept = new Set<string>();

/**
 * Removes the run cgroups in `parent` that no live daemon owns: named for a dead pid, or named the
 * old way (shadowfs-run-<id>, before daemon pids were in the name) and untouched for ten minutes.
 * rmdir refuses a cgroup that still holds a process, so nothing in use goes. (A daemon sweeps each
 * parent once, before its first run cgroup there.)
 */
export function sweepRunCgroups(parent: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(parent).filter((n) => n.startsWith('shadowfs-run-'));
  } catch {
    return;
  }
  for (const name of names) {
    const owner = /^shadowfs-run-(\d+)-/.exec(name);
    const dir = path.join(parent, name);
    try {
      if (owner ? processAlive(Number(owner[1])) : Date.now() - fs.statSync(dir).mtimeMs < 600_000) continue;
      fs.rmdirSync(dir);
    } catch {
      // in use, or gone meanwhile
    }
  }
}

/** Makes the cgroup `name` in `parent` (after sweeping what dead daemons left there); undefined when it cannot. */
function makeCgroup(parent: string, name: string): string | undefined {
  if (!swept.has(parent)) {
    swept.add(parent);
    sweepRunCgroups(parent);
  }
  const dir = path.join(parent, name);
  try {
    fs.mkdirSync(dir);
    return dir;
  } catch {
    return undefined;
  }
}

/** The value a limit is written as, per file. */
function limitFiles(limit: keyof RunLimits, value: number, v2: boolean): Array<[string, string]> {
  if (limit === 'memoryBytes') {
    const bytes = String(Math.floor(value));
    // No swap beyond the limit: memory.swap.max (v2) or memsw (v1, written after the plain limit, which it may not be below).
    return v2
      ? [
          ['memory.max', bytes],
          ['memory.swap.max', '0'],
        ]
      : [
          ['memory.limit_in_bytes', bytes],
          ['memory.memsw.limit_in_bytes', bytes],
        ];
  }
  if (limit === 'processes') return [['pids.max', String(Math.floor(value))]];
  const quota = String(Math.max(1000, Math.round(value * CPU_PERIOD_US)));
  return v2
    ? [['cpu.max', `${quota} ${CPU_PERIOD_US}`]]
    : [
        ['cpu.cfs_period_us', String(CPU_PERIOD_US)],
        ['cpu.cfs_quota_us', quota],
      ];
}

/** Writes a limit's files in `dir`; files a kernel does not have are skipped, except the first (the limit itself). */
function writeLimit(dir: string, limit: keyof RunLimits, value: number, v2: boolean): void {
  limitFiles(limit, value, v2).forEach(([file, text], i) => {
    try {
      fs.writeFileSync(path.join(dir, file), text);
    } catch (err) {
      if (i === 0 || (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  });
}

/** A counter from a flat-keyed cgroup file ("key value" lines), 0 when absent. */
function counter(file: string, key: string): number {
  try {
    const line = fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`${key} `));
    return line ? Number(line.split(' ')[1]) || 0 : 0;
  } catch {
    return 0;
  }
}

/** The numeric entries of /proc: every process this one can see. */
function procPids(): number[] {
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return [];
  }
  return entries.filter((e) => /^\d+$/.test(e)).map(Number);
}

class LinuxProcessGroup implements ProcessGroup {
  readonly cgroup: string | undefined;
  readonly launches = false;
  readonly joins: string[] = [];
  /** The cgroup v1 directories holding limits (also in joins), removed with the group. */
  private readonly v1: string[] = [];
  /** Where each limit's events are read: [file, key] per hit. */
  private readonly events: Array<[LimitHit, string, string]> = [];

  constructor(
    readonly runId: string,
    limits: RunLimits = {},
  ) {
    const name = `shadowfs-run-${process.pid}-${runId}`;
    // SHADOWFS_NO_CGROUP=1 forces the /proc fallback, with no cgroup of either version (used by
    // the tests to cover it).
    const root = process.platform === 'linux' && process.env.SHADOWFS_NO_CGROUP !== '1' ? cgroup2Root() : undefined;
    const asked = (Object.keys(CONTROLLER) as Array<keyof RunLimits>).filter((k) => limits[k] !== undefined);
    const handed =
      root && asked.length > 0
        ? delegate(
            root,
            asked.map((k) => CONTROLLER[k]),
          )
        : new Set<string>();
    let dir: string | undefined;
    if (root) {
      const candidate = makeCgroup(root, name);
      if (candidate && fs.existsSync(path.join(candidate, 'cgroup.kill'))) dir = candidate;
      else if (candidate) fs.rmdirSync(candidate);
    }
    this.cgroup = dir;
    if (dir) this.joins.push(dir);
    try {
      for (const limit of asked) {
        const value = limits[limit] as number;
        const controller = CONTROLLER[limit];
        if (dir && handed.has(controller)) {
          writeLimit(dir, limit, value, true);
          if (limit === 'memoryBytes') this.events.push(['memory', path.join(dir, 'memory.events'), 'oom_kill']);
          if (limit === 'processes') this.events.push(['processes', path.join(dir, 'pids.events'), 'max']);
          continue;
        }
        const parent = v1Parent(controller);
        const v1 = parent ? makeCgroup(parent, name) : undefined;
        if (!v1) {
          throw new ShadowError(
            'NOT_SUPPORTED',
            `this system cannot limit a run's ${limit === 'memoryBytes' ? 'memory' : limit === 'cpus' ? 'CPU time' : 'processes'}: ` +
              `the "${controller}" cgroup controller is neither handed down on cgroup v2 ` +
              `(${root ? `${root}/cgroup.subtree_control` : 'no writable cgroup v2 hierarchy'}) nor on a writable cgroup v1 hierarchy. ` +
              'Run without that limit, or give the daemon a cgroup with the controller delegated (systemd: Delegate=yes).',
          );
        }
        this.v1.push(v1);
        this.joins.push(v1);
        writeLimit(v1, limit, value, false);
        if (limit === 'memoryBytes') this.events.push(['memory', path.join(v1, 'memory.oom_control'), 'oom_kill']);
        if (limit === 'processes') this.events.push(['processes', path.join(v1, 'pids.events'), 'max']);
      }
    } catch (err) {
      for (const d of [...this.v1, ...(dir ? [dir] : [])]) {
        try {
          fs.rmdirSync(d);
        } catch {
          // nothing ran in it yet; swept by the next daemon if it cannot go now
        }
      }
      if (err instanceof ShadowError) throw err;
      throw new ShadowError('NOT_SUPPORTED', `cannot set the run's limits: ${(err as Error).message}`, { cause: err });
    }
    if (asked.length > 0 && this.joins.length === 0) {
      throw new ShadowError('NOT_SUPPORTED', 'limits need a cgroup, and this system gave the run none');
    }
  }

  limitsHit(): LimitHit[] {
    return [...new Set(this.events.filter(([, file, key]) => counter(file, key) > 0).map(([hit]) => hit))];
  }

  launch(): never {
    throw new Error('ProcessGroup.launch: a Linux run is started as usual (through the launcher) and found by its cgroup or marker');
  }

  alive(): number[] {
    if (this.cgroup) {
      try {
        return fs.readFileSync(path.join(this.cgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
      } catch {
        return [];
      }
    }
    const out: number[] = [];
    for (const pid of procPids()) {
      try {
        const env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1');
        if (env.split('\0').includes(`${RUN_MARKER}=${this.runId}`)) out.push(pid);
      } catch {
        // gone, or not ours
      }
    }
    return out;
  }

  async killAll(): Promise<number> {
    let killed = 0;
    const deadline = Date.now() + 5000;
    for (;;) {
      const pids = this.alive();
      if (pids.length === 0) return killed;
      killed = Math.max(killed, pids.length);
      if (this.cgroup) {
        try {
          fs.writeFileSync(path.join(this.cgroup, 'cgroup.kill'), '1');
        } catch {
          // fall through to signals
        }
      }
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      if (Date.now() > deadline) return killed;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async dispose(): Promise<number> {
    const n = await this.killAll();
    // A cgroup lingers for a moment after its last process has been reaped; what is still there
    // after a second is swept by the next daemon (it is named for this one's pid).
    for (const dir of [...(this.cgroup ? [this.cgroup] : []), ...this.v1]) {
      for (let i = 0; i < 50; i++) {
        try {
          fs.rmdirSync(dir);
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') break;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    }
    return n;
  }
}

/** Every live process as [pid, ppid, pgrp, state, start time] (from /proc/<pid>/stat). */
function processTable(): Array<[number, number, number, string, string]> {
  const out: Array<[number, number, number, string, string]> = [];
  for (const pid of procPids()) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ")".
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.push([pid, Number(f[1]), Number(f[2]), f[0], f[19]]);
  }
  return out;
}

function treeOf(pid: number): ProcessSnapshot {
  const table = processTable();
  const tree = new Set<number>([pid]);
  for (const [p, , pgrp] of table) if (pgrp === pid) tree.add(p);
  for (let grew = true; grew;) {
    grew = false;
    for (const [p, ppid] of table) {
      if (tree.has(ppid) && !tree.has(p)) {
        tree.add(p);
        grew = true;
      }
    }
  }
  return table.filter(([p]) => tree.has(p)).map(([p, , , , start]) => `${p}:${start}`);
}

function stillRunning(tree: ProcessSnapshot): number[] {
  const live = new Set(
    processTable()
      .filter(([, , , st]) => st !== 'Z' && st !== 'X')
      .map(([p, , , , start]) => `${p}:${start}`),
  );
  return tree.filter((k) => live.has(k)).map((k) => Number(k.split(':')[0]));
}

function killGroup(pid: number): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // the group is gone already
  }
}

export const linuxProcesses: ProcessTrees = {
  group: (runId, limits) => new LinuxProcessGroup(runId, limits),
  treeOf,
  stillRunning,
  killGroup,
};

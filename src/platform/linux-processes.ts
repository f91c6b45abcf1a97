// Process trees on Linux. A run's group finds and kills every process the run started, including
// ones that left its process group (daemonised, setsid): a cgroup v2 per run, killed with
// cgroup.kill; where no writable cgroup v2 hierarchy exists, a marker in the environment of every
// process of the run, found by scanning /proc. (A process that clears its environment escapes the
// fallback only.) A language server's tree is its process group and its descendants, read from
// /proc/<pid>/stat by the same scan.
import * as fs from 'fs';
import * as path from 'path';
import { RUN_MARKER } from './common';
import { mountTable } from './linux-mounts';
import type { ProcessGroup, ProcessSnapshot, ProcessTrees } from './types';

function cgroup2Root(): string | undefined {
  return mountTable().find((m) => m.fstype === 'cgroup2' && !m.options.includes('ro'))?.mountPoint;
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

  constructor(readonly runId: string) {
    // SHADOWFS_NO_CGROUP=1 forces the /proc fallback (used by the tests to cover it).
    const root = process.platform === 'linux' && process.env.SHADOWFS_NO_CGROUP !== '1' ? cgroup2Root() : undefined;
    let dir: string | undefined;
    if (root) {
      const candidate = path.join(root, `shadowfs-run-${runId}`);
      try {
        fs.mkdirSync(candidate);
        if (fs.existsSync(path.join(candidate, 'cgroup.kill'))) dir = candidate;
        else fs.rmdirSync(candidate);
      } catch {
        dir = undefined;
      }
    }
    this.cgroup = dir;
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
    if (this.cgroup) {
      for (let i = 0; i < 50; i++) {
        try {
          fs.rmdirSync(this.cgroup);
          break;
        } catch {
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
  group: (runId) => new LinuxProcessGroup(runId),
  treeOf,
  stillRunning,
  killGroup,
};

// Finds and kills every process a run started, including ones that left its process group
// (daemonised, setsid). Linux: a cgroup v2 per run, killed with cgroup.kill; where no writable
// cgroup v2 hierarchy exists, a marker in the environment of every process of the run, found
// by scanning /proc. (A process that clears its environment escapes the fallback only.)
import * as fs from 'fs';
import * as path from 'path';

export const RUN_MARKER = 'SHADOWFS_RUN_ID';

function cgroup2Root(): string | undefined {
  try {
    for (const line of fs.readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
      const f = line.split(' ');
      if (f[2] === 'cgroup2' && !f[3]?.split(',').includes('ro')) return f[1];
    }
  } catch {
    // not Linux
  }
  return undefined;
}

export class ProcessTracker {
  /** The cgroup directory of this run, when cgroups are usable. */
  readonly cgroup: string | undefined;

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

  /** Shell words that move the shell into the run's cgroup before it execs the command. */
  joinScript(): string {
    return this.cgroup ? `echo $$ > '${this.cgroup}/cgroup.procs' || exit 125; ` : '';
  }

  /** Processes of this run still alive. */
  alive(): number[] {
    if (this.cgroup) {
      try {
        return fs.readFileSync(path.join(this.cgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
      } catch {
        return [];
      }
    }
    const out: number[] = [];
    for (const ent of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(ent)) continue;
      try {
        const env = fs.readFileSync(`/proc/${ent}/environ`, 'latin1');
        if (env.split('\0').includes(`${RUN_MARKER}=${this.runId}`)) out.push(Number(ent));
      } catch {
        // gone, or not ours
      }
    }
    return out;
  }

  /** Kills every process of the run and waits (up to 5 s) until none is left. Returns how many were killed. */
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

  /** Kills what is left and removes the cgroup. */
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

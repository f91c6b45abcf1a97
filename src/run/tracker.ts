// Finds and kills every process a run started, including ones that left its process group
// (daemonised, setsid). Linux: a cgroup v2 per run, killed with cgroup.kill; where no writable
// cgroup v2 hierarchy exists, a marker in the environment of every process of the run, found
// by scanning /proc. (A process that clears its environment escapes the fallback only.)
// Windows: a Job Object per run (src/platform/win32-job.ts), which the command is started inside.
import type { ChildProcessByStdio } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import type { Readable, Writable } from 'stream';
import { ShadowError } from '../errors';
import { mountTable } from '../platform';
import { type LaunchOptions, Win32Job } from '../platform/win32-job';

export const RUN_MARKER = 'SHADOWFS_RUN_ID';

function cgroup2Root(): string | undefined {
  return mountTable().find((m) => m.fstype === 'cgroup2' && !m.options.includes('ro'))?.mountPoint;
}

export class ProcessTracker {
  /** The cgroup directory of this run, when cgroups are usable. */
  readonly cgroup: string | undefined;
  /** Windows: the Job Object of this run; start the command with `job.launch` so it is born in it. */
  readonly job: Win32Job | undefined;

  constructor(readonly runId: string) {
    this.job = process.platform === 'win32' ? new Win32Job() : undefined;
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

  /**
   * Windows: starts `argv` inside the run's Job Object, through the launcher (see win32-job.ts), so
   * that it and everything it starts belong to the run before it can start anything. When the
   * launcher cannot be put in the job the command is not started, the job is closed, and this
   * throws INTERNAL.
   */
  async launch(argv: string[], opts: LaunchOptions): Promise<ChildProcessByStdio<Writable, Readable, Readable>> {
    if (!this.job) throw new Error('ProcessTracker.launch: only Windows runs start through a Job Object');
    try {
      return this.job.launch(argv, opts);
    } catch (err) {
      await this.dispose();
      throw new ShadowError(
        'INTERNAL',
        `cannot put ${argv[0]} in the Job Object of the run, so it was not started: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  /** Processes of this run still alive. */
  alive(): number[] {
    if (this.job) {
      try {
        return this.job.alive();
      } catch {
        return [];
      }
    }
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
    if (this.job) {
      try {
        return await this.job.killAll();
      } catch {
        // The job could not be read or terminated; closing it in dispose() still kills what is in it.
        return 0;
      }
    }
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

  /** Kills what is left and removes the cgroup (Windows: closes the job). */
  async dispose(): Promise<number> {
    const n = await this.killAll();
    this.job?.close();
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

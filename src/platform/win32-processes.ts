// Process trees on Windows: a run's group is a Job Object (win32-job.ts) that the command is
// started inside, so everything it starts is in the job and dies with it. A run's command is
// resolved as a Windows user writes it (win32-command.ts) and started at Low integrity
// (win32-integrity.ts) with TEMP and TMP in a per-run directory under LocalLow. A language
// server's tree is not tracked here yet: treeOf gives nothing and killGroup does nothing, as
// before (Windows has no process groups that a signal reaches).
//
// A run's resource limits are set on its job when the group is made, before anything is
// launched into it (win32-job.ts setLimits): a limit that cannot be set refuses the run with
// NOT_SUPPORTED naming the Win32 call and its error, and nothing starts.
//
// Nothing here changes an ACL, owner or label of any file: the only security change made is to
// the launcher's own token (SetTokenInformation(TokenIntegrityLevel)); the run directory inherits
// LocalLow's descriptor as it is made.
import type { ChildProcessByStdio } from 'child_process';
import type { Readable, Writable } from 'stream';
import { ShadowError } from '../common/errors';
import type { LaunchOptions, LimitHit, ProcessGroup, ProcessTrees, RunLimits } from './types';
import { resolveWindowsCommand, type WindowsSpawn } from './win32-command';
import { INTEGRITY_RID, integrityName, lowerIntegrity, lowRunEnv, lowRunTemp, removeLowRunTemp } from './win32-integrity';
import { Win32Job } from './win32-job';
import { type LaunchOptions as JobLaunchOptions } from './win32-launcher';

/** What a Windows run asks of its group (see Win32ProcessGroup.launchRun). */
export interface Win32RunOptions {
  /** What the user asked to run: a program and its arguments, or with `shell` a cmd.exe line. */
  argv: string[];
  shell: boolean;
  /** The directory the command starts in (in the shadow); a relative command name is found from it. */
  cwd: string;
  /** The command's whole environment (PATH, PATHEXT and ComSpec are read from it). */
  env: Record<string, string>;
  /** The folder the run must not write, for messages. */
  folder: string;
  /** Run even when the token cannot be lowered, reported as protected: false. */
  unprotected: boolean;
  /** Called with what is about to run, before anything is started (the run policy); throws to refuse. */
  check?: (resolved: WindowsSpawn) => void;
}

/** A Windows run started: its launcher, what was resolved, and whether its token is Low. */
export interface Win32Run {
  child: ChildProcessByStdio<Writable, Readable, Readable>;
  resolved: WindowsSpawn;
  /** The launcher's token read back Low, so the command was created at Low integrity. */
  protected: boolean;
  unprotectedReason?: string;
}

/** How to say on Windows that a run may go without its protection (as NAMESPACE_UNAVAILABLE does on Linux). */
const OPT_OUT = 'To run without that protection, pass --unprotected (API and RPC: unprotected: true).';

export class Win32ProcessGroup implements ProcessGroup {
  readonly cgroup = undefined;
  readonly launches = true;
  /** The run's Job Object, with the run's limits on it; start the command with launch() so it is born in it. */
  readonly job: Win32Job;
  /** The run's directory under LocalLow (runTemp), removed by dispose(). */
  private temp: { runId: string; dir: string } | undefined;

  /**
   * Makes the run's job and sets `limits` on it (memory: committed memory of all the run's
   * processes together, the launcher's included; processes: at once, the launcher not counted;
   * cpus: a hard cap on the share of all processors' time). Throws NOT_SUPPORTED, with the job
   * closed, when one cannot be set.
   */
  constructor(
    readonly runId: string,
    limits: RunLimits = {},
  ) {
    this.job = new Win32Job();
    if (Object.values(limits).every((v) => v === undefined)) return;
    try {
      this.job.setLimits(limits);
    } catch (err) {
      this.job.close();
      if (err instanceof ShadowError) throw err;
      throw new ShadowError(
        'NOT_SUPPORTED',
        `cannot set the run's limits on its Job Object, so it was not started: ${(err as Error).message}. Run without that limit.`,
        { cause: err },
      );
    }
  }

  /** The limits the run has reached (read from its job's completion port; see Win32Job.limitsHit). */
  limitsHit(): LimitHit[] {
    try {
      return this.job.limitsHit();
    } catch {
      return [];
    }
  }

  /**
   * Makes the run's empty directory under LocalLow (win32-integrity.ts lowRunTemp) and returns the
   * variables that point the command there: TEMP and TMP, which a Low-integrity process needs
   * (it cannot write the user's %TEMP%, which is Medium), and npm_config_cache, because npm's
   * default cache (%LOCALAPPDATA%\npm-cache) is Medium too and every npm install would fail with
   * EPERM there. The cache lives as long as the run: one shared between runs would be a channel
   * from one agent's run to the next's (and npm's index entries are not all checked against their
   * hashes), so packages are downloaded again on each run; a caller that wants a lasting cache
   * sets npm_config_cache in the run's env, which wins. dispose() removes the directory.
   */
  runEnv(): Record<string, string> {
    if (!this.temp) this.temp = { runId: this.runId, dir: lowRunTemp(this.runId) };
    return { ...lowRunEnv(this.temp.dir), npm_config_cache: `${this.temp.dir}\\npm-cache` };
  }

  /**
   * Starts `argv` inside the run's Job Object, through the launcher (see win32-job.ts), so that it
   * and everything it starts belong to the run before it can start anything. When the launcher
   * cannot be put in the job the command is not started, the job is closed, and this throws
   * INTERNAL; when opts.beforeGo throws a ShadowError, the command is not started either and that
   * error is thrown as it is.
   */
  async launch(argv: string[], opts: LaunchOptions & JobLaunchOptions): Promise<ChildProcessByStdio<Writable, Readable, Readable>> {
    try {
      return this.job.launch(argv, opts);
    } catch (err) {
      await this.dispose();
      if (err instanceof ShadowError) throw err;
      throw new ShadowError(
        'INTERNAL',
        `cannot put ${argv[0]} in the Job Object of the run, so it was not started: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  /**
   * A run's command: resolved as Windows users write it (resolveWindowsCommand: cmd.exe for a
   * shell line and for .cmd/.bat files, PATH with PATHEXT but never the current directory first;
   * NOT_FOUND and INVALID_ARGUMENT thrown as they are), judged by opts.check, and started in the
   * job with its launcher's token lowered to Low integrity between the job and the go.
   *
   * When the token cannot be lowered (any Win32 failure, or INTEGRITY_NOT_LOWERED: the call was
   * accepted but the token still reads above Low, as always under wine, which does not implement
   * integrity levels) the run is refused with NAMESPACE_UNAVAILABLE and the command never starts,
   * unless opts.unprotected: then it starts with the token it has and says protected: false.
   */
  async launchRun(opts: Win32RunOptions): Promise<Win32Run> {
    let resolved: WindowsSpawn;
    try {
      resolved = resolveWindowsCommand(opts.argv, { shell: opts.shell, cwd: opts.cwd, env: opts.env });
      opts.check?.(resolved);
    } catch (err) {
      await this.dispose();
      throw err;
    }
    let outcome: { protected: true } | { protected: false; why: string } = { protected: false, why: 'the launcher was not lowered' };
    const child = await this.launch([resolved.file, ...resolved.args], {
      cwd: opts.cwd,
      env: opts.env,
      windowsVerbatimArguments: resolved.windowsVerbatimArguments,
      beforeGo: (pid) => {
        try {
          const level = lowerIntegrity(pid);
          outcome =
            level.rid <= INTEGRITY_RID.low ? { protected: true } : { protected: false, why: `its token reads ${integrityName(level.rid)}` };
        } catch (err) {
          outcome = { protected: false, why: (err as Error).message };
        }
        if (!outcome.protected && !opts.unprotected) {
          throw new ShadowError(
            'NAMESPACE_UNAVAILABLE',
            `cannot start this run at Low integrity, which keeps it from writing ${opts.folder} ` +
              `(${outcome.why}); the command did not run. ${OPT_OUT}`,
          );
        }
      },
    });
    // beforeGo ran synchronously inside launch() (unless spawn itself failed: the child's 'error' says so).
    const done = outcome as typeof outcome;
    return done.protected
      ? { child, resolved, protected: true }
      : {
          child,
          resolved,
          protected: false,
          unprotectedReason: `the command's token could not be lowered to Low integrity (${done.why}); --unprotected ran it anyway`,
        };
  }

  alive(): number[] {
    try {
      return this.job.alive();
    } catch {
      return [];
    }
  }

  async killAll(): Promise<number> {
    try {
      return await this.job.killAll();
    } catch {
      // The job could not be read or terminated; closing it in dispose() still kills what is in it.
      return 0;
    }
  }

  /**
   * Kills what is left, closes the job, then removes the run's LocalLow directory: only once no
   * process of the job is alive (they may hold files open there, and a process left could
   * otherwise write in it again). Idempotent.
   */
  async dispose(): Promise<number> {
    const n = await this.killAll();
    this.job.close();
    const temp = this.temp;
    this.temp = undefined;
    if (temp) await removeWhenFree(temp.runId);
    return n;
  }
}

/**
 * Removes a run's LocalLow directory. The job is closed, so its processes are terminated, but a
 * process's files close a moment after it is told to end: a sharing violation is retried for a
 * few seconds before it is given up (the directory is then left, and emptied by the next run of
 * the same id).
 */
async function removeWhenFree(runId: string): Promise<void> {
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      removeLowRunTemp(runId);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code !== 'EBUSY' && code !== 'EPERM' && code !== 'ENOTEMPTY') || Date.now() > deadline) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Whether `group` is a Windows run's group, which resolves and lowers its command (launchRun). */
export function isWin32Group(group: ProcessGroup): group is Win32ProcessGroup {
  return group instanceof Win32ProcessGroup;
}

export const win32Processes: ProcessTrees = {
  group: (runId, limits) => new Win32ProcessGroup(runId, limits),
  treeOf: () => [],
  stillRunning: () => [],
  killGroup: () => undefined,
};

// Process trees on Windows: a run's group is a Job Object (win32-job.ts) that the command is
// started inside, so everything it starts is in the job and dies with it. A language server's
// tree is not tracked here yet: treeOf gives nothing and killGroup does nothing, as before
// (Windows has no process groups that a signal reaches).
import type { ChildProcessByStdio } from 'child_process';
import type { Readable, Writable } from 'stream';
import { ShadowError } from '../errors';
import type { LaunchOptions, ProcessGroup, ProcessTrees } from './types';
import { Win32Job } from './win32-job';

class Win32ProcessGroup implements ProcessGroup {
  readonly cgroup = undefined;
  readonly launches = true;
  /** The run's Job Object; start the command with launch() so it is born in it. */
  readonly job = new Win32Job();

  /**
   * Starts `argv` inside the run's Job Object, through the launcher (see win32-job.ts), so that it
   * and everything it starts belong to the run before it can start anything. When the launcher
   * cannot be put in the job the command is not started, the job is closed, and this throws
   * INTERNAL.
   */
  async launch(argv: string[], opts: LaunchOptions): Promise<ChildProcessByStdio<Writable, Readable, Readable>> {
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

  async dispose(): Promise<number> {
    const n = await this.killAll();
    this.job.close();
    return n;
  }
}

export const win32Processes: ProcessTrees = {
  group: () => new Win32ProcessGroup(),
  treeOf: () => [],
  stillRunning: () => [],
  killGroup: () => undefined,
};

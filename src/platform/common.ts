// What the OS modules share: a time limit on programs that may never end, and the one set of
// nesting checks every mount point passes.
import { execFile } from 'child_process';
import * as path from 'path';
import { ShadowError } from '../common/errors';

/** The environment variable every process of a run carries: its run id (see linux-processes.ts and linux-peer.ts). */
export const RUN_MARKER = 'SHADOWFS_RUN_ID';

/**
 * Runs a program with a time limit that holds even when the program cannot be ended: a process
 * waiting on a hung FUSE or network server sleeps uninterruptibly, and SIGKILL does not end it
 * until the server answers. Resolves with its exit status and stdout, or with `timedOut` once the
 * limit passed (the child is sent SIGKILL then, and left behind).
 */
export function runWithin(
  file: string,
  args: string[],
  ms: number,
  env: NodeJS.ProcessEnv = {},
): Promise<{ status: number | null; stdout: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: { status: number | null; stdout: string; timedOut: boolean }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
    };
    const child = execFile(file, args, { encoding: 'utf8', env, killSignal: 'SIGKILL' }, (err, stdout) =>
      finish({ status: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout: String(stdout), timedOut: false }),
    );
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish({ status: null, stdout: '', timedOut: true });
    }, ms);
  });
}

/** Whether `child` is `parent` or lies beneath it. */
export function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * The nesting checks of every mount point, on every OS: the folder may not lie inside the mount
 * point (the shadow would hide it from itself), nor the mount point inside the folder (the shadow
 * would show itself). `probe` is the mount point resolved as far as it exists; `shown` names it in
 * the message.
 */
export function checkNesting(folder: string, probe: string, shown: string): void {
  if (isInside(folder, probe))
    throw new ShadowError(
      'FOLDER_INSIDE_MOUNTPOINT',
      `the folder ${folder} is inside the mount point ${shown}; mount somewhere outside it`,
    );
  if (isInside(probe, folder))
    throw new ShadowError(
      'MOUNTPOINT_INSIDE_FOLDER',
      `the mount point ${shown} is inside the folder it would shadow (${folder}); mount somewhere outside it`,
    );
}

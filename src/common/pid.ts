import * as fs from 'fs';

// Whether a process id names a live process: signal 0 checks without sending anything, and EPERM
// means it is there but another user's. Node implements it on Windows too. Not a positive id (0
// would signal our own process group): not a process.
// A zombie (ended, not yet reaped by its parent) answers signal 0 too, for as long as its parent
// takes; on Linux /proc says so, and it counts as gone: a daemon killed a moment ago must not hold
// its lock against the next one.
export function processAlive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !ended(pid);
}

/** Whether /proc shows `pid` as a zombie or dead (state Z or X); false where there is no /proc. */
function ended(pid: number): boolean {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return false;
  }
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")".
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state === 'Z' || state === 'X';
}

// Whether a process id names a live process: signal 0 checks without sending anything, and EPERM
// means it is there but another user's. Node implements it on Windows too. Not a positive id (0
// would signal our own process group): not a process.
export function processAlive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

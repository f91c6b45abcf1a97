// Descriptors the daemon must not hand on (Linux). Everything Node and our native module open is
// close-on-exec, so a program the daemon starts (git for a diff or an apply, a language server, a
// run's launcher) gets only its own standard streams. Two kinds are not: a terminal's master that
// node-pty opens for a shell session (node-pty 1.1 leaves it inheritable), and whatever the
// process that started the daemon left open for its children (an agent's MCP host autostarting
// the daemon passes on its own pipes). Both are marked close-on-exec here.
import * as fs from 'fs';
import { errnoText, LIBC, libc, type LibcResult } from './linux-libc';

// <asm-generic/fcntl.h>, the same on every Linux architecture.
const F_SETFD = 2;
const FD_CLOEXEC = 1;
/** O_CLOEXEC as /proc/<pid>/fdinfo's "flags:" line shows it (octal; <asm-generic/fcntl.h>). */
const O_CLOEXEC = 0o2000000;

/** Marks `fd` close-on-exec (fcntl F_SETFD). Throws, naming the descriptor and errno, when that fails. */
export function closeOnExec(fd: number): void {
  const lib = libc('keep a descriptor from the programs the daemon starts');
  const r = lib.load({
    library: LIBC,
    funcName: 'fcntl',
    retType: lib.DataType.I32,
    paramsType: [lib.DataType.I32, lib.DataType.I32, lib.DataType.I32],
    paramsValue: [fd, F_SETFD, FD_CLOEXEC],
    errno: true,
  }) as unknown as LibcResult;
  if (r.value !== 0) throw new Error(`fcntl(${fd}, F_SETFD, FD_CLOEXEC) failed: ${errnoText(r)} (errno ${r.errnoCode})`);
}

/** This process's descriptors above 2 that a program it starts would inherit (no O_CLOEXEC). */
export function inheritableFds(): number[] {
  const found: number[] = [];
  for (const name of fs.readdirSync('/proc/self/fd')) {
    const fd = Number(name);
    if (!(fd > 2)) continue;
    let info: string;
    try {
      info = fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
    } catch {
      continue; // closed meanwhile (the directory's own descriptor is one)
    }
    const flags = /^flags:\s*([0-7]+)$/m.exec(info);
    if (flags && (parseInt(flags[1], 8) & O_CLOEXEC) === 0) found.push(fd);
  }
  return found.sort((a, b) => a - b);
}

/**
 * Marks close-on-exec every descriptor above 2 that is not (at the daemon's start: what its
 * starter left open). Returns those it marked.
 */
export function closeOnExecInherited(): number[] {
  const fds = inheritableFds();
  for (const fd of fds) closeOnExec(fd);
  return fds;
}

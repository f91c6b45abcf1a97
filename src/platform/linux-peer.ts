// Which connections the daemon serves: only those of processes running as its own user, outside
// any run. Linux: the kernel's record of the connecting process (SO_PEERCRED), checked at accept,
// before a byte is read: its uid must be the daemon's, and it must share the daemon's user and PID
// namespaces. A run executes in namespaces of its own and cannot see the daemon's socket; should
// it reach it anyway, this refuses it (a process in a child user namespace mapped to root passes
// the uid check, so the uid alone would not do). Windows: Node does not expose the server side of
// a named pipe (so the client's process id cannot be asked for); there the client must prove in
// its hello that it can read the secret in the per-user endpoint file (see server.ts).
import * as fs from 'fs';
import type * as net from 'net';
import { peerCredentials } from './linux-peercred';
import { RUN_MARKER } from './common';

/** The namespaces a client must share with the daemon. */
const SHARED_NAMESPACES = ['user', 'pid'] as const;
type Kind = (typeof SHARED_NAMESPACES)[number];

/** The daemon's own namespaces, read once: a process never changes its user or PID namespace. */
const own = new Map<Kind, string>();

function namespaceOf(pid: number | 'self', kind: Kind): string {
  // "user:[4026531837]": the namespace's type and inode, the same for every process in it.
  return fs.readlinkSync(`/proc/${pid}/ns/${kind}`);
}

/** Why the connection is refused, or undefined when it comes from this user, outside any run. */
export function checkPeer(socket: net.Socket): string | undefined {
  if (process.platform !== 'linux') return undefined;
  let uid: number;
  let pid: number;
  try {
    ({ uid, pid } = peerCredentials(socket));
  } catch (err) {
    return `cannot tell which user connected (${(err as Error).message}), so the connection is refused`;
  }
  const mine = process.getuid?.();
  if (uid !== mine) return `the connecting process runs as uid ${uid}, and this daemon serves only uid ${mine}`;
  for (const kind of SHARED_NAMESPACES) {
    let theirs: string;
    let ours: string;
    try {
      ours = own.get(kind) ?? namespaceOf('self', kind);
      own.set(kind, ours);
      theirs = namespaceOf(pid, kind);
    } catch (err) {
      return (
        `cannot read the ${kind} namespace of the connecting process ${pid} (${(err as Error).message}), so it cannot be shown ` +
        "to run outside an agent's run, and the connection is refused"
      );
    }
    if (theirs !== ours)
      return (
        `the connecting process ${pid} runs in another ${kind} namespace (${theirs}) than this daemon (${ours}): ` +
        "it is inside a run's sandbox or a container, and runs may not control shadowfs; connect from the user's own session"
      );
  }
  // A run without namespaces (--unprotected, where none can be made) shares them with the daemon,
  // but not its cgroup: every run is in a cgroup of its own, which Landlock keeps it from leaving.
  try {
    if (/\/shadowfs-run-[^/\n]*$/m.test(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8')))
      return `the connecting process ${pid} belongs to an agent's run (its cgroup says so), and runs may not control shadowfs`;
  } catch {
    // no cgroup file: a kernel without cgroups, where runs have none either
  }
  // Where no cgroup could be made for it, a run carries its marker in its environment (a
  // process that empties its environment loses it: that is why the cgroup comes first).
  try {
    if (
      fs
        .readFileSync(`/proc/${pid}/environ`, 'latin1')
        .split('\0')
        .some((v) => v.startsWith(`${RUN_MARKER}=`))
    )
      return `the connecting process ${pid} belongs to an agent's run (its environment says so), and runs may not control shadowfs`;
  } catch {
    // gone already
  }
  return undefined;
}

// What shadowfs asks of the operating system, as one interface that each OS module (linux.ts,
// win32.ts) implements: where per-user files live, what is mounted, how a mount point is made
// ready and a stale mount taken away, how the daemon is reached and who is at the other end, and
// how the processes a command starts are kept together and ended. Types only: index.ts picks the
// implementation.
import type { ChildProcessByStdio } from 'child_process';
import type * as net from 'net';
import type { Readable, Writable } from 'stream';

/** One line of the kernel's mount table, its octal escapes undone. */
export interface MountLine {
  source: string;
  mountPoint: string;
  fstype: string;
  options: string[];
}

/** The per-user files of the daemon (endpoint.ts fills them in). */
export interface DaemonFiles {
  /** Linux: the Unix socket. Windows: empty; the pipe's random name is in the endpoint file. */
  socket: string;
  /** Windows: JSON {pipe, pid, secret} written by the daemon once it listens. */
  endpoint: string;
}

/** Where a client finds a daemon: the address, and on Windows the secret and pid published with it. */
export interface DaemonLocation {
  where: string;
  secret?: string;
  pid?: number;
}

/** How the daemon is reached, and how each end makes sure of the other. */
export interface DaemonEndpoint {
  /** 'socket': a Unix socket, whose peer the kernel names. 'pipe': a named pipe, whose client proves itself in hello. */
  readonly kind: 'socket' | 'pipe';
  /**
   * The secret of the hello handshake ('' where the kernel vouches for a peer): a client that does
   * not prove with it that it can read this user's endpoint file is served nothing but hello.
   */
  newSecret(): string;
  /**
   * Listens through `listen` (the daemon's server; it rejects with the listen error), publishes
   * the address with `secret` where there is one, and returns the address.
   */
  listen(files: DaemonFiles, secret: string, listen: (where: string) => Promise<void>): Promise<string>;
  /** Where this user's daemon was published, or undefined when none is (or the one published is gone). */
  locate(files: DaemonFiles): DaemonLocation | undefined;
  /** Where this user's daemon listens, for messages. */
  describe(files: DaemonFiles): string;
  /** The files a stopping daemon removes: its socket, or its endpoint file while it still names it. */
  ownFiles(files: DaemonFiles): string[];
  /** Daemon side, at accept: why the connecting process is refused, or undefined. */
  refusePeer(socket: net.Socket): string | undefined;
  /**
   * Client side, right after connect and before the first byte: throws PEER_REFUSED when the
   * process serving `where` is not this user's daemon (`daemonPid`: the pid published with it).
   */
  verifyServer(socket: net.Socket, where: string, daemonPid?: number): void;
}

/** How a command is started in a ProcessGroup that launches it (Windows). */
export interface LaunchOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/** Resource limits of one run, each optional (left out: no limit). */
export interface RunLimits {
  /**
   * Bytes of memory the run's processes may use together. Linux: as the cgroup counts it (page
   * cache included, no swap beyond it). Windows: committed memory of the Job Object, the launcher's
   * own included.
   */
  memoryBytes?: number;
  /** Processes the run may have at once (Linux counts threads too; Windows does not count the launcher). */
  processes?: number;
  /** CPU time as a number of CPUs' worth (1.5: one and a half CPUs). */
  cpus?: number;
}

/**
 * A limit a run reached: memory (Linux: the kernel killed one of its processes for it; Windows: an
 * allocation was refused), processes (a process it tried to start was refused). Either way a memory
 * hit ends the run.
 */
export type LimitHit = 'memory' | 'processes';

/** Every process one command started, its whole tree, whatever it did to leave its process group. */
export interface ProcessGroup {
  /** Linux: the run's cgroup directory, which the launcher joins; undefined where none could be made. */
  readonly cgroup: string | undefined;
  /**
   * Windows: the command must be started through launch() so it is born inside the group; false
   * where it is started as usual and found by the group (cgroup, environment marker).
   */
  readonly launches: boolean;
  /** Starts `argv` inside the group (only when `launches`). */
  launch(argv: string[], opts: LaunchOptions): Promise<ChildProcessByStdio<Writable, Readable, Readable>>;
  /**
   * Linux: the cgroup directories the launcher joins before the command starts: the run's own
   * (cgroup) and, where the controllers are still on cgroup v1, one per limited controller.
   */
  readonly joins?: string[];
  /** The limits the group has reached so far (none where it has none). */
  limitsHit?(): LimitHit[];
  /** Processes of the group still alive. */
  alive(): number[];
  /** Kills every process of the group and waits (up to 5 s) until none is left; how many were killed. */
  killAll(): Promise<number>;
  /** Kills what is left and releases the group (cgroup removed, job closed); how many were killed. */
  dispose(): Promise<number>;
}

/**
 * A process and its descendants as they were when it was taken, each as "pid:start time", so that
 * a pid the system gave to another process later is never taken for one of them.
 */
export type ProcessSnapshot = string[];

export interface ProcessTrees {
  /**
   * A tracked group for the run `runId` (which names its cgroup and marks its processes), with
   * `limits` applied; throws NOT_SUPPORTED, having made nothing, when one of them cannot be set
   * here (a run is never started with less confinement than it asked for).
   */
  group(runId: string, limits?: RunLimits): ProcessGroup;
  /** `pid`, the processes of its process group, and every descendant of them. */
  treeOf(pid: number): ProcessSnapshot;
  /** Those of `tree` still running (zombies, which hold nothing open, do not count). */
  stillRunning(tree: ProcessSnapshot): number[];
  /** Kills the process group that `pid` leads (a process started detached leads one); never throws. */
  killGroup(pid: number): void;
}

export interface Platform {
  /** The OS, for messages and the daemon's `version` answer. */
  readonly name: NodeJS.Platform;
  /** File names compare without case (Windows; git's default there too). */
  readonly caseInsensitiveNames: boolean;
  /** What splits a path into names, NUL included: a single name holds none of these. */
  readonly nameSeparators: RegExp;
  /**
   * Runs and language servers are confined with Linux namespaces, Landlock and seccomp through
   * the launcher (run/launcher.ts); false where the OS has none of that.
   */
  readonly namespaces: boolean;

  /** The private per-user directory: mount points and the daemon's socket, state and log. */
  runtimeDir(): string;
  /**
   * Daemon side, once it listens: makes its runtime directory findable by this user's processes
   * whose environment lost the variable that names it; returns what undoes that at stop.
   */
  announceRuntimeDir?(dir: string): () => void;
  /** The per-user directory for what must outlive the daemon and a reboot (checkpoints). */
  stateDir(): string;
  /** The per-user configuration directory shadowfs's own folder goes in (lsp.json). */
  configDir(): string;

  /** The mount table as this process sees it (empty where the OS has none to read). */
  mountTable(): MountLine[];
  /** Throws when this system cannot mount at all (no FUSE device); WinFsp is checked by the native module. */
  checkMountable(): void;
  /**
   * Makes `requested` (undefined: a default of this OS) ready to mount the shadow of `folder`
   * (called `name`) on: refused when nested with `folder` either way, in use, or not empty.
   * `created`: shadowfs made it (or the file system driver will), so it is removed with the mount.
   */
  prepareMountPoint(requested: string | undefined, folder: string, name: string): { mountPoint: string; created: boolean };
  /** Before a suspended shadow is mounted again at `mountPoint`: makes what the OS needs there. */
  remakeMountPoint(mountPoint: string): void;
  /** A drive's root ("X:\\"), which is a mount point and an absolute path but no directory of a parent. */
  isDriveRoot(p: string): boolean;
  /** Detaches the stale mount at `mountPoint` (lazily: nothing waits on it); whether it is gone. */
  forceUnmount(mountPoint: string, timeoutMs: number): Promise<boolean>;

  /**
   * Marks descriptor `fd` close-on-exec, so that no program the daemon starts inherits it (where
   * descriptors are inherited unless so marked: node-pty's terminal master on Linux).
   */
  closeOnExec?(fd: number): void;
  /** Daemon side, at its start: marks close-on-exec what the process that started it left open; returns those. */
  closeOnExecInherited?(): number[];

  readonly endpoint: DaemonEndpoint;
  readonly processes: ProcessTrees;
}

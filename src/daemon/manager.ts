// The daemon's shadows: mounted by name, found by name or mount point, suspended when idle
// (unmounted, layers kept; the next request mounts them again), and written to a state file so
// that a daemon started after a crash can find and clean the mounts its predecessor left.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import type { Logger } from 'winston';
import * as z from 'zod';
import { ShadowError } from '../errors';
import { mountedPaths, type MountLine, mountTable, platform, runtimeDir, runWithin, unanswered } from '../platform';
import type { NotificationName, NotificationParamsOf, ShadowInfo } from '../protocol/methods';
import { DiagnosticsService } from '../diagnostics/service';
import { mount, Shadow } from '../shadow';
import type { GoneEvent, IoMode, WindowsVolume } from '../shadow';
import { AUTOSAVE_NAME, WorkService } from '../work/service';

interface Entry {
  name: string;
  shadow: Shadow;
  /** Its language servers, started on the first lints/lsp request. */
  diagnostics?: DiagnosticsService;
  /** Diffs, apply, checkpoints and autosave. */
  work: WorkService;
  lastUsed: number;
  lastActivity: number;
}

// The state file is input, not truth: whoever can write the runtime directory (an agent's
// process of this user, say) can forge it before a crash. Every field is checked for shape here;
// what a recovering daemon does with the paths is checked again against the kernel's mount
// table (see recoverStale), so a forged entry can neither unmount nor remove anything that is
// not a stale mount of this daemon.

/** No NUL, absolute and written the way path.normalize writes it (no "..", ".", "//" or trailing "/"). */
function isCleanAbsolute(p: string): boolean {
  if (p.includes('\0') || !path.isAbsolute(p)) return false;
  if (platform.isDriveRoot(p)) return true; // a drive letter mount point ("X:\\")
  return path.normalize(p) === p && (p.length === 1 || !p.endsWith(path.sep));
}

const AbsPath = z.string().min(1).max(4096).refine(isCleanAbsolute, { message: 'not an absolute, normalized path without NUL' });

/** Agent ids as shadow.ts takes them: 1-128 bytes, no "/" or NUL. */
const AgentId = z
  .string()
  .min(1)
  .refine((a) => Buffer.byteLength(a) <= 128 && !/[/\0]/.test(a), { message: 'not an agent id' });

const ViewState = z.strictObject({ mountPoint: AbsPath, createdMountPoint: z.boolean() });

const ShadowState = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/),
  lower: AbsPath,
  mountPoint: AbsPath,
  /** The daemon made the mount point, so it removes it (when empty) with the mount. */
  createdMountPoint: z.boolean().optional(),
  views: z.array(z.unknown()).max(1024).optional(),
  /** The agent the shared mount showed (null: the folder), so a crash does not change it. */
  active: AgentId.nullable().optional(),
  /** How it was mounted, so that a crash recovery mounts it the same way. */
  backend: z
    .string()
    .regex(/^[a-z0-9_]{1,32}$/)
    .optional(),
  io: z.enum(['cached', 'open', 'passthrough']).optional(),
});

type ViewEntry = z.infer<typeof ViewState>;
type ShadowEntry = Omit<z.infer<typeof ShadowState>, 'views'> & { views?: ViewEntry[] };

interface StateFile {
  pid: number;
  shadows: ShadowEntry[];
}

const StateTop = z.object({ pid: z.number().int().positive(), shadows: z.array(z.unknown()).max(4096) });

/** A state file is small (a few hundred bytes a shadow): anything this big is not one. */
const MAX_STATE_BYTES = 4 * 1024 * 1024;

function issues(err: z.ZodError): string {
  return err.issues
    .slice(0, 3)
    .map((i) => `${i.path.join('.') || 'entry'}: ${i.message}`)
    .join('; ');
}

/** Whether `child` is `parent` or lies beneath it (both absolute and normalized). */
function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/**
 * Why the mount at `mountPoint` is not provably a stale mount of the shadow of `lower` that a
 * daemon of this user made, or undefined when it is: the topmost mount there (the one umount
 * would take) is a shadowfs FUSE mount (native/platform/fuse_loop.h names them
 * "shadowfs:<folder>", type fuse.shadowfs) of that very folder, mounted by this user, and its
 * server is gone (any access fails with ENOTCONN; a live mount belongs to a process that still
 * serves it, which a crashed daemon is not).
 */
async function whyNotStaleShadow(mountPoint: string, lower: string, table: MountLine[]): Promise<string | undefined> {
  const top = table.filter((m) => m.mountPoint === mountPoint).at(-1);
  if (!top) return 'nothing is mounted there';
  if (top.fstype !== 'fuse.shadowfs') return `the mount there is ${top.fstype}, not a shadowfs mount`;
  if (top.source !== `shadowfs:${lower}`) return `the shadowfs mount there is ${JSON.stringify(top.source)}, not the folder recorded`;
  const uid = process.getuid?.();
  if (uid !== undefined && !top.options.includes(`user_id=${uid}`)) return 'the shadowfs mount there belongs to another user';
  // In a child with a time limit: a mount whose server hangs must not hang this daemon.
  const answer = await run(
    process.execPath,
    [
      '-e',
      "try{require('fs').statSync(process.argv[1]);process.stdout.write('LIVE')}catch(e){process.stdout.write(String(e.code))}",
      mountPoint,
    ],
    STALE_PROBE_MS,
  );
  if (answer !== 'ENOTCONN') return `the shadowfs mount there is still served by a live process (${answer || 'no answer'})`;
  return undefined;
}

/**
 * How long the check of one recorded mount may take (a hung server answers nothing):
 * $SHADOWFS_STALE_PROBE_MS, else 5 s. Requests wait for recovery meanwhile (status does not).
 */
const STALE_PROBE_MS = Number(process.env.SHADOWFS_STALE_PROBE_MS) > 0 ? Number(process.env.SHADOWFS_STALE_PROBE_MS) : 5000;

/** Runs a program with no environment and a time limit; its stdout, or '' when it timed out. */
async function run(file: string, args: string[], timeout: number): Promise<string> {
  const r = await runWithin(file, args, timeout);
  return r.timedOut ? '' : r.stdout;
}

/** Why a folder the state file names must not be shadowed again after a crash, or undefined. */
async function whyNotRemount(lower: string): Promise<string | undefined> {
  if (path.parse(lower).root === lower) return 'the folder is the root of the file system';
  const stuck = await unanswered(lower, STALE_PROBE_MS);
  if (stuck) return stuck;
  let real: string;
  try {
    real = fs.realpathSync(lower);
  } catch {
    return 'the folder does not exist';
  }
  if (real !== lower) return `the folder's path leads elsewhere now (${real}) through a symbolic link`;
  if (!fs.statSync(real).isDirectory()) return 'the folder is not a directory';
  return undefined;
}

/** The daemon's own directory of mount points it makes (shadow.ts), if it is a real directory. */
function ownMountsDir(): string | undefined {
  try {
    const dir = path.join(runtimeDir(), 'mounts');
    const st = fs.lstatSync(dir);
    return st.isDirectory() && !st.isSymbolicLink() && fs.realpathSync(dir) === dir ? dir : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why the daemon must not remove the directory `dir`, or undefined when it may (it is empty,
 * which rmdir checks): it is a real directory (not a link), directly in the daemon's own mounts
 * directory, nothing is mounted there, and it is neither inside nor equal to any recorded folder.
 */
function whyNotRemovable(dir: string, mountsDir: string | undefined, lowers: string[]): string | undefined {
  if (!mountsDir) return 'the daemon has no mounts directory of its own';
  if (path.dirname(dir) !== mountsDir) return `it is not in the daemon's own mounts directory ${mountsDir}`;
  if (lowers.some((l) => isInside(dir, l))) return 'it lies inside a folder a shadow shows';
  const st = fs.lstatSync(dir, { throwIfNoEntry: false });
  if (!st) return 'it is gone already';
  if (st.isSymbolicLink() || !st.isDirectory()) return 'it is not a directory';
  if (mountedPaths().has(dir)) return 'something is still mounted there';
  return undefined;
}

const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;

export interface ManagerOptions {
  statePath: string;
  /** Unmount (keeping layers) a shadow nobody used for this long. */
  idleMs: number;
  log: Logger;
  /** Save every changed layer as its "autosave" checkpoint this often (0: never). */
  autosaveMs?: number;
  notify: <N extends NotificationName>(method: N, params: NotificationParamsOf<N>) => void;
  /** Whether a shadow is in use beyond what its activity shows (runs in progress): never idle then. */
  busy?: (shadow: Shadow) => boolean;
}

export class ShadowManager {
  private readonly entries = new Map<string, Entry>();
  private idleTimer: NodeJS.Timeout | undefined;
  private feedTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: ManagerOptions) {}

  get size(): number {
    return this.entries.size;
  }

  /**
   * Mount points recoverStale proved were stale mounts of the previous daemon and unmounted:
   * the only recorded mount points remountAfterCrash mounts at again.
   */
  private static proven = new Set<string>();

  /**
   * Unmounts what a crashed daemon left behind, as its state file lists it (views first, then
   * the shared mount), and removes the mount directories it had made for them once they are
   * empty. The state file may be forged, so it only names candidates: a mount is unmounted only
   * when the kernel's mount table shows, at exactly that point, a shadowfs mount of the recorded
   * folder, made by this user, whose server is gone (whyNotStaleShadow); a directory is removed
   * only when it is an empty real directory directly in the daemon's own mounts directory and
   * outside every recorded folder (whyNotRemovable). The folders are never touched. Whatever is
   * refused is logged with the reason. Returns the mounts it cleaned.
   */
  static async recoverStale(state: StateFile | undefined, log: Logger): Promise<string[]> {
    ShadowManager.proven = new Set();
    if (!state) return [];
    const recovered: string[] = [];
    const table = mountTable();
    const mountsDir = ownMountsDir();
    const lowers = state.shadows.map((s) => s.lower);
    // The live checks of every recorded mount at once: each has its own time limit.
    const checks = new Map<string, Promise<string | undefined>>();
    for (const s of state.shadows)
      for (const p of [...(s.views ?? []), { mountPoint: s.mountPoint }])
        if (!checks.has(`${p.mountPoint}\0${s.lower}`) && table.some((m) => m.mountPoint === p.mountPoint))
          checks.set(`${p.mountPoint}\0${s.lower}`, whyNotStaleShadow(p.mountPoint, s.lower, table));
    for (const s of state.shadows) {
      const points = [...(s.views ?? []), { mountPoint: s.mountPoint, createdMountPoint: s.createdMountPoint === true }];
      for (const p of points) {
        // A normal mount refuses both (MOUNTPOINT_INSIDE_LOWER, LOWER_INSIDE_MOUNTPOINT): only a forged entry has them.
        if (isInside(p.mountPoint, s.lower) || isInside(s.lower, p.mountPoint)) {
          log.warn('the state file names a mount point inside (or around) its own folder; left alone', {
            name: s.name,
            mountPoint: p.mountPoint,
            lower: s.lower,
          });
          continue;
        }
        const onTable = table.some((m) => m.mountPoint === p.mountPoint);
        const why = onTable ? await checks.get(`${p.mountPoint}\0${s.lower}`) : undefined;
        if (why) {
          log.warn(`the state file names a mount that is not a stale mount of this daemon (${why}); left alone`, {
            name: s.name,
            mountPoint: p.mountPoint,
            lower: s.lower,
          });
          continue;
        }
        if (onTable) {
          if (!(await platform.forceUnmount(p.mountPoint, STALE_PROBE_MS))) {
            log.warn('could not clean a stale mount (umount -l and fusermount3 -uz failed)', { mountPoint: p.mountPoint });
            continue;
          }
          log.warn('cleaned a stale mount left by a crashed daemon', { name: s.name, mountPoint: p.mountPoint, lower: s.lower });
          recovered.push(p.mountPoint);
          ShadowManager.proven.add(p.mountPoint);
        }
        if (p.createdMountPoint) {
          const whyKept = whyNotRemovable(p.mountPoint, mountsDir, lowers);
          if (whyKept) {
            if (fs.existsSync(p.mountPoint))
              log.warn(`left a mount directory the state file says the daemon made (${whyKept})`, {
                name: s.name,
                mountPoint: p.mountPoint,
              });
            continue;
          }
          try {
            fs.rmdirSync(p.mountPoint); // only when empty: never anything with content in it
            log.info('removed the empty mount directory a crashed daemon had made', { mountPoint: p.mountPoint });
          } catch {
            // gone already, or not empty: leave it
          }
        }
      }
    }
    return recovered;
  }

  /**
   * The state file a previous daemon left, if any, with every entry checked for shape: a file
   * that is not one (a link, not JSON, not the shape) counts as none, and an entry (a shadow or
   * one of its views) that is not valid is left out, with a warning on `log` naming why.
   */
  static readState(statePath: string, log?: Logger): StateFile | undefined {
    let text: string;
    try {
      // Not through a link: the state file is a plain file the daemon wrote (renamed into place).
      const fd = fs.openSync(statePath, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0));
      try {
        const st = fs.fstatSync(fd);
        if (!st.isFile() || st.size > MAX_STATE_BYTES) {
          log?.warn('the state file is not a plain file of a sensible size; ignored', { statePath });
          return undefined;
        }
        text = fs.readFileSync(fd, 'utf8');
      } finally {
        fs.closeSync(fd);
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        log?.warn('the state file cannot be read (a link?); ignored', { statePath, error: (err as Error).message });
      return undefined;
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      log?.warn('the state file is not JSON; ignored', { statePath });
      return undefined;
    }
    const top = StateTop.safeParse(raw);
    if (!top.success) {
      log?.warn(`the state file is not of the daemon's shape (${issues(top.error)}); ignored`, { statePath });
      return undefined;
    }
    const shadows: ShadowEntry[] = [];
    const names = new Set<string>();
    top.data.shadows.forEach((entry, i) => {
      const s = ShadowState.safeParse(entry);
      if (!s.success) {
        log?.warn(`the state file's shadow #${i} is not valid (${issues(s.error)}); skipped`, { statePath });
        return;
      }
      if (names.has(s.data.name)) {
        log?.warn(`the state file names the shadow ${s.data.name} twice; the second one is skipped`, { statePath });
        return;
      }
      names.add(s.data.name);
      const views: ViewEntry[] = [];
      (s.data.views ?? []).forEach((v, j) => {
        const view = ViewState.safeParse(v);
        if (view.success) views.push(view.data);
        else log?.warn(`the state file's view #${j} of ${s.data.name} is not valid (${issues(view.error)}); skipped`, { statePath });
      });
      shadows.push({ ...s.data, views });
    });
    return { pid: top.data.pid, shadows };
  }

  /**
   * Mounts again, under their names, the shadows a crashed daemon served (after recoverStale
   * cleaned their mounts); mount() brings their layers back from autosave. Each entry passes what
   * a normal mount checks (mount() runs those checks again), and more, for the state file may be
   * forged: its folder must be an existing directory named by its real path, and not the root
   * of the file system; it goes back to the mount point the user had given only when
   * recoverStale proved a stale mount of this folder was there (else to a new one in the
   * daemon's own mounts directory). A refused entry, or a mount that fails, is logged and left out.
   */
  async remountAfterCrash(state: StateFile | undefined, done: (name: string) => void = () => undefined): Promise<string[]> {
    const back: string[] = [];
    for (const s of state?.shadows ?? []) {
      try {
        if (await this.remountOne(s)) back.push(s.name);
      } finally {
        done(s.name);
      }
    }
    return back;
  }

  /** remountAfterCrash for one entry: whether it is mounted again. */
  private async remountOne(s: ShadowEntry): Promise<boolean> {
    if (this.entries.has(s.name)) return false;
    const why = await whyNotRemount(s.lower);
    if (why) {
      this.opts.log.warn(`refused to mount again a shadow the state file names: ${why}`, { name: s.name, lower: s.lower });
      return false;
    }
    try {
      const atRecorded = s.createdMountPoint !== true && ShadowManager.proven.has(s.mountPoint);
      if (s.createdMountPoint !== true && !atRecorded)
        this.opts.log.warn('mounting again in a new mount point: no stale mount of this shadow was found at the recorded one', {
          name: s.name,
          mountPoint: s.mountPoint,
        });
      const info = await this.mount({
        folder: s.lower,
        name: s.name,
        ...(atRecorded ? { mountPoint: s.mountPoint } : {}),
        ...(s.backend !== undefined ? { backend: s.backend } : {}),
        ...(s.io !== undefined ? { io: s.io } : {}),
      });
      // The shared mount shows again what it showed: the agent whose layer came back, or the folder.
      const wanted = s.active;
      if (wanted !== undefined && wanted !== info.active && (wanted === null || info.agents.includes(wanted))) {
        await this.entries.get(s.name)?.shadow.activate(wanted);
        this.saveState();
      }
      this.opts.log.warn('mounted again after a crash of the previous daemon', { name: s.name, lower: s.lower });
      return true;
    } catch (err) {
      this.opts.log.error('could not mount again after a crash', { name: s.name, lower: s.lower, error: (err as Error).message });
      return false;
    }
  }

  /** Watches every mounted shadow's layers and notifies "layer/changed" (event "changed") about once a second, coalesced. */
  startChangeFeed(intervalMs = 1000, wanted: () => boolean = () => true): void {
    let busy = false;
    this.feedTimer = setInterval(() => {
      if (busy || !wanted()) return;
      busy = true;
      void (async () => {
        for (const e of this.entries.values()) {
          try {
            for (const a of await e.work.pollChanges())
              this.opts.notify('layer/changed', { shadow: e.name, agent: a.agent, event: 'changed', changes: a.changes });
          } catch (err) {
            this.opts.log.debug('change feed', { name: e.name, error: (err as Error).message });
          }
        }
      })().finally(() => (busy = false));
    }, intervalMs);
    this.feedTimer.unref();
  }

  startIdleChecks(intervalMs: number): void {
    this.idleTimer = setInterval(() => void this.idleTick(), intervalMs);
    this.idleTimer.unref();
  }

  async mount(params: {
    folder: string;
    mountPoint?: string;
    name?: string;
    cacheTimeout?: number;
    backend?: string;
    io?: IoMode;
    allowOther?: boolean;
    /** Windows, winfsp: the volume form (see MountOptions.volume). */
    volume?: WindowsVolume;
    /** Bring back agents' layers from their autosave checkpoints for this folder (default true). */
    restore?: boolean;
  }): Promise<ShadowInfo> {
    if (params.name !== undefined && !NAME_RE.test(params.name)) {
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `a shadow name is 1-64 letters, digits, ".", "_" or "-"; got ${JSON.stringify(params.name)}`,
      );
    }
    if (params.name !== undefined && this.entries.has(params.name)) {
      throw new ShadowError('MOUNTPOINT_IN_USE', `a shadow named ${params.name} exists already; pick another --name`);
    }
    // The checks below run on the daemon's own thread: a path on a hung FUSE or network server
    // must prove it answers first, in a child with a time limit.
    for (const p of [params.folder, params.mountPoint]) {
      const stuck = p === undefined ? undefined : await unanswered(p);
      if (stuck) throw new ShadowError('TIMEOUT', `cannot mount: ${stuck}`);
    }
    const shadow = await mount(params.folder, {
      mountPoint: params.mountPoint,
      cacheTimeout: params.cacheTimeout,
      backend: params.backend,
      ...(params.io ? { io: params.io } : {}),
      ...(params.volume ? { volume: params.volume } : {}),
      allowOther: params.allowOther === true,
    });
    const name = params.name ?? this.freeName(path.basename(shadow.lower));
    const now = Date.now();
    const work = new WorkService(shadow, {
      autosaveMs: this.opts.autosaveMs,
      log: (line) => this.opts.log.warn(line, { shadow: name }),
    });
    const entry: Entry = { name, shadow, work, lastUsed: now, lastActivity: shadow.activity() };
    this.entries.set(name, entry);
    shadow.onGone((e) => {
      this.lost(entry, e).catch((err: unknown) =>
        this.opts.log.error('handling a lost mount failed', { name, error: (err as Error).message }),
      );
    });
    this.saveState();
    // Layers a crash (or a reboot) took away come back from their autosave checkpoints.
    const restored: string[] = [];
    if (params.restore !== false) {
      for (const agent of work.store.agents()) {
        try {
          await work.restore(agent, AUTOSAVE_NAME);
          restored.push(agent);
        } catch (err) {
          // No autosave is no error; a damaged (or forged) one is refused whole and said so.
          if ((err as { code?: string }).code === 'UNKNOWN_CHECKPOINT') continue;
          this.opts.log.error('could not restore a layer from its autosave', { name, agent, error: (err as Error).message });
        }
      }
    }
    this.opts.log.info('mounted', { name, lower: shadow.lower, mountPoint: shadow.mountPoint, ...(restored.length ? { restored } : {}) });
    this.opts.notify('shadow/changed', { shadow: name, event: 'mounted' });
    return { ...(await this.info(entry)), ...(restored.length ? { restored } : {}) };
  }

  /** Finds a shadow by name or by (a path inside) its mount point. */
  get(nameOrDir: string): Entry {
    const byName = this.entries.get(nameOrDir);
    if (byName) return byName;
    const abs = path.resolve(nameOrDir);
    for (const e of this.entries.values()) {
      if (abs === e.shadow.mountPoint || abs.startsWith(`${e.shadow.mountPoint}/`)) return e;
    }
    throw new ShadowError('UNKNOWN_SHADOW', `no shadow named or mounted at ${JSON.stringify(nameOrDir)}; see "shadowfs list"`);
  }

  /** Marks a shadow used, mounting it again if it was suspended for being idle. */
  async use(entry: Entry): Promise<Shadow> {
    entry.lastUsed = Date.now();
    if (entry.shadow.suspended) {
      await entry.shadow.resume();
      this.opts.log.info('mounted again after idling', { name: entry.name });
      this.opts.notify('shadow/changed', { shadow: entry.name, event: 'remounted' });
    }
    return entry.shadow;
  }

  /** The shadow's diagnostics service (its language servers), mounting it again if idle. */
  async diagnostics(nameOrDir: string): Promise<DiagnosticsService> {
    const e = this.get(nameOrDir);
    await this.use(e);
    e.diagnostics ??= new DiagnosticsService(e.shadow, {
      // The servers' stderr and window/logMessage lines, tagged with the shadow.
      log: (line) => this.opts.log.debug(line, { shadow: e.name }),
    });
    return e.diagnostics;
  }

  /** The shadow's diffs, apply and checkpoints, mounting it again if idle. */
  async work(nameOrDir: string): Promise<WorkService> {
    const e = this.get(nameOrDir);
    await this.use(e);
    return e.work;
  }

  /**
   * A mount of the shadow ended without the daemon asking (the WinFsp dispatcher stopped: the volume or the driver went
   * away; a kernel connection ended). The shadow is treated as gone away, not as dropped: its layers stay in memory
   * (and in their autosaves), the shared mount reads as not mounted with the reason (info().lost), its language servers
   * (which ran in a mount that is no more) are stopped, the state file forgets its views, and every client is told
   * ("shadow/changed", event "lost"). The next request that uses it mounts it again, as after an idle unmount.
   */
  private async lost(entry: Entry, e: GoneEvent): Promise<void> {
    if (this.entries.get(entry.name) !== entry) return; // unmounted for good meanwhile
    this.opts.log.warn(e.view ? 'a view of the shadow went away' : 'the shadow went away', {
      name: entry.name,
      reason: e.reason,
      ...(e.view ? { view: e.view } : {}),
    });
    if (!e.view) await this.stopServers(entry);
    this.saveState();
    this.opts.notify('shadow/changed', { shadow: entry.name, event: 'lost', reason: e.reason, ...(e.view ? { view: e.view } : {}) });
  }

  /** Stops a shadow's language servers (before its mount goes away). */
  private async stopServers(e: Entry): Promise<void> {
    const d = e.diagnostics;
    e.diagnostics = undefined;
    await d
      ?.dispose()
      .catch((err: unknown) => this.opts.log.warn('stopping language servers failed', { name: e.name, error: (err as Error).message }));
  }

  async unmount(nameOrDir: string, lazy: boolean): Promise<string> {
    const e = this.get(nameOrDir);
    await this.stopServers(e);
    const agents = e.shadow.mounted ? await e.shadow.agents().catch(() => []) : [];
    await e.shadow.unmount({ lazy });
    // Unmounting drops the layers on purpose: their autosaves must not bring them back.
    await e.work.dispose(false);
    for (const a of new Set([...agents, ...e.work.store.agents()])) e.work.store.remove(a, AUTOSAVE_NAME);
    this.entries.delete(e.name);
    this.saveState();
    this.opts.log.info('unmounted', { name: e.name, lazy });
    this.opts.notify('shadow/changed', { shadow: e.name, event: 'unmounted' });
    return e.name;
  }

  async list(): Promise<ShadowInfo[]> {
    return Promise.all([...this.entries.values()].map((e) => this.info(e)));
  }

  async info(e: Entry): Promise<ShadowInfo> {
    const mounted = e.shadow.mounted;
    // A shadow unmounted meanwhile (idle) simply lists no agents.
    const agents = mounted ? await e.shadow.agents().catch(() => []) : [];
    const lost = e.shadow.lost;
    const handles = e.shadow.openHandles();
    return {
      name: e.name,
      lower: e.shadow.lower,
      mountPoint: e.shadow.mountPoint,
      backend: e.shadow.backend,
      io: e.shadow.io,
      ...(e.shadow.volume ? { volume: e.shadow.volume } : {}),
      ...(lost !== undefined ? { lost } : {}),
      ...(mounted ? { transport: e.shadow.transport() } : {}),
      mounted,
      active: mounted ? e.shadow.active : null,
      agents,
      views: [...e.shadow.views].map((v) => ({ id: v.viewId, agent: v.agentId, mountPoint: v.mountPoint })),
      idleSeconds: Math.round((Date.now() - e.lastUsed) / 1000),
      ...(handles !== null && mounted ? { openHandles: handles } : {}),
    };
  }

  /** Unmounts everything (lazily: the daemon is going away). */
  async shutdown(): Promise<void> {
    clearInterval(this.idleTimer);
    clearInterval(this.feedTimer);
    for (const e of this.entries.values()) {
      await this.stopServers(e);
      // The layers go with this daemon: their last state is saved for the next mount.
      await e.work.dispose(true);
      try {
        await e.shadow.unmount({ lazy: true });
      } catch (err) {
        this.opts.log.error('unmount at shutdown failed', { name: e.name, error: (err as Error).message });
      }
    }
    this.entries.clear();
    this.saveState();
  }

  private async idleTick(): Promise<void> {
    const now = Date.now();
    for (const e of this.entries.values()) {
      if (!e.shadow.mounted) continue;
      const activity = e.shadow.activity();
      // A run in progress uses its shadow even while it is quiet (its namespace holds a copy), and
      // so does a program with a file open (counted by winfsp; FUSE refuses the unmount instead).
      if (activity !== e.lastActivity || this.opts.busy?.(e.shadow) || (e.shadow.openHandles() ?? 0) > 0) {
        e.lastActivity = activity;
        e.lastUsed = now;
        continue;
      }
      if (now - e.lastUsed < this.opts.idleMs || e.shadow.views.size > 0) continue;
      try {
        await this.stopServers(e);
        await e.shadow.suspend();
        this.saveState(); // its views are gone
        e.lastActivity = e.shadow.activity();
        this.opts.log.info('unmounted for being idle; layers kept', { name: e.name, idleSeconds: Math.round((now - e.lastUsed) / 1000) });
        this.opts.notify('shadow/changed', { shadow: e.name, event: 'idle-unmounted' });
      } catch (err) {
        // Busy means somebody uses it after all: try again later.
        e.lastUsed = now;
        this.opts.log.debug('idle unmount postponed', { name: e.name, error: (err as Error).message });
      }
    }
  }

  private freeName(base: string): string {
    const clean = base.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 56) || 'shadow';
    if (!this.entries.has(clean)) return clean;
    for (let i = 2; ; i++) if (!this.entries.has(`${clean}-${i}`)) return `${clean}-${i}`;
  }

  /** Writes the state file (call after anything a crash recovery must know about changed: mounts, views). */
  saveState(): void {
    const state: StateFile = {
      pid: process.pid,
      shadows: [...this.entries.values()].map((e) => ({
        name: e.name,
        lower: e.shadow.lower,
        mountPoint: e.shadow.mountPoint,
        createdMountPoint: e.shadow.ownsMountPoint,
        backend: e.shadow.backend,
        io: e.shadow.io,
        views: [...e.shadow.views].map((v) => ({ mountPoint: v.mountPoint, createdMountPoint: v.ownsMountPoint })),
        ...(e.shadow.mounted ? { active: e.shadow.active } : {}),
      })),
    };
    // A fresh name, created exclusively: a link planted at a predictable name is never followed.
    const tmp = `${this.opts.statePath}.${crypto.randomBytes(6).toString('hex')}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(state, null, 2), { mode: 0o600, flag: 'wx' });
    fs.renameSync(tmp, this.opts.statePath);
  }
}

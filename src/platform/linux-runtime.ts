// Where this user's daemon lives on Linux, for every process of the user, including those whose
// environment lost XDG_RUNTIME_DIR: MCP clients start their servers with only HOME, LOGNAME,
// PATH, SHELL, TERM and USER (the MCP SDK's stdio default), and a client that looked in the
// temporary-directory fallback would start a second daemon instead of finding the user's. So the
// daemon records its runtime directory in a file at a place derived from HOME alone, and a
// process without XDG_RUNTIME_DIR reads it, trusting it only when this user owns it and nobody
// else may write it; failing that, /run/user/<uid> (what systemd gives as XDG_RUNTIME_DIR).
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { processAlive } from '../common/pid';

/**
 * The daemon's record of its runtime directory: HOME-derived only (XDG_STATE_HOME may be stripped
 * too), unless $SHADOWFS_RUNTIME_RECORD names the file (the test suite's own daemons keep theirs
 * in the suite's runtime directory, so they never become the user's).
 */
export function runtimePointerPath(): string {
  return process.env.SHADOWFS_RUNTIME_RECORD || path.join(os.homedir(), '.local', 'state', 'shadowfs', 'daemon-runtime.json');
}

const uid = (): number | undefined => process.getuid?.();

/** True when `p` is this user's and no one else may write it (nor, for a directory, its parent chain up to HOME). */
function ownedAndPrivate(p: string): boolean {
  try {
    const st = fs.lstatSync(p);
    if (uid() !== undefined && st.uid !== uid()) return false;
    return (st.mode & 0o022) === 0 && !st.isSymbolicLink();
  } catch {
    return false;
  }
}

/** The runtime directory a live daemon recorded, when the record can be trusted. */
export function recordedRuntimeDir(): string | undefined {
  const file = runtimePointerPath();
  if (!ownedAndPrivate(file) || !ownedAndPrivate(path.dirname(file))) return undefined;
  try {
    const rec = JSON.parse(fs.readFileSync(file, 'utf8')) as { dir?: unknown; pid?: unknown };
    if (typeof rec.dir !== 'string' || !path.isAbsolute(rec.dir) || typeof rec.pid !== 'number') return undefined;
    if (!processAlive(rec.pid) || !ownedAndPrivate(rec.dir)) return undefined;
    return rec.dir;
  } catch {
    return undefined;
  }
}

/**
 * The per-user runtime directory's parent: XDG_RUNTIME_DIR when set; else the directory a live
 * daemon recorded; else /run/user/<uid> when it is this user's; else the temporary directory.
 * Returns the shadowfs directory itself when it comes from the record.
 */
function chooseBase(): string {
  const xdg = process.env.XDG_RUNTIME_DIR;
  if (xdg && fs.existsSync(xdg)) return path.join(xdg, 'shadowfs');
  const recorded = recordedRuntimeDir();
  if (recorded) return recorded;
  const systemd = `/run/user/${uid() ?? ''}`;
  if (uid() !== undefined && ownedAndPrivate(systemd)) return path.join(systemd, 'shadowfs');
  return path.join(os.tmpdir(), `shadowfs-${uid() ?? 'user'}`);
}

/**
 * Mode 0700 under XDG_RUNTIME_DIR (or where the daemon recorded, /run/user/<uid>, or a per-uid
 * directory in the temp dir), owned by this user: mount points and the daemon's socket, state and log.
 */
export function runtimeDir(): string {
  const base = chooseBase();
  fs.mkdirSync(base, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(base);
  if (!st.isDirectory() || (uid() !== undefined && st.uid !== uid())) {
    throw new ShadowError('INTERNAL', `the runtime directory ${base} is not a directory owned by you; remove it and retry`);
  }
  fs.chmodSync(base, 0o700);
  return base;
}

/**
 * Daemon side, once it listens: records `dir` for processes without XDG_RUNTIME_DIR, unless
 * another live daemon's record is there (another one of this user's, e.g. a test's). Returns
 * what removes the record again at stop (only its own).
 */
export function announceRuntimeDir(dir: string): () => void {
  const file = runtimePointerPath();
  try {
    const other = recordedRuntimeDir();
    if (other !== undefined && other !== dir) return () => undefined;
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    fs.chmodSync(path.dirname(file), 0o700);
    const tmp = `${file}.${process.pid}`;
    fs.writeFileSync(tmp, JSON.stringify({ dir, pid: process.pid }), { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch {
    return () => undefined; // a read-only home: clients with XDG_RUNTIME_DIR still find it
  }
  return () => {
    try {
      const rec = JSON.parse(fs.readFileSync(file, 'utf8')) as { pid?: unknown };
      if (rec.pid === process.pid) fs.unlinkSync(file);
    } catch {
      // gone already
    }
  };
}

// Files of the state directory read and written as untrusted ground (for checkpoints.ts): a
// directory is used only when it is a real one (never a link), a file is written beside its name
// and renamed into place (created exclusively, so never through a planted link), and read only
// when it is a plain file, opened without following a link.
import * as crypto from 'crypto';
import * as fs from 'fs';
import { corrupt } from './checkpoint-manifest';

/** Fails unless `dir` is a real directory (not a link to one). */
export function checkRealDir(dir: string): void {
  const st = fs.lstatSync(dir, { throwIfNoEntry: false });
  if (st && (st.isSymbolicLink() || !st.isDirectory())) throw corrupt(`${dir} is not a directory (a link?)`);
}

/** Makes `dirs` (each the parent of the next), refusing any that is a link or not a directory. */
export function makeRealDirs(dirs: string[]): void {
  for (const d of dirs) {
    try {
      fs.mkdirSync(d, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    checkRealDir(d);
  }
}

/** Writes `file` (whose directories are real, see makeRealDirs) beside it first and renames it into place. */
export function writeAtomic(file: string, data: Buffer | string): void {
  // Created exclusively: never through a link somebody planted at that name.
  const tmp = `${file}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  // rename replaces whatever is at `file` (a link too), never what a link points at.
  fs.renameSync(tmp, file);
}

/**
 * The content of `file`, a plain file (not a link, a fifo or a device), or undefined when there
 * is none. Throws corrupt() when something other than a plain file is there.
 */
export function readPlain(file: string, maxBytes = Number.MAX_SAFE_INTEGER): Buffer | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw corrupt(`${file} is a symbolic link`);
    throw corrupt(`${file} cannot be read (${code ?? (err as Error).message})`);
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw corrupt(`${file} is not a plain file`);
    if (st.size > maxBytes) throw corrupt(`${file} is too big for what it should be`);
    return fs.readFileSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

// File operations confined beneath an open directory (the user's folder, for apply): every step
// resolves its path one component at a time from a descriptor of the folder, and no component
// may be a symbolic link, so nothing apply does can land outside the folder, whatever links the
// folder has, the agent wrote, or someone plants while apply runs. One function per operation;
// the OS-specific part is only here.
//
// Linux: Node has no openat, but /proc/self/fd/<fd>/<name> is resolved by the kernel from the
// directory open as <fd> (the magic link is that very directory, not a path looked up again).
// Each directory component is opened from its parent's descriptor with O_DIRECTORY|O_NOFOLLOW,
// and the final operation (mkdir, unlink, rmdir, rename, symlink, open with O_NOFOLLOW) acts on
// /proc/self/fd/<parent>/<last>, which none of them follows when <last> is a link.
//
// Windows: platform/win32-beneath.ts, the same operations on handles: each component opened with
// NtCreateFile relative to its parent's handle, reparse points refused, the last step acted on
// through its handle (see that file). Elsewhere (no /proc/self/fd, not Windows): path-based
// calls, each preceded by an lstat of every ancestor, which leaves a window between the check
// and the call.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { besideName } from '../common/paths';
import { allZero, writeAt } from './content';
import { platform } from '../platform';
import { BeneathWin32 } from '../platform/win32-beneath';

const { O_RDONLY, O_WRONLY, O_DIRECTORY, O_NOFOLLOW, O_CREAT, O_EXCL } = fs.constants;
// Absent on Windows, where a FIFO cannot be met this way anyway.
const O_NONBLOCK = fs.constants.O_NONBLOCK ?? 0;

const HANDLE_RELATIVE = platform.name === 'linux' && fs.existsSync('/proc/self/fd');

/** The components of a '/'-separated relative path; INVALID_PATH for anything that could leave the folder. */
function components(rel: string): string[] {
  const parts = rel.split('/');
  for (const p of parts)
    if (p === '' || p === '.' || p === '..' || p.includes('\0') || p.includes('\\'))
      throw new ShadowError('INVALID_PATH', `${JSON.stringify(rel)} is not a plain path inside the folder`);
  return parts;
}

function throughLink(anc: string, cause?: unknown): ShadowError {
  return new ShadowError('PATH_THROUGH_SYMLINK', `${anc} is a symbolic link in the folder; shadowfs does not write through links`, {
    cause,
  });
}

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

/** The user's folder, held open; every operation resolves beneath it. Close it when done. */
export class Beneath {
  private constructor(
    readonly root: string,
    private readonly fd: number | null,
    /** Windows: every operation goes to the handle-based half. */
    private readonly win?: BeneathWin32,
  ) {}

  static open(root: string): Beneath {
    if (platform.name === 'win32') return new Beneath(root, null, BeneathWin32.open(root));
    return new Beneath(root, HANDLE_RELATIVE ? fs.openSync(root, O_RDONLY | O_DIRECTORY) : null);
  }

  /** Whether permission bits read here mean what they say (not on Windows, where Node makes them up). */
  get hasPermissionBits(): boolean {
    return !this.win;
  }

  close(): void {
    this.win?.close();
    if (this.fd !== null) fs.closeSync(this.fd);
  }

  /**
   * Runs `fn` with the path of `rel`'s last component as seen from its parent directory (held
   * open, every ancestor checked not to be a link). Missing ancestors are made when `create`.
   */
  private at<T>(rel: string, create: boolean, fn: (p: string, name: string) => T): T {
    const parts = components(rel);
    const name = parts.pop()!;
    if (this.fd === null) {
      // Path-based (see the file's comment): check each ancestor, then act on the joined path.
      let cur = this.root;
      for (let i = 0; i < parts.length; i++) {
        cur = path.join(cur, parts[i]);
        const st = fs.lstatSync(cur, { throwIfNoEntry: false });
        if (st?.isSymbolicLink()) throw throughLink(parts.slice(0, i + 1).join('/'));
        if (!st && create) fs.mkdirSync(cur);
        else if (st && !st.isDirectory()) throw new ShadowError('NOT_A_DIRECTORY', `${parts.slice(0, i + 1).join('/')} is not a directory`);
      }
      return fn(path.join(cur, name), name);
    }
    let dir = fs.openSync(`/proc/self/fd/${this.fd}`, O_RDONLY | O_DIRECTORY);
    try {
      for (let i = 0; i < parts.length; i++) {
        const p = `/proc/self/fd/${dir}/${parts[i]}`;
        let next: number;
        try {
          next = fs.openSync(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        } catch (err) {
          const anc = parts.slice(0, i + 1).join('/');
          if (code(err) === 'ENOENT' && create) {
            try {
              fs.mkdirSync(p); // mkdir never follows a link at its last component
            } catch (e) {
              if (code(e) !== 'EEXIST') throw e;
            }
            next = fs.openSync(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW); // a link planted meanwhile: ELOOP
          } else if (code(err) === 'ELOOP' || fs.lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink()) throw throughLink(anc, err);
          else if (code(err) === 'ENOTDIR')
            throw new ShadowError('NOT_A_DIRECTORY', `${anc} is not a directory in the folder`, { cause: err });
          else throw err;
        }
        fs.closeSync(dir);
        dir = next;
      }
      return fn(`/proc/self/fd/${dir}/${name}`, name);
    } catch (err) {
      if (code(err) === 'ELOOP' && !(err instanceof ShadowError)) throw throughLink(rel, err);
      throw err;
    } finally {
      fs.closeSync(dir);
    }
  }

  /** What is at `rel` (never following a link), or null when nothing is; PATH_THROUGH_SYMLINK when an ancestor is a link. */
  lstat(rel: string): fs.Stats | null {
    if (this.win) return this.win.lstat(rel);
    try {
      return this.at(rel, false, (p) => fs.lstatSync(p, { throwIfNoEntry: false }) ?? null);
    } catch (err) {
      if (code(err) === 'ENOENT' || (err instanceof ShadowError && err.code === 'NOT_A_DIRECTORY')) return null;
      throw err;
    }
  }

  readlink(rel: string): string {
    if (this.win) return this.win.readlink(rel);
    return this.at(rel, false, (p) => fs.readlinkSync(p));
  }

  /** The bytes and mode of the regular file at `rel` (a link there is refused: ELOOP; a FIFO or device: INVALID_ARGUMENT, never waited on). */
  readFile(rel: string): { data: Buffer; mode: number } {
    if (this.win) return this.win.readFile(rel);
    const { fd, stat } = this.openFile(rel);
    try {
      return { data: fs.readFileSync(fd), mode: stat.mode };
    } finally {
      fs.closeSync(fd);
    }
  }

  /**
   * Opens the regular file at `rel` for reading (the caller closes the descriptor): opened with
   * O_NONBLOCK, so a FIFO or device put there opens at once instead of waiting for a writer, then
   * refused by its fstat (INVALID_ARGUMENT); a link there is refused (ELOOP).
   */
  openFile(rel: string): { fd: number; stat: fs.Stats } {
    if (this.win) return this.win.openFile(rel);
    return this.at(rel, false, (p) => {
      const fd = fs.openSync(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
      try {
        const stat = fs.fstatSync(fd);
        if (!stat.isFile()) throw new ShadowError('INVALID_ARGUMENT', `${rel} is not a regular file in the folder`);
        return { fd, stat };
      } catch (err) {
        fs.closeSync(fd);
        throw err;
      }
    });
  }

  /** The names in directory `rel` ('' for the folder itself), with their types. */
  /**
   * The directory `rel` opened as a folder of its own (a link on the way or there: refused, as
   * everywhere here); close it when done. Walks that go deep open each level once from the one
   * above instead of from the top every time.
   */
  sub(rel: string): Beneath {
    if (this.win) return new Beneath(path.join(this.root, ...rel.split('/')), null, this.win.sub(rel));
    if (this.fd === null) {
      const st = this.lstat(rel); // every ancestor checked
      if (!st) throw Object.assign(new Error(`ENOENT: ${rel} is not in the folder`), { code: 'ENOENT' });
      if (st.isSymbolicLink()) throw throughLink(rel);
      if (!st.isDirectory()) throw new ShadowError('NOT_A_DIRECTORY', `${rel} is not a directory in the folder`);
      return new Beneath(path.join(this.root, ...rel.split('/')), null);
    }
    const fd = this.at(rel, false, (p) => {
      try {
        return fs.openSync(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      } catch (err) {
        // A link there fails with ENOTDIR (O_DIRECTORY is checked on the link itself) or ELOOP.
        if (fs.lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink()) throw throughLink(rel, err);
        throw err;
      }
    });
    return new Beneath(path.join(this.root, ...rel.split('/')), fd);
  }

  readdir(rel: string): fs.Dirent[] {
    if (this.win) return this.win.readdir(rel);
    if (rel === '') return fs.readdirSync(this.fd === null ? this.root : `/proc/self/fd/${this.fd}`, { withFileTypes: true });
    return this.at(rel, false, (p) => {
      if (this.fd === null) return fs.readdirSync(p, { withFileTypes: true });
      const fd = fs.openSync(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      try {
        return fs.readdirSync(`/proc/self/fd/${fd}`, { withFileTypes: true });
      } finally {
        fs.closeSync(fd);
      }
    });
  }

  /** Makes directory `rel` (and missing ancestors); a directory already there is fine, anything else EEXIST. */
  mkdir(rel: string, mode = 0o777): void {
    if (this.win) return this.win.mkdir(rel); // a Windows directory has no mode
    this.at(rel, true, (p) => {
      try {
        fs.mkdirSync(p, mode);
      } catch (err) {
        if (code(err) !== 'EEXIST' || !fs.lstatSync(p).isDirectory()) throw err;
      }
    });
  }

  /**
   * Writes a regular file (or, with `link`, a symbolic link to `link`) at `rel` atomically: made
   * beside it under a new name (O_EXCL|O_NOFOLLOW), then renamed over whatever file or link is
   * there (rename replaces a link, never follows it; a directory there fails with EISDIR).
   */
  write(rel: string, content: { data: Buffer; mode: number } | { link: string }): void {
    if (this.win) return this.win.write(rel, content);
    this.at(rel, true, (p, name) => {
      const tmp = path.join(path.dirname(p), besideName(name, crypto.randomBytes(6).toString('hex')));
      try {
        if ('link' in content) fs.symlinkSync(content.link, tmp);
        else {
          const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, content.mode & 0o777);
          try {
            fs.writeSync(fd, content.data);
            fs.fchmodSync(fd, content.mode & 0o777);
            fs.fsyncSync(fd);
          } finally {
            fs.closeSync(fd);
          }
        }
        fs.renameSync(tmp, p);
      } catch (err) {
        fs.rmSync(tmp, { force: true });
        throw err;
      }
    });
  }

  /**
   * Writes a regular file of any size at `rel` from `spans` (data, or a number: a hole of that
   * many bytes, left a hole), the way write() does: made beside it under a new name, filled,
   * then renamed over what is there. Both steps resolve beneath the folder with links refused.
   */
  async writeFrom(rel: string, spans: AsyncIterable<Buffer | number>, mode: number): Promise<void> {
    if (this.win) return this.win.writeFrom(rel, spans, mode);
    const parts = components(rel);
    const tmpName = besideName(parts[parts.length - 1], crypto.randomBytes(6).toString('hex'));
    const tmpRel = [...parts.slice(0, -1), tmpName].join('/');
    const fd = this.at(tmpRel, true, (p) => fs.openSync(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode & 0o777));
    try {
      let at = 0;
      for await (const s of spans) {
        // Holes, and stretches of zeros, are left holes: what reads back is the same.
        if (typeof s === 'number' || allZero(s)) {
          at += typeof s === 'number' ? s : s.length;
          continue;
        }
        for (let done = 0; done < s.length;) done += await writeAt(fd, s, done, s.length - done, at + done);
        at += s.length;
      }
      fs.ftruncateSync(fd, at); // a hole at the end
      fs.fchmodSync(fd, mode & 0o777);
      fs.fsyncSync(fd);
      fs.closeSync(fd);
    } catch (err) {
      fs.closeSync(fd);
      this.unlink(tmpRel);
      throw err;
    }
    try {
      this.at(rel, true, (p) => fs.renameSync(path.join(path.dirname(p), tmpName), p));
    } catch (err) {
      this.unlink(tmpRel);
      throw err;
    }
  }

  /** Sets the permission bits of the regular file at `rel` (a link there is refused). */
  chmod(rel: string, mode: number): void {
    if (this.win) return this.win.chmod(rel, mode);
    this.at(rel, false, (p) => {
      if (this.fd === null) {
        if (fs.lstatSync(p).isSymbolicLink()) throw throughLink(rel);
        return fs.chmodSync(p, mode & 0o777);
      }
      const fd = fs.openSync(p, O_RDONLY | O_NOFOLLOW);
      try {
        fs.fchmodSync(fd, mode & 0o777);
      } finally {
        fs.closeSync(fd);
      }
    });
  }

  /** Removes the file or link at `rel` itself (never what a link points to); false when nothing was there. */
  unlink(rel: string): boolean {
    if (this.win) return this.win.unlink(rel);
    try {
      this.at(rel, false, (p) => fs.unlinkSync(p));
      return true;
    } catch (err) {
      if (code(err) === 'ENOENT') return false;
      throw err;
    }
  }

  /** Removes the empty directory at `rel` (never recursively; a link there is not followed: ENOTDIR). */
  rmdir(rel: string): void {
    if (this.win) return this.win.rmdir(rel);
    this.at(rel, false, (p) => fs.rmdirSync(p));
  }
}

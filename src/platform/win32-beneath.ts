// File operations confined beneath an open directory on Windows: the Windows half of
// src/work/beneath.ts, with the same operations and the same errors. Every step opens one
// component with NtCreateFile relative to its parent's handle (OBJECT_ATTRIBUTES.RootDirectory),
// so no path is ever looked up again from the top, and no component may be a link:
//
// - each component is opened with FILE_OPEN_REPARSE_POINT (the reparse point itself is opened,
//   never what it names) and OBJ_DONT_REPARSE, then its FileAttributeTagInformation is read: a
//   reparse point whose tag is a name surrogate (symbolic link, junction, WSL link: anything that
//   names another object) is refused with PATH_THROUGH_SYMLINK. Reparse points that name nothing
//   else (cloud-file placeholders, dedup) are the file or directory they stand for and pass.
// - the name the file system gives the opened object (FileNormalizedNameInformation, else
//   FileNameInformation) must be the parent's name plus the component asked for. That catches
//   what the tag cannot: an 8.3 short name that aliases another entry (refused, INVALID_PATH),
//   and, under wine, a Unix symbolic link, which wine follows silently and reports as the
//   object it points to (refused, PATH_THROUGH_SYMLINK).
// - the last step acts on the handle: rename with FileRenameInformation(Ex) whose RootDirectory
//   is the parent's handle, delete with FileDispositionInformation(Ex) (POSIX semantics where the
//   system has them), data and attributes through a Node descriptor made from the handle by
//   libuv's own uv_open_osfhandle (exported by node.exe), so reads and writes go through libuv
//   off the main thread as they do on Linux.
// - names are checked before any call: no '..', no ':' (alternate data streams), no characters
//   Win32 cannot name, no reserved device names (CON, NUL, COM1, ...), no trailing dot or space
//   (which Win32 strips, so the name would alias another): INVALID_PATH. Paths may be of any
//   length: NT names relative to a handle have no MAX_PATH.
//
// The NT calls are in win32-nt.ts (their numbers and layouts in win32-nt-defs.ts), directory reads
// in win32-nt-readdir.ts. ffi-rs is required only when a folder is opened: importing this module
// never fails, on any platform.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowError } from '../common/errors';
import { besideName } from '../common/paths';
import { allZero, writeAt } from '../work/content';
import {
  attributeTag,
  type Dir,
  dispose,
  errCode,
  failed,
  isNameSurrogate,
  nameOf,
  ntClose,
  ntCreate,
  ntError,
  ntFsControl,
  type Opened,
  renameInto,
  reparseTarget,
  symlinkReparseData,
  throughLink,
  toFd,
} from './win32-nt';
import {
  DELETE,
  FILE_ATTRIBUTE_DIRECTORY,
  FILE_CREATE,
  FILE_DIRECTORY_FILE,
  FILE_LIST_DIRECTORY,
  FILE_NON_DIRECTORY_FILE,
  FILE_OPEN,
  FILE_OPEN_IF,
  FILE_OPEN_REPARSE_POINT,
  FILE_READ_ATTRIBUTES,
  FILE_READ_DATA,
  FILE_READ_EA,
  FILE_TRAVERSE,
  FILE_WRITE_ATTRIBUTES,
  FILE_WRITE_DATA,
  FSCTL_GET_REPARSE_POINT,
  FSCTL_SET_REPARSE_POINT,
  MAXIMUM_REPARSE_DATA_BUFFER_SIZE,
  OBJ_CASE_INSENSITIVE,
  READ_CONTROL,
  STATUS_FILE_IS_A_DIRECTORY,
  STATUS_NOT_A_DIRECTORY,
  STATUS_OBJECT_NAME_COLLISION,
  STATUS_OBJECT_NAME_NOT_FOUND,
  STATUS_OBJECT_PATH_NOT_FOUND,
  SYNCHRONIZE,
} from './win32-nt-defs';
import { listDirectory } from './win32-nt-readdir';

// Names Win32 reserves for devices, with or without an extension ("NUL.txt" is NUL too); the
// superscript digits count as digits there.
const DEVICE_NAME = /^(CON|PRN|AUX|NUL|COM[0-9\u00b9\u00b2\u00b3]|LPT[0-9\u00b9\u00b2\u00b3]|CONIN\$|CONOUT\$)$/i;
// Characters no Win32 name may hold: controls, the wildcards and separators, ':' (a stream).
const BAD_CHAR = /[\u0000-\u001f<>:"/\\|?*]/;

/** Why `name` cannot be a file name in a Windows folder, or null when it can. */
export function windowsNameProblem(name: string): string | null {
  if (name === '' || name === '.' || name === '..') return 'an empty, "." or ".." component';
  const bad = BAD_CHAR.exec(name);
  if (bad) return bad[0] === ':' ? 'a ":" (an alternate data stream)' : `the character ${JSON.stringify(bad[0])}`;
  if (/[. ]$/.test(name)) return 'a trailing dot or space (Windows strips it, so the name would alias another)';
  const base = name.replace(/\..*$/s, '').replace(/ +$/, '');
  if (DEVICE_NAME.test(base)) return `the reserved device name ${base.toUpperCase()}`;
  return null;
}

/** The components of a '/'-separated relative path; INVALID_PATH for anything that could leave the folder or alias a name. */
function components(rel: string): string[] {
  const parts = rel.split('/');
  for (const p of parts) {
    const why = windowsNameProblem(p);
    if (why) throw new ShadowError('INVALID_PATH', `${JSON.stringify(rel)} is not a plain Windows path inside the folder: it has ${why}`);
  }
  return parts;
}

/** The NT name (\??\C:\..., \??\UNC\server\share\...) of a Win32 path. */
function ntPathOf(p: string): string {
  const ns = path.win32.toNamespacedPath(path.win32.resolve(p));
  if (!ns.startsWith('\\\\?\\')) throw new Error(`cannot open ${p}: not a local or UNC path`);
  return '\\??\\' + ns.slice(4);
}

const upper = (s: string): string => s.toUpperCase();

function joinName(dir: string, name: string): string {
  return dir.endsWith('\\') ? dir + name : `${dir}\\${name}`;
}

/**
 * Checks that `handle`, opened as `name` beneath `dir`, is that very entry: its name is the
 * directory's plus `name` (case aside). Another entry of the same directory is an alias (8.3 short
 * name): INVALID_PATH; anything elsewhere was reached through a link the tag did not show (wine's
 * Unix links): PATH_THROUGH_SYMLINK. Returns the entry's name.
 */
function verifyName(handle: number, dir: Dir, name: string, rel: string, shown: string): string {
  const actual = nameOf(handle, rel);
  if (upper(actual) === upper(joinName(dir.name, name))) return actual;
  const cut = actual.lastIndexOf('\\');
  const actualDir = cut <= 0 ? '\\' : actual.slice(0, cut);
  if (upper(actualDir) === upper(dir.name))
    throw new ShadowError(
      'INVALID_PATH',
      `${shown} is another name of ${JSON.stringify(actual.slice(cut + 1))} in the folder; give its real name`,
    );
  throw throughLink(shown);
}

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

/**
 * The user's folder on Windows, held open by a handle; every operation resolves beneath it one
 * component at a time, links refused. The same operations as Beneath (src/work/beneath.ts), with
 * the same results and error codes. Close it when done.
 */
export class BeneathWin32 {
  private constructor(
    readonly root: string,
    private readonly dir: Dir,
  ) {}

  /** Opens the folder `root` (a link or junction naming the folder itself is followed, as on Linux; nothing beneath it is). */
  static open(root: string): BeneathWin32 {
    const r = ntCreate(
      0,
      ntPathOf(root),
      FILE_LIST_DIRECTORY | FILE_TRAVERSE | FILE_READ_ATTRIBUTES | SYNCHRONIZE,
      FILE_DIRECTORY_FILE,
      FILE_OPEN,
      OBJ_CASE_INSENSITIVE,
    );
    if (failed(r.status)) throw ntError(r.status, 'NtCreateFile', root);
    try {
      return new BeneathWin32(root, { handle: r.handle, name: nameOf(r.handle, root), owned: false });
    } catch (err) {
      ntClose(r.handle);
      throw err;
    }
  }

  close(): void {
    if (this.dir.handle) ntClose(this.dir.handle);
    this.dir.handle = 0;
  }

  private release(d: Dir): void {
    if (d.owned) ntClose(d.handle);
  }

  /**
   * Opens `name` beneath `dir` as one step: the handle (the caller closes it) with its attributes
   * and tag, or null when nothing is there. A name-surrogate reparse point is refused unless
   * `links` ('allow': the caller acts on the link itself and is told by the tag); the name is
   * always checked (verifyName).
   */
  private step(
    dir: Dir,
    name: string,
    access: number,
    options: number,
    disposition: number,
    rel: string,
    links: 'refuse' | 'allow',
  ): (Opened & { name: string }) | null {
    const r = ntCreate(dir.handle, name, access | FILE_READ_ATTRIBUTES | SYNCHRONIZE, options | FILE_OPEN_REPARSE_POINT, disposition);
    if (r.status === STATUS_OBJECT_NAME_NOT_FOUND || r.status === STATUS_OBJECT_PATH_NOT_FOUND) return null;
    if (failed(r.status)) throw ntError(r.status, 'NtCreateFile', rel);
    try {
      const at = attributeTag(r.handle, rel);
      if (links === 'refuse' && isNameSurrogate(at)) throw throughLink(rel);
      const full = verifyName(r.handle, dir, name, rel, rel);
      return { handle: r.handle, ...at, name: full };
    } catch (err) {
      ntClose(r.handle);
      throw err;
    }
  }

  /** Opens directory `name` beneath `dir` (made when missing and `create`), refusing links. */
  private openDir(dir: Dir, name: string, shown: string, create: boolean): Dir | null {
    const access = FILE_LIST_DIRECTORY | FILE_TRAVERSE;
    let o: (Opened & { name: string }) | null;
    try {
      o = this.step(dir, name, access, FILE_DIRECTORY_FILE, create ? FILE_OPEN_IF : FILE_OPEN, shown, 'refuse');
    } catch (err) {
      if (errCode(err) !== 'ENOTDIR') throw err;
      // Not a directory: a link to a file, or a file. Say which.
      const probe = this.step(dir, name, 0, 0, FILE_OPEN, shown, 'allow');
      if (probe) ntClose(probe.handle);
      if (probe && isNameSurrogate(probe)) throw throughLink(shown, err);
      throw new ShadowError('NOT_A_DIRECTORY', `${shown} is not a directory in the folder`, { cause: err });
    }
    return o && { handle: o.handle, name: o.name, owned: true };
  }

  /** The open parent directory of `parts` (the caller releases it). */
  private walk(parts: string[], create: boolean): Dir {
    let dir = this.dir;
    if (!dir.handle) throw new Error(`the folder ${this.root} is closed`);
    try {
      for (let i = 0; i < parts.length; i++) {
        const shown = parts.slice(0, i + 1).join('/');
        const next = this.openDir(dir, parts[i], shown, create);
        if (!next) throw ntError(STATUS_OBJECT_PATH_NOT_FOUND, 'NtCreateFile', shown);
        this.release(dir);
        dir = next;
      }
      return dir;
    } catch (err) {
      this.release(dir);
      throw err;
    }
  }

  /** Runs `fn` with `rel`'s parent directory open (missing ancestors made when `create`) and `rel`'s last component. */
  private at<T>(rel: string, create: boolean, fn: (dir: Dir, name: string) => T): T {
    const parts = components(rel);
    const name = parts.pop()!;
    const dir = this.walk(parts, create);
    try {
      return fn(dir, name);
    } finally {
      this.release(dir);
    }
  }

  /** What is at `rel` (never following a link: a link shows as one), or null when nothing is; PATH_THROUGH_SYMLINK when an ancestor is a link. */
  lstat(rel: string): fs.Stats | null {
    try {
      return this.at(rel, false, (dir, name) => {
        const o = this.step(dir, name, 0, 0, FILE_OPEN, rel, 'allow');
        if (!o) return null;
        const fd = toFd(o.handle, rel);
        try {
          const st = fs.fstatSync(fd);
          if (isNameSurrogate(o)) st.mode = (st.mode & ~S_IFMT) | S_IFLNK;
          return st;
        } finally {
          fs.closeSync(fd);
        }
      });
    } catch (err) {
      if (errCode(err) === 'ENOENT' || errCode(err) === 'NOT_A_DIRECTORY') return null;
      throw err;
    }
  }

  /** The target of the symbolic link or junction at `rel` (EINVAL when it is none). */
  readlink(rel: string): string {
    return this.at(rel, false, (dir, name) => {
      const o = this.step(dir, name, 0, 0, FILE_OPEN, rel, 'allow');
      if (!o) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      try {
        const out = Buffer.alloc(MAXIMUM_REPARSE_DATA_BUFFER_SIZE);
        const r = ntFsControl(o.handle, FSCTL_GET_REPARSE_POINT, null, out);
        if (failed(r.status)) throw ntError(r.status, 'NtFsControlFile(FSCTL_GET_REPARSE_POINT)', rel);
        return reparseTarget(out.subarray(0, r.bytes), rel);
      } finally {
        ntClose(o.handle);
      }
    });
  }

  /** The bytes and mode of the regular file at `rel` (a link there: PATH_THROUGH_SYMLINK; a directory: INVALID_ARGUMENT). */
  readFile(rel: string): { data: Buffer; mode: number } {
    const { fd, stat } = this.openFile(rel);
    try {
      return { data: fs.readFileSync(fd), mode: stat.mode };
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Opens the regular file at `rel` for reading; the caller closes the descriptor. */
  openFile(rel: string): { fd: number; stat: fs.Stats } {
    return this.at(rel, false, (dir, name) => {
      let o: Opened | null;
      try {
        o = this.step(dir, name, FILE_READ_DATA | FILE_READ_EA | READ_CONTROL, FILE_NON_DIRECTORY_FILE, FILE_OPEN, rel, 'refuse');
      } catch (err) {
        if (errCode(err) === 'EISDIR')
          throw new ShadowError('INVALID_ARGUMENT', `${rel} is not a regular file in the folder`, { cause: err });
        throw err;
      }
      if (!o) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      const fd = toFd(o.handle, rel);
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

  /**
   * The directory `rel` opened as a folder of its own (a link on the way or there: refused, as
   * everywhere here); it holds its own handle, which close() releases. Walks that go deep open
   * each level once from the one above instead of from the top every time.
   */
  sub(rel: string): BeneathWin32 {
    return this.at(rel, false, (parent, name) => {
      const d = this.openDir(parent, name, rel, false);
      if (!d) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      // Not "owned" in the walks' sense (released after each step): it is the new folder's own
      // handle, closed by its close().
      return new BeneathWin32(path.win32.join(this.root, ...rel.split('/')), { ...d, owned: false });
    });
  }

  /** The names in directory `rel` ('' for the folder itself), with their types (a reparse point that names another object: a link). */
  readdir(rel: string): fs.Dirent[] {
    if (rel === '') return listDirectory(this.dir, this.root, rel);
    return this.at(rel, false, (parent, name) => {
      const d = this.openDir(parent, name, rel, false);
      if (!d) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      try {
        return listDirectory(d, path.win32.join(this.root, ...rel.split('/')), rel);
      } finally {
        this.release(d);
      }
    });
  }

  /**
   * Makes directory `rel` (and missing ancestors); a directory already there is fine, anything
   * else EEXIST. (No mode: a Windows directory has none; Beneath's mode argument is not passed on.)
   */
  mkdir(rel: string): void {
    this.at(rel, true, (dir, name) => {
      const made = ntCreate(
        dir.handle,
        name,
        FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE,
        FILE_DIRECTORY_FILE | FILE_OPEN_REPARSE_POINT,
        FILE_CREATE,
      );
      if (!failed(made.status)) {
        try {
          verifyName(made.handle, dir, name, rel, rel);
        } finally {
          ntClose(made.handle);
        }
        return;
      }
      if (made.status !== STATUS_OBJECT_NAME_COLLISION) throw ntError(made.status, 'NtCreateFile(FILE_CREATE, directory)', rel);
      let there: Dir | null;
      try {
        there = this.openDir(dir, name, rel, false);
      } catch (err) {
        if (errCode(err) === 'NOT_A_DIRECTORY') throw ntError(STATUS_OBJECT_NAME_COLLISION, 'NtCreateFile(FILE_CREATE, directory)', rel);
        throw err;
      }
      if (there) this.release(there);
      else throw ntError(STATUS_OBJECT_NAME_COLLISION, 'NtCreateFile(FILE_CREATE, directory)', rel);
    });
  }

  /**
   * Makes a new file `.<name>.shadowfs-<random>` beside `name` in `dir` (FILE_CREATE: never an
   * existing one); with `link`, a symbolic link to it. The handle may delete and rename it.
   */
  private newSibling(dir: Dir, name: string, rel: string, link?: string): { handle: number; tmpName: string } {
    const tmpName = besideName(name, crypto.randomBytes(6).toString('hex'));
    const access = FILE_WRITE_DATA | FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES | DELETE | SYNCHRONIZE;
    const r = ntCreate(dir.handle, tmpName, access, FILE_NON_DIRECTORY_FILE | FILE_OPEN_REPARSE_POINT, FILE_CREATE);
    if (failed(r.status)) throw ntError(r.status, 'NtCreateFile(FILE_CREATE)', rel);
    if (link === undefined) return { handle: r.handle, tmpName };
    try {
      const set = ntFsControl(r.handle, FSCTL_SET_REPARSE_POINT, symlinkReparseData(link), null);
      if (failed(set.status)) {
        const err = ntError(set.status, 'NtFsControlFile(FSCTL_SET_REPARSE_POINT, IO_REPARSE_TAG_SYMLINK)', rel);
        err.message += '; making a symbolic link on Windows needs the "Create symbolic links" privilege';
        throw err;
      }
    } catch (err) {
      this.discard(r.handle, rel);
      throw err;
    }
    return { handle: r.handle, tmpName };
  }

  /** Deletes and closes a file this module made (best effort: the original error matters more). */
  private discard(handle: number, rel: string): void {
    try {
      dispose(handle, rel, 0);
    } catch {
      // left behind under its temporary name; nothing else is touched
    }
    ntClose(handle);
  }

  /**
   * Refuses `name` in `dir` when an entry is there under another name (an 8.3 alias): the rename
   * would replace that entry. A link there is fine: the rename replaces the link itself.
   */
  private checkTarget(dir: Dir, name: string, rel: string): void {
    const o = this.step(dir, name, 0, 0, FILE_OPEN, rel, 'allow');
    if (o) ntClose(o.handle);
  }

  /**
   * Writes a regular file (or, with `link`, a symbolic link to `link`) at `rel` atomically: made
   * beside it under a new name, then renamed over whatever file or link is there (a rename
   * replaces a link, never follows it; a directory there fails).
   */
  write(rel: string, content: { data: Buffer; mode: number } | { link: string }): void {
    this.at(rel, true, (dir, name) => {
      this.checkTarget(dir, name, rel);
      const made = this.newSibling(dir, name, rel, 'link' in content ? content.link : undefined);
      if ('link' in content) {
        try {
          renameInto(made.handle, dir, name, rel);
        } catch (err) {
          this.discard(made.handle, rel);
          throw err;
        }
        ntClose(made.handle);
        return;
      }
      const fd = toFd(made.handle, rel);
      try {
        try {
          fs.writeSync(fd, content.data);
          fs.fsyncSync(fd);
          renameInto(made.handle, dir, name, rel);
        } catch (err) {
          try {
            dispose(made.handle, rel, 0);
          } catch {
            // left behind under its temporary name
          }
          throw err;
        }
        // After the rename, so that a read-only file is never what a rename has to replace or delete.
        fs.fchmodSync(fd, content.mode & 0o777);
      } finally {
        fs.closeSync(fd);
      }
    });
  }

  /**
   * Writes a regular file of any size at `rel` from `spans` (data, or a number: that many zero
   * bytes), the way write() does: made beside it under a new name, filled off the main thread,
   * then renamed over what is there. The parent directory stays open (by handle) throughout.
   */
  async writeFrom(rel: string, spans: AsyncIterable<Buffer | number>, mode: number): Promise<void> {
    const parts = components(rel);
    const name = parts.pop()!;
    const dir = this.walk(parts, true);
    try {
      this.checkTarget(dir, name, rel);
      const made = this.newSibling(dir, name, rel);
      const fd = toFd(made.handle, rel);
      try {
        try {
          let at = 0;
          for await (const s of spans) {
            // Zeros need not be written: the end of file set below reads back as zeros.
            if (typeof s === 'number' || allZero(s)) {
              at += typeof s === 'number' ? s : s.length;
              continue;
            }
            for (let done = 0; done < s.length;) done += await writeAt(fd, s, done, s.length - done, at + done);
            at += s.length;
          }
          fs.ftruncateSync(fd, at);
          fs.fsyncSync(fd);
          renameInto(made.handle, dir, name, rel);
        } catch (err) {
          try {
            dispose(made.handle, rel, 0);
          } catch {
            // left behind under its temporary name
          }
          throw err;
        }
        fs.fchmodSync(fd, mode & 0o777);
      } finally {
        fs.closeSync(fd);
      }
    } finally {
      this.release(dir);
    }
  }

  /** Sets the mode of the regular file at `rel` (on Windows: the read-only attribute, from the owner's write bit); a link there is refused. */
  chmod(rel: string, mode: number): void {
    this.at(rel, false, (dir, name) => {
      const o = this.step(dir, name, FILE_WRITE_ATTRIBUTES, 0, FILE_OPEN, rel, 'refuse');
      if (!o) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      const fd = toFd(o.handle, rel);
      try {
        fs.fchmodSync(fd, mode & 0o777);
      } finally {
        fs.closeSync(fd);
      }
    });
  }

  /** Removes the file or link at `rel` itself (never what a link points to); false when nothing was there. EISDIR for a directory. */
  unlink(rel: string): boolean {
    try {
      return this.at(rel, false, (dir, name) => {
        const o = this.step(dir, name, DELETE | FILE_WRITE_ATTRIBUTES, 0, FILE_OPEN, rel, 'allow');
        if (!o) return false;
        try {
          if (o.attributes & FILE_ATTRIBUTE_DIRECTORY && !isNameSurrogate(o)) throw ntError(STATUS_FILE_IS_A_DIRECTORY, 'unlink', rel);
          dispose(o.handle, rel, o.attributes);
        } finally {
          ntClose(o.handle);
        }
        return true;
      });
    } catch (err) {
      if (errCode(err) === 'ENOENT') return false;
      throw err;
    }
  }

  /** Removes the empty directory at `rel` (never recursively; a link there: ENOTDIR, never followed). */
  rmdir(rel: string): void {
    this.at(rel, false, (dir, name) => {
      const o = this.step(dir, name, DELETE | FILE_WRITE_ATTRIBUTES, FILE_DIRECTORY_FILE, FILE_OPEN, rel, 'allow');
      if (!o) throw ntError(STATUS_OBJECT_NAME_NOT_FOUND, 'NtCreateFile', rel);
      try {
        if (isNameSurrogate(o)) throw ntError(STATUS_NOT_A_DIRECTORY, 'rmdir (a link, not followed)', rel);
        dispose(o.handle, rel, o.attributes);
      } finally {
        ntClose(o.handle);
      }
    });
  }
}

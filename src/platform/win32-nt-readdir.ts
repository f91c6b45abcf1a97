// Directory reads on Windows for win32-beneath.ts: NtQueryDirectoryFile on an open directory's
// handle, its FILE_FULL_DIR_INFORMATION records read into fs.Dirent-shaped entries, a reparse
// point that names another object (a symbolic link, a junction) shown as a link, never followed.
import type * as fs from 'fs';
import {
  DIR_ENTRY_NAME_OFFSET,
  FILE_ATTRIBUTE_DIRECTORY,
  FileFullDirectoryInformation,
  IO_STATUS_BLOCK_SIZE,
  STATUS_NO_MORE_FILES,
} from './win32-nt-defs';
import { type Dir, failed, isNameSurrogate, NTDLL, ntError, ntApi } from './win32-nt';

const LIST_BUFFER_BYTES = 64 * 1024;

/** One entry of BeneathWin32.readdir, shaped as fs.Dirent. */
class Entry implements fs.Dirent {
  constructor(
    readonly name: string,
    readonly parentPath: string,
    private readonly kind: 'file' | 'dir' | 'link',
  ) {}
  get path(): string {
    return this.parentPath;
  }
  isFile(): boolean {
    return this.kind === 'file';
  }
  isDirectory(): boolean {
    return this.kind === 'dir';
  }
  isSymbolicLink(): boolean {
    return this.kind === 'link';
  }
  isBlockDevice(): boolean {
    return false;
  }
  isCharacterDevice(): boolean {
    return false;
  }
  isFIFO(): boolean {
    return false;
  }
  isSocket(): boolean {
    return false;
  }
}

/** The entries of the open directory `d` (at `parentPath`; `rel` names it in errors), without "." and "..". */
export function listDirectory(d: Dir, parentPath: string, rel: string): fs.Dirent[] {
  const { T, call } = ntApi();
  const out: fs.Dirent[] = [];
  const buf = Buffer.alloc(LIST_BUFFER_BYTES);
  for (let first = true; ; first = false) {
    const r = call(NTDLL, 'NtQueryDirectoryFile', T.I32, [
      [T.I64, d.handle],
      [T.I64, 0], // Event
      [T.I64, 0], // ApcRoutine
      [T.I64, 0], // ApcContext
      [T.U8Array, Buffer.alloc(IO_STATUS_BLOCK_SIZE)],
      [T.U8Array, buf],
      [T.U32, buf.length],
      [T.I32, FileFullDirectoryInformation],
      [T.U8, 0], // ReturnSingleEntry
      [T.I64, 0], // FileName: every entry
      [T.U8, first ? 1 : 0], // RestartScan
    ]);
    const status = r.value >>> 0;
    if (status === STATUS_NO_MORE_FILES) return out;
    if (failed(status)) throw ntError(status, 'NtQueryDirectoryFile(FileFullDirectoryInformation)', rel || '.');
    for (let at = 0; ;) {
      const next = buf.readUInt32LE(at);
      const attributes = buf.readUInt32LE(at + 56);
      const nameLength = buf.readUInt32LE(at + 60);
      const tag = buf.readUInt32LE(at + 64);
      const name = buf.subarray(at + DIR_ENTRY_NAME_OFFSET, at + DIR_ENTRY_NAME_OFFSET + nameLength).toString('utf16le');
      if (name !== '.' && name !== '..') {
        const kind = isNameSurrogate({ attributes, tag }) ? 'link' : attributes & FILE_ATTRIBUTE_DIRECTORY ? 'dir' : 'file';
        out.push(new Entry(name, parentPath, kind));
      }
      if (next === 0) break;
      at += next;
    }
  }
}

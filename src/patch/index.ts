// Diffs and git-format patches from in-memory before/after contents. A layer's changes to a folder
// become (a) a unified diff for people and (b) a patch that `git apply` (and `git apply --index`)
// in a clean checkout of the folder turns into the layer's state byte for byte: text and binary
// files, new and deleted files, renames, mode changes and symlinks. Pure: the caller gathers the
// contents; nothing here touches the file system or starts a process.
import { ShadowError } from '../common/errors';
import { comparePaths } from './git-format';
import { findRenames } from './renames';
import type { RenameCandidate } from './renames';
import { formatSection, isTextContent } from './section';
import type { Section } from './section';

export interface Side {
  kind: 'file' | 'symlink';
  /** git mode: 0o100644, 0o100755 for files; 0o120000 for symlinks */
  mode: number;
  /** file bytes, or the symlink's target bytes; empty for a `large` file */
  data: Buffer;
  /** A file too large to hold in memory: `data` is empty and this says what the file holds. */
  large?: LargeContent;
  /** A layer's side: its object's stamp (NativeStat.stamp) taken before it was read, for apply's hand-back. */
  stamp?: string;
}

/** What a file too large to hold in memory holds, found by streaming it (see src/work/content.ts). */
export interface LargeContent {
  size: number;
  /** git's blob id of the content (SHA-1 of "blob <size>\0" and the bytes). */
  id: string;
  /**
   * Its "literal <size>" hunk of a git binary patch, made by streaming it; formatPatch needs it
   * (and the other side's) to write the change with binary: true. Always written as binary.
   */
  literal?: string;
}

/** One path's change; null = absent on that side. Paths are relative and '/'-separated. */
export interface FileChange {
  path: string;
  old: Side | null;
  new: Side | null;
}

export interface PatchFile {
  path: string;
  /** Set for renames: the path before. */
  oldPath?: string;
  /** 'type-changed': a file became a symlink or the reverse (written as a delete and an add). */
  status: 'added' | 'modified' | 'deleted' | 'renamed' | 'type-changed';
  /** Either side is binary (a NUL in its first 8000 bytes) or not valid UTF-8. */
  binary: boolean;
  /** Lines added and removed in text hunks; 0 for binary content. */
  additions: number;
  deletions: number;
  oldMode?: number;
  newMode?: number;
}

export interface PatchOptions {
  /**
   * true: git binary patches (literal "GIT binary patch", zlib + git's base85) so git apply works;
   * false: "Binary files a/x and b/x differ" like plain `git diff`.
   */
  binary: boolean;
  /**
   * Detect renames: a deleted and an added path with identical content, or text files with at
   * least 50% in common (git's default threshold, measured like git). Default true.
   */
  renames?: boolean;
  /** Lines of context around changes. Default 3. */
  context?: number;
  /** Full 40-hex blob ids on every index line, like git's --full-index. Default false. */
  fullIndex?: boolean;
}

export interface Patch {
  text: string;
  files: PatchFile[];
}

/** One entry of the result: the file it reports and the section(s) that write it. */
interface Entry {
  file: Omit<PatchFile, 'binary' | 'additions' | 'deletions'>;
  sections: Section[];
}

const FILE_MODES = [0o100644, 0o100755];
const SYMLINK_MODE = 0o120000;

/**
 * Writes the changes as one patch, files in git's order (byte-wise on the path; a renamed file
 * sits at its new path). Unchanged entries are left out.
 */
export function formatPatch(changes: FileChange[], opts: PatchOptions): Patch {
  const format = { binary: opts.binary, fullIndex: opts.fullIndex ?? false, context: checkedContext(opts.context) };
  const entries = collectEntries(changes, opts.renames ?? true);
  entries.sort((a, b) => comparePaths(a.file.path, b.file.path));
  let text = '';
  const files: PatchFile[] = [];
  for (const entry of entries) {
    const file: PatchFile = { ...entry.file, binary: false, additions: 0, deletions: 0 };
    for (const section of entry.sections) {
      const out = formatSection(section, format);
      text += out.text;
      file.binary ||= out.binary;
      file.additions += out.additions;
      file.deletions += out.deletions;
    }
    files.push(file);
  }
  return { text, files };
}

/** Classifies each change, pairing deletions with additions into renames when asked. */
function collectEntries(changes: FileChange[], detectRenames: boolean): Entry[] {
  const seen = new Set<string>();
  const entries: Entry[] = [];
  const added: RenameCandidate[] = [];
  const deleted: RenameCandidate[] = [];
  const sides = new Map<string, Side>();
  for (const change of changes) {
    const { path, old, new: next } = checkedChange(change);
    if (seen.has(path)) throw new ShadowError('INVALID_ARGUMENT', `the path ${JSON.stringify(path)} appears twice in the changes`);
    seen.add(path);
    if (old && next) {
      if (sameSide(old, next)) continue;
      entries.push(old.kind === next.kind ? modified(path, old, next) : typeChanged(path, old, next));
    } else if (old || next) {
      const side = (old ?? next) as Side;
      sides.set(path, side);
      (old ? deleted : added).push({ path, kind: side.kind, data: side.data, text: !side.large && isTextContent(side.data) });
    }
  }
  const byPath = (a: RenameCandidate, b: RenameCandidate): number => comparePaths(a.path, b.path);
  added.sort(byPath);
  deleted.sort(byPath);

  const renamed = new Set<string>();
  if (detectRenames) {
    for (const { from, to, similarity } of findRenames(deleted, added)) {
      const old = sides.get(from) as Side;
      const next = sides.get(to) as Side;
      entries.push({
        file: { path: to, oldPath: from, status: 'renamed', oldMode: old.mode, newMode: next.mode },
        sections: [{ oldPath: from, newPath: to, old, new: next, similarity }],
      });
      renamed.add(from).add(to);
    }
  }
  for (const { path } of added) {
    if (renamed.has(path)) continue;
    const next = sides.get(path) as Side;
    entries.push({
      file: { path, status: 'added', newMode: next.mode },
      sections: [{ oldPath: path, newPath: path, old: null, new: next }],
    });
  }
  for (const { path } of deleted) {
    if (renamed.has(path)) continue;
    const old = sides.get(path) as Side;
    entries.push({ file: { path, status: 'deleted', oldMode: old.mode }, sections: [{ oldPath: path, newPath: path, old, new: null }] });
  }
  return entries;
}

function modified(path: string, old: Side, next: Side): Entry {
  return {
    file: { path, status: 'modified', oldMode: old.mode, newMode: next.mode },
    sections: [{ oldPath: path, newPath: path, old, new: next }],
  };
}

/** git cannot change a file into a symlink in place: it writes a deletion, then an addition. */
function typeChanged(path: string, old: Side, next: Side): Entry {
  return {
    file: { path, status: 'type-changed', oldMode: old.mode, newMode: next.mode },
    sections: [
      { oldPath: path, newPath: path, old, new: null },
      { oldPath: path, newPath: path, old: null, new: next },
    ],
  };
}

function sameSide(a: Side, b: Side): boolean {
  if (a.kind !== b.kind || a.mode !== b.mode) return false;
  if (a.large || b.large) return !!a.large && !!b.large && a.large.size === b.large.size && a.large.id === b.large.id;
  return a.data.equals(b.data);
}

function checkedContext(context: number | undefined): number {
  if (context === undefined) return 3;
  if (!Number.isSafeInteger(context) || context < 0) {
    throw new ShadowError('INVALID_ARGUMENT', `context must be a whole number of lines, 0 or more; got ${String(context)}`);
  }
  return context;
}

function checkedChange(change: FileChange): FileChange {
  checkPath(change.path);
  if (change.old) checkSide(change.old, change.path, 'old');
  if (change.new) checkSide(change.new, change.path, 'new');
  return change;
}

/** A path git can name: relative, '/'-separated, without empty, "." or ".." parts or NUL bytes. */
function checkPath(path: unknown): void {
  const bad = (why: string): never => {
    throw new ShadowError('INVALID_PATH', `cannot write a patch for the path ${JSON.stringify(path)}: ${why}`);
  };
  if (typeof path !== 'string') return bad('it is not a string');
  if (path.includes('\0')) bad('it contains a NUL byte');
  if (path.split('/').some((part) => part === '' || part === '.' || part === '..')) {
    bad('give a relative path with "/" between names and no empty, "." or ".." parts');
  }
  // Lone UTF-16 surrogates would not survive the UTF-8 encoding every patch line goes through.
  if (Buffer.from(path, 'utf8').toString('utf8') !== path) bad('it is not valid Unicode');
}

function checkSide(side: Side, path: string, which: 'old' | 'new'): void {
  const what = `the ${which} side of ${JSON.stringify(path)}`;
  if (!Buffer.isBuffer(side.data)) throw new ShadowError('INVALID_ARGUMENT', `${what}: data must be a Buffer`);
  if (side.large && (side.kind !== 'file' || side.data.length !== 0 || !/^[0-9a-f]{40}$/.test(side.large.id)))
    throw new ShadowError('INVALID_ARGUMENT', `${what}: a large side is a file with no data in memory and a 40-hex blob id`);
  const modeOk = side.kind === 'file' ? FILE_MODES.includes(side.mode) : side.kind === 'symlink' && side.mode === SYMLINK_MODE;
  if (!modeOk) {
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `${what}: a ${String(side.kind)} needs mode ${side.kind === 'symlink' ? '0o120000' : '0o100644 or 0o100755'}, got 0o${Number(side.mode).toString(8)}`,
    );
  }
}

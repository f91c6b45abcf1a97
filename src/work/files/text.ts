// The text tools: read a file (readText, or layer.read's byte ranges), write a whole file
// (writeText) and replace exact text in one (editText), as ONE agent's layer shows it. Writes
// and edits are each a single native job with an optional `expect` precondition, so nothing
// changes the file between what the job looks at and what it writes.
import { ShadowError } from '../../common/errors';
import { normalizeRelPath } from '../../common/paths';
import { LAYER_READ_MAX_BYTES } from '../../protocol/methods';
import { addon, type FileExpectation, type NativeConflict, type NativeShadow } from '../../shadow/native';
import type { Layer } from '../../shadow';
import { boolOpt, intOpt, stringArg } from './args';
import { isBinary, statOrNull } from './probe';

export interface LayerReadResult {
  path: string;
  /** base64 */
  data: string;
  size: number;
  offset: number;
}

/**
 * What layer.read answers: a range of a file as `layer` shows it (`offset`, `length`, at most
 * LAYER_READ_MAX_BYTES), or the whole file when neither is given, which is FILE_TOO_LARGE for a
 * file over LAYER_READ_MAX_BYTES (with a hint to read it in ranges). Any file, however large or
 * sparse, can be read in ranges; an answer never holds more than one range in memory.
 */
export async function readLayerRange(layer: Layer, rel: string, opts: { offset?: number; length?: number } = {}): Promise<LayerReadResult> {
  const p = normalizeRelPath(rel);
  const ranged = opts.offset !== undefined || opts.length !== undefined;
  const offset = intOpt('offset', opts.offset, 0, 0, Number.MAX_SAFE_INTEGER);
  const length = intOpt('length', opts.length, LAYER_READ_MAX_BYTES, 0, LAYER_READ_MAX_BYTES);
  const r = await layer.readRange(p, offset, length);
  if (!ranged && r.size > r.data.length)
    throw new ShadowError(
      'FILE_TOO_LARGE',
      `${p} holds ${r.size} bytes, more than the ${LAYER_READ_MAX_BYTES} one read returns; read it in ranges (offset and length, at most ${LAYER_READ_MAX_BYTES} bytes each: "shadowfs layer cat" does this)`,
    );
  return { path: p, data: r.data.toString('base64'), size: r.size, offset };
}

/** readText answers at most this much content unless told otherwise. */
export const DEFAULT_MAX_BYTES = 2 * 1024 * 1024;
/** No tool loads a file larger than this (the Layer reads whole files). */
export const MAX_FILE_BYTES = 64 * 1024 * 1024;

/**
 * Refuses what is not a regular file before it is read: a symlink (the Layer never follows one;
 * the answer names its target) or a fifo, socket or device (reading one could block forever).
 */
async function checkRegularFile(layer: Layer, rel: string, type: string): Promise<void> {
  if (type === 'file') return;
  if (type === 'symlink') {
    const target = await layer.readlink(rel).catch(() => null);
    throw new ShadowError(
      'PATH_THROUGH_SYMLINK',
      `${rel} is a symbolic link${target === null ? '' : ` to ${target}`}; name the file it points to instead`,
    );
  }
  throw new ShadowError('INVALID_ARGUMENT', `${rel} is not a regular file (a fifo, socket or device); it holds no text to read or edit`);
}

function tooLarge(rel: string, size: number): ShadowError {
  return new ShadowError('INVALID_ARGUMENT', `${rel} is ${size} bytes, more than the ${MAX_FILE_BYTES} bytes these tools load`);
}

/** Byte offsets where each line starts (a final line without a newline counts; an empty file has none). */
function lineStarts(buf: Buffer): number[] {
  const starts: number[] = [];
  let at = 0;
  while (at < buf.length) {
    starts.push(at);
    const nl = buf.indexOf(0x0a, at);
    if (nl < 0) break;
    at = nl + 1;
  }
  return starts;
}

/** 1-based line number of each offset in `offsets` (ascending) within `text`. */
function lineNumbers(text: string, offsets: number[]): number[] {
  const out: number[] = [];
  let line = 1;
  let from = 0;
  for (const off of offsets) {
    for (let nl = text.indexOf('\n', from); nl >= 0 && nl < off; nl = text.indexOf('\n', nl + 1)) {
      line++;
      from = nl + 1;
    }
    out.push(line);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// readText

export interface ReadTextOptions {
  /** First line to return, 1-based (default 1). */
  startLine?: number;
  /** Last line to return, 1-based and inclusive (default: the last line). */
  endLine?: number;
  /** The most content to return, in bytes (default 2 MiB); more is refused with a hint to read a line range. */
  maxBytes?: number;
}

export interface ReadTextResult {
  path: string;
  content: string;
  totalLines: number;
  startLine: number;
  endLine: number;
  binary: boolean;
  /** Bytes of the whole file, its mtime and the content hash of its bytes: what `expect` of writeText and editText names. */
  size: number;
  mtimeMs: number;
  hash: string;
}

/**
 * Reads a text file, or a range of its lines, as the layer shows it. The content keeps its
 * line endings, so the whole file comes back byte for byte. A range past the end is clipped (a
 * range wholly past it gives no content and endLine < startLine). A binary file (a NUL in its
 * first 8000 bytes) gives binary: true and no content.
 */
export async function readText(layer: Layer, rel: string, opts: ReadTextOptions = {}): Promise<ReadTextResult> {
  const p = normalizeRelPath(rel);
  const maxBytes = intOpt('maxBytes', opts.maxBytes, DEFAULT_MAX_BYTES, 1, MAX_FILE_BYTES);
  const ranged = opts.startLine !== undefined || opts.endLine !== undefined;
  const startLine = intOpt('startLine', opts.startLine, 1, 1, Number.MAX_SAFE_INTEGER);
  const endLine = intOpt('endLine', opts.endLine, Number.MAX_SAFE_INTEGER, 1, Number.MAX_SAFE_INTEGER);
  if (endLine < startLine)
    throw new ShadowError('INVALID_ARGUMENT', `endLine (${endLine}) is before startLine (${startLine}); lines are 1-based and inclusive`);
  const st = await layer.stat(p);
  if (st.type === 'directory') throw new ShadowError('IS_DIRECTORY', `${p} is a directory; list it instead of reading it`);
  await checkRegularFile(layer, p, st.type);
  if (st.size > MAX_FILE_BYTES) throw tooLarge(p, st.size);
  const buf = await layer.readFile(p);
  // What a stat-then-write names in `expect` (writeText, editText).
  const state = { size: buf.length, mtimeMs: st.mtimeMs, hash: addon().contentHash(buf) };
  if (isBinary(buf)) return { path: p, content: '', totalLines: 0, startLine: 1, endLine: 0, binary: true, ...state };
  const starts = lineStarts(buf);
  const total = starts.length;
  const first = Math.min(startLine, total + 1);
  const last = Math.min(endLine, total);
  const from = first <= total ? starts[first - 1] : buf.length;
  const to = last < total ? starts[last] : buf.length;
  const bytes = Math.max(0, to - from);
  if (bytes > maxBytes) {
    throw new ShadowError(
      'INVALID_ARGUMENT',
      ranged
        ? `lines ${first}-${last} of ${p} are ${bytes} bytes, more than maxBytes (${maxBytes}); read a smaller line range`
        : `${p} is ${buf.length} bytes (${total} lines), more than maxBytes (${maxBytes}); read it in parts with startLine and endLine`,
    );
  }
  return {
    path: p,
    content: buf.toString('utf8', from, from + bytes),
    totalLines: total,
    startLine: first,
    endLine: last,
    binary: false,
    ...state,
  };
}

// ---------------------------------------------------------------------------------------------
// writeText
// ---------------------------------------------------------------------------------------------
// The single native jobs behind writeText and editText: each is one Overlay::updateFile, so
// nothing else changes the file (another tool call, a program writing through the mount)
// between what it looks at and what it writes.

async function fileJob<T extends { status: string }>(
  layer: Layer,
  p: string,
  what: string,
  fn: (n: NativeShadow) => Promise<T>,
): Promise<T> {
  return layer.fileJob(p, what, fn);
}

function checkExpectation(expect: unknown): FileExpectation | undefined {
  if (expect === undefined || expect === null) return undefined;
  if (typeof expect !== 'object')
    throw new ShadowError('INVALID_ARGUMENT', `expect must be an object ({ exists, size, mtimeMs, hash }), got ${typeof expect}`);
  const e = expect as Record<string, unknown>;
  const out: FileExpectation = {};
  for (const k of Object.keys(e))
    if (!['exists', 'size', 'mtimeMs', 'hash'].includes(k))
      throw new ShadowError('INVALID_ARGUMENT', `expect has no field ${JSON.stringify(k)}`);
  if (e.exists !== undefined) out.exists = boolOpt('expect.exists', e.exists);
  if (e.size !== undefined) out.size = intOpt('expect.size', e.size, 0, 0, Number.MAX_SAFE_INTEGER);
  if (e.mtimeMs !== undefined) {
    if (typeof e.mtimeMs !== 'number' || !Number.isFinite(e.mtimeMs))
      throw new ShadowError('INVALID_ARGUMENT', `expect.mtimeMs must be a number, got ${JSON.stringify(e.mtimeMs)}`);
    out.mtimeMs = e.mtimeMs;
  }
  if (e.hash !== undefined) {
    if (typeof e.hash !== 'string' || !/^[0-9a-f]{16}$/.test(e.hash))
      throw new ShadowError('INVALID_ARGUMENT', `expect.hash must be 16 hex digits (contentHash), got ${JSON.stringify(e.hash)}`);
    out.hash = e.hash;
  }
  return out;
}

function conflictError(p: string, r: NativeConflict): ShadowError {
  return new ShadowError(
    'CONFLICT',
    `${p} is not what the caller saw (${r.reason}); nothing was written: read it again and redo the change on what it holds now`,
  );
}

/** The errors of a native file job that name what is at the path, worded for a tool call. */
async function explainNotFile(layer: Layer, p: string, err: unknown, verb: string): Promise<never> {
  if (err instanceof ShadowError) {
    if (err.code === 'IS_DIRECTORY') throw new ShadowError('IS_DIRECTORY', `${p} is a directory; ${verb}`, { cause: err });
    if (err.code === 'PATH_THROUGH_SYMLINK' || (err.code === 'INVALID_ARGUMENT' && err.errno !== undefined)) {
      const st = await statOrNull(layer, p).catch(() => null);
      if (st) await checkRegularFile(layer, p, st.type);
    }
  }
  throw err;
}

/**
 * Writes a whole text file into the layer, creating missing parent directories, in one native
 * job with its mode: an existing file keeps its permission bits unless `mode` is given (a new
 * one gets `mode` or 0o644). A directory is never written over (IS_DIRECTORY), nor is anything
 * through a symlink. With `expect`, the file is written only if it is still what the caller saw
 * (size, mtimeMs, content hash, or absent with exists: false); else CONFLICT and nothing is
 * written. No other change of the file lands between that check and the write.
 */
export async function writeText(
  layer: Layer,
  rel: string,
  content: string,
  opts: { mode?: number; expect?: FileExpectation } = {},
): Promise<{ path: string; bytes: number; created: boolean; hash?: string; mtimeMs?: number }> {
  const p = normalizeRelPath(rel);
  stringArg('content', content);
  const mode = opts.mode === undefined ? null : intOpt('mode', opts.mode, 0, 0, 0o7777);
  const expect = checkExpectation(opts.expect);
  const data = Buffer.from(content, 'utf8');
  const r = await fileJob(layer, p, `write ${p}`, (n) =>
    n.writeFile(layer.agentId, p, data, mode, process.getuid?.() ?? 0, process.getgid?.() ?? 0, expect ?? null),
  ).catch((err) => explainNotFile(layer, p, err, 'a file cannot be written over it'));
  if (r.status === 'conflict') throw conflictError(p, r);
  const out: { path: string; bytes: number; created: boolean; hash?: string; mtimeMs?: number } = {
    path: p,
    bytes: data.length,
    created: r.created,
  };
  // The state a next stat-then-write can name, for callers that ask with a precondition.
  if (expect) Object.assign(out, { hash: r.hash, mtimeMs: r.mtimeMs });
  return out;
}

// ---------------------------------------------------------------------------------------------
// editText

/** `s` without whitespace, and for each character left, its offset in `s`. */
function squeeze(s: string): { text: string; at: number[] } {
  let text = '';
  const at: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (!/\s/.test(s[i])) {
      text += s[i];
      at.push(i);
    }
  }
  return { text, at };
}

/**
 * Replaces the exact text `oldText` with `newText` in one file of the layer: it must occur
 * once, or `replaceAll` must be set. Nothing is written when it fails: NO_MATCH (saying when
 * the text is there but with other whitespace), AMBIGUOUS_MATCH (how often and on which
 * lines). The file keeps its mode. One native job: the file is read, edited and written with
 * no other change of it in between (so concurrent edits never lose one another's changes);
 * with `expect`, only if it is still what the caller saw (else CONFLICT).
 */
export async function editText(
  layer: Layer,
  rel: string,
  oldText: string,
  newText: string,
  opts: { replaceAll?: boolean; expect?: FileExpectation } = {},
): Promise<{ path: string; replacements: number }> {
  const p = normalizeRelPath(rel);
  stringArg('oldText', oldText, { nonEmpty: true });
  stringArg('newText', newText);
  const replaceAll = boolOpt('replaceAll', opts.replaceAll);
  const expect = checkExpectation(opts.expect);
  const r = await fileJob(layer, p, `edit ${p}`, (n) =>
    n.editFile(layer.agentId, p, [{ oldText, newText, replaceAll }], MAX_FILE_BYTES, expect ?? null),
  ).catch((err) => explainNotFile(layer, p, err, 'name a file to edit'));
  switch (r.status) {
    case 'written':
      return { path: p, replacements: r.replacements[0] };
    case 'conflict':
      throw conflictError(p, r);
    case 'too-large':
      throw tooLarge(p, r.size);
    case 'binary':
      throw new ShadowError('INVALID_ARGUMENT', `${p} is a binary file; it cannot be edited as text`);
    case 'not-utf8':
      throw new ShadowError('INVALID_ARGUMENT', `${p} is not valid UTF-8; editing it as text would change bytes it does not mean to`);
    case 'ambiguous': {
      const shown = r.lines.slice(0, 20).join(', ') + (r.count > 20 ? ', ...' : '');
      throw new ShadowError(
        'AMBIGUOUS_MATCH',
        `the text to replace occurs ${r.count} times in ${p} (lines ${shown}); include more of the surrounding text to pick one, or set replaceAll`,
      );
    }
    default:
      throw await noMatchError(layer, p, oldText);
  }
}

/** NO_MATCH, saying where the text occurs when whitespace is ignored (read again: a hint only). */
async function noMatchError(layer: Layer, p: string, oldText: string): Promise<ShadowError> {
  let hint = '';
  const want = squeeze(oldText).text;
  if (want !== '') {
    const text = await layer
      .readFile(p)
      .then((b) => b.toString('utf8'))
      .catch(() => '');
    const have = squeeze(text);
    const i = have.text.indexOf(want);
    if (i >= 0) {
      const [line] = lineNumbers(text, [have.at[i]]);
      hint = ` It does occur at line ${line} when whitespace is ignored: the whitespace differs (indentation, tabs or spaces, line breaks); copy the text exactly as the file has it.`;
    }
  }
  return new ShadowError(
    'NO_MATCH',
    `the text to replace does not occur in ${p}.${hint || ' Read the file again and copy the text exactly.'}`,
  );
}

// The agent file tools: read, write, edit, list, glob and grep over the tree as ONE agent's
// layer shows it, through the Layer API only. Many agents share one mount whose active layer
// changes under them, so these never look at the mount (nor at the folder on disk): agent A's
// tools see A's added, changed and deleted files while another agent's layer is active.
// Pure functions of a Layer; the daemon and MCP wiring live elsewhere. Every path argument is
// checked with normalizeRelPath, every answer is bounded, and walks come back in path order.
import picomatch from 'picomatch';
import { Worker } from 'worker_threads';
import { ShadowError } from '../errors';
import { normalizeRelPath } from '../paths';
import { GREP_DEFAULT_TIMEOUT_MS, GREP_MAX_TIMEOUT_MS, LAYER_READ_MAX_BYTES } from '../protocol/methods';
import { addon, type FileExpectation, type NativeConflict, type NativeShadow } from '../native';
export type { FileExpectation } from '../native';
import type { Layer } from '../shadow';
import { isIgnored, joinRel, orderedMap, planWalk, walk, WalkEntry } from './walk';

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
/** grep passes over larger files (generated bundles, data) rather than hold them. */
export const GREP_MAX_FILE_BYTES = 8 * 1024 * 1024;
/** Lines grep returns are cut to this many characters. */
export const MAX_LINE_CHARS = 500;
/** Like git: a NUL byte in the first this-many bytes makes a file binary. */
const BINARY_PROBE = 8000;
const DEFAULT_LIMIT = 1000;
const MAX_LIMIT = 100_000;
const DEFAULT_MAX_MATCHES = 500;
const MAX_MATCHES = 10_000;
const MAX_CONTEXT = 50;
/** How long a grep's regular expression may run in all (see GrepOptions.timeoutMs). */
export const DEFAULT_GREP_TIMEOUT_MS = GREP_DEFAULT_TIMEOUT_MS;
const MAX_GREP_TIMEOUT_MS = GREP_MAX_TIMEOUT_MS;
/** Files grep reads (and stats list makes) at the same time. */
const CONCURRENCY = 8;

// ---------------------------------------------------------------------------------------------
// Argument checks: these functions are called with what a model sent, so nothing is assumed.

function intOpt(name: string, value: unknown, def: number, min: number, max: number): number {
  if (value === undefined || value === null) return def;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
    throw new ShadowError('INVALID_ARGUMENT', `${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return value;
}

function boolOpt(name: string, value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw new ShadowError('INVALID_ARGUMENT', `${name} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

function stringArg(name: string, value: unknown, { nonEmpty = false } = {}): string {
  if (typeof value !== 'string') throw new ShadowError('INVALID_ARGUMENT', `${name} must be a string, got ${typeof value}`);
  if (nonEmpty && value === '') throw new ShadowError('INVALID_ARGUMENT', `${name} must not be empty`);
  return value;
}

function isBinary(buf: Buffer): boolean {
  return buf.subarray(0, BINARY_PROBE).includes(0);
}

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

/** The file's lines without their line endings ("\n" or "\r\n"). */
function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
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

/** `rel`'s type and mode as the layer shows it, or null when nothing is there. */
async function statOrNull(layer: Layer, rel: string): Promise<{ type: string; mode: number; size: number } | null> {
  try {
    return await layer.stat(rel);
  } catch (err) {
    if (err instanceof ShadowError && err.code === 'NOT_FOUND') return null;
    throw err;
  }
}

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

// ---------------------------------------------------------------------------------------------
// list

export interface ListEntry {
  path: string;
  type: string;
  /** Bytes, for files. */
  size?: number;
}

/** Adds each file's size (stats made a few at a time, in order). */
async function withSizes(layer: Layer, entries: { path: string; type: string }[]): Promise<ListEntry[]> {
  async function* items(): AsyncGenerator<{ path: string; type: string }> {
    yield* entries;
  }
  const out: ListEntry[] = [];
  const sized = orderedMap(
    items(),
    async (e): Promise<ListEntry> => {
      if (e.type !== 'file') return { path: e.path, type: e.type };
      const st = await statOrNull(layer, e.path);
      // Gone since it was listed: list it as seen, without a size.
      return st === null ? { path: e.path, type: e.type } : { path: e.path, type: e.type, size: st.size };
    },
    CONCURRENCY,
  );
  for await (const e of sized) out.push(e);
  return out;
}

/**
 * Lists a directory as the layer shows it ('' for the root), or with `recursive` everything
 * under it, in path order; symlinks are listed, never followed. Unless `includeIgnored`, .git
 * and what .gitignore files exclude are left out (and not entered), except that a directory
 * that is itself ignored (named on purpose) shows all it holds. Naming a file lists it alone.
 * At most `limit` entries (default 1000), else truncated.
 */
export async function list(
  layer: Layer,
  rel: string,
  opts: { recursive?: boolean; includeIgnored?: boolean; limit?: number } = {},
): Promise<{ entries: ListEntry[]; truncated: boolean }> {
  const p = normalizeRelPath(rel, { allowRoot: true });
  const recursive = boolOpt('recursive', opts.recursive);
  const includeIgnored = boolOpt('includeIgnored', opts.includeIgnored);
  const limit = intOpt('limit', opts.limit, DEFAULT_LIMIT, 1, MAX_LIMIT);
  const st = await layer.stat(p);
  if (st.type !== 'directory') {
    return { entries: [st.type === 'file' ? { path: p, type: st.type, size: st.size } : { path: p, type: st.type }], truncated: false };
  }
  const plan = await planWalk(layer, p, includeIgnored);
  const found: WalkEntry[] = [];
  let truncated = false;
  for await (const e of walk(layer, plan, { recursive })) {
    if (found.length === limit) {
      truncated = true;
      break;
    }
    found.push(e);
  }
  return { entries: await withSizes(layer, found), truncated };
}

// ---------------------------------------------------------------------------------------------
// glob

/** Checks a glob pattern: relative, never climbing out with "..". Returns it without a leading "./". */
function checkPattern(pattern: unknown): string {
  let pat = stringArg('pattern', pattern, { nonEmpty: true });
  while (pat.startsWith('./')) pat = pat.slice(2);
  const body = pat.startsWith('!') ? pat.slice(1) : pat;
  if (body.startsWith('/') || /^[A-Za-z]:/.test(body))
    throw new ShadowError('INVALID_PATH', `the pattern must be relative to the shadow root (or cwd), got ${JSON.stringify(pattern)}`);
  if (body.split('/').includes('..'))
    throw new ShadowError('INVALID_PATH', `the pattern must not contain "..": ${JSON.stringify(pattern)}`);
  if (pat === '' || body.includes('\0')) throw new ShadowError('INVALID_ARGUMENT', `not a usable pattern: ${JSON.stringify(pattern)}`);
  return pat;
}

/** Hidden files match like any other (.git and ignored files are left out by the walk instead). */
const PICOMATCH_OPTIONS = { dot: true } as const;

function relativeTo(dir: string, p: string): string {
  return dir === '' ? p : p.slice(dir.length + 1);
}

/**
 * Paths (files, directories, symlinks) that match a glob, as the layer shows the tree, in
 * path order. The pattern is matched against paths relative to `cwd` (default the root;
 * picomatch syntax: "**", "*", "{a,b}", ...); answers are relative to the root. Hidden files
 * match "*". Unless `includeIgnored`, .git and what .gitignore files exclude are left out,
 * except inside a directory named on purpose (cwd, or the pattern's leading directories
 * without wildcards, e.g. "node_modules/pkg/*.js"). The walk starts at those leading
 * directories and goes no deeper than the pattern can match. A pattern without wildcards
 * is a path: there or not. At most `limit` paths (default 1000), else truncated.
 */
export async function glob(
  layer: Layer,
  pattern: string,
  opts: { cwd?: string; includeIgnored?: boolean; limit?: number } = {},
): Promise<{ paths: string[]; truncated: boolean }> {
  const pat = checkPattern(pattern);
  const cwd = normalizeRelPath(opts.cwd ?? '', { allowRoot: true });
  const includeIgnored = boolOpt('includeIgnored', opts.includeIgnored);
  const limit = intOpt('limit', opts.limit, DEFAULT_LIMIT, 1, MAX_LIMIT);
  const cwdStat = await layer.stat(cwd);
  if (cwdStat.type !== 'directory') throw new ShadowError('INVALID_ARGUMENT', `cwd ${cwd} is not a directory`);
  let isMatch: (p: string) => boolean;
  try {
    isMatch = picomatch(pat, PICOMATCH_OPTIONS);
    isMatch('x'); // picomatch compiles lazily: a pattern too big for a RegExp fails here, not later
  } catch (err) {
    throw new ShadowError('INVALID_ARGUMENT', `invalid glob ${JSON.stringify(pat)}: ${(err as Error).message}`);
  }
  const scan = picomatch.scan(pat);
  if (!scan.isGlob && !scan.negated) {
    // A plain path: it is there or not.
    let literal: string;
    try {
      literal = joinRel(cwd, normalizeRelPath(pat));
    } catch {
      return { paths: [], truncated: false };
    }
    const st = await statOrNull(layer, literal);
    if (st === null || (!includeIgnored && (await isIgnored(layer, literal, st.type === 'directory'))))
      return { paths: [], truncated: false };
    return { paths: [literal], truncated: false };
  }
  // Start below the pattern's fixed directories; bound the depth unless "**" (or a part that may hold "/") is in it.
  let base = '';
  if (!scan.negated) {
    try {
      base = normalizeRelPath(scan.base, { allowRoot: true });
    } catch {
      base = '';
    }
  }
  const rest = scan.negated ? pat.slice(1) : scan.glob;
  const unbounded = scan.negated || rest.includes('**') || scan.isExtglob || scan.isBrace;
  const maxDepth = unbounded ? Infinity : rest.split('/').length;
  const start = joinRel(cwd, base);
  if (start !== cwd) {
    const st = await statOrNull(layer, start);
    if (st === null || st.type !== 'directory') return { paths: [], truncated: false };
  }
  const plan = await planWalk(layer, start, includeIgnored);
  const paths: string[] = [];
  let truncated = false;
  for await (const e of walk(layer, plan, { maxDepth })) {
    if (!isMatch(relativeTo(cwd, e.path))) continue;
    if (paths.length === limit) {
      truncated = true;
      break;
    }
    paths.push(e.path);
  }
  return { paths, truncated };
}

// ---------------------------------------------------------------------------------------------
// grep

export interface GrepMatch {
  path: string;
  /** 1-based. */
  line: number;
  /** The matching line, cut to 500 characters around the match. */
  text: string;
  /** Up to `context` lines before and after, when context was asked for. */
  before?: string[];
  after?: string[];
}

export interface GrepOptions {
  /** A file or directory to search ('' or absent: the root). */
  path?: string;
  /** Only files whose path (relative to `path`) matches this glob; a glob without "/" is matched against the file name. */
  glob?: string;
  ignoreCase?: boolean;
  /** The pattern is plain text, not a regular expression. */
  fixedStrings?: boolean;
  /** Lines of context before and after each match (0 to 50). */
  context?: number;
  includeIgnored?: boolean;
  /** At most this many matching lines (default 500), else truncated. */
  maxMatches?: number;
  /**
   * How long the regular expression may run over all the files, in milliseconds (default
   * 10000): past it the search stops with TIMEOUT. It runs on a worker thread, never the caller's.
   */
  timeoutMs?: number;
}

function isLowSurrogate(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  return i > 0 && c >= 0xdc00 && c <= 0xdfff;
}

/** Keeps the end of a slice off the middle of a surrogate pair (by moving it back). */
function safeEnd(s: string, i: number): number {
  return isLowSurrogate(s, i) ? i - 1 : i;
}

/** Keeps the start of a slice off the middle of a surrogate pair (by moving it on). */
function safeStart(s: string, i: number): number {
  return isLowSurrogate(s, i) ? i + 1 : i;
}

/** `line` cut to MAX_LINE_CHARS, keeping the text from shortly before offset `at` in view; "…" marks a cut. */
export function clipLine(line: string, at = 0): string {
  if (line.length <= MAX_LINE_CHARS) return line;
  if (at <= 100) return line.slice(0, safeEnd(line, MAX_LINE_CHARS - 1)) + '…';
  let start = Math.min(at - 100, line.length - (MAX_LINE_CHARS - 1));
  start = safeStart(line, start);
  if (start + MAX_LINE_CHARS - 1 >= line.length) return '…' + line.slice(start);
  return '…' + line.slice(start, safeEnd(line, start + MAX_LINE_CHARS - 2)) + '…';
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// A JavaScript regular expression can take exponential time (`^(a+)+$` over "aaa…a!"), and what
// grep is given comes from callers (a model, over MCP): it runs on a worker thread under a
// deadline, and a worker past it is terminated. Fixed strings (linear) stay on this thread.
const MATCHER_SOURCE = `
const { parentPort, workerData } = require('worker_threads');
const re = new RegExp(workerData.source, workerData.flags);
parentPort.on('message', (m) => {
  const out = [];
  for (let i = 0; i < m.lines.length && out.length < 2 * m.limit; i++) {
    const r = re.exec(m.lines[i]);
    if (r !== null) out.push(i, r.index);
  }
  parentPort.postMessage(out);
});
`;

/** Finds, in `lines`, the first `limit` matching lines: [line index, match offset] pairs, flattened. */
interface LineMatcher {
  match(lines: string[], limit: number): Promise<number[]>;
  close(): Promise<void>;
}

function mainThreadMatcher(re: RegExp): LineMatcher {
  return {
    match: (lines, limit) => {
      const out: number[] = [];
      for (let i = 0; i < lines.length && out.length < 2 * limit; i++) {
        const r = re.exec(lines[i]);
        if (r !== null) out.push(i, r.index);
      }
      return Promise.resolve(out);
    },
    close: () => Promise.resolve(),
  };
}

/** A matcher on a worker thread that may run `budgetMs` in all (the time it spends matching). */
function workerMatcher(re: RegExp, pattern: string, budgetMs: number): LineMatcher {
  let worker: Worker | undefined;
  let left = budgetMs;
  const timedOut = (): ShadowError =>
    new ShadowError(
      'TIMEOUT',
      `grep stopped: the regular expression ${JSON.stringify(pattern)} ran for more than ${budgetMs} ms (a pattern like (a+)+ can take exponential time); simplify it, use fixedStrings, search fewer files, or give a longer timeoutMs`,
    );
  return {
    match: (lines, limit) => {
      if (left <= 0) return Promise.reject(timedOut());
      if (!worker) {
        worker = new Worker(MATCHER_SOURCE, { eval: true, workerData: { source: re.source, flags: re.flags } });
        // Between calls nobody else listens: an error then must not become an uncaught one.
        worker.on('error', () => undefined);
      }
      const w = worker;
      const started = Date.now();
      return new Promise<number[]>((resolve, reject) => {
        const done = (): void => {
          clearTimeout(timer);
          w.off('message', onMessage);
          w.off('error', onError);
          w.off('exit', onExit);
          left -= Date.now() - started;
        };
        const onMessage = (out: number[]): void => {
          done();
          resolve(out);
        };
        const onError = (err: Error): void => {
          done();
          reject(new ShadowError('INTERNAL', `grep's matcher failed: ${err.message}`, { cause: err }));
        };
        const onExit = (): void => {
          done();
          reject(new ShadowError('INTERNAL', "grep's matcher stopped unexpectedly"));
        };
        const timer = setTimeout(() => {
          done();
          left = 0;
          worker = undefined;
          void w.terminate();
          reject(timedOut());
        }, left);
        w.on('message', onMessage);
        w.once('error', onError);
        w.once('exit', onExit);
        w.postMessage({ lines, limit });
      });
    },
    close: async () => {
      const w = worker;
      worker = undefined;
      if (w) await w.terminate();
    },
  };
}

type Scanned = { kind: 'text'; path: string; text: string } | { kind: 'skipped' };

/**
 * Searches files as the layer shows them for a JavaScript regular expression (or, with
 * fixedStrings, plain text), line by line, in path order. Binary files and files over 8 MiB
 * are passed over; .git and what .gitignore files exclude too, unless includeIgnored or
 * `path` names an ignored directory or a file (named on purpose, searched as a whole). One
 * match per matching line, cut to 500 characters, with `context` lines around it if asked.
 * At most `maxMatches` (default 500), else truncated. filesSearched counts the text files read.
 */
export async function grep(
  layer: Layer,
  pattern: string,
  opts: GrepOptions = {},
): Promise<{ matches: GrepMatch[]; filesSearched: number; truncated: boolean }> {
  stringArg('pattern', pattern, { nonEmpty: true });
  const ignoreCase = boolOpt('ignoreCase', opts.ignoreCase);
  const fixed = boolOpt('fixedStrings', opts.fixedStrings);
  const includeIgnored = boolOpt('includeIgnored', opts.includeIgnored);
  const context = intOpt('context', opts.context, 0, 0, MAX_CONTEXT);
  const maxMatches = intOpt('maxMatches', opts.maxMatches, DEFAULT_MAX_MATCHES, 1, MAX_MATCHES);
  const timeoutMs = intOpt('timeoutMs', opts.timeoutMs, DEFAULT_GREP_TIMEOUT_MS, 1, MAX_GREP_TIMEOUT_MS);
  let re: RegExp;
  try {
    re = new RegExp(fixed ? escapeRegExp(pattern) : pattern, ignoreCase ? 'i' : '');
    re.test(''); // V8 compiles on first use: a pattern too big for it fails here, not mid-search
  } catch (err) {
    throw new ShadowError('INVALID_ARGUMENT', `invalid regular expression ${JSON.stringify(pattern)}: ${(err as Error).message}`);
  }
  const root = normalizeRelPath(opts.path ?? '', { allowRoot: true });
  let fileFilter: (p: string) => boolean = () => true;
  if (opts.glob !== undefined && opts.glob !== null) {
    const g = checkPattern(opts.glob);
    let m: (p: string) => boolean;
    try {
      m = picomatch(g, { ...PICOMATCH_OPTIONS, basename: !g.includes('/') });
      m('x'); // compiled lazily: make a pattern too big for a RegExp fail here, as INVALID_ARGUMENT
    } catch (err) {
      throw new ShadowError('INVALID_ARGUMENT', `invalid glob ${JSON.stringify(g)}: ${(err as Error).message}`);
    }
    fileFilter = (p) => m(relativeTo(root, p));
  }

  const st = await layer.stat(root);
  async function* files(): AsyncGenerator<string> {
    if (st.type === 'file') {
      yield root; // named on purpose: searched whatever the ignore rules or the glob say
      return;
    }
    if (st.type !== 'directory') return;
    for await (const e of walk(layer, await planWalk(layer, root, includeIgnored))) {
      if (e.type === 'file' && fileFilter(e.path)) yield e.path;
    }
  }
  const load = async (p: string): Promise<Scanned> => {
    try {
      const fst = await layer.stat(p);
      if (fst.type !== 'file' || fst.size > GREP_MAX_FILE_BYTES) return { kind: 'skipped' };
      const buf = await layer.readFile(p);
      if (buf.length > GREP_MAX_FILE_BYTES || isBinary(buf)) return { kind: 'skipped' };
      return { kind: 'text', path: p, text: buf.toString('utf8') };
    } catch (err) {
      // Changed or gone since the walk saw it.
      if (err instanceof ShadowError && ['NOT_FOUND', 'IS_DIRECTORY', 'NOT_A_DIRECTORY', 'PATH_THROUGH_SYMLINK'].includes(err.code))
        return { kind: 'skipped' };
      throw err;
    }
  };

  const matches: GrepMatch[] = [];
  let filesSearched = 0;
  let truncated = false;
  const matcher = fixed ? mainThreadMatcher(re) : workerMatcher(re, pattern, timeoutMs);
  try {
    scan: for await (const f of orderedMap(files(), load, CONCURRENCY)) {
      if (f.kind !== 'text') continue;
      filesSearched++;
      const lines = splitLines(f.text);
      // One more than fits: finding it is what marks the answer truncated.
      const found = await matcher.match(lines, maxMatches - matches.length + 1);
      for (let k = 0; k < found.length; k += 2) {
        const i = found[k];
        if (matches.length === maxMatches) {
          truncated = true;
          break scan;
        }
        const hit: GrepMatch = { path: f.path, line: i + 1, text: clipLine(lines[i], found[k + 1]) };
        if (context > 0) {
          hit.before = lines.slice(Math.max(0, i - context), i).map((l) => clipLine(l));
          hit.after = lines.slice(i + 1, i + 1 + context).map((l) => clipLine(l));
        }
        matches.push(hit);
      }
    }
  } finally {
    await matcher.close();
  }
  return { matches, filesSearched, truncated };
}

// grep: search the files ONE agent's layer shows for a regular expression (or plain text), line
// by line in path order. The expression runs on a worker thread under a deadline, since a
// pattern a model sends can take exponential time.
import { Worker } from 'worker_threads';
import { ShadowError } from '../../common/errors';
import { compileGlob } from '../../common/glob-match';
import { normalizeRelPath } from '../../common/paths';
import { GREP_DEFAULT_TIMEOUT_MS, GREP_MAX_TIMEOUT_MS } from '../../protocol/methods';
import type { Layer } from '../../shadow';
import { orderedMap, planWalk, walk } from '../walk';
import { boolOpt, checkPattern, intOpt, relativeTo, stringArg } from './args';
import { CONCURRENCY, isBinary } from './probe';

/** grep passes over larger files (generated bundles, data) rather than hold them. */
export const GREP_MAX_FILE_BYTES = 8 * 1024 * 1024;
/** Lines grep returns are cut to this many characters. */
export const MAX_LINE_CHARS = 500;
const DEFAULT_MAX_MATCHES = 500;
const MAX_MATCHES = 10_000;
const MAX_CONTEXT = 50;
/** How long a grep's regular expression may run in all (see GrepOptions.timeoutMs). */
export const DEFAULT_GREP_TIMEOUT_MS = GREP_DEFAULT_TIMEOUT_MS;
const MAX_GREP_TIMEOUT_MS = GREP_MAX_TIMEOUT_MS;

/** The file's lines without their line endings ("\n" or "\r\n"). */
function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
} // ---------------------------------------------------------------------------------------------
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
    // Matched on this thread, so by our own matcher, whose time is bounded whatever the glob
    // (src/common/glob-match.ts); a glob without "/" is matched against the file's name.
    const m = compileGlob(g, { basename: !g.includes('/') });
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

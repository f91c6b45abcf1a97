// Walks one agent's layer as that layer shows the tree, for the agent file tools (files.ts):
// through Layer.readdir only (never the mount, never the folder on disk), so the walk sees the
// agent's added and deleted files whether or not its layer is the one the shared mount shows.
// Names come sorted, symlinks are reported but never followed, and .git plus whatever the
// .gitignore files (as the layer shows them) exclude is pruned while walking, so an ignored
// node_modules is never entered.
import ignore from 'ignore';
import { ShadowError } from '../common/errors';
import { platform } from '../platform';
import type { Layer } from '../shadow';

export type EntryType = 'file' | 'directory' | 'symlink' | 'special';

export interface WalkEntry {
  /** Relative to the shadow root. */
  path: string;
  type: EntryType;
  /** 1 for an entry of the directory the walk started in. */
  depth: number;
}

/** Joins a directory ('' for the root) and a relative path ('' for the directory itself). */
export function joinRel(dir: string, name: string): string {
  return dir === '' ? name : name === '' ? dir : `${dir}/${name}`;
}

/** Code-unit order: the same on every machine and locale. */
export function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// Git's default on Linux is to match case-sensitively; on Windows it folds case.
const IGNORE_CASE = platform.caseInsensitiveNames;

/** Glob characters a directory name is escaped of before it prefixes a nested .gitignore's pattern. */
function escapeDir(dir: string): string {
  const e = dir.replace(/[\\*?[\]]/g, '\\$&');
  // A leading "#" would make the line a comment, a leading "!" a negation.
  return /^[#!]/.test(e) ? `\\${e}` : e;
}

/**
 * Rewrites one line of the .gitignore in `dir` so that it means the same relative to the root:
 * a pattern with a slash at its start or middle is anchored to `dir`, any other matches at any
 * depth below `dir` (the rules of gitignore(5)). Null for blank lines and comments.
 */
export function rebaseRule(line: string, dir: string): string | null {
  if (dir === '') return line;
  let body = line.replace(/\r$/, '');
  if (body.startsWith('#')) return null;
  let neg = '';
  if (body.startsWith('!')) {
    neg = '!';
    body = body.slice(1);
  }
  // Trailing spaces are dropped unless escaped with a backslash (an approximation of git's rule
  // that is exact for every line without a run of backslashes before the spaces).
  body = body.replace(/(?<!\\) +$/, '');
  const core = body.endsWith('/') ? body.slice(0, -1) : body;
  if (core.replace(/^\/+/, '') === '') return null;
  const anchored = core.includes('/');
  return anchored ? `${neg}${escapeDir(dir)}/${body.replace(/^\/+/, '')}` : `${neg}${escapeDir(dir)}/**/${body}`;
}

/**
 * The .gitignore rules that apply inside one directory: those of every .gitignore from the root
 * down to it, rewritten relative to the root and in that order, so a deeper file's rules come
 * later and win, as in git. One `ignore` instance holds them all, which also gives git's rule
 * that nothing under an excluded directory can be re-included.
 */
export class IgnoreRules {
  private constructor(private readonly ig: ReturnType<typeof ignore>) {}

  static empty(): IgnoreRules {
    return new IgnoreRules(ignore({ ignorecase: IGNORE_CASE }));
  }

  /** These rules plus those of the .gitignore in `dir`, as text. */
  withFile(dir: string, text: string): IgnoreRules {
    const lines: string[] = [];
    for (const line of text.replace(/^\uFEFF/, '').split('\n')) {
      const r = rebaseRule(line, dir);
      if (r !== null) lines.push(r);
    }
    if (lines.length === 0) return this;
    return new IgnoreRules(ignore({ ignorecase: IGNORE_CASE }).add(this.ig).add(lines));
  }

  /** Whether `rel` (relative to the root; `isDir` for a directory) is excluded, by its own rule or a parent's. */
  ignores(rel: string, isDir: boolean): boolean {
    return this.ig.ignores(isDir ? `${rel}/` : rel);
  }
}

/** Reads the .gitignore in `dir` as the layer shows it; null when there is none that is a file. */
async function readGitignore(layer: Layer, dir: string): Promise<string | null> {
  try {
    return (await layer.readFile(joinRel(dir, '.gitignore'))).toString('utf8');
  } catch (err) {
    // Missing, a directory, or a symlink (git does not follow one either): no rules.
    if (err instanceof ShadowError && ['NOT_FOUND', 'IS_DIRECTORY', 'PATH_THROUGH_SYMLINK', 'NOT_A_DIRECTORY'].includes(err.code))
      return null;
    throw err;
  }
}

/** Where a walk starts and what it leaves out. */
export interface WalkPlan {
  /** The directory to walk ('' for the root). */
  start: string;
  /** The rules in force in `start`'s parent (start's own .gitignore is read by the walk); null: ignore nothing. */
  rules: IgnoreRules | null;
  /** Leave out entries named .git. */
  skipGit: boolean;
}

/**
 * Follows the .gitignore files from the root down to the directory `rel`: the rules in force
 * in its parent, and whether `rel` (or a directory above it) is left out on the way.
 */
async function ancestry(layer: Layer, rel: string): Promise<{ rules: IgnoreRules; out: boolean }> {
  const parts = rel === '' ? [] : rel.split('/');
  let rules = IgnoreRules.empty();
  let dir = '';
  for (let i = 0; i < parts.length; i++) {
    if (parts[i] === '.git') return { rules, out: true };
    const text = await readGitignore(layer, dir);
    if (text !== null) rules = rules.withFile(dir, text);
    dir = joinRel(dir, parts[i]);
    if (rules.ignores(dir, true)) return { rules, out: true };
  }
  return { rules, out: false };
}

/**
 * Decides how to walk the directory `start`: with includeIgnored nothing is left out.
 * Otherwise .git is, and what the .gitignore files say, unless `start` itself lies in .git or
 * in an ignored place: then the caller named it on purpose and sees all of it (but .git).
 */
export async function planWalk(layer: Layer, start: string, includeIgnored: boolean): Promise<WalkPlan> {
  if (includeIgnored) return { start, rules: null, skipGit: false };
  const { rules, out } = await ancestry(layer, start);
  if (out) return { start, rules: null, skipGit: !start.split('/').includes('.git') };
  return { start, rules, skipGit: true };
}

/** Whether a walk of `rel`'s directory (see planWalk) would leave `rel` out. */
export async function isIgnored(layer: Layer, rel: string, isDir: boolean): Promise<boolean> {
  const slash = rel.lastIndexOf('/');
  const dir = slash < 0 ? '' : rel.slice(0, slash);
  const plan = await planWalk(layer, dir, false);
  if (plan.skipGit && rel.slice(slash + 1) === '.git') return true;
  if (plan.rules === null) return false;
  const text = await readGitignore(layer, dir);
  return (text === null ? plan.rules : plan.rules.withFile(dir, text)).ignores(rel, isDir);
}

export interface WalkOptions {
  /** Go into subdirectories (default true). */
  recursive?: boolean;
  /** Entries deeper than this below the start are not visited (1: the start's own entries). */
  maxDepth?: number;
}

/**
 * Yields what lies under plan.start, depth first in path order (each directory's names sorted,
 * a directory right before its contents). Only the directories on the current path are held,
 * so memory stays bounded by depth times directory size whatever the tree; the caller stops
 * whenever it has enough. A directory that vanishes while being walked is skipped.
 */
export async function* walk(layer: Layer, plan: WalkPlan, options: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  const recursive = options.recursive ?? true;
  const maxDepth = options.maxDepth ?? Infinity;
  // Depth first, in path order, with a stack of its own: a generator per directory nested with
  // yield* overflowed the call stack on a tree 3,000 directories deep (review: grep and glob said
  // INTERNAL "Maximum call stack size exceeded"), which an agent's layer may hold.
  interface Level {
    dir: string;
    entries: Awaited<ReturnType<Layer['readdir']>>;
    next: number;
    rules: IgnoreRules | null;
    depth: number;
  }
  const enter = async (dir: string, inherited: IgnoreRules | null, depth: number): Promise<Level | null> => {
    let entries;
    try {
      entries = await layer.readdir(dir);
    } catch (err) {
      if (err instanceof ShadowError && (err.code === 'NOT_FOUND' || err.code === 'NOT_A_DIRECTORY')) return null;
      throw err;
    }
    entries.sort((a, b) => byName(a.name, b.name));
    let rules = inherited;
    if (rules !== null && entries.some((e) => e.name === '.gitignore' && e.type === 'file')) {
      const text = await readGitignore(layer, dir);
      if (text !== null) rules = rules.withFile(dir, text);
    }
    return { dir, entries, next: 0, rules, depth };
  };
  const stack: Level[] = [];
  const top = await enter(plan.start, plan.rules, 1);
  if (top) stack.push(top);
  while (stack.length > 0) {
    const level = stack[stack.length - 1];
    if (level.next >= level.entries.length) {
      stack.pop();
      continue;
    }
    const e = level.entries[level.next++];
    const rel = joinRel(level.dir, e.name);
    const isDir = e.type === 'directory';
    if (plan.skipGit && e.name === '.git') continue;
    if (level.rules !== null && level.rules.ignores(rel, isDir)) continue;
    yield { path: rel, type: e.type, depth: level.depth };
    if (isDir && recursive && level.depth < maxDepth) {
      const below = await enter(rel, level.rules, level.depth + 1);
      if (below) stack.push(below);
    }
  }
}

/**
 * Maps `items` through `fn` with up to `concurrency` calls in flight, yielding the results in
 * the items' order. Stopping early leaves the calls in flight to finish unobserved (their
 * failures are swallowed, never unhandled).
 */
export async function* orderedMap<T, R>(items: AsyncIterable<T>, fn: (item: T) => Promise<R>, concurrency: number): AsyncGenerator<R> {
  const window: Promise<R>[] = [];
  const start = (item: T): void => {
    const p = fn(item);
    p.catch(() => undefined);
    window.push(p);
  };
  for await (const item of items) {
    start(item);
    if (window.length >= concurrency) yield await (window.shift() as Promise<R>);
  }
  while (window.length > 0) yield await (window.shift() as Promise<R>);
}

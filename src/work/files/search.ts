// list and glob: the tree as ONE agent's layer shows it, walked in path order, leaving out .git
// and what .gitignore files exclude unless asked (or a directory is named on purpose).
import { ShadowError } from '../../common/errors';
import { compileGlob } from '../../common/glob-match';
import { normalizeRelPath } from '../../common/paths';
import type { Layer } from '../../shadow';
import { isIgnored, joinRel, orderedMap, planWalk, walk, WalkEntry } from '../walk';
import { boolOpt, checkPattern, intOpt, relativeTo } from './args';
import { CONCURRENCY, statOrNull } from './probe';

const DEFAULT_LIMIT = 1000;
const MAX_LIMIT = 100_000;

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

/**
 * Paths (files, directories, symlinks) that match a glob, as the layer shows the tree, in
 * path order. The pattern is matched against paths relative to `cwd` (default the root;
 * "**", "*", "?", "[a-z]", "{a,b}", "{1..3}", "\\" escapes, a leading "!" to negate; see
 * src/common/glob-match.ts); answers are relative to the root. Hidden files
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
  // Our own matcher (src/common/glob-match.ts): its time is bounded whatever the pattern, where
  // picomatch's backtracking regular expressions could hold the daemon's thread for hours.
  const isMatch = compileGlob(pat);
  const { plan } = isMatch;
  if (plan.literal !== null) {
    // A plain path: it is there or not.
    let literal: string;
    try {
      literal = joinRel(cwd, normalizeRelPath(plan.literal));
    } catch {
      return { paths: [], truncated: false };
    }
    const st = await statOrNull(layer, literal);
    if (st === null || (!includeIgnored && (await isIgnored(layer, literal, st.type === 'directory'))))
      return { paths: [], truncated: false };
    return { paths: [literal], truncated: false };
  }
  // Start below the pattern's fixed directories; bound the depth unless "**" (or a negation) is in it.
  let base = '';
  let maxDepth = Infinity;
  try {
    base = normalizeRelPath(plan.base, { allowRoot: true });
    if (base === plan.base) maxDepth = plan.depth;
  } catch {
    base = ''; // not a usable directory: walk from cwd, unbounded
  }
  if (base !== plan.base) base = '';
  const start = joinRel(cwd, base);
  if (start !== cwd) {
    const st = await statOrNull(layer, start);
    if (st === null || st.type !== 'directory') return { paths: [], truncated: false };
  }
  const walkPlan = await planWalk(layer, start, includeIgnored);
  const paths: string[] = [];
  let truncated = false;
  for await (const e of walk(layer, walkPlan, { maxDepth })) {
    if (!isMatch(relativeTo(cwd, e.path))) continue;
    if (paths.length === limit) {
      truncated = true;
      break;
    }
    paths.push(e.path);
  }
  return { paths, truncated };
}

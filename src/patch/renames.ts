// Rename detection for the patch writer, modelled on git's diffcore-rename: a deleted path and an
// added path become one rename when their contents are identical, or (regular text files only)
// when at least half of the larger file is found in the other one. Similarity is measured like
// git's diffcore-delta: both files are cut into chunks that end at a newline or after 64 bytes,
// and the bytes of the chunks they share count as copied.
import { blobId } from './git-format';

export interface RenameCandidate {
  path: string;
  kind: 'file' | 'symlink';
  data: Buffer;
  /** Whether the content is diffed as text (only text files are paired by similarity). */
  text: boolean;
}

export interface Rename {
  from: string;
  to: string;
  /** git's "similarity index", 0..100; 100 only for identical content. */
  similarity: number;
}

/** git's default -M threshold: half of the larger file must be common. */
const MIN_SIMILARITY = 0.5;

/** Like git's diff.renameLimit: beyond this many deleted x added pairs, only exact renames. */
const MAX_INEXACT_PAIRS = 1000 * 1000;

/** git's diffcore-delta chunk limit: a chunk ends at a newline or after this many bytes. */
const CHUNK_BYTES = 64;

/**
 * Pairs deleted and added paths into renames. `deleted` and `added` must be sorted in path order;
 * the result is deterministic for a given input. Empty files are never paired (any two would
 * match), nor are a file and a symlink.
 */
export function findRenames(deleted: RenameCandidate[], added: RenameCandidate[]): Rename[] {
  const sources = deleted.filter((c) => c.data.length > 0);
  const targets = added.filter((c) => c.data.length > 0);
  const exact = exactRenames(sources, targets);
  const used = new Set(exact.flatMap((r) => [r.from, r.to]));
  const similar = similarRenames(
    sources.filter((c) => !used.has(c.path)),
    targets.filter((c) => !used.has(c.path)),
  );
  return [...exact, ...similar];
}

/** Identical content and kind; among several sources, one with the same file name is preferred. */
function exactRenames(sources: RenameCandidate[], targets: RenameCandidate[]): Rename[] {
  const byContent = new Map<string, RenameCandidate[]>();
  for (const source of sources) {
    const key = `${source.kind}:${blobId(source.data)}`;
    byContent.set(key, [...(byContent.get(key) ?? []), source]);
  }
  const renames: Rename[] = [];
  for (const target of targets) {
    const free = byContent.get(`${target.kind}:${blobId(target.data)}`);
    if (!free || free.length === 0) continue;
    const sameName = free.findIndex((s) => baseName(s.path) === baseName(target.path));
    const [source] = free.splice(sameName >= 0 ? sameName : 0, 1);
    renames.push({ from: source.path, to: target.path, similarity: 100 });
  }
  return renames;
}

/** Pairs by similarity, best pairs first, each path used at most once (git's greedy matching). */
function similarRenames(sources: RenameCandidate[], targets: RenameCandidate[]): Rename[] {
  const textFiles = (c: RenameCandidate): boolean => c.kind === 'file' && c.text;
  const from = sources.filter(textFiles).map((c) => ({ path: c.path, size: c.data.length, chunks: chunkSizes(c.data) }));
  const to = targets.filter(textFiles).map((c) => ({ path: c.path, size: c.data.length, chunks: chunkSizes(c.data) }));
  if (from.length === 0 || to.length === 0 || from.length * to.length > MAX_INEXACT_PAIRS) return [];
  const scored: { from: string; to: string; score: number }[] = [];
  for (const target of to) {
    for (const source of from) {
      const larger = Math.max(source.size, target.size);
      // The size difference alone can rule a pair out, as in git, before comparing chunks.
      if (larger - Math.min(source.size, target.size) > larger * (1 - MIN_SIMILARITY)) continue;
      const score = sharedBytes(source.chunks, target.chunks) / larger;
      if (score >= MIN_SIMILARITY) scored.push({ from: source.path, to: target.path, score });
    }
  }
  // Candidates arrive in (target, source) path order; a stable sort keeps it among equal scores.
  scored.sort((a, b) => b.score - a.score);
  const used = new Set<string>();
  const renames: Rename[] = [];
  for (const pair of scored) {
    if (used.has(pair.from) || used.has(pair.to)) continue;
    used.add(pair.from).add(pair.to);
    // Different content is never shown as 100% (chunks can match in another order).
    renames.push({ from: pair.from, to: pair.to, similarity: Math.min(99, Math.floor(pair.score * 100)) });
  }
  return renames;
}

/** Total bytes per distinct chunk; a CR before LF is left out, as git does for text. */
function chunkSizes(data: Buffer): Map<string, number> {
  const sizes = new Map<string, number>();
  let chunk: number[] = [];
  const close = (): void => {
    const key = String.fromCharCode(...chunk);
    sizes.set(key, (sizes.get(key) ?? 0) + chunk.length);
    chunk = [];
  };
  for (let i = 0; i < data.length; i++) {
    const byte = data[i];
    if (byte === 0x0d && data[i + 1] === 0x0a) continue;
    chunk.push(byte);
    if (byte === 0x0a || chunk.length === CHUNK_BYTES) close();
  }
  if (chunk.length > 0) close();
  return sizes;
}

function sharedBytes(a: Map<string, number>, b: Map<string, number>): number {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  let shared = 0;
  for (const [chunk, size] of small) shared += Math.min(size, large.get(chunk) ?? 0);
  return shared;
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

// The audit trail of a layer (native/core/audit.h, docs/audit-trail.md): what programs did
// through a mount showing the layer, as the native module records it, and the queries over it
// (since a time, paths matching a glob, the newest N). The record lives in the native layer; a
// checkpoint keeps a copy (src/work/checkpoints.ts) and restoring one puts it back.
import * as z from 'zod';
import { ShadowError } from '../common/errors';
import { compileAuditGlob } from '../common/glob-match';
import { AUDIT_OP_NAMES } from '../protocol/audit';

/** What a recorded request did (see docs/audit-trail.md for what each one covers); the
 * protocol's list, so the two cannot drift. */
export const AUDIT_OPS = AUDIT_OP_NAMES;
export type AuditOp = (typeof AUDIT_OPS)[number];

/** One entry of a layer's audit trail. */
export interface AuditEntry {
  /** Numbers the layer's entries, oldest first; never reused (also after entries were dropped). */
  seq: number;
  /** When, in milliseconds since the epoch. */
  timeMs: number;
  op: AuditOp;
  /** open and create: opened for writing. */
  write: boolean;
  /** The requesting process as the kernel named it (0: not known, as on Windows). */
  pid: number;
  /** Its command name, read once per process id (best effort: empty when it was gone, stale when the id was reused). */
  comm: string;
  /** open, create and write: bytes written (through that open; for write, a run of writes without an open the mount saw). */
  bytes: number;
  path: string;
  /** rename: the new name; link: the existing name; symlink: the target; else "". */
  to: string;
}

/** A layer's whole record, as the native module keeps it. */
export interface AuditRecord {
  entries: AuditEntry[];
  /** Entries dropped (oldest first) to keep within the limits, since the record began. */
  dropped: number;
  /** The seq the next entry gets. */
  nextSeq: number;
  maxEntries: number;
  maxBytes: number;
}

/** What to show of a record. */
export interface AuditQuery {
  /** Only entries at or after this time (ms since the epoch). */
  sinceMs?: number;
  /** Only entries whose path (or, for rename and link, other path) matches this glob (`*`, `?`, `**`; without "/": a name at any depth). */
  path?: string;
  /** Only the newest this many of those that match. */
  limit?: number;
  /** Only these ops. */
  ops?: AuditOp[];
}

/** A query's answer. */
export interface AuditResult {
  agent: string;
  entries: AuditEntry[];
  /** Entries that matched the query (more than `entries` when a limit left the older ones out). */
  matched: number;
  /** Entries the layer's record holds now. */
  kept: number;
  /** Entries dropped to keep the record within its limits (the oldest first): they matched or not, they are gone. */
  dropped: number;
  limits: { maxEntries: number; maxBytes: number };
}

/** The default limits of one layer's record (and their environment overrides, read by the daemon). */
export const DEFAULT_AUDIT_MAX_ENTRIES = 10_000;
export const DEFAULT_AUDIT_MAX_BYTES = 2 * 1024 * 1024;

/**
 * The limits of every layer's record the daemon sets (SHADOWFS_AUDIT_MAX_ENTRIES,
 * SHADOWFS_AUDIT_MAX_BYTES, in its environment), or undefined when neither is set.
 */
export function auditLimitsOf(env: NodeJS.ProcessEnv): { maxEntries: number; maxBytes: number } | undefined {
  const read = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < 1)
      throw new ShadowError('INVALID_ARGUMENT', `${name} is a whole number, 1 or more, got ${JSON.stringify(raw)}`);
    return n;
  };
  if (!env.SHADOWFS_AUDIT_MAX_ENTRIES && !env.SHADOWFS_AUDIT_MAX_BYTES) return undefined;
  return {
    maxEntries: read('SHADOWFS_AUDIT_MAX_ENTRIES', DEFAULT_AUDIT_MAX_ENTRIES),
    maxBytes: read('SHADOWFS_AUDIT_MAX_BYTES', DEFAULT_AUDIT_MAX_BYTES),
  };
}

/**
 * A path glob as a test of a whole relative path ("a/b"): `*`, `?`, `**` (followed by "/": any
 * number of directories; elsewhere: anything, across "/", as before), everything else literal;
 * anchored with a "/", else a name at any depth; also what is inside a matching directory. It is
 * matched by src/common/glob-match.ts, whose time is bounded: the RegExp it once was
 * ("[^/]*a[^/]*a…") could hold the daemon's thread for hours over one record.
 */
export function auditGlob(glob: string): (path: string) => boolean {
  if (typeof glob !== 'string' || glob.length === 0 || glob.length > 1024)
    throw new ShadowError('INVALID_ARGUMENT', 'the path glob must be a non-empty string of at most 1024 characters');
  return compileAuditGlob(glob);
}

/** The entries of `record` that `q` asks for, oldest first. */
export function queryAudit(agent: string, record: AuditRecord, q: AuditQuery = {}): AuditResult {
  const matches = q.path === undefined ? undefined : auditGlob(q.path);
  if (q.limit !== undefined && (!Number.isInteger(q.limit) || q.limit < 0))
    throw new ShadowError('INVALID_ARGUMENT', 'limit must be a whole number, 0 or more');
  const ops = q.ops ? new Set(q.ops) : undefined;
  const matched = record.entries.filter(
    (e) =>
      (q.sinceMs === undefined || e.timeMs >= q.sinceMs) &&
      (ops === undefined || ops.has(e.op)) &&
      (matches === undefined || matches(e.path) || (e.op !== 'symlink' && e.to !== '' && matches(e.to))),
  );
  const entries = q.limit === undefined ? matched : matched.slice(Math.max(0, matched.length - q.limit));
  return {
    agent,
    entries,
    matched: matched.length,
    kept: record.entries.length,
    dropped: record.dropped,
    limits: { maxEntries: record.maxEntries, maxBytes: record.maxBytes },
  };
}

/** What loadAudit takes: a record's entries, its count of dropped ones and the seq it hands out next. */
export type AuditState = Pick<AuditRecord, 'entries' | 'dropped' | 'nextSeq'>;

/**
 * The record a layer gets when a checkpoint's record (`saved`) is restored over its own (`now`):
 * the checkpoint's entries, then every entry of `now` the checkpoint does not hold. A restore
 * takes nothing out: an agent may restore its own checkpoints, and would otherwise make what its
 * programs did since vanish from its record (review; also across a new mount or a layer dropped
 * and made again, whose record numbers from its start again).
 *
 * An entry is the checkpoint's when its seq, time, op, process and paths are the same (its byte
 * count may have grown since: `now`'s is taken). When every other entry of `now` is numbered from
 * the checkpoint's next seq on, the record is the checkpoint's own, gone on: seqs and `dropped`
 * continue (what it numbered since and no longer holds counted as dropped). Otherwise it began
 * again after the checkpoint: its entries are numbered on after the checkpoint's, oldest first,
 * and what it dropped is added to the checkpoint's count.
 */
export function restoredAudit(saved: AuditState, now: AuditState): AuditState {
  const key = (e: AuditEntry): string => JSON.stringify([e.seq, e.timeMs, e.op, e.write, e.pid, e.path, e.to]);
  const current = new Map(now.entries.map((e) => [key(e), e]));
  const kept = saved.entries.map((e) => {
    const mine = current.get(key(e));
    current.delete(key(e));
    return mine ?? e;
  });
  const since = [...current.values()];
  if (since.every((e) => e.seq >= saved.nextSeq)) {
    const numberedSince = Math.max(0, now.nextSeq - saved.nextSeq);
    return {
      entries: [...kept, ...since],
      dropped: saved.dropped + Math.max(0, numberedSince - since.length),
      nextSeq: Math.max(saved.nextSeq, now.nextSeq),
    };
  }
  return {
    entries: [...kept, ...since.map((e, i) => ({ ...e, seq: saved.nextSeq + i }))],
    dropped: saved.dropped + now.dropped,
    nextSeq: saved.nextSeq + since.length,
  };
}

/** The shape a saved record must have (a checkpoint's copy is input: checked before it is loaded). */
export const AuditRecordSchema = z.object({
  entries: z.array(
    z.object({
      seq: z.number().int().min(1),
      timeMs: z.number().int().min(0),
      op: z.enum(AUDIT_OPS),
      write: z.boolean(),
      pid: z.number().int().min(0).max(0xffffffff),
      comm: z.string().max(256),
      bytes: z.number().int().min(0),
      path: z.string().max(65536),
      to: z.string().max(65536),
    }),
  ),
  dropped: z.number().int().min(0),
  nextSeq: z.number().int().min(1),
  maxEntries: z.number().int().min(0),
  maxBytes: z.number().int().min(0),
});

/** A time for --since: an ISO date, ms since the epoch, or a duration back from now ("90s", "15m", "2h", "1d"). */
export function parseSince(since: string, now = Date.now()): number {
  const s = since.trim();
  const d = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(s);
  if (d) {
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[d[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
    return now - Number(d[1]) * unit;
  }
  if (/^\d+$/.test(s)) return Number(s);
  const t = Date.parse(s);
  if (Number.isNaN(t))
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `--since ${JSON.stringify(since)} is neither a time (ISO 8601, ms since the epoch) nor a duration back from now (90s, 15m, 2h, 1d)`,
    );
  return t;
}

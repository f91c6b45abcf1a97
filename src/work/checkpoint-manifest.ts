// What a checkpoint is on disk, and the checks that make what is read there trustworthy: the
// manifest's shape (types and the zod schemas every read passes through), the names of
// checkpoints and agents' directories, blob ids, the size caps, and corrupt(), the error for
// anything that fails them. The store that writes and reads checkpoints is checkpoints.ts.
import * as z from 'zod';
import { ShadowError } from '../common/errors';
import type { ChangeBase } from '../shadow/native';
import { platform } from '../platform';

const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;

export interface CheckpointEntry {
  path: string;
  type: 'file' | 'symlink' | 'dir' | 'deleted';
  /** Permission bits of files and directories. */
  mode?: number;
  /** SHA-256 of a file's content (a blob), for a file stored whole. */
  blob?: string;
  /**
   * A file stored by its data extents (version 2): its size, and the pieces of it that hold
   * data, each a blob; everything else reads as zeros (holes). So a sparse file costs what its
   * data costs.
   */
  size?: number;
  chunks?: CheckpointChunk[];
  target?: string;
  base?: ChangeBase;
  /** SHA-256 of the content the agent started from, where the folder still had it. */
  baseBlob?: string;
}

/** One stored piece of a file: `length` bytes at `offset`, the content of blob `blob`. */
export interface CheckpointChunk {
  offset: number;
  length: number;
  blob: string;
}

export interface CheckpointManifest {
  /** 1: every file whole (`blob`); 2: files may be stored by extents (`size` and `chunks`). */
  version: 1 | 2;
  name: string;
  agent: string;
  folder: string;
  createdAt: string;
  /** When the layer started (see Provenance.layerSince). */
  layerSince?: number;
  /** Whether autosave made it. */
  auto: boolean;
  entries: CheckpointEntry[];
  /** The layer's audit trail then (src/shadow/audit.ts): a blob holding its JSON. Absent in checkpoints made before it existed. */
  audit?: string;
}

export interface CheckpointInfo {
  name: string;
  createdAt: string;
  auto: boolean;
  files: number;
  bytes: number;
}

/**
 * Every blob `m` references: its files' contents (a whole file's `blob`, or each of its `chunks`),
 * the base contents it kept (`baseBlob`) and its audit trail (`audit`). The blob collection of
 * checkpoints.ts keeps exactly these: a new kind of reference must be added here.
 */
export function manifestBlobs(m: Pick<CheckpointManifest, 'entries' | 'audit'>): Set<string> {
  const out = new Set<string>();
  for (const e of m.entries) {
    if (e.blob !== undefined) out.add(e.blob);
    for (const c of e.chunks ?? []) out.add(c.blob);
    if (e.baseBlob !== undefined) out.add(e.baseBlob);
  }
  if (m.audit !== undefined) out.add(m.audit);
  return out;
}

/** A blob's id: the SHA-256 of its content, in lower-case hex. */
export const BLOB_RE = /^[0-9a-f]{64}$/;

/** The most bytes one chunk (blob) of a file stored by extents holds. */
export const CHUNK_BYTES = 4 * 1024 * 1024;

/** The default cap on one file a checkpoint stores (see CheckpointStore.maxFileBytes). */
export const DEFAULT_CHECKPOINT_MAX_FILE_BYTES = 256 * 1024 * 1024;

/** The largest file a checkpoint stores: SHADOWFS_CHECKPOINT_MAX_FILE_BYTES, else the default. */
export function checkpointMaxFileBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SHADOWFS_CHECKPOINT_MAX_FILE_BYTES;
  if (raw === undefined || raw === '') return DEFAULT_CHECKPOINT_MAX_FILE_BYTES;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new ShadowError(
      'INVALID_ARGUMENT',
      `SHADOWFS_CHECKPOINT_MAX_FILE_BYTES is a number of bytes (a whole number, 0 or more), got ${JSON.stringify(raw)}`,
    );
  return n;
}

/** Manifests are small (a line per changed path): anything this big is not one. */
export const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

/** The error for a checkpoint whose files fail the checks (see the top of checkpoints.ts). */
export function corrupt(what: string): ShadowError {
  return new ShadowError(
    'STATE_CORRUPT',
    `${what}: this part of the checkpoints is damaged or was tampered with, so it was refused and nothing was changed; remove it and save a new checkpoint`,
  );
}

const ChangeBaseSchema = z.strictObject({
  ino: z.number().int().nonnegative(),
  size: z.number().int().nonnegative(),
  mtimeNs: z.string().regex(/^-?[0-9]{1,30}$/),
  ctimeNs: z.string().regex(/^-?[0-9]{1,30}$/),
  hash: z
    .string()
    .regex(/^[0-9a-f]{16}$/)
    .nullable(),
});

const EntrySchema = z
  .strictObject({
    path: z.string().max(65536),
    type: z.enum(['file', 'symlink', 'dir', 'deleted']),
    mode: z.number().int().min(0).max(0o7777).optional(),
    blob: z.string().regex(BLOB_RE).optional(),
    target: z
      .string()
      .min(1)
      .max(65536)
      .refine((t) => !t.includes('\0'), { message: 'a link target has a NUL byte' })
      .optional(),
    base: ChangeBaseSchema.optional(),
    baseBlob: z.string().regex(BLOB_RE).optional(),
    size: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
    chunks: z
      .array(
        z.strictObject({
          offset: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
          length: z.number().int().positive().max(CHUNK_BYTES),
          blob: z.string().regex(BLOB_RE),
        }),
      )
      .max(1 << 22)
      .optional(),
  })
  .refine((e) => e.type !== 'file' || (e.blob !== undefined) !== (e.chunks !== undefined), {
    message: 'a file entry names either one blob or its chunks',
  })
  .refine((e) => (e.chunks === undefined) === (e.size === undefined), { message: 'chunks and size go together' })
  .refine((e) => e.type === 'file' || (e.chunks === undefined && e.blob === undefined), { message: 'only a file has content' })
  .refine((e) => chunksFit(e.chunks ?? [], e.size ?? 0), { message: 'the chunks overlap, are out of order, or pass the size' })
  .refine((e) => e.type !== 'symlink' || e.target !== undefined, { message: 'a link entry has no target' });

/** Whether `chunks` are in order, disjoint, and within `size` bytes. */
function chunksFit(chunks: CheckpointChunk[], size: number): boolean {
  let at = 0;
  for (const c of chunks) {
    if (c.offset < at || c.offset + c.length > size) return false;
    at = c.offset + c.length;
  }
  return true;
}

export const ManifestSchema = z.object({
  version: z.union([z.literal(1), z.literal(2)]),
  name: z.string(),
  agent: z.string(),
  folder: z.string(),
  createdAt: z.string().max(64),
  layerSince: z.number().finite().optional(),
  auto: z.boolean(),
  entries: z.array(EntrySchema),
  audit: z.string().regex(BLOB_RE).optional(),
});

/** An agent's directory name: what shadow.ts takes as an agent id, and a single path component. */
export function checkAgentDir(agent: unknown): string {
  const separators = platform.nameSeparators;
  if (
    typeof agent !== 'string' ||
    agent === '' ||
    agent === '.' ||
    agent === '..' ||
    separators.test(agent) ||
    Buffer.byteLength(agent) > 128
  )
    throw new ShadowError(
      'INVALID_AGENT',
      `checkpoints are kept for agent ids of 1 to 128 bytes without "/" or NUL, other than "." and "..", got ${JSON.stringify(agent)}`,
    );
  return agent;
}

export function checkName(name: unknown): string {
  if (typeof name !== 'string' || !NAME_RE.test(name) || name === '.' || name === '..')
    throw new ShadowError('INVALID_ARGUMENT', `a checkpoint name is 1 to 64 letters, digits, ".", "_" or "-", got ${JSON.stringify(name)}`);
  return name;
}

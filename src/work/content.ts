// File contents of any size, a piece at a time: a file in an agent's layer (read in ranges, its
// holes skipped), or a regular file of the user's folder (read from a descriptor opened beneath
// the folder). Diffs, patches and checkpoints use these for files too large to hold in memory
// whole: they hash, compare and compress such files by streaming them, so a 5 GiB sparse file
// costs a few megabytes of memory, never 5 GiB.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as zlib from 'zlib';
import { ShadowError } from '../common/errors';
import { encodeBase85, lineLengthChar, BYTES_PER_LINE } from '../patch/binary';
import type { Layer } from '../shadow';

/** Files above this many bytes are never held whole in memory by diffs, patches or apply: they are streamed. */
export const LARGE_FILE_BYTES = 16 * 1024 * 1024;

/** How much one read asks for. */
export const PIECE_BYTES = 4 * 1024 * 1024;

/** fs.read on a descriptor, off the main thread (fs.promises has it only on FileHandles). */
export function readAt(fd: number, buf: Buffer, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => fs.read(fd, buf, offset, length, position, (err, n) => (err ? reject(err) : resolve(n))));
}

/** fs.write on a descriptor, off the main thread. */
export function writeAt(fd: number, buf: Buffer, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => fs.write(fd, buf, offset, length, position, (err, n) => (err ? reject(err) : resolve(n))));
}

/** A piece of zeros, shared by every hole (never written to). */
const ZEROS = Buffer.alloc(PIECE_BYTES);

/** Whether `b` holds zeros only (a writer may leave such a stretch a hole). */
export function allZero(b: Buffer): boolean {
  for (let at = 0; at < b.length; at += ZEROS.length) {
    const part = b.subarray(at, at + ZEROS.length);
    if (!part.equals(ZEROS.subarray(0, part.length))) return false;
  }
  return true;
}

/** Where a file holds data: [offset, length] pairs, sorted; the rest of `size` reads as zeros. */
export interface Extents {
  size: number;
  extents: Array<[number, number]>;
}

/** The error for a file that changed while it was streamed. */
function changedWhileRead(what: string): ShadowError {
  return new ShadowError('CONFLICT', `${what} changed while it was read; try again once it stays still`);
}

/** The whole of `ext` as pieces: data read by `read(offset, length)`, holes as shared zeros (do not modify them). */
async function* piecesOf(ext: Extents, what: string, read: (offset: number, length: number) => Promise<Buffer>): AsyncGenerator<Buffer> {
  let at = 0;
  const holeUntil = async function* (end: number): AsyncGenerator<Buffer> {
    while (at < end) {
      const n = Math.min(PIECE_BYTES, end - at);
      yield ZEROS.subarray(0, n);
      at += n;
    }
  };
  for (const [off, len] of ext.extents) {
    if (off < at || off + len > ext.size) throw changedWhileRead(what);
    yield* holeUntil(off);
    const end = off + len;
    while (at < end) {
      const n = Math.min(PIECE_BYTES, end - at);
      const data = await read(at, n);
      if (data.length !== n) throw changedWhileRead(what);
      yield data;
      at += n;
    }
  }
  yield* holeUntil(ext.size);
}

/** Where `rel` as `layer` shows it holds data. */
export async function layerExtents(layer: Layer, rel: string): Promise<Extents> {
  return layer.dataExtents(rel);
}

/**
 * The content of `rel` as `layer` shows it, in pieces (holes are not read: they come as zeros).
 * CONFLICT when the file changes size while it is read.
 */
export async function* layerPieces(layer: Layer, rel: string, ext?: Extents): AsyncGenerator<Buffer> {
  for await (const s of layerSpans(layer, rel, ext)) {
    if (typeof s !== 'number') {
      yield s;
      continue;
    }
    for (let left = s; left > 0; left -= PIECE_BYTES) yield ZEROS.subarray(0, Math.min(left, PIECE_BYTES));
  }
}

/** The same as spans: data as Buffers, each hole as its length in bytes (a number), so a writer can leave it a hole. */
export async function* layerSpans(layer: Layer, rel: string, ext?: Extents): AsyncGenerator<Buffer | number> {
  const e = ext ?? (await layerExtents(layer, rel));
  const what = `${rel} in the layer of ${layer.agentId}`;
  let at = 0;
  for (const [off, len] of e.extents) {
    if (off < at || off + len > e.size) throw changedWhileRead(what);
    if (off > at) yield off - at;
    for (at = off; at < off + len;) {
      const n = Math.min(PIECE_BYTES, off + len - at);
      const r = await layer.readRange(rel, at, n);
      if (r.size !== e.size || r.data.length !== n) throw changedWhileRead(what);
      yield r.data;
      at += n;
    }
  }
  if (e.size > at) yield e.size - at;
}

/**
 * The first `size` bytes of the open regular file `fd`, in pieces (the caller keeps `fd` open
 * until the pieces are consumed). CONFLICT when the file turns out shorter.
 */
export async function* fdPieces(fd: number, size: number, what: string): AsyncGenerator<Buffer> {
  yield* piecesOf({ size, extents: size ? [[0, size]] : [] }, what, async (offset, length) => {
    const buf = Buffer.allocUnsafe(length);
    let got = 0;
    while (got < length) {
      const bytesRead = await readAt(fd, buf, got, length - got, offset + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return buf.subarray(0, got);
  });
}

/** git's blob id (SHA-1 of "blob <size>\0" and the bytes) of `size` bytes given in pieces. */
export async function gitBlobIdOf(pieces: AsyncIterable<Buffer>, size: number, what: string): Promise<string> {
  const h = crypto.createHash('sha1').update(`blob ${size}\0`);
  let n = 0;
  for await (const p of pieces) {
    h.update(p);
    n += p.length;
  }
  if (n !== size) throw changedWhileRead(what);
  return h.digest('hex');
}

/** The most compressed bytes one literal of a streamed binary patch may hold. */
export const MAX_LITERAL_DEFLATED_BYTES = 64 * 1024 * 1024;

/**
 * git's "literal <size>" hunk (zlib-deflated, base85 lines) of `size` bytes given in pieces, made
 * while they stream through, with the blob id of what went in. FILE_TOO_LARGE when the deflated
 * bytes pass `maxDeflated` (a patch is text in one answer: only files that compress well fit).
 */
export async function streamedLiteral(
  pieces: AsyncIterable<Buffer>,
  size: number,
  what: string,
  maxDeflated = MAX_LITERAL_DEFLATED_BYTES,
): Promise<{ hunk: string; id: string }> {
  const sha = crypto.createHash('sha1').update(`blob ${size}\0`);
  // Level 1: a big file's literal is made in a fraction of the default's time; git inflates either.
  const deflate = zlib.createDeflate({ level: 1 });
  const lines: string[] = [`literal ${size}\n`];
  let carry = Buffer.alloc(0);
  let deflated = 0;
  let failed: Error | undefined;
  let switching = false; // a change of strategy is under way (below)
  deflate.on('data', (chunk: Buffer) => {
    deflated += chunk.length;
    if (deflated > maxDeflated) {
      failed ??= new ShadowError(
        'FILE_TOO_LARGE',
        `${what} holds ${size} bytes that compress to more than the ${maxDeflated} a patch carries per file; leave it out of the patch (name the other paths), or bring it over with apply`,
      );
      // Not in the middle of a change of strategy: zlib's params() asserts that its stream still
      // has a handle when its flush is done, so the change ends first (strategy() below).
      if (!switching) deflate.destroy();
      return;
    }
    let buf = carry.length ? Buffer.concat([carry, chunk]) : chunk;
    while (buf.length >= BYTES_PER_LINE) {
      lines.push(lineLengthChar(BYTES_PER_LINE) + encodeBase85(buf.subarray(0, BYTES_PER_LINE)) + '\n');
      buf = buf.subarray(BYTES_PER_LINE);
    }
    carry = Buffer.from(buf);
  });
  const ended = new Promise<void>((resolve, reject) => {
    deflate.on('end', resolve);
    deflate.on('error', reject);
    deflate.on('close', () => (failed ? reject(failed) : undefined));
  });
  // Zeros (a sparse file's holes, read back as zeros) are deflated with the run-length strategy:
  // a GiB of zeros makes 1.0 MB instead of level 1's 4.7 MB, in less time (a 5 GiB sparse
  // file's literal: 18 s before, 9 s after, here). Data goes back to the default strategy, which
  // also finds repeats further apart.
  let runLength = false;
  const strategy = async (rle: boolean): Promise<void> => {
    if (rle === runLength || deflate.destroyed) return;
    runLength = rle;
    switching = true;
    await new Promise<void>((r) => deflate.params(1, rle ? zlib.constants.Z_RLE : zlib.constants.Z_DEFAULT_STRATEGY, () => r()));
    switching = false;
    if (failed) deflate.destroy();
  };
  let n = 0;
  try {
    for await (const p of pieces) {
      if (failed) break;
      sha.update(p);
      n += p.length;
      if (p.length >= 64 * 1024) {
        await strategy(allZero(p));
        if (failed) break;
      }
      if (!deflate.write(p))
        await new Promise<void>((r) => {
          const done = (): void => {
            deflate.off('drain', done).off('close', done);
            r();
          };
          deflate.on('drain', done).on('close', done);
        });
    }
    if (!failed) deflate.end();
    await ended;
  } catch (err) {
    deflate.destroy();
    throw failed ?? err;
  }
  if (failed) throw failed;
  if (n !== size) throw changedWhileRead(what);
  if (carry.length) lines.push(lineLengthChar(carry.length) + encodeBase85(carry) + '\n');
  return { hunk: lines.join('') + '\n', id: sha.digest('hex') };
}

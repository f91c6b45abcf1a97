// What more than one file tool asks of the layer before it reads a file: is anything there,
// and is it text. Also how many files the tools read or stat at the same time.
import { ShadowError } from '../../common/errors';
import type { Layer } from '../../shadow';

/** Like git: a NUL byte in the first this-many bytes makes a file binary. */
const BINARY_PROBE = 8000;
/** Files grep reads (and stats list makes) at the same time. */
export const CONCURRENCY = 8;

export function isBinary(buf: Buffer): boolean {
  return buf.subarray(0, BINARY_PROBE).includes(0);
}

/** `rel`'s type and mode as the layer shows it, or null when nothing is there. */
export async function statOrNull(layer: Layer, rel: string): Promise<{ type: string; mode: number; size: number } | null> {
  try {
    return await layer.stat(rel);
  } catch (err) {
    if (err instanceof ShadowError && err.code === 'NOT_FOUND') return null;
    throw err;
  }
}

// Validation of paths given to the API: relative to the shadow root, never escaping it.
import { ShadowError } from './errors';

/**
 * Returns `p` normalised ("a/./b//c" -> "a/b/c"). Refuses absolute paths, "..", NUL bytes,
 * backslashes used as separators on POSIX-looking paths are kept as characters.
 */
export function normalizeRelPath(p: unknown, { allowRoot = false } = {}): string {
  if (typeof p !== 'string') throw new ShadowError('INVALID_PATH', `path must be a string, got ${typeof p}`);
  if (p.includes('\0')) throw new ShadowError('INVALID_PATH', `path contains a NUL byte: ${JSON.stringify(p)}`);
  if (p.startsWith('/') || p.startsWith('\\') || /^[A-Za-z]:/.test(p)) {
    throw new ShadowError('INVALID_PATH', `path must be relative to the shadow root, got the absolute path ${JSON.stringify(p)}`);
  }
  const parts: string[] = [];
  for (const c of p.split('/')) {
    if (c === '' || c === '.') continue;
    if (c === '..') throw new ShadowError('INVALID_PATH', `path must not contain "..": ${JSON.stringify(p)}`);
    if (Buffer.byteLength(c) > 255)
      throw new ShadowError('INVALID_PATH', `a name in the path is longer than 255 bytes: ${JSON.stringify(p)}`);
    parts.push(c);
  }
  const out = parts.join('/');
  if (out === '' && !allowRoot)
    throw new ShadowError('INVALID_PATH', 'path names the shadow root itself; name a file or directory inside it');
  return out;
}

/**
 * The name of a new file made beside `name` and then renamed over it (apply's atomic writes):
 * `.<name>.shadowfs-<12 hex>`, or `.shadowfs-<12 hex>` when that would pass the 255 bytes a name
 * may have (a name of 233 bytes or more could never be written otherwise).
 */
export function besideName(name: string, hex: string): string {
  const full = `.${name}.shadowfs-${hex}`;
  return Buffer.byteLength(full) <= 255 && full.length <= 255 ? full : `.shadowfs-${hex}`;
}

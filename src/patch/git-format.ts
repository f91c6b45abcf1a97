// Small pieces of git's on-disk and diff formats that the patch writer needs: blob ids, binary
// detection, C-style path quoting, mode strings and git's path order. Kept apart from the diff
// logic so each rule can be checked against git on its own.
import { isUtf8 as isValidUtf8 } from 'buffer';
import { createHash } from 'crypto';

/** git's object id of a blob: sha1 over "blob <size>\0" followed by the bytes. */
export function blobId(data: Buffer): string {
  return createHash('sha1').update(`blob ${data.length}\0`).update(data).digest('hex');
}

/** The id git writes for "no file on this side" (all zeros). */
export const NULL_ID = '0'.repeat(40);

/** git's default abbreviation (small repositories); ids are only hints for text patches. */
export const SHORT_ID_LENGTH = 7;

/** How far git looks for a NUL byte when it decides whether content is binary. */
const BINARY_PROBE_BYTES = 8000;

/** git's test: content is binary when a NUL byte occurs in its first 8000 bytes. */
export function hasNulPrefix(data: Buffer): boolean {
  return data.subarray(0, BINARY_PROBE_BYTES).includes(0);
}

/**
 * Whether the bytes survive decoding as UTF-8 and encoding again unchanged. The patch is
 * returned as a JS string, so a text hunk can only carry lines that are valid UTF-8; other
 * content goes out as a binary patch so the result stays byte-exact.
 */
export function isUtf8(data: Buffer): boolean {
  return isValidUtf8(data);
}

/** A git mode as git prints it: six octal digits ("100644", "120000"). */
export function modeString(mode: number): string {
  return mode.toString(8).padStart(6, '0');
}

/** Escapes git writes by name inside quoted paths; other special bytes become \ooo. */
const NAMED_ESCAPES: ReadonlyMap<number, string> = new Map([
  [0x07, 'a'],
  [0x08, 'b'],
  [0x09, 't'],
  [0x0a, 'n'],
  [0x0b, 'v'],
  [0x0c, 'f'],
  [0x0d, 'r'],
  [0x22, '"'],
  [0x5c, '\\'],
]);

/** Bytes that make git quote a path (core.quotePath=true, its default); space is not one. */
function needsQuoting(byte: number): boolean {
  return byte < 0x20 || byte === 0x22 || byte === 0x5c || byte >= 0x7f;
}

/**
 * A path as git writes it in diff headers: unchanged when plain, otherwise a C-style quoted
 * string of its UTF-8 bytes ("a/na\"me", "a/\303\274.txt"), which git apply unquotes.
 */
export function quotePath(path: string): string {
  const bytes = Buffer.from(path, 'utf8');
  if (!bytes.some(needsQuoting)) return path;
  let out = '"';
  for (const byte of bytes) {
    if (!needsQuoting(byte)) out += String.fromCharCode(byte);
    else out += '\\' + (NAMED_ESCAPES.get(byte) ?? byte.toString(8).padStart(3, '0'));
  }
  return out + '"';
}

/** git's order of paths (the index order): byte-wise on the UTF-8 bytes, not on UTF-16 units. */
export function comparePaths(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

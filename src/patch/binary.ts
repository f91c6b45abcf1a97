// git's "GIT binary patch" body: each side's bytes deflated with zlib and written in git's base85,
// one line per 52 compressed bytes. The forward literal (the new content) is followed by a
// reverse one (the old content), so `git apply -R` works too. Only "literal" hunks are written,
// never git's "delta" ones: a literal is always valid, a delta would only make the patch smaller.
import { deflateSync } from 'zlib';

/** git's base85 alphabet (base85.c), not the Ascii85 one. */
const BASE85_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~';

/** The most compressed bytes git puts on one line of a binary patch. */
export const BYTES_PER_LINE = 52;

/**
 * Encodes bytes in git's base85: each group of 4 bytes (big-endian, the last group padded with
 * zero bytes) becomes 5 digits, most significant first. The line's length prefix tells the
 * reader how many of the padded bytes are real.
 */
export function encodeBase85(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 4) {
    let value = 0;
    for (let j = i; j < i + 4; j++) value = value * 256 + (j < bytes.length ? bytes[j] : 0);
    const digits: string[] = [];
    for (let k = 0; k < 5; k++) {
      digits.unshift(BASE85_ALPHABET[value % 85]);
      value = Math.floor(value / 85);
    }
    out += digits.join('');
  }
  return out;
}

/** The character that starts a line of n bytes: 'A'..'Z' for 1..26, 'a'..'z' for 27..52. */
export function lineLengthChar(n: number): string {
  return n <= 26 ? String.fromCharCode(0x41 + n - 1) : String.fromCharCode(0x61 + n - 27);
}

/** One "literal <size>" hunk: the deflated bytes in base85 lines, closed by an empty line. */
function literalHunk(data: Buffer): string {
  const deflated = deflateSync(data);
  let out = `literal ${data.length}\n`;
  for (let at = 0; at < deflated.length; at += BYTES_PER_LINE) {
    const chunk = deflated.subarray(at, at + BYTES_PER_LINE);
    out += lineLengthChar(chunk.length) + encodeBase85(chunk) + '\n';
  }
  return out + '\n';
}

/** The body git writes after the index line for a binary change with --binary. */
export function gitBinaryPatch(oldData: Buffer, newData: Buffer): string {
  return 'GIT binary patch\n' + literalHunk(newData) + literalHunk(oldData);
}

/** The same body from literal hunks made elsewhere (a large file's, streamed): the new side's, then the old side's. */
export function gitBinaryPatchOf(newHunk: string, oldHunk: string): string {
  return 'GIT binary patch\n' + newHunk + oldHunk;
}

/** The literal hunk of one side held in memory (the empty one of an absent side too). */
export function literalHunkOf(data: Buffer): string {
  return literalHunk(data);
}

// Unified-diff hunks for one text file, written the way git writes them: jsdiff (the `diff`
// package) finds the changed lines and groups them with context; this module writes the
// "@@ -a,b +c,d @@ heading" lines (git's count and heading rules) and the "\ No newline at end of
// file" markers, and counts added and removed lines.
import { structuredPatch } from 'diff';
import type { StructuredPatchHunk } from 'diff';

export interface TextHunks {
  /** The hunks, each line ending in "\n"; empty when the texts are equal. */
  text: string;
  additions: number;
  deletions: number;
}

/**
 * Beyond this many inserted plus removed lines jsdiff gives up (its cost grows with the number of
 * edits times the file length) and the file is written as one hunk that replaces every line:
 * still a correct patch, only less readable, and the result does not depend on timing.
 */
const MAX_EDIT_LENGTH = 2000;

/** git's cap on a hunk heading, in bytes (xdiff's func_line buffer). */
const HEADING_MAX_BYTES = 80;

const NO_NEWLINE = '\\ No newline at end of file';

export function textHunks(oldText: string, newText: string, context: number): TextHunks {
  if (oldText === newText) return { text: '', additions: 0, deletions: 0 };
  const found = structuredPatch('a', 'b', oldText, newText, undefined, undefined, { context, maxEditLength: MAX_EDIT_LENGTH });
  const hunks = found ? found.hunks : [rewriteHunk(oldText, newText)];
  const headings = new HeadingFinder(oldText);
  let text = '';
  let additions = 0;
  let deletions = 0;
  for (const hunk of hunks) {
    text += hunkHeader(hunk, headings.before(hunk.oldStart - 1)) + '\n';
    for (const line of hunk.lines) {
      if (line.startsWith('+')) additions++;
      else if (line.startsWith('-')) deletions++;
      text += line + '\n';
    }
  }
  return { text, additions, deletions };
}

/** "@@ -3,4 +3,5 @@ heading": a count of 1 is left out, and an empty range names the line before it. */
function hunkHeader(hunk: StructuredPatchHunk, heading: string): string {
  const range = (start: number, count: number): string => (count === 0 ? `${start - 1},0` : count === 1 ? `${start}` : `${start},${count}`);
  const header = `@@ -${range(hunk.oldStart, hunk.oldLines)} +${range(hunk.newStart, hunk.newLines)} @@`;
  return heading ? `${header} ${heading}` : header;
}

/** Splits text into lines that keep their "\n" (the last one may have none). */
function linesOf(text: string): string[] {
  const lines = text.split(/(?<=\n)/);
  return lines[lines.length - 1] === '' ? lines.slice(0, -1) : lines;
}

/** A hunk replacing every old line by every new line, for when jsdiff gives up. */
function rewriteHunk(oldText: string, newText: string): StructuredPatchHunk {
  const oldLines = linesOf(oldText);
  const newLines = linesOf(newText);
  const lines: string[] = [];
  const add = (prefix: string, line: string): void => {
    if (line.endsWith('\n')) lines.push(prefix + line.slice(0, -1));
    else lines.push(prefix + line, NO_NEWLINE);
  };
  for (const line of oldLines) add('-', line);
  for (const line of newLines) add('+', line);
  return { oldStart: 1, oldLines: oldLines.length, newStart: 1, newLines: newLines.length, lines };
}

/**
 * git's default hunk heading: the nearest line above the hunk (in the old file) that starts with
 * a letter, "_" or "$", cut to 80 bytes, without trailing whitespace. Like xdiff, the search for
 * one hunk stops where the previous hunk's search started and then keeps that hunk's heading.
 */
class HeadingFinder {
  private readonly lines: string[];
  private searchedDownTo = -1;
  private heading = '';

  constructor(oldText: string) {
    this.lines = oldText.split('\n');
  }

  /** The heading for a hunk whose first line is `firstLine` (0-based); call in hunk order. */
  before(firstLine: number): string {
    const start = Math.min(firstLine - 1, this.lines.length - 1);
    for (let i = start; i > this.searchedDownTo; i--) {
      if (/^[A-Za-z_$]/.test(this.lines[i])) {
        this.heading = trimHeading(this.lines[i]);
        break;
      }
    }
    this.searchedDownTo = firstLine - 1;
    return this.heading;
  }
}

/** Cuts a heading to git's 80 bytes (on a character boundary) and drops trailing whitespace. */
function trimHeading(line: string): string {
  let out = '';
  let bytes = 0;
  for (const ch of line) {
    bytes += Buffer.byteLength(ch, 'utf8');
    if (bytes > HEADING_MAX_BYTES) break;
    out += ch;
  }
  // git's isspace(): space, tab, CR and LF only.
  return out.replace(/[ \t\r\n]+$/, '');
}

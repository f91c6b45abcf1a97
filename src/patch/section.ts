// One "diff --git" section of a patch: git's extended header lines (file modes, rename, index),
// then either text hunks, a "GIT binary patch" or a "Binary files ... differ" line. The order and
// spelling of the header lines follow git's diff.c, which is what git apply parses.
import { ShadowError } from '../common/errors';
import { gitBinaryPatch, gitBinaryPatchOf, literalHunkOf } from './binary';
import { textHunks } from './hunks';
import { NULL_ID, SHORT_ID_LENGTH, blobId, hasNulPrefix, isUtf8, modeString, quotePath } from './git-format';
import type { Side } from './index';

/** A pair of sides git writes as one section: a change at one path, or a rename. */
export interface Section {
  oldPath: string;
  newPath: string;
  old: Side | null;
  new: Side | null;
  /** Set for renames: git's "similarity index". */
  similarity?: number;
}

export interface SectionFormat {
  /** Write "GIT binary patch" bodies instead of "Binary files ... differ". */
  binary: boolean;
  /** Full blob ids on every index line (binary patches always have them). */
  fullIndex: boolean;
  context: number;
}

export interface FormattedSection {
  text: string;
  binary: boolean;
  additions: number;
  deletions: number;
}

const EMPTY = Buffer.alloc(0);

/** Content is diffed line by line when git would call it text and it is valid UTF-8. */
export function isTextContent(data: Buffer): boolean {
  return !hasNulPrefix(data) && isUtf8(data);
}

export function formatSection(section: Section, format: SectionFormat): FormattedSection {
  const { old, new: next } = section;
  const oldName = quotePath(`a/${section.oldPath}`);
  const newName = quotePath(`b/${section.newPath}`);
  let text = `diff --git ${oldName} ${newName}\n` + modeAndRenameLines(section);

  const oldData = old?.data ?? EMPTY;
  const newData = next?.data ?? EMPTY;
  const oldId = old ? (old.large?.id ?? blobId(oldData)) : NULL_ID;
  const newId = next ? (next.large?.id ?? blobId(newData)) : NULL_ID;
  // A file too large to hold in memory is binary (as git calls files over core.bigFileThreshold).
  const large = !!old?.large || !!next?.large;
  const binary = large || !isTextContent(oldData) || !isTextContent(newData);
  // Same content (a mode change, an exact rename): git writes no index line and no body.
  if (oldId === newId) return { text, binary, additions: 0, deletions: 0 };

  // git apply refuses a binary patch unless both ids are complete: it checks them.
  const full = format.fullIndex || (binary && format.binary);
  const shown = (id: string): string => (full ? id : id.slice(0, SHORT_ID_LENGTH));
  const sameMode = old !== null && next !== null && old.mode === next.mode;
  text += `index ${shown(oldId)}..${shown(newId)}${sameMode ? ` ${modeString(old.mode)}` : ''}\n`;

  const oldLabel = old ? oldName : '/dev/null';
  const newLabel = next ? newName : '/dev/null';
  if (binary) {
    if (!format.binary) text += `Binary files ${oldLabel} and ${newLabel} differ\n`;
    else if (!large) text += gitBinaryPatch(oldData, newData);
    else text += gitBinaryPatchOf(literalOf(next, section.newPath), literalOf(old, section.oldPath));
    return { text, binary, additions: 0, deletions: 0 };
  }
  const hunks = textHunks(oldData.toString('utf8'), newData.toString('utf8'), format.context);
  // A new or deleted empty file has no hunk, and then git writes no ---/+++ lines either.
  if (hunks.text) text += `--- ${fileLabel(oldLabel)}\n+++ ${fileLabel(newLabel)}\n${hunks.text}`;
  return { text, binary, additions: hunks.additions, deletions: hunks.deletions };
}

/** One side's literal hunk: made here from its bytes, or streamed by the caller for a large file. */
function literalOf(side: Side | null, path: string): string {
  if (!side?.large) return literalHunkOf(side?.data ?? EMPTY);
  if (side.large.literal === undefined)
    throw new ShadowError(
      'FILE_TOO_LARGE',
      `${path} holds ${side.large.size} bytes, too many to carry in a patch without streaming its literal first`,
    );
  return side.large.literal;
}

/** git's lines between "diff --git" and "index": new/deleted file mode, old/new mode, rename. */
function modeAndRenameLines({ old, new: next, oldPath, newPath, similarity }: Section): string {
  if (!old && next) return `new file mode ${modeString(next.mode)}\n`;
  if (old && !next) return `deleted file mode ${modeString(old.mode)}\n`;
  let text = '';
  if (old && next && old.mode !== next.mode) text += `old mode ${modeString(old.mode)}\nnew mode ${modeString(next.mode)}\n`;
  if (similarity !== undefined) {
    text += `similarity index ${similarity}%\nrename from ${quotePath(oldPath)}\nrename to ${quotePath(newPath)}\n`;
  }
  return text;
}

/** git ends a ---/+++ name containing a space with a tab, so tools that split on it find the end. */
function fileLabel(label: string): string {
  return label.includes(' ') ? `${label}\t` : label;
}

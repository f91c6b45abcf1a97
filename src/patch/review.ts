// A layer's change cut into review units, each with a stable id: a text file's change is cut into
// hunks (git's, with 3 lines of context), a mode change of a text file is a unit of its own, and
// every other change (an added, deleted, binary or large file, a symlink, a type change) is one
// unit for the whole path. An id is a hash of the path and the unit's two sides (a hunk's old and
// new lines, context included), so it stays the same while that hunk and its surroundings in the
// folder do, wherever the hunk moves in the file; hunks are at least 7 unchanged lines apart, so
// applying some of a file's hunks leaves the others' ids as they were. Pure, like the rest of
// src/patch: the caller gathers the contents.
import * as crypto from 'crypto';
import { structuredPatch } from 'diff';
import { ShadowError } from '../common/errors';
import type { FileChange, Side } from './index';
import { isTextContent } from './section';

export const REVIEW_CONTEXT = 3;

/** Beyond this many inserted plus removed lines the file is one hunk (as in ./hunks). */
const MAX_EDIT_LENGTH = 2000;

export interface ReviewUnit {
  /** Stable id: the same while this unit's content and what surrounds it in the folder stay the same. */
  id: string;
  path: string;
  /** 'hunk': part of a text file's change; 'mode': a text file's mode change; 'file': a whole path's change. */
  unit: 'hunk' | 'mode' | 'file';
  status: 'added' | 'modified' | 'deleted' | 'type-changed';
  binary: boolean;
  /** For hunks: where the hunk lies, 1-based lines as in its @@ header (old: the folder's file, new: the agent's). */
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  additions: number;
  deletions: number;
  oldMode?: number;
  newMode?: number;
  /** The unit as a person reads it: a hunk with its @@ header, a mode line, or the whole file as added/removed lines (text) or a sentence (binary, link). */
  text: string;
}

/** One text hunk, with its regions as 0-based line indexes. */
interface TextHunk {
  id: string;
  old0: number;
  oldCount: number;
  new0: number;
  newCount: number;
  lines: string[];
}

/** Lines that keep their "\n" (the last may have none), as jsdiff counts them. */
export function splitLines(text: string): string[] {
  const lines = text.split(/(?<=\n)/);
  return lines[lines.length - 1] === '' ? lines.slice(0, -1) : lines;
}

function shortHash(...parts: Array<string | Buffer>): string {
  const h = crypto.createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 16);
}

/** Whether a side can be cut into hunks: a file in memory holding text. */
export function isTextSide(side: Side | null): side is Side {
  return !!side && side.kind === 'file' && !side.large && isTextContent(side.data);
}

function textHunkList(path: string, oldText: string, newText: string): TextHunk[] {
  if (oldText === newText) return [];
  const found = structuredPatch('a', 'b', oldText, newText, undefined, undefined, {
    context: REVIEW_CONTEXT,
    maxEditLength: MAX_EDIT_LENGTH,
  });
  const oldLines = splitLines(oldText);
  const newLines = splitLines(newText);
  const raw = found
    ? found.hunks.map((h) => ({ old0: h.oldStart - 1, oldCount: h.oldLines, new0: h.newStart - 1, newCount: h.newLines, lines: h.lines }))
    : [
        {
          old0: 0,
          oldCount: oldLines.length,
          new0: 0,
          newCount: newLines.length,
          lines: [...oldLines.map((l) => '-' + l.replace(/\n$/, '')), ...newLines.map((l) => '+' + l.replace(/\n$/, ''))],
        },
      ];
  const seen = new Map<string, number>();
  return raw.map((h) => {
    const base = shortHash(
      path,
      oldLines.slice(h.old0, h.old0 + h.oldCount).join(''),
      newLines.slice(h.new0, h.new0 + h.newCount).join(''),
    );
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return { ...h, id: n === 1 ? base : `${base}-${n}` };
  });
}

const range = (start0: number, count: number): string =>
  count === 0 ? `${start0},0` : count === 1 ? `${start0 + 1}` : `${start0 + 1},${count}`;

function describeSide(side: Side | null): string {
  if (!side) return 'absent';
  if (side.large) return `${side.kind}:${side.mode}:large:${side.large.id}`;
  return `${side.kind}:${side.mode}:${crypto.createHash('sha256').update(side.data).digest('hex')}`;
}

/** A whole text file as added or removed lines. */
function wholeText(prefix: '+' | '-', data: Buffer): { text: string; count: number } {
  const lines = splitLines(data.toString('utf8'));
  let text = `@@ ${prefix === '+' ? `-0,0 +${range(0, lines.length)}` : `-${range(0, lines.length)} +0,0`} @@\n`;
  for (const l of lines) text += l.endsWith('\n') ? prefix + l : `${prefix}${l}\n\\ No newline at end of file\n`;
  return { text, count: lines.length };
}

/** The review units of `changes`, in the order given. */
export function reviewUnits(changes: FileChange[]): ReviewUnit[] {
  const out: ReviewUnit[] = [];
  for (const f of changes) {
    const { old, new: next } = f;
    if (!old && !next) continue;
    const status = !old ? 'added' : !next ? 'deleted' : old.kind !== next.kind ? 'type-changed' : 'modified';
    const common = { path: f.path, oldStart: 0, oldLines: 0, newStart: 0, newLines: 0, additions: 0, deletions: 0 };
    const modes = { ...(old ? { oldMode: old.mode } : {}), ...(next ? { newMode: next.mode } : {}) };
    if (status === 'modified' && isTextSide(old) && isTextSide(next)) {
      for (const h of textHunkList(f.path, old.data.toString('utf8'), next.data.toString('utf8'))) {
        let text = `@@ -${range(h.old0, h.oldCount)} +${range(h.new0, h.newCount)} @@\n`;
        for (const l of h.lines) text += l + '\n';
        out.push({
          ...common,
          id: h.id,
          unit: 'hunk',
          status,
          binary: false,
          oldStart: h.oldCount === 0 ? h.old0 : h.old0 + 1,
          oldLines: h.oldCount,
          newStart: h.newCount === 0 ? h.new0 : h.new0 + 1,
          newLines: h.newCount,
          additions: h.lines.filter((l) => l.startsWith('+')).length,
          deletions: h.lines.filter((l) => l.startsWith('-')).length,
          text,
        });
      }
      if (old.mode !== next.mode)
        out.push({
          ...common,
          ...modes,
          id: shortHash(f.path, 'mode', String(old.mode), String(next.mode)),
          unit: 'mode',
          status,
          binary: false,
          text: `mode ${old.mode.toString(8)} -> ${next.mode.toString(8)}\n`,
        });
      continue;
    }
    const binary = [old, next].some((s) => s && s.kind === 'file' && !isTextSide(s));
    let text = '';
    let additions = 0;
    let deletions = 0;
    for (const [side, sign] of [
      [old, '-'],
      [next, '+'],
    ] as const) {
      if (!side) continue;
      if (side.kind === 'symlink') text += `${sign === '-' ? 'was' : 'now'} a symlink to ${side.data.toString()}\n`;
      else if (!isTextSide(side)) text += `${sign === '-' ? 'was' : 'now'} a binary file\n`;
      else {
        const w = wholeText(sign, side.data);
        text += w.text;
        if (sign === '+') additions = w.count;
        else deletions = w.count;
      }
    }
    if (status === 'modified' && old && next && old.mode !== next.mode)
      text = `mode ${old.mode.toString(8)} -> ${next.mode.toString(8)}\n` + text;
    out.push({
      ...common,
      ...modes,
      id: shortHash(f.path, 'file', describeSide(old), describeSide(next)),
      unit: 'file',
      status,
      binary,
      additions,
      deletions,
      text,
    });
  }
  return out;
}

/**
 * The new side of a hunk the user edited (as git add -p's "e"): `edited` is the hunk's text as
 * changed in an editor, "#" lines ignored; its " " and "-" lines must still be the hunk's old side
 * (`oldSide`, lines without their "\n"), and its " " and "+" lines are what goes in their place.
 */
export function editedNewSide(edited: string, oldSide: string[]): string[] {
  const before: string[] = [];
  const after: string[] = [];
  const lines = edited.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (const l of lines) {
    if (l.startsWith('#') || l.startsWith('@@') || l.startsWith('\\')) continue;
    const body = l.slice(1);
    if (l === '' || l.startsWith(' ')) {
      before.push(body);
      after.push(body);
    } else if (l.startsWith('-')) before.push(body);
    else if (l.startsWith('+')) after.push(body);
    else
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `an edited hunk's lines start with " ", "-", "+" or "#"; not: ${JSON.stringify(l.slice(0, 40))}`,
      );
  }
  if (before.length !== oldSide.length || before.some((l, i) => l !== oldSide[i]))
    throw new ShadowError(
      'INVALID_ARGUMENT',
      'the edited hunk\'s context and removed lines (" " and "-") are no longer the folder\'s lines it replaces: change only what it adds, or remove a "-" line by making it context',
    );
  return after;
}

/**
 * The file `change` makes when only the units `chosen` (ids) of it are taken: the folder's text
 * with the chosen hunks in (a hunk in `edited`, by id, as the user edited it: see editedNewSide),
 * and the new mode only if its unit is chosen. For a path that is cut into hunks (a modified text
 * file) only.
 */
export function withChosen(change: FileChange, chosen: ReadonlySet<string>, edited: ReadonlyMap<string, string> = new Map()): Side {
  const { old, new: next } = change;
  if (!isTextSide(old) || !isTextSide(next) || old.kind !== 'file' || next.kind !== 'file')
    throw new Error(`${change.path} is not a text file cut into hunks`);
  const oldLines = splitLines(old.data.toString('utf8'));
  const newLines = splitLines(next.data.toString('utf8'));
  const parts: string[] = [];
  let at = 0;
  for (const h of textHunkList(change.path, old.data.toString('utf8'), next.data.toString('utf8'))) {
    if (!chosen.has(h.id) && !edited.has(h.id)) continue;
    parts.push(...oldLines.slice(at, h.old0));
    const region = newLines.slice(h.new0, h.new0 + h.newCount);
    const e = edited.get(h.id);
    if (e === undefined) parts.push(...region);
    else {
      const oldSide = oldLines.slice(h.old0, h.old0 + h.oldCount).map((l) => l.replace(/\n$/, ''));
      const text = editedNewSide(e, oldSide)
        .map((l) => l + '\n')
        .join('');
      // At the end of a file without a newline, the edited lines end without one too.
      const last = region[region.length - 1] ?? oldLines[h.old0 + h.oldCount - 1];
      parts.push(last !== undefined && !last.endsWith('\n') ? text.replace(/\n$/, '') : text);
    }
    at = h.old0 + h.oldCount;
  }
  parts.push(...oldLines.slice(at));
  const modeId = shortHash(change.path, 'mode', String(old.mode), String(next.mode));
  return { kind: 'file', mode: old.mode !== next.mode && chosen.has(modeId) ? next.mode : old.mode, data: Buffer.from(parts.join('')) };
}

/** The agent's file with the units `dropped` taken out again (the folder's text there): how a rejected hunk is reverted in the layer. */
export function withoutDropped(change: FileChange, dropped: ReadonlySet<string>): Side {
  const all = reviewUnits([change]).map((u) => u.id);
  return withChosen(change, new Set(all.filter((id) => !dropped.has(id))));
}

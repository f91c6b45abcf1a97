// The lints service's texts and diagnostics, without any server: applying an agent's range edits
// to a file's text, reading a file a server may be handed as a document (regular files only),
// converting LSP diagnostics to the protocol's, and splitting an agent's diagnostics into those
// its change introduced and those the folder already had.
import * as fs from 'fs';
import type { Diagnostic as LspDiagnostic } from 'vscode-languageserver-protocol';
import { ShadowError } from '../common/errors';
import { Beneath } from '../work/beneath';
import type { Diagnostic } from '../protocol/methods';

export type Position = { line: number; character: number };
export type Range = { start: Position; end: Position };

/** Documents larger than this are not handed to a language server. */
export const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;

/** Applies LSP range edits (line/UTF-16 character positions) to a text. */
export function applyEdits(text: string, edits: ReadonlyArray<{ range: Range; newText: string }>): string {
  const lineStarts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) lineStarts.push(i + 1);
  const offset = (p: Position): number => {
    if (p.line >= lineStarts.length) return text.length;
    const start = lineStarts[p.line];
    const end = p.line + 1 < lineStarts.length ? lineStarts[p.line + 1] - 1 : text.length;
    return Math.min(start + p.character, end);
  };
  const resolved = edits.map((e) => ({ from: offset(e.range.start), to: offset(e.range.end), text: e.newText }));
  for (const r of resolved) if (r.to < r.from) throw new ShadowError('INVALID_ARGUMENT', 'an edit range ends before it starts');
  // Apply from the end so earlier offsets stay valid; overlapping edits are refused.
  resolved.sort((a, b) => b.from - a.from || b.to - a.to);
  for (let i = 1; i < resolved.length; i++) {
    if (resolved[i].to > resolved[i - 1].from) throw new ShadowError('INVALID_ARGUMENT', 'edit ranges overlap');
  }
  let out = text;
  for (const r of resolved) out = out.slice(0, r.from) + r.text + out.slice(r.to);
  return out;
}

export function toDiagnostic(d: LspDiagnostic): Diagnostic {
  const out: Diagnostic = {
    range: { start: { ...d.range.start }, end: { ...d.range.end } },
    message: typeof d.message === 'string' ? d.message : d.message.value,
  };
  if (d.severity !== undefined) out.severity = d.severity;
  if (d.code !== undefined) out.code = d.code;
  if (d.source !== undefined) out.source = d.source;
  return out;
}

function identity(d: Diagnostic): string {
  return `${d.severity ?? ''}|${String(d.code ?? '')}|${d.source ?? ''}|${d.message}`;
}

/** Splits diagnostics into those the baseline does not have (as many times) and those it has. */
export function splitByBaseline(now: Diagnostic[], baseline: Diagnostic[]): { introduced: Diagnostic[]; existing: Diagnostic[] } {
  const left = new Map<string, number>();
  for (const d of baseline) left.set(identity(d), (left.get(identity(d)) ?? 0) + 1);
  const introduced: Diagnostic[] = [];
  const existing: Diagnostic[] = [];
  for (const d of now) {
    const k = identity(d);
    const n = left.get(k) ?? 0;
    if (n > 0) {
      left.set(k, n - 1);
      existing.push(d);
    } else introduced.push(d);
  }
  return { introduced, existing };
}

/**
 * What is at `rel` in the view `root` (a mount the daemon reads, unconfined), never following a
 * link: a regular `file`, `other` (a directory, a FIFO, a link, or a path through a link), or
 * nothing (`missing`). A link an agent made must not send the daemon to where it points (review:
 * `ln -s ~/.aws/credentials leak.ts` had its text quoted back in diagnostics), nor tell whether
 * its target exists.
 */
export function kindBeneath(root: string, rel: string): 'file' | 'other' | 'missing' {
  const dir = Beneath.open(root);
  try {
    const st = dir.lstat(rel);
    return !st ? 'missing' : st.isFile() ? 'file' : 'other';
  } catch (err) {
    if (err instanceof ShadowError && err.code === 'PATH_THROUGH_SYMLINK') return 'other';
    // A path no file can be at (a component that is a file: NOT_A_DIRECTORY or ENOTDIR; too long
    // for the system): one agent's layer must not make every agent's checks fail (review).
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'NOT_A_DIRECTORY' || code === 'ENOTDIR' || code === 'ENAMETOOLONG' || code === 'ENOENT') return 'missing';
    throw err;
  } finally {
    dir.close();
  }
}

/**
 * The text of `rel` in the view `root`, only if it is a regular file reached without a link:
 * opened one component at a time from `root` (work/beneath.ts), a link anywhere on the way is
 * PATH_THROUGH_SYMLINK (the server, confined, reads such a file itself as its own view shows it);
 * opened without blocking and checked on the open descriptor (no race with a swap), so a FIFO,
 * socket or device in a layer is an error here, never a read that holds a libuv thread forever.
 */
export async function readRegularText(root: string, rel: string): Promise<string> {
  const dir = Beneath.open(root);
  let opened: { fd: number; stat: fs.Stats };
  try {
    opened = dir.openFile(rel);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new ShadowError('NOT_FOUND', `${rel}: no such file in this view of the shadow`);
    if (code === 'ELOOP' || code === 'PATH_THROUGH_SYMLINK')
      throw new ShadowError(
        'PATH_THROUGH_SYMLINK',
        `${rel} is a symbolic link or lies through one: shadowfs hands a language server only files of the shadow itself, never where a link points`,
        { cause: err },
      );
    if (code === 'INVALID_ARGUMENT')
      throw new ShadowError(
        'INVALID_ARGUMENT',
        `${rel} is not a regular file (a fifo, socket or device): only regular files are read and checked`,
        { cause: err },
      );
    throw err;
  } finally {
    dir.close();
  }
  const { fd, stat } = opened;
  try {
    if (stat.size > MAX_DOCUMENT_BYTES)
      throw new ShadowError(
        'FILE_TOO_LARGE',
        `${rel} holds ${stat.size} bytes, more than the ${MAX_DOCUMENT_BYTES} a document handed to a language server may hold`,
      );
    return await new Promise<string>((resolve, reject) => fs.readFile(fd, 'utf8', (err, text) => (err ? reject(err) : resolve(text))));
  } finally {
    fs.closeSync(fd);
  }
}

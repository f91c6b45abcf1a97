// The MCP tools over this agent's work as a whole: changes, revert, diff, patch, checkpoints and
// its audit trail; and, offered only with --allow-apply, review_hunks and apply.
import * as z from 'zod';
import { Requests } from '../../protocol/methods';
import { boundedList, capHead, compactJson, LIST_MAX, output, TEXT_MAX_BYTES } from '../shape';
import { ask, protocolSchema, rel, type ToolDef } from './common';

export const WORK_TOOLS: ToolDef[] = [
  {
    name: 'changes',
    title: "This agent's changes",
    description: `${Requests['layer.changes'].summary} One line per path: added, modified, deleted or metadata; at most ${LIST_MAX}.`,
    readOnly: true,
    inputSchema: z.strictObject({}),
    call: async (ctx, _a, extra) => {
      const r = await ask(ctx, 'layer.changes', {}, extra);
      if (!r.changes.length) return output('no changes');
      const lines = r.changes.map(
        (c) => `${c.kind} ${c.path}${c.type === 'directory' ? '/' : ''}${c.excluded ? ` (${c.excluded}: not in diff or apply)` : ''}`,
      );
      return output(boundedList(lines, 'see diff with paths for part of them'));
    },
  },
  {
    name: 'revert',
    title: 'Revert a path',
    description: `${Requests['layer.revert'].summary}`,
    destructive: true,
    inputSchema: z.strictObject({ path: z.string().describe('Relative to the project root, or absolute inside it.') }),
    call: async (ctx, a, extra) => {
      const r = await ask(ctx, 'layer.revert', { path: await rel(ctx, a.path) }, extra);
      return output(`reverted ${r.path}: the folder's version shows there again`);
    },
  },
  {
    name: 'diff',
    title: 'Diff of the changes',
    description: `${Requests['layer.diff'].summary} At most ${TEXT_MAX_BYTES / 1024} KB shown; pass paths for part of it.`,
    readOnly: true,
    inputSchema: protocolSchema('layer.diff'),
    call: async (ctx, a, extra) => {
      const paths = Array.isArray(a.paths) ? await Promise.all(a.paths.map((p) => rel(ctx, p))) : undefined;
      const r = await ask(ctx, 'layer.diff', { ...a, paths }, extra);
      return output(r.text ? capHead(r.text, TEXT_MAX_BYTES, 'pass paths to see the diff of some files') : '(no changes)');
    },
  },
  {
    name: 'patch',
    title: 'Git patch of the changes',
    description: `${Requests['layer.patch'].summary} At most ${TEXT_MAX_BYTES / 1024} KB shown; pass paths for part of it.`,
    readOnly: true,
    inputSchema: protocolSchema('layer.patch'),
    call: async (ctx, a, extra) => {
      const paths = Array.isArray(a.paths) ? await Promise.all(a.paths.map((p) => rel(ctx, p))) : undefined;
      const r = await ask(ctx, 'layer.patch', { ...a, paths }, extra);
      return output(r.text ? capHead(r.text, TEXT_MAX_BYTES, 'pass paths to get the patch of some files') : '(no changes)');
    },
  },
  {
    name: 'checkpoint',
    title: 'Save a checkpoint',
    description: Requests['layer.checkpoint'].summary,
    inputSchema: protocolSchema('layer.checkpoint'),
    call: async (ctx, a, extra) => {
      const r = await ask(ctx, 'layer.checkpoint', a, extra);
      return output(`checkpoint ${r.name}: ${r.files} files, ${r.bytes} bytes`);
    },
  },
  {
    name: 'restore_checkpoint',
    title: 'Restore a checkpoint',
    description: Requests['layer.restore'].summary,
    destructive: true,
    inputSchema: protocolSchema('layer.restore'),
    call: async (ctx, a, extra) => {
      const r = await ask(ctx, 'layer.restore', a, extra);
      return output(`restored checkpoint ${r.name}: ${r.paths} paths`);
    },
  },
  {
    name: 'list_checkpoints',
    title: 'List checkpoints',
    description: Requests['layer.checkpoints'].summary,
    readOnly: true,
    inputSchema: protocolSchema('layer.checkpoints'),
    call: async (ctx, a, extra) => {
      const r = await ask(ctx, 'layer.checkpoints', a, extra);
      if (!r.checkpoints.length) return output('no checkpoints');
      return output(
        boundedList(
          r.checkpoints.map((c) => compactJson(c)),
          'restore or remove old ones',
        ),
      );
    },
  },
  {
    name: 'audit',
    title: "What this agent's programs did",
    description: `${Requests['layer.audit'].summary} This agent's own record only, read-only; the newest ${LIST_MAX} unless limit says fewer.`,
    readOnly: true,
    inputSchema: protocolSchema('layer.audit'),
    call: async (ctx, a, extra) => {
      const limit = typeof a.limit === 'number' ? Math.min(a.limit, LIST_MAX) : LIST_MAX;
      const r = await ask(ctx, 'layer.audit', { ...a, limit }, extra);
      const lines = r.entries.map((e) => {
        const where = e.to !== undefined ? `${e.path} -> ${e.to}` : e.path;
        return `${e.time} ${e.comm || '?'}[${e.pid}] ${e.op}${e.write ? '(w)' : ''} ${where}${e.bytes ? ` ${e.bytes}B` : ''}`;
      });
      const head = [
        ...(r.dropped
          ? [`(${r.dropped} oldest entries dropped to keep the record within ${r.maxEntries} entries / ${r.maxBytes} bytes)`]
          : []),
        ...(r.matched > r.entries.length ? [`(${r.matched - r.entries.length} older matching entries not shown)`] : []),
      ];
      return output([...head, ...(lines.length ? lines : ['nothing recorded'])].join('\n'));
    },
  },
];

/** How much of each conflicting file's merged text apply shows. */
const CONFLICT_MAX_BYTES = 4 * 1024;

/** The user's side of review, offered with apply: the changes as hunks with ids that apply's hunks parameter takes. */
export const REVIEW: ToolDef = {
  name: 'review_hunks',
  title: 'List the changes as hunks',
  description:
    "This agent's changes as hunks with stable ids (whole files where they cannot be cut); apply with hunks: [ids] writes only those to the user's folder.",
  readOnly: true,
  inputSchema: protocolSchema('layer.hunks'),
  call: async (ctx, a, extra) => output(compactJson(await ask(ctx, 'layer.hunks', a, extra))),
};

export const APPLY: ToolDef = {
  name: 'apply',
  title: "Apply the changes to the user's folder",
  description:
    "Writes this agent's changes into the user's real folder (the only tool that does). Files the user changed meanwhile come back as conflicts and are not written unless resolutions say how. With branch, no file is written: this agent's commits (its HEAD) come into the user's repository as that new branch instead (force replaces an existing one). The answer is compact JSON; each conflict shows only its conflicting regions with a few lines around them (or its merge cut to 4 KB), not the full copies: read_file the path for yours.",
  destructive: true,
  inputSchema: protocolSchema('layer.apply'),
  call: async (ctx, a, extra) => {
    const paths = Array.isArray(a.paths) ? await Promise.all(a.paths.map((p) => rel(ctx, p))) : undefined;
    const r = await ask(ctx, 'layer.apply', { ...a, ...(paths ? { paths } : {}) }, extra);
    const conflicts = r.conflicts.map((c) => ({
      path: c.path,
      reason: c.reason,
      binary: c.binary,
      mergeConflicts: c.mergeConflicts,
      // Only the conflicting regions, each with a few lines around it, where the merge has them;
      // else the merge (conflict markers) cut to a bound.
      ...(c.regions
        ? { regions: c.regions }
        : { merged: c.merged === null ? null : capHead(c.merged, CONFLICT_MAX_BYTES, `read_file ${c.path} for your version`) }),
    }));
    const more = r.applied.length - LIST_MAX;
    return output(compactJson({ ...r, applied: r.applied.slice(0, LIST_MAX), ...(more > 0 ? { appliedNotShown: more } : {}), conflicts }));
  },
};

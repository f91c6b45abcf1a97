// The MCP file tools: read, write, edit, delete, move, list, glob and grep on this agent's layer,
// answered from the daemon's file requests without switching the shared mount.
import * as z from 'zod';
import { ShadowError } from '../../common/errors';
import { Requests } from '../../protocol/methods';
import { boundedList, cutLine, LIST_MAX, numberLines, output, READ_DEFAULT_LINES } from '../shape';
import { ask, protocolSchema, rel, relOpt, type ToolDef } from './common';
import { lintsNote } from './lints';

export const FILE_TOOLS: ToolDef[] = [
  {
    name: 'read_file',
    title: 'Read a file',
    description: `Reads a text file as this agent sees it, lines numbered from 1 as cat -n prints them: ${READ_DEFAULT_LINES} lines from offset unless limit says otherwise, lines longer than 2000 characters cut. The first line says the file's line count and its hash (what write_file and edit_file take in expect.hash).`,
    readOnly: true,
    inputSchema: z.strictObject({
      path: z.string().describe('Relative to the project root, or absolute inside it.'),
      offset: z.number().int().min(1).optional().describe('The first line to read, 1-based (default 1).'),
      limit: z.number().int().min(1).optional().describe(`How many lines (default ${READ_DEFAULT_LINES}).`),
    }),
    call: async (ctx, a, extra) => {
      const p = await rel(ctx, a.path);
      const offset = (a.offset as number | undefined) ?? 1;
      const limit = (a.limit as number | undefined) ?? READ_DEFAULT_LINES;
      const r = await ask(ctx, 'file.read', { path: p, startLine: offset, endLine: offset + limit - 1 }, extra);
      const hash = r.hash ? `, hash ${r.hash}` : '';
      if (r.binary) return output(`${r.path} is a binary file (${r.size ?? '?'} bytes${hash}); it is not shown`);
      if (r.totalLines === 0) return output(`${r.path} is empty${hash}`);
      if (offset > r.totalLines)
        throw new ShadowError('INVALID_ARGUMENT', `${r.path} has ${r.totalLines} lines; offset ${offset} is past its end`);
      const lines = r.content.split('\n');
      if (lines.length && lines[lines.length - 1] === '' && r.content.endsWith('\n')) lines.pop();
      const head = `${r.path}: lines ${r.startLine}-${r.endLine} of ${r.totalLines}${hash}`;
      const rest = r.endLine < r.totalLines ? [`[${r.totalLines - r.endLine} more lines; read on with offset ${r.endLine + 1}]`] : [];
      return output([head, numberLines(lines, r.startLine), ...rest].join('\n'));
    },
  },
  {
    name: 'write_file',
    title: 'Write a file',
    description: `${Requests['file.write'].summary} Paths relative to the project root or absolute inside it. The result carries the lints the language server gives for the change (those it introduced), or says it had no fresh answer.`,
    inputSchema: protocolSchema('file.write', ['mode']).extend({
      path: z.string().describe('Relative to the project root, or absolute inside it.'),
    }),
    call: async (ctx, a, extra) => {
      const p = await rel(ctx, a.path);
      const r = await ask(ctx, 'file.write', { ...a, path: p }, extra);
      const out = output(`wrote ${r.path}: ${r.bytes} bytes${r.created ? ', a new file' : ''}${r.hash ? ` (hash ${r.hash})` : ''}`);
      const note = await lintsNote(ctx, r.path);
      if (note) out.notes.push(note);
      return out;
    },
  },
  {
    name: 'edit_file',
    title: 'Replace exact text in a file',
    description: `${Requests['file.edit'].summary} The result carries the lints of the change (those it introduced), or says there was no fresh answer.`,
    inputSchema: protocolSchema('file.edit').extend({ path: z.string().describe('Relative to the project root, or absolute inside it.') }),
    call: async (ctx, a, extra) => {
      const p = await rel(ctx, a.path);
      const r = await ask(ctx, 'file.edit', { ...a, path: p }, extra);
      const out = output(`edited ${r.path}: ${r.replacements} replacement${r.replacements === 1 ? '' : 's'}`);
      const note = await lintsNote(ctx, r.path);
      if (note) out.notes.push(note);
      return out;
    },
  },
  {
    name: 'delete_file',
    title: 'Delete a file or directory',
    description:
      "Deletes a file, or a directory with everything in it, in this agent's layer (the folder keeps it until the changes are applied; revert brings it back).",
    destructive: true,
    inputSchema: z.strictObject({ path: z.string().describe('Relative to the project root, or absolute inside it.') }),
    call: async (ctx, a, extra) => {
      const r = await ask(ctx, 'layer.remove', { path: await rel(ctx, a.path) }, extra);
      return output(`deleted ${r.path} in your layer (revert brings it back)`);
    },
  },
  {
    name: 'move_file',
    title: 'Move or rename a file',
    description:
      "Moves one file in this agent's layer: its bytes to the new path (parents made; the new file gets mode 0644), then the old path deleted. A directory is refused: move it with run_command (mv). An existing destination is refused unless overwrite.",
    destructive: true,
    inputSchema: z.strictObject({
      from: z.string().describe('The file to move: relative to the project root, or absolute inside it.'),
      to: z.string().describe('Its new path.'),
      overwrite: z.boolean().optional().describe('Replace an existing file at to.'),
    }),
    call: async (ctx, a, extra) => {
      const from = await rel(ctx, a.from);
      const to = await rel(ctx, a.to);
      if (from === to) throw new ShadowError('INVALID_ARGUMENT', 'from and to are the same path');
      const src = await ask(ctx, 'layer.read', { path: from }, extra).catch((err: unknown) => {
        if (err instanceof ShadowError && err.code === 'IS_DIRECTORY')
          throw new ShadowError(
            'IS_DIRECTORY',
            `${from} is a directory; move_file moves one file: use run_command with mv for a directory`,
          );
        throw err;
      });
      const existing = await ask(ctx, 'layer.read', { path: to, offset: 0, length: 0 }, extra).then(
        () => true,
        (err: unknown) => {
          if (err instanceof ShadowError && err.code === 'NOT_FOUND') return false;
          throw err;
        },
      );
      if (existing && a.overwrite !== true)
        throw new ShadowError('CONFLICT', `${to} exists; pass overwrite: true to replace it, or choose another path`);
      await ask(ctx, 'layer.write', { path: to, data: src.data }, extra);
      await ask(ctx, 'layer.remove', { path: from }, extra);
      return output(`moved ${from} to ${to} (${src.size ?? Buffer.from(src.data, 'base64').length} bytes)`);
    },
  },
  {
    name: 'list_directory',
    title: 'List a directory',
    description: `${Requests['file.list'].summary} Shows at most ${LIST_MAX} entries ("name/" for directories).`,
    readOnly: true,
    inputSchema: protocolSchema('file.list').extend({
      path: z.string().optional().describe('Default: the root. Absolute inside the project works too.'),
    }),
    call: async (ctx, a, extra) => {
      const p = await relOpt(ctx, a.path);
      const r = await ask(ctx, 'file.list', { ...a, path: p, limit: Math.min((a.limit as number | undefined) ?? 1000, 5000) }, extra);
      if (!r.entries.length) return output(`${p ?? '.'} is empty`);
      const lines = r.entries.map((e) =>
        e.type === 'directory' ? `${e.path}/` : e.size !== undefined ? `${e.path} (${e.size} bytes)` : e.path,
      );
      return output(boundedList(lines, 'list a subdirectory, or use glob with a narrower pattern', { moreBeyond: r.truncated }));
    },
  },
  {
    name: 'glob',
    title: 'Find files by glob',
    description: `${Requests['file.glob'].summary} Shows at most ${LIST_MAX} paths.`,
    readOnly: true,
    inputSchema: protocolSchema('file.glob').extend({
      cwd: z.string().optional().describe('Relative to the project root, or absolute inside it.'),
    }),
    call: async (ctx, a, extra) => {
      const cwd = await relOpt(ctx, a.cwd);
      const r = await ask(ctx, 'file.glob', { ...a, cwd, limit: Math.min((a.limit as number | undefined) ?? 1000, 5000) }, extra);
      if (!r.paths.length) return output(`no path matches ${a.pattern as string}`);
      return output(boundedList(r.paths, 'narrow the pattern', { moreBeyond: r.truncated }));
    },
  },
  {
    name: 'grep',
    title: 'Search file contents',
    description: `${Requests['file.grep'].summary} Matches as path:line:text (1-based lines; context lines as path-line-text), at most ${LIST_MAX} matches (maxMatches: fewer), lines cut at 500 characters.`,
    readOnly: true,
    inputSchema: protocolSchema('file.grep').extend({
      path: z.string().optional().describe('A file or directory to search (default: everything); absolute inside the project works too.'),
    }),
    call: async (ctx, a, extra) => {
      const p = await relOpt(ctx, a.path);
      const want = Math.min((a.maxMatches as number | undefined) ?? LIST_MAX, LIST_MAX);
      const r = await ask(ctx, 'file.grep', { ...a, path: p, maxMatches: want + 1 }, extra);
      if (!r.matches.length) return output(`no match in ${r.filesSearched} files`);
      const lines: string[] = [];
      for (const m of r.matches.slice(0, want)) {
        if (a.context && lines.length) lines.push('--');
        (m.before ?? []).forEach((t, i, all) => lines.push(`${m.path}-${m.line - all.length + i}-${cutLine(t, 500)}`));
        lines.push(`${m.path}:${m.line}:${cutLine(m.text, 500)}`);
        (m.after ?? []).forEach((t, i) => lines.push(`${m.path}-${m.line + 1 + i}-${cutLine(t, 500)}`));
      }
      const more = r.matches.length > want || r.truncated;
      if (more)
        lines.push(`[… more matches not shown (${want} shown of ${r.filesSearched} files searched); narrow the pattern, path or glob]`);
      return output(lines.join('\n'));
    },
  },
];

// The MCP server's tools, as data: each one's input schema (the protocol's own parameters where
// they fit, without shadow and agent; shaped as agents call them where they do not: read_file's
// offset and limit, run_command's command line, positions as 1-based line and column) and the
// call that turns it into daemon requests and a bounded text answer (shape.ts).
import * as z from 'zod';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { ShadowError } from '../common/errors';
import type { Diagnostic } from '../protocol/lsp';
import { Requests, type MethodName, type ParamsOf, type ResultOf } from '../protocol/methods';
import type { DaemonLink } from './link';
import type { OwnView } from './own-view';
import { toRootRelative } from './paths';
import { BackgroundRuns, exitLine, newRunId, POLL_MAX_WAIT_S } from './runs';
import {
  boundedList,
  capHead,
  capMiddle,
  compactJson,
  cutLine,
  LIST_MAX,
  numberLines,
  output,
  OUTPUT_HEAD_BYTES,
  OUTPUT_TAIL_BYTES,
  READ_DEFAULT_LINES,
  TEXT_MAX_BYTES,
  type ToolOutput,
} from './shape';

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface ToolContext {
  shadow: string;
  agent: string;
  link: DaemonLink;
  runs: BackgroundRuns;
  /** The agent's view of its own, opened when it asks (use_own_view). */
  ownView: OwnView;
  /** Starts progress notifications for a queued run (when the client asked for progress); returns how to stop. */
  progressWhileQueued: (runId: string, extra: Extra) => (() => void) | undefined;
}

export interface ToolDef {
  name: string;
  title: string;
  description: string;
  inputSchema: z.ZodObject;
  readOnly?: boolean;
  destructive?: boolean;
  call: (ctx: ToolContext, args: Record<string, unknown>, extra: Extra) => Promise<ToolOutput>;
}

/** How long the lints that come with an edit's result may take (ms). */
export const EDIT_LINTS_TIMEOUT_MS = 3000;

/** The protocol's parameter schema of `method` without shadow, agent and `hide`. */
function protocolSchema(method: MethodName, hide: string[] = []): z.ZodObject {
  const omit: Record<string, true> = { shadow: true, agent: true };
  for (const h of hide) omit[h] = true;
  return (Requests[method].params as unknown as z.ZodObject).omit(omit);
}

/** A request of this agent on its shadow, with `params` besides. */
async function ask<M extends MethodName>(
  ctx: ToolContext,
  method: M,
  params: Record<string, unknown>,
  extra?: Extra,
): Promise<ResultOf<M>> {
  return ctx.link.request(method, { ...params, shadow: ctx.shadow, agent: ctx.agent } as ParamsOf<M>, extra?.signal);
}

/** A path argument as the daemon takes it: absolute paths inside the project made relative. */
async function rel(ctx: ToolContext, p: unknown): Promise<string> {
  if (typeof p !== 'string') throw new ShadowError('INVALID_PATH', 'path must be a string');
  return toRootRelative(p, await ctx.link.roots());
}

async function relOpt(ctx: ToolContext, p: unknown): Promise<string | undefined> {
  if (p === undefined) return undefined;
  const r = await rel(ctx, p);
  return r === '.' ? undefined : r;
}

/** An LSP position (0-based) as `line:column`, 1-based like every line number these tools show. */
const at = (pos: { line: number; character: number }): string => `${pos.line + 1}:${pos.character + 1}`;
const SEVERITY = ['', 'error', 'warning', 'info', 'hint'];
const diagLine = (p: string, d: Diagnostic): string =>
  `${p}:${at(d.range.start)}: ${SEVERITY[d.severity ?? 1] ?? 'error'}: ${cutLine(d.message.replace(/\s*\n\s*/g, ' '), 300)}${d.source ? ` [${d.source}${d.code !== undefined ? ` ${d.code}` : ''}]` : ''}`;

function lintsText(r: ResultOf<'lints'>, max = LIST_MAX): string {
  const lines: string[] = [];
  for (const f of r.files) {
    const where = f.server ? ` (${f.server})` : '';
    if (f.status === 'fresh' && (f.baseline === 'timeout' || f.baseline === 'error' || f.baseline === 'queued'))
      lines.push(
        `${f.path}: ${f.introduced.length} found${where}; the folder's own are not known yet (${f.baseline === 'queued' ? 'its check waits for the shared mount' : `its check gave ${f.baseline}`}), so some may have been there before your change`,
      );
    else if (f.status === 'fresh')
      lines.push(`${f.path}: ${f.introduced.length} introduced by the change, ${f.existing.length} already in the folder${where}`);
    else if (f.status === 'queued')
      lines.push(
        `${f.path}: queued: no answer, the shared mount was busy with ${f.waitingFor ?? 'another job'}; call lints again later, or call use_own_view to stop waiting for others`,
      );
    else if (f.status === 'timeout')
      lines.push(`${f.path}: timeout: no fresh answer in time (not "no problems"); call lints again with a larger timeoutMs`);
    else if (f.status === 'unsupported') lines.push(`${f.path}: no language server for this file`);
    else lines.push(`${f.path}: error: ${f.error ?? 'the language server failed'}`);
    for (const d of f.introduced) lines.push(`  ${diagLine(f.path, d)}`);
  }
  return boundedList(lines, 'pass paths to check fewer files', { max });
}

/**
 * The lints of a file just written or edited, as a note for the edit's result: only what the
 * change introduced, nothing for a file no language server knows, and a plain word when no fresh
 * answer came within EDIT_LINTS_TIMEOUT_MS.
 */
async function lintsNote(ctx: ToolContext, p: string): Promise<string | undefined> {
  let r: ResultOf<'lints'>;
  try {
    r = await ask(ctx, 'lints', { paths: [p], timeoutMs: EDIT_LINTS_TIMEOUT_MS });
  } catch (err) {
    return `lints: not checked (${(err as Error).message})`;
  }
  const f = r.files[0];
  if (!f || f.status === 'unsupported') return undefined;
  if (f.status === 'fresh') {
    if (!f.introduced.length) return `lints: no new problems in ${f.path}`;
    const known = f.baseline !== 'timeout' && f.baseline !== 'error' && f.baseline !== 'queued';
    const head = known
      ? `your change introduced ${f.introduced.length} problem(s)`
      : `${f.introduced.length} problem(s) (the folder's own are not known yet: some may have been there before your change)`;
    return `lints: ${head}:\n${boundedList(
      f.introduced.map((d) => diagLine(f.path, d)),
      'call lints for all of them',
      { max: 20 },
    )}`;
  }
  if (f.status === 'error') return `lints: the language server failed (${f.error ?? 'no reason given'}); call lints to try again`;
  return `lints: no fresh answer within ${EDIT_LINTS_TIMEOUT_MS / 1000} s (${f.status === 'queued' ? `the shared mount was busy with ${f.waitingFor ?? 'another job'}` : 'the language server is slow or starting'}); call lints later for ${f.path}`;
}

const position = {
  path: z.string().describe('The file: relative to the project root, or absolute inside it.'),
  line: z.number().int().min(1).describe('Line, 1-based (as read_file and grep number lines).'),
  column: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('Column, 1-based; default: where symbol starts on the line, else its first non-blank.'),
  symbol: z.string().min(1).optional().describe('The name on that line to ask about (instead of a column).'),
  timeoutMs: z.number().int().positive().max(600_000).optional(),
};

/** The LSP position (0-based) the tool's line, column or symbol name. */
async function lspPosition(ctx: ToolContext, p: string, args: Record<string, unknown>): Promise<{ line: number; character: number }> {
  const line = args.line as number;
  if (typeof args.column === 'number') return { line: line - 1, character: args.column - 1 };
  const r = await ask(ctx, 'file.read', { path: p, startLine: line, endLine: line });
  const text = r.content.replace(/\n$/, '');
  if (r.totalLines < line) throw new ShadowError('INVALID_ARGUMENT', `${p} has ${r.totalLines} lines, not ${line}`);
  if (typeof args.symbol === 'string') {
    const i = text.indexOf(args.symbol);
    if (i < 0) throw new ShadowError('NO_MATCH', `${JSON.stringify(args.symbol)} is not on line ${line} of ${p}: ${cutLine(text, 200)}`);
    return { line: line - 1, character: i };
  }
  return { line: line - 1, character: Math.max(0, text.search(/\S/)) };
}

/** Why a definition, references or hover question has no answer, as an agent reads it. */
function noAnswer(r: ResultOf<'lsp.hover'>, what: string): string {
  if (r.status === 'queued')
    return `${what}: queued: no answer, the shared mount was busy with ${r.waitingFor ?? 'another job'}; ask again later, or call use_own_view to stop waiting for others`;
  return `${what}: ${r.status}${r.error ? ` (${r.error})` : ''}; no answer from a language server`;
}

function locationsText(r: ResultOf<'lsp.definition'>, what: string): string {
  if (r.status !== 'fresh') return noAnswer({ ...r, contents: '' }, what);
  if (!r.locations.length) return `${what}: none found`;
  return boundedList(
    r.locations.map((l) => `${l.path}:${at(l.range.start)}`),
    'ask about a narrower symbol',
  );
}

const runSchema = protocolSchema('run', [
  'runId',
  'atOriginalPath',
  'originalPath',
  'unprotected',
  'discardWrites',
  'shell',
  'argv',
  'cwd',
]).extend({
  command: z
    .string()
    .min(1)
    .optional()
    .describe('A shell command line, run with sh -c (e.g. "npm test 2>&1 | tail -50"). Give command or argv.'),
  argv: z.array(z.string()).min(1).optional().describe('The command and its arguments, run without a shell. Give command or argv.'),
  cwd: z.string().optional().describe('Working directory: relative to the project root, or absolute inside it.'),
  background: z
    .boolean()
    .optional()
    .describe(
      'Start it and answer at once with its run id; run_output then gives its output as it comes and its end, cancel_run stops it.',
    ),
});

const RUN_DESCRIPTION = `Runs a command in the project with this agent's changes visible, at the folder's own path, taking turns with other agents (not after use_own_view); the folder itself is never written. Give a shell command line (command) or argv. It has no terminal and no input: editors and prompts fail at once (give git commit -m). It may run 600 s unless timeout (seconds; 0: no limit) says otherwise; cancelling the call interrupts it. Each output stream shows its first ${OUTPUT_HEAD_BYTES / 1024} KB and last ${OUTPUT_TAIL_BYTES / 1024} KB; redirect to a file and read_file it for all. With background: true it answers at once with a run id (run_output, cancel_run).`;

export const TOOLS: ToolDef[] = [
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
  {
    name: 'run_command',
    title: 'Run a command in the project',
    description: RUN_DESCRIPTION,
    inputSchema: runSchema,
    call: async (ctx, a, extra) => {
      const { command, argv, background, cwd, ...rest } = a as { command?: string; argv?: string[]; background?: boolean; cwd?: string };
      if ((command === undefined) === (argv === undefined))
        throw new ShadowError(
          'INVALID_ARGUMENT',
          'give either command (a shell command line) or argv (a command and its arguments), not both nor neither',
        );
      const runId = newRunId();
      const params: Record<string, unknown> = {
        ...rest,
        argv: command !== undefined ? [command] : argv,
        ...(command !== undefined ? { shell: true } : {}),
        ...(cwd !== undefined ? { cwd: await rel(ctx, cwd) } : {}),
        runId,
      };
      const label = command ?? (argv ?? []).join(' ');
      if (background) {
        ctx.runs.start({ ...params, shadow: ctx.shadow, agent: ctx.agent } as ParamsOf<'run'>, cutLine(label, 80));
        return output(
          `started run ${runId} in the background: ${cutLine(label, 200)}\ncall run_output with runId ${runId} for its output and end, cancel_run to stop it`,
        );
      }
      const unlisten = ctx.progressWhileQueued(runId, extra);
      try {
        const r = await ask(ctx, 'run', params, extra);
        const how =
          'run it again with its output redirected to a file (command: "… > out.log 2>&1") and read_file that with offset and limit';
        const parts = [exitLine(r)];
        for (const stream of ['stdout', 'stderr'] as const) {
          if (!r[stream]) continue;
          parts.push(`--- ${stream}\n${capMiddle(r[stream], OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES, how).text}`);
        }
        if (r.outputTruncated) parts.push(`[the daemon kept only part of the output; ${how}]`);
        return output(parts.join('\n'));
      } finally {
        unlisten?.();
      }
    },
  },
  {
    name: 'use_own_view',
    title: 'Stop taking turns with other agents',
    description:
      "Opens a view of the project of this agent's own (a mount that always shows its changes), so that run_command, lints, definition, references and hover run at once instead of waiting while another agent's command holds the shared mount. Call it when a result said queued, or before long runs. It stays open until this server ends.",
    inputSchema: z.strictObject({}),
    call: async (ctx) => output(await ctx.ownView.use()),
  },
  {
    name: 'run_output',
    title: 'Output of a background run',
    description: `New output of a background run since the last call (at most ${TEXT_MAX_BYTES / 1024} KB; the rest waits for the next call), and its exit status once it ended.`,
    readOnly: true,
    inputSchema: z.strictObject({
      runId: z.string().min(1).describe('The id run_command gave.'),
      wait: z
        .number()
        .min(0)
        .max(POLL_MAX_WAIT_S)
        .optional()
        .describe(`Seconds to wait for new output or the end when there is none yet (default 0, at most ${POLL_MAX_WAIT_S}).`),
    }),
    call: async (ctx, a) => output(await ctx.runs.poll(a.runId as string, (a.wait as number | undefined) ?? 0)),
  },
  {
    name: 'cancel_run',
    title: 'Cancel a background run',
    description: 'Cancels a background run: its command is interrupted, then killed after a grace period.',
    destructive: true,
    inputSchema: z.strictObject({ runId: z.string().min(1).describe('The id run_command gave.') }),
    call: async (ctx, a) => output(await ctx.runs.cancel(a.runId as string)),
  },
  {
    name: 'lints',
    title: 'Diagnostics for the change',
    description: `${Requests.lints.summary} Positions are 1-based line:column.`,
    inputSchema: protocolSchema('lints', ['edits', 'quickFixes']).extend({
      paths: z
        .array(z.string())
        .optional()
        .describe("Files to check (relative or absolute inside the project); default: every file this agent's layer changed."),
    }),
    call: async (ctx, a, extra) => {
      const paths = Array.isArray(a.paths) ? await Promise.all(a.paths.map((p) => rel(ctx, p))) : undefined;
      const r = await ask(ctx, 'lints', { ...a, paths }, extra);
      if (!r.files.length) return output('no changed file to check');
      return output(lintsText(r));
    },
  },
  {
    name: 'definition',
    title: 'Go to definition',
    description: 'Where the symbol at a position (1-based line, and column or symbol name) is defined, as path:line:column.',
    readOnly: true,
    inputSchema: z.strictObject(position),
    call: async (ctx, a, extra) => {
      const p = await rel(ctx, a.path);
      const r = await ask(ctx, 'lsp.definition', { path: p, position: await lspPosition(ctx, p, a), timeoutMs: a.timeoutMs }, extra);
      return output(locationsText(r, 'definition'));
    },
  },
  {
    name: 'references',
    title: 'Find references',
    description: `Every reference to the symbol at a position (1-based line, and column or symbol name), as path:line:column; at most ${LIST_MAX}.`,
    readOnly: true,
    inputSchema: z.strictObject(position),
    call: async (ctx, a, extra) => {
      const p = await rel(ctx, a.path);
      const r = await ask(ctx, 'lsp.references', { path: p, position: await lspPosition(ctx, p, a), timeoutMs: a.timeoutMs }, extra);
      return output(locationsText(r, 'references'));
    },
  },
  {
    name: 'hover',
    title: 'Hover information',
    description: 'The type and documentation of the symbol at a position (1-based line, and column or symbol name).',
    readOnly: true,
    inputSchema: z.strictObject(position),
    call: async (ctx, a, extra) => {
      const p = await rel(ctx, a.path);
      const r = await ask(ctx, 'lsp.hover', { path: p, position: await lspPosition(ctx, p, a), timeoutMs: a.timeoutMs }, extra);
      if (r.status !== 'fresh') return output(noAnswer(r, 'hover'));
      return output(r.contents ? capHead(r.contents, 8 * 1024, 'ask definition and read_file it') : 'hover: nothing there');
    },
  },
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
        ...(r.dropped ? [`(${r.dropped} oldest entries dropped to stay within ${r.maxEntries} entries)`] : []),
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

// The MCP lint and code-navigation tools (lints, definition, references, hover) and the text
// they answer with: diagnostics and locations as file:line:column lines, bounded.
import * as z from 'zod';
import { ShadowError } from '../../common/errors';
import type { Diagnostic } from '../../protocol/lsp';
import { Requests, type ResultOf } from '../../protocol/methods';
import { boundedList, capHead, cutLine, LIST_MAX, output } from '../shape';
import { ask, EDIT_LINTS_TIMEOUT_MS, protocolSchema, rel, type ToolContext, type ToolDef } from './common';

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
export async function lintsNote(ctx: ToolContext, p: string): Promise<string | undefined> {
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

export const LINT_TOOLS: ToolDef[] = [
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
];

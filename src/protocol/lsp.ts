// The protocol's requests to the language servers running inside a shadow: lints (what they say
// about an agent's change) and the navigation requests lsp.definition, references and hover, with
// the LSP shapes they answer in. Served by src/daemon/handlers/lsp.ts.
import * as z from 'zod';
import type { ErrorCode } from './errors';
import { agentId, relPath, request, shadowRef } from './shared';

export const Position = z
  .strictObject({ line: z.number().int().min(0), character: z.number().int().min(0) })
  .describe('Zero-based line and UTF-16 column, as LSP counts.');
export const Range = z.strictObject({ start: Position, end: Position });
export const Diagnostic = z
  .object({
    range: Range,
    severity: z.number().int().min(1).max(4).optional().describe('1 error, 2 warning, 3 information, 4 hint.'),
    code: z.union([z.string(), z.number()]).optional(),
    source: z.string().optional(),
    message: z.string(),
  })
  .describe('A diagnostic in LSP shape.');
export type Diagnostic = z.infer<typeof Diagnostic>;
export const TextEdit = z.object({ path: z.string(), range: Range, newText: z.string() });
export const Location = z.object({ path: z.string().describe('Relative to the shadow root; absolute when outside it.'), range: Range });

export const FileLints = z.object({
  path: z.string(),
  status: z
    .enum(['fresh', 'timeout', 'queued', 'unsupported', 'error'])
    .describe(
      'fresh: the server answered for exactly this version; timeout: it did not within timeoutMs (never "no problems"); queued: the check never got the shared mount within timeoutMs (waitingFor says whose job held it); unsupported: no server for this file.',
    ),
  waitingFor: z
    .string()
    .optional()
    .describe('For "queued": the agent whose job held the shared mount ("(folder)": the folder\'s own check).'),
  error: z.string().optional(),
  server: z.string().optional().describe('Which language server answered.'),
  version: z.number().int().optional().describe('The document version the answer is for.'),
  introduced: z.array(Diagnostic).describe('Diagnostics the folder itself does not have.'),
  existing: z.array(Diagnostic).describe('Diagnostics the folder has too (its baseline).'),
  baseline: z
    .enum(['fresh', 'cached', 'timeout', 'error', 'queued', 'none'])
    .optional()
    .describe(
      "How the folder's own diagnostics were known. Unless fresh or cached, every diagnostic is listed as introduced. queued: the agent has a view of its own, and the folder's check (on the shared mount, busy with another job) was not waited for.",
    ),
  quickFixes: z
    .array(
      z.object({ title: z.string(), diagnostic: z.number().int().optional().describe('Index into introduced.'), edits: z.array(TextEdit) }),
    )
    .optional(),
});

const atPosition = z.strictObject({
  shadow: shadowRef,
  agent: agentId,
  path: relPath,
  position: Position,
  timeoutMs: z.number().int().positive().max(600_000).optional(),
});
const answerStatus = z
  .enum(['fresh', 'timeout', 'queued', 'unsupported', 'error'])
  .describe(
    'fresh: the server answered; timeout: it did not within timeoutMs; queued: the question never got the shared mount within timeoutMs (waitingFor says whose job held it; an agent with a view of its own never queues); unsupported: no server for this file.',
  );
const waitingFor = z
  .string()
  .optional()
  .describe('For "queued": the agent whose job held the shared mount ("(folder)": the folder\'s own check).');
const locationsAnswer = z.object({ status: answerStatus, waitingFor, error: z.string().optional(), locations: z.array(Location) });
const atPositionErrors: ErrorCode[] = ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'NOT_FOUND', 'NOT_MOUNTED'];

export const LspRequests = {
  lints: request({
    summary:
      "What the language servers say about an agent's change: edits (optional) are applied to the agent's layer first, then each file is checked on a warm server running in the shadow with that layer active (in the agent's own view when it has one, without queueing), and split into diagnostics the change introduced and those the folder already has.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      paths: z.array(relPath).optional().describe("Files to check; default: the edited files, else every file the agent's layer changed."),
      edits: z
        .array(
          z.strictObject({
            path: relPath,
            content: z.string().optional().describe('The whole new content.'),
            edits: z
              .array(z.strictObject({ range: Range, newText: z.string() }))
              .optional()
              .describe('Range edits on the content as the agent sees it.'),
          }),
        )
        .optional(),
      timeoutMs: z.number().int().positive().max(600_000).optional().describe('Deadline for the whole answer (default 10000).'),
      quickFixes: z.boolean().optional().describe("Also return the server's code actions for the introduced diagnostics."),
    }),
    result: z.object({ files: z.array(FileLints), ms: z.number() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'INVALID_ARGUMENT', 'NOT_FOUND', 'NOT_MOUNTED', 'TIMEOUT'],
  }),
  'lsp.definition': request({
    summary: "Where the symbol at a position is defined, as the agent's layer shows the code.",
    params: atPosition,
    result: locationsAnswer,
    errors: atPositionErrors,
  }),
  'lsp.references': request({
    summary: "Every reference to the symbol at a position, as the agent's layer shows the code.",
    params: atPosition,
    result: locationsAnswer,
    errors: atPositionErrors,
  }),
  'lsp.hover': request({
    summary: "The hover text at a position, as the agent's layer shows the code.",
    params: atPosition,
    result: z.object({ status: answerStatus, waitingFor, error: z.string().optional(), contents: z.string(), range: Range.optional() }),
    errors: atPositionErrors,
  }),
} as const;

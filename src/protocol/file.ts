// The protocol's agent file tools (file.read, write, edit, list, glob, grep): text in an agent's
// layer, as MCP and the CLI's file commands use it. Served by src/daemon/handlers/file.ts.
import * as z from 'zod';
import { agentId, relPath, request, shadowRef } from './shared';

/** grep's deadline for its regular expression: the default and the most a caller may give (ms). */
export const GREP_DEFAULT_TIMEOUT_MS = 10_000;
export const GREP_MAX_TIMEOUT_MS = 120_000;

/** A file.write / file.edit precondition: the file must still be what the caller saw (file.read gives these). */
const fileExpectation = z
  .strictObject({
    exists: z.boolean().optional().describe('false: create only (the file must not exist); true: it must exist.'),
    size: z.number().int().min(0).optional(),
    mtimeMs: z.number().optional(),
    hash: z
      .string()
      .regex(/^[0-9a-f]{16}$/)
      .optional()
      .describe('The content hash file.read gave.'),
  })
  .describe(
    'Write only if the file is still what you saw; else CONFLICT and nothing is written. Checked and written in one step, with no other change of the file in between.',
  );

const toolsFlags = {
  includeIgnored: z.boolean().optional().describe('Also look at what .gitignore ignores (and .git).'),
};

export const FileRequests = {
  'file.read': request({
    summary: "Reads a text file (or a line range) as the agent's layer shows it, without switching the shared mount.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      startLine: z.number().int().min(1).optional().describe('First line, 1-based.'),
      endLine: z.number().int().min(1).optional().describe('Last line, inclusive.'),
    }),
    result: z.object({
      path: z.string(),
      content: z.string(),
      totalLines: z.number().int(),
      startLine: z.number().int(),
      endLine: z.number().int(),
      binary: z.boolean(),
      size: z.number().int().optional().describe('Bytes of the whole file.'),
      mtimeMs: z.number().optional().describe('Its modification time, as file.write and file.edit take it in expect.'),
      hash: z.string().optional().describe("Content hash of the whole file's bytes, as expect takes it."),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'NOT_FOUND', 'IS_DIRECTORY', 'INVALID_ARGUMENT', 'NOT_MOUNTED'],
  }),
  'file.write': request({
    summary: "Writes a whole text file into the agent's layer (parents made; an existing file keeps its mode).",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      content: z.string(),
      mode: z.number().int().min(0).max(0o7777).optional(),
      expect: fileExpectation.optional(),
    }),
    result: z.object({
      path: z.string(),
      bytes: z.number().int(),
      created: z.boolean(),
      hash: z.string().optional().describe('With expect: the content hash the file has now, for the next expect.'),
      mtimeMs: z.number().optional().describe('With expect: its modification time now.'),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'IS_DIRECTORY', 'CONFLICT', 'NOT_MOUNTED', 'PATH_MASKED', 'PATH_PROTECTED'],
  }),
  'file.edit': request({
    summary:
      "Replaces exact text in a file of the agent's layer: NO_MATCH when it does not occur, AMBIGUOUS_MATCH when it occurs more than once (unless replaceAll).",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath,
      oldText: z.string().min(1),
      newText: z.string(),
      replaceAll: z.boolean().optional(),
      expect: fileExpectation.optional(),
    }),
    result: z.object({ path: z.string(), replacements: z.number().int() }),
    errors: [
      'UNKNOWN_SHADOW',
      'INVALID_AGENT',
      'INVALID_PATH',
      'NOT_FOUND',
      'NO_MATCH',
      'AMBIGUOUS_MATCH',
      'CONFLICT',
      'NOT_MOUNTED',
      'PATH_PROTECTED',
    ],
  }),
  'file.list': request({
    summary: "Lists a directory (or a tree) as the agent's layer shows it; .gitignore'd entries left out unless asked.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      path: relPath.optional().describe('Default: the root.'),
      recursive: z.boolean().optional(),
      limit: z.number().int().min(1).max(100000).optional(),
      ...toolsFlags,
    }),
    result: z.object({
      entries: z.array(z.object({ path: z.string(), type: z.string(), size: z.number().optional() })),
      truncated: z.boolean(),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'NOT_FOUND', 'NOT_A_DIRECTORY', 'NOT_MOUNTED'],
  }),
  'file.glob': request({
    summary:
      "Paths matching a glob (e.g. src/**/*.ts; * ? ** [a-z] [!x] {a,b} {1..3}, \\ escapes, a leading ! negates; no extglobs) as the agent's layer shows the tree.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      pattern: z.string().min(1),
      cwd: relPath.optional(),
      limit: z.number().int().min(1).max(100000).optional(),
      ...toolsFlags,
    }),
    result: z.object({ paths: z.array(z.string()), truncated: z.boolean() }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'INVALID_ARGUMENT', 'NOT_MOUNTED', 'TIMEOUT'],
  }),
  'file.grep': request({
    summary:
      "Searches file contents (a JavaScript regular expression, or fixed strings) as the agent's layer shows them; binary and .gitignore'd files skipped unless asked.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      pattern: z.string().min(1),
      path: relPath.optional().describe('A file or directory to search; default: everything.'),
      glob: z.string().optional().describe('Only files whose path matches this glob.'),
      ignoreCase: z.boolean().optional(),
      fixedStrings: z.boolean().optional(),
      context: z.number().int().min(0).max(20).optional().describe('Lines of context before and after each match.'),
      maxMatches: z.number().int().min(1).max(10000).optional(),
      timeoutMs: z
        .number()
        .int()
        .min(1)
        .max(GREP_MAX_TIMEOUT_MS)
        .optional()
        .describe(
          `How long the regular expression may run in all, in ms (default ${GREP_DEFAULT_TIMEOUT_MS}, at most ${GREP_MAX_TIMEOUT_MS}); past it the search stops with TIMEOUT. It runs off the daemon's main thread.`,
        ),
      ...toolsFlags,
    }),
    result: z.object({
      matches: z.array(
        z.object({
          path: z.string(),
          line: z.number().int(),
          text: z.string(),
          before: z.array(z.string()).optional(),
          after: z.array(z.string()).optional(),
        }),
      ),
      filesSearched: z.number().int(),
      truncated: z.boolean(),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'INVALID_PATH', 'INVALID_ARGUMENT', 'NOT_MOUNTED', 'TIMEOUT'],
  }),
} as const;

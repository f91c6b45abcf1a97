// The shell-session requests and notifications of the protocol (`shell.*`, `shell/*`): an
// interactive program on a pseudo-terminal as one agent, in that agent's own view of a shadow,
// which any connection of the user may join, type into and resize. methods.ts adds these to the
// protocol's tables. Restricted connections (session.restrict) may not use them.
import * as z from 'zod';
import type { NotificationDef, RequestDef } from './methods';

const NO_NUL = /^[^\u0000]*$/;
const text = (description: string) => z.string().regex(NO_NUL, 'contains a NUL byte').describe(description);
const sessionId = text('The session id shell.open answered with.').max(64);
const cols = z.number().int().min(1).max(1000).describe('Columns of the terminal.');
const rows = z.number().int().min(1).max(1000).describe('Rows of the terminal.');

export const ShellInfo = z.object({
  sessionId: z.string(),
  shadow: z.string().describe('Name of the shadow.'),
  agent: z.string(),
  argv: z.array(z.string()).describe('The program and its arguments.'),
  cwd: z.string().describe('Where it started, relative to the folder.'),
  pid: z.number().int().describe("The terminal's first process (the launcher that confines the program), as the daemon sees it."),
  startedAt: z.string().describe('ISO 8601.'),
  running: z.boolean(),
  exitCode: z.number().int().nullable().optional().describe('Once it ended: its exit status, null when a signal ended it.'),
  signal: z.string().nullable().optional().describe('Once it ended: the signal that ended it, or null.'),
  cols,
  rows,
  attached: z.number().int().describe('Connections joined to it now.'),
  protections: z
    .array(z.string())
    .describe(
      "The confinement this system gives the session (as a run reports it; Windows: 'job', and 'low-integrity' when the token was lowered).",
    ),
  unprotectedReason: z.string().optional().describe('Windows: why the program runs without its Low-integrity token, when it does.'),
});
export type ShellInfo = z.infer<typeof ShellInfo>;

const joined = ShellInfo.extend({
  scrollback: z.string().describe('Its most recent output (at most 256 KiB), base64: what a terminal that joins shows first.'),
});

export const ShellRequests = {
  'shell.open': {
    summary:
      "Starts an interactive program on a pseudo-terminal as an agent, in that agent's own view of the shadow (opened for it if it has none) at the folder's own path, confined as runs are; this connection is joined to it (shell/output, shell/exit).",
    params: z.strictObject({
      shadow: text('Name of the shadow, or its mount point (or a path inside it).'),
      agent: text('Agent id: names one layer of the shadow (1-255 bytes, no "/").'),
      argv: z.array(text('argument')).optional().describe("The program and its arguments; default: the user's shell."),
      cwd: text('Where it starts, relative to the folder; default: its root.').optional(),
      cols,
      rows,
      term: text('The terminal type the program is told ($TERM); default: xterm-256color.').max(64).optional(),
      env: z.array(text('NAME=value')).optional().describe('Extra environment entries, NAME=value.'),
      noNetwork: z.boolean().optional().describe('Only loopback networking (a network namespace).'),
      unprotected: z
        .boolean()
        .optional()
        .describe(
          'Windows: start the program even when its token cannot be lowered to Low integrity, instead of NAMESPACE_UNAVAILABLE (Linux sessions are always confined: NOT_SUPPORTED).',
        ),
      writable: z
        .array(text('absolute directory'))
        .max(64)
        .optional()
        .describe(
          "Directories apart from the folder the program may also write, at their own paths: an agent CLI's own configuration and login (the home directory is otherwise private and empty).",
        ),
      readable: z
        .array(text('absolute directory'))
        .max(64)
        .optional()
        .describe('Directories apart from the folder the program may read, at their own paths.'),
    }),
    result: ShellInfo,
    errors: [
      'UNKNOWN_SHADOW',
      'INVALID_AGENT',
      'INVALID_ARGUMENT',
      'INVALID_PATH',
      'NOT_FOUND',
      'NOT_MOUNTED',
      'NOT_SUPPORTED',
      'NAMESPACE_UNAVAILABLE',
      'MOUNT_FAILED',
      'SCOPE_DENIED',
    ],
  },
  'shell.attach': {
    summary:
      'Joins this connection to a session (by id, or the running session of an agent in a shadow): it gets shell/output and shell/exit from now on, and the output so far.',
    params: z.strictObject({
      sessionId: sessionId.optional(),
      shadow: text('With agent, instead of sessionId: name of the shadow, or its mount point.').optional(),
      agent: text('With shadow: the agent whose running session to join (its first, when it has several).').optional(),
    }),
    result: joined,
    errors: ['NOT_FOUND', 'UNKNOWN_SHADOW', 'INVALID_ARGUMENT', 'SCOPE_DENIED'],
  },
  'shell.detach': {
    summary: 'Leaves a session without ending it (closing the connection does the same).',
    params: z.strictObject({ sessionId }),
    result: z.object({ sessionId: z.string() }),
    errors: ['NOT_FOUND', 'SCOPE_DENIED'],
  },
  'shell.input': {
    summary: "Types into a session's terminal: keys or pasted text (Ctrl-C is the byte 0x03, as on any terminal).",
    params: z.strictObject({ sessionId, data: text('The bytes, base64.').max(1024 * 1024) }),
    result: z.object({ sessionId: z.string(), bytes: z.number().int() }),
    errors: ['NOT_FOUND', 'INVALID_ARGUMENT', 'SCOPE_DENIED'],
  },
  'shell.resize': {
    summary: "Sets the size of a session's terminal (the program gets SIGWINCH).",
    params: z.strictObject({ sessionId, cols, rows }),
    result: z.object({ sessionId: z.string(), cols: z.number().int(), rows: z.number().int() }),
    errors: ['NOT_FOUND', 'SCOPE_DENIED'],
  },
  'shell.close': {
    summary:
      "Ends a session as closing its terminal would (SIGHUP), killing whatever is left a few seconds later; answers once it has ended. The agent's layer keeps what the session wrote.",
    params: z.strictObject({ sessionId }),
    result: ShellInfo,
    errors: ['NOT_FOUND', 'SCOPE_DENIED'],
  },
  'shell.list': {
    summary: 'The shell sessions of a shadow, or of every shadow: running ones, and those that ended in the last minute.',
    params: z.strictObject({ shadow: text('Name of the shadow, or its mount point.').optional() }),
    result: z.object({ sessions: z.array(ShellInfo) }),
    errors: ['UNKNOWN_SHADOW', 'SCOPE_DENIED'],
  },
} as const satisfies Record<string, RequestDef>;

export const ShellNotifications = {
  'shell/output': {
    summary: 'To the connections joined to a session: a chunk of what its program wrote to the terminal.',
    params: z.object({ sessionId: z.string(), data: z.string().describe('The bytes, base64.') }),
  },
  'shell/exit': {
    summary: 'To the connections joined to a session: its program ended (and every process it left was ended too).',
    params: z.object({ sessionId: z.string(), exitCode: z.number().int().nullable(), signal: z.string().nullable() }),
  },
} as const satisfies Record<string, NotificationDef>;

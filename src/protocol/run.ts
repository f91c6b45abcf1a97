// The protocol's requests for running commands in a shadow (run, run.cancel) and what a run
// returns. Served by src/daemon/handlers/run.ts.
import * as z from 'zod';
import { agentId, request, shadowRef, text } from './shared';

export const RunResult = z.object({
  runId: z.string(),
  exitCode: z.number().nullable(),
  signal: z.string().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  durationMs: z.number(),
  queuedMs: z.number(),
  timedOut: z.boolean(),
  timeoutMs: z
    .number()
    .optional()
    .describe('The time limit the run had once it had the shadow (absent: none); timedOut says it was reached.'),
  cancelled: z.boolean(),
  leftoverProcesses: z.number().describe('Processes still alive when the command ended (background children), killed then.'),
  outputTruncated: z.boolean(),
  protected: z
    .boolean()
    .describe(
      "Whether the run was kept from writing the folder through its absolute path (Linux: a private mount namespace in which the folder's own path shows the shadow; Windows: a Low-integrity token, which the folder's files refuse to write and the shadow lets write).",
    ),
  protections: z
    .array(z.string())
    .describe(
      'What confined the run (Linux): "mount" (a view where the folder\'s path shows the shadow, the system read-only, shadowfs\'s own directories hidden), "user" (a user namespace that locks those mounts and holds no capability outside), "pid" (a PID namespace: nothing outside visible, nothing left behind), "network" (--no-network), "landlock" (writes only beneath the shadow, private temporary directories and the user\'s list; no abstract sockets or signals outside), "landlock-writes" (the same without the socket and signal scoping of older kernels), "seccomp" (no mount, namespace, file-handle, keyring, BPF or terminal-injection calls). Empty where none applied.',
    ),
  unprotectedReason: z.string().optional().describe('Why the run was not protected, when it was not.'),
  limitsHit: z
    .array(z.enum(['memory', 'processes']))
    .optional()
    .describe(
      'Limits the run reached: "memory" (past its memory limit: on Linux the kernel killed a process of it, on Windows an allocation was refused; shadowfs then ended the run), "processes" (a process it tried to start was refused). Absent when none was reached.',
    ),
});
export type RunResult = z.infer<typeof RunResult>;

export const RunRequests = {
  run: request({
    summary:
      'Runs a command in the shadow as an agent (its layer active on the shared mount while it runs); output streams as run/output notifications to this connection.',
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      argv: z.array(text('argument')).min(1).describe('The command and its arguments.'),
      runId: text('An id for run.cancel and the run/output notifications; default: a random one.').max(128).optional(),
      cwd: text('Working directory relative to the shadow root.').optional(),
      env: z.array(text('NAME=value')).optional().describe('Extra environment entries, NAME=value.'),
      timeout: z
        .number()
        .min(0)
        .optional()
        .describe(
          'Seconds the command may run once it has the shadow (default 600); 0: no limit. Past it the run is interrupted, then killed.',
        ),
      discardWrites: z.boolean().optional().describe("Empty the agent's layer after the run."),
      shell: z.boolean().optional().describe('Run argv[0] as a shell command line.'),
      originalPath: z
        .boolean()
        .optional()
        .describe("Default true (Linux): the folder's own path shows the shadow; false runs unprotected."),
      atOriginalPath: z.boolean().optional().describe('Older name of originalPath: true, the default now.'),
      unprotected: z
        .boolean()
        .optional()
        .describe(
          'Run without protection where it cannot be made (Linux: the namespace; Windows: the Low-integrity token), instead of NAMESPACE_UNAVAILABLE.',
        ),
      noNetwork: z.boolean().optional().describe('Run in a network namespace with loopback only.'),
      limits: z
        .strictObject({
          memoryBytes: z
            .number()
            .int()
            .min(1 << 20)
            .optional()
            .describe(
              'Memory all its processes may use together, in bytes (at least 1 MiB; Windows: committed memory, the launcher included); past it the run is ended.',
            ),
          processes: z.number().int().min(1).optional().describe('Processes it may have at once (Linux counts threads too).'),
          cpus: z.number().min(0.01).max(1024).optional().describe('CPU time, in CPUs (1.5: one and a half CPUs).'),
        })
        .optional()
        .describe(
          'Resource limits of the run (Linux: cgroup v2 where delegated, else cgroup v1; Windows: its Job Object). A limit this system cannot set refuses the run with NOT_SUPPORTED.',
        ),
    }),
    result: RunResult,
    errors: [
      'UNKNOWN_SHADOW',
      'INVALID_AGENT',
      'INVALID_ARGUMENT',
      'INVALID_PATH',
      'POLICY_DENIED',
      'NAMESPACE_UNAVAILABLE',
      'NOT_SUPPORTED',
      'NOT_FOUND',
      'NOT_A_DIRECTORY',
      'NOT_MOUNTED',
      'ABORTED',
    ],
  }),
  'run.cancel': request({
    summary: 'Cancels a run (queued or running).',
    params: z.strictObject({ runId: text('The run to cancel.') }),
    result: z.object({ runId: z.string(), cancelled: z.boolean().describe('false when no such run is in progress.') }),
    errors: [],
  }),
} as const;

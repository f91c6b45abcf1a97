// The protocol's requests about the daemon and the connection itself: hello (the Windows proof),
// session.restrict, version, health and status. Served by src/daemon/handlers/admin.ts.
import * as z from 'zod';
import { MemoryBudget, NativeStatus, ShadowInfo } from './shadows';
import { ShellInfo } from './shell';
import { agentId, none, request, shadowRef, text } from './shared';

export const AdminRequests = {
  hello: request({
    summary:
      "Introduces a client. Required as the first request on Windows, where the client proves with the secret in the per-user state directory that it runs as the daemon's user, and the daemon proves the same back; optional elsewhere.",
    params: z.strictObject({
      client: text('Name and version of the client, for the log.').max(200).optional(),
      nonce: z
        .string()
        .regex(/^[0-9a-f]{32,128}$/)
        .optional()
        .describe('Random hex chosen by the client.'),
      proof: z
        .string()
        .regex(/^[0-9a-f]{64}$/)
        .optional()
        .describe('HMAC-SHA256(secret, "shadowfs-client:" + nonce), hex.'),
    }),
    result: z.object({
      version: z.string(),
      protocol: z.number().int(),
      pid: z.number().int(),
      proof: z.string().optional().describe('HMAC-SHA256(secret, "shadowfs-server:" + nonce), hex: the daemon knows the secret too.'),
    }),
    errors: ['PEER_REFUSED'],
  }),
  'session.restrict': request({
    summary:
      "Restricts this connection, for as long as it lasts and irrevocably, to one agent's layer on one shadow: what an untrusted agent's front end (shadowfs mcp) does before it serves anything. From then on the daemon answers only the methods of ScopedMethods, on that shadow and agent, and refuses the rest with SCOPE_DENIED (mount, unmount, views of other agents or at a mount point it picks, other agents' layers, runs with weaker protection, and apply unless allowApply). Calling it again may only keep or narrow the scope.",
    params: z.strictObject({
      shadow: shadowRef,
      agent: agentId,
      allowApply: z
        .boolean()
        .optional()
        .describe(
          "Let the connection apply the agent's layer to the folder (layer.apply); default false. Set it only on the user's word (shadowfs mcp --allow-apply).",
        ),
      folder: z
        .string()
        .optional()
        .describe(
          'The folder the shadow must show (the `folder` an earlier session.restrict answered): a front end that connects again after a daemon restart passes it, so a shadow of the same name showing another folder is refused (UNKNOWN_SHADOW), not served.',
        ),
    }),
    result: z.object({
      shadow: z.string().describe('The name of the shadow the connection is restricted to.'),
      agent: z.string(),
      allowApply: z.boolean(),
      folder: z.string().describe('The folder that shadow shows.'),
    }),
    errors: ['UNKNOWN_SHADOW', 'INVALID_AGENT', 'SCOPE_DENIED'],
  }),
  version: request({
    summary: "The daemon's version, protocol version, platform, and the mount backends it has.",
    params: none,
    result: z.object({
      version: z.string(),
      protocol: z.number().int(),
      platform: z.string(),
      backends: z.array(z.string()).describe('Empty when the native module is not available.'),
      native: NativeStatus,
    }),
    errors: [],
  }),
  health: request({
    summary: 'A cheap liveness check.',
    params: none,
    result: z.object({
      ok: z.literal(true),
      pid: z.number().int(),
      uptimeSeconds: z.number(),
      shadows: z.number().int(),
      native: z.boolean(),
    }),
    errors: [],
  }),
  shutdown: request({
    summary:
      'Stops the daemon as SIGTERM does: shell sessions are hung up, every layer is saved (autosave) and every shadow unmounted; mounting a folder again brings its layers back. Answered before the daemon goes; refused to a restricted connection.',
    params: none,
    result: z.object({
      pid: z.number().int().describe('The daemon that is stopping.'),
      shadows: z.array(z.string()).describe('The shadows it unmounts.'),
      sessions: z.number().int().describe('Shell sessions it hangs up.'),
    }),
    errors: [],
  }),
  status: request({
    summary: 'The daemon, its endpoint and log, every shadow, and what it cleaned after a crashed predecessor.',
    params: none,
    result: z.object({
      pid: z.number().int(),
      socket: z.string().describe('The Unix socket or named pipe the daemon listens on.'),
      logFile: z.string(),
      uptimeSeconds: z.number(),
      shadows: z.array(ShadowInfo),
      recovered: z.array(z.string()).describe('Stale mounts of a crashed daemon this one cleaned when it started.'),
      recovering: z
        .array(z.string())
        .describe(
          'Shadows a crashed predecessor served that this daemon is still cleaning up or mounting again; requests other than hello, version, health, status and run.cancel wait until it is done.',
        ),
      clients: z
        .array(
          z.object({
            client: z.string().optional().describe('The name it gave in hello.'),
            scope: z
              .object({ shadow: z.string(), agent: z.string(), allowApply: z.boolean() })
              .optional()
              .describe('What it restricted itself to (session.restrict); absent: a full client of the user.'),
          }),
        )
        .describe('The connections the daemon serves now, this one included.'),
      native: NativeStatus,
      memory: z
        .object({
          rss: z.number().int().describe('Resident memory of the daemon process.'),
          heapUsed: z.number().int().describe("Bytes of JavaScript objects in V8's heap (live ones and garbage not yet collected)."),
          heapTotal: z.number().int().describe("V8's heap as taken from the system."),
          external: z.number().int().describe('Memory of C++ objects bound to JavaScript ones, buffers included.'),
          arrayBuffers: z.number().int().describe('Of external: ArrayBuffers and Buffers.'),
          budget: MemoryBudget.optional().describe(
            'The budget for layer contents (all shadows) and how much of it is in use (per layer: stats); absent while $SHADOWFS_MEMORY_BUDGET does not parse.',
          ),
        })
        .describe(
          "The daemon's memory in bytes (Node's process.memoryUsage()); layer contents held by the native module are not in heapUsed.",
        ),
      activity: z
        .object({
          runs: z
            .array(
              z.object({
                runId: z.string(),
                shadow: z.string(),
                agent: z.string(),
                argv: z.array(z.string()),
                state: z
                  .enum(['queued', 'running'])
                  .describe('queued: waiting for the shared mount; running: it has it, or runs in its view.'),
                waitingFor: z
                  .string()
                  .optional()
                  .describe('While queued: the agent whose job holds the shared mount ("(folder)": a job on the folder).'),
                sinceMs: z.number().describe('How long it has been queued, or running since it started.'),
              }),
            )
            .describe('Runs in progress.'),
          shells: z.array(ShellInfo).describe('Shell sessions: running ones, and those that ended in the last minute.'),
          queues: z
            .array(
              z.object({
                shadow: z.string(),
                running: z.string().nullable().describe('The agent whose job (a run or a lints check) holds the shared mount now.'),
                runningMs: z.number().optional(),
                waiting: z.array(z.object({ agent: z.string(), waitingFor: z.string().nullable(), waitedMs: z.number() })),
              }),
            )
            .describe("Each mounted shadow's shared mount: who holds it, and every job waiting for it, oldest first."),
        })
        .describe('Who is running what: runs, shell sessions and the queues of the shared mounts (views are in shadows[].views).'),
    }),
    errors: [],
  }),
} as const;

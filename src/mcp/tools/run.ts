// The MCP run tools: run_command (in the foreground or background), its output and cancel, and
// use_own_view (a view of this agent's own, so its runs and lints wait for nobody).
import * as z from 'zod';
import { ShadowError } from '../../common/errors';
import { type ParamsOf } from '../../protocol/methods';
import { exitLine, newRunId, POLL_MAX_WAIT_S } from '../runs';
import { capMiddle, cutLine, output, OUTPUT_HEAD_BYTES, OUTPUT_TAIL_BYTES, TEXT_MAX_BYTES } from '../shape';
import { ask, protocolSchema, rel, type ToolDef } from './common';

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

export const RUN_TOOLS: ToolDef[] = [
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
];

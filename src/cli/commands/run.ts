// `shadowfs run <shadow> --agent A [options] -- <cmd> [args...]`: runs a command inside the
// shadow with the agent's layer, streaming its output; exits with the command's exit status
// (124 on timeout, 128+N when killed by signal N). Ctrl-C cancels the daemon's run: the command
// is interrupted (SIGINT), then killed with everything it started after a few seconds.
import * as crypto from 'crypto';
import * as os from 'os';
import type { Argv, CommandModule } from 'yargs';
import { ShadowClient } from '../../client/client';
import { connectCli } from '../daemon-call';
import { ShadowError } from '../../common/errors';
import { emit, reportError } from '../output';

interface Args {
  shadow: string;
  agent: string;
  cwd?: string;
  env: string[];
  timeout?: string;
  'discard-writes': boolean;
  shell: boolean;
  'original-path': boolean;
  'at-original-path': boolean;
  unprotected: boolean;
  network: boolean;
  memory?: string;
  'max-processes'?: number;
  cpus?: number;
  json: boolean;
  '--'?: string[];
  command?: string[];
}

export const runCommand: CommandModule<object, Args> = {
  command: 'run <shadow> [command..]',
  describe: "Run a command inside a shadow with an agent's layer (put the command after --)",
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true, describe: 'name or mount point' })
      .option('agent', { type: 'string', demandOption: true, describe: 'whose layer the command sees and writes' })
      .option('cwd', { type: 'string', describe: 'working directory relative to the shadow root' })
      .option('env', { type: 'string', array: true, default: [], describe: 'NAME=value, repeatable' })
      .option('timeout', {
        type: 'string',
        describe: 'seconds the command may run once it has the shadow (default 600); 0 or none: no limit',
      })
      .option('discard-writes', { type: 'boolean', default: false, describe: 'run on a scratch copy of the layer, dropped afterwards' })
      .option('shell', { type: 'boolean', default: false, describe: 'run the words with sh -c' })
      .option('original-path', {
        type: 'boolean',
        default: true,
        describe:
          "Linux: the command sees the shadow at the folder's own path (private mount namespace), so it cannot write the folder " +
          'through its absolute path. On by default; --no-original-path runs unprotected',
      })
      .option('at-original-path', { type: 'boolean', default: false, hidden: true, describe: 'the default now; kept for old scripts' })
      .option('unprotected', {
        type: 'boolean',
        default: false,
        describe: 'where the mount namespace cannot be made, run without it instead of refusing with NAMESPACE_UNAVAILABLE',
      })
      .option('network', {
        type: 'boolean',
        default: true,
        describe: 'Linux: --no-network gives the command only loopback (network namespace)',
      })
      .option('memory', {
        type: 'string',
        describe: 'memory limit of the whole run, e.g. 512M or 2G (bytes without a unit); past it the run is killed',
      })
      .option('max-processes', { type: 'number', describe: 'processes the run may have at once (Linux counts threads too)' })
      .option('cpus', { type: 'number', describe: 'CPU time the run may use, in CPUs (e.g. 1.5)' })
      .option('json', {
        type: 'boolean',
        default: false,
        describe: 'print {exitCode, signal, stdout, stderr, durationMs, queuedMs} at the end instead of streaming',
      }) as Argv<Args>,
  handler: async (args) => {
    let client: ShadowClient | undefined;
    try {
      const argv = [...(args.command ?? []), ...(args['--'] ?? [])].map(String);
      if (argv.length === 0)
        throw new ShadowError('INVALID_ARGUMENT', 'name the command to run after --, e.g. shadowfs run proj --agent a -- npm test');
      const limits = {
        ...(args.memory !== undefined ? { memoryBytes: parseSize(args.memory) } : {}),
        ...(args['max-processes'] !== undefined ? { processes: args['max-processes'] } : {}),
        ...(args.cpus !== undefined ? { cpus: args.cpus } : {}),
      };
      const timeout = args.timeout === undefined ? undefined : parseTimeout(args.timeout);
      client = await connectCli();
      const runId = crypto.randomBytes(6).toString('hex');
      if (!args.json) {
        client.on('run/output', (p) => {
          if (p.runId === runId) (p.stream === 'stdout' ? process.stdout : process.stderr).write(Buffer.from(p.data, 'base64'));
        });
      }
      const c = client;
      const cancel = (): void => {
        process.stderr.write('shadowfs: cancelling the run: its command is interrupted, and killed in a few seconds if it has not ended\n');
        void c.request('run.cancel', { runId }).catch(() => undefined);
      };
      process.once('SIGINT', cancel);
      process.once('SIGTERM', cancel);
      const r = await client.request('run', {
        shadow: args.shadow,
        agent: args.agent,
        argv,
        runId,
        env: args.env,
        ...(args.cwd !== undefined ? { cwd: args.cwd } : {}),
        ...(timeout !== undefined ? { timeout } : {}),
        discardWrites: args['discard-writes'],
        shell: args.shell,
        originalPath: args['original-path'],
        ...(args['at-original-path'] ? { atOriginalPath: true } : {}),
        unprotected: args.unprotected,
        noNetwork: !args.network,
        ...(Object.keys(limits).length > 0 ? { limits } : {}),
      });
      process.off('SIGINT', cancel);
      process.off('SIGTERM', cancel);
      if (!r.protected) {
        process.stderr.write(
          `shadowfs: warning: this run was unprotected (${r.unprotectedReason ?? 'no mount namespace'}): it could write your folder through its absolute path\n`,
        );
      }
      if (args.json) emit(args, r as unknown as Record<string, unknown>, '');
      else if (r.limitsHit?.includes('memory'))
        process.stderr.write(`shadowfs: the run went past its memory limit (--memory ${args.memory}); its processes were killed\n`);
      else if (r.timedOut)
        process.stderr.write(
          `shadowfs: the command ran longer than ${(r.timeoutMs ?? 0) / 1000} s${timeout === undefined ? ' (the default limit)' : ''}; it was stopped. ` +
            'To let it run longer, pass --timeout SECONDS (0 or none: no limit)\n',
        );
      const sigNum = r.signal ? ((os.constants.signals as Record<string, number>)[r.signal] ?? 9) : 0;
      process.exitCode = r.timedOut ? 124 : (r.exitCode ?? 128 + sigNum);
    } catch (err) {
      reportError(args, err);
    } finally {
      client?.close();
    }
  },
};

/** Bytes from "512M", "2G", "1.5g", "65536" (K, M, G, T: powers of 1024); INVALID_ARGUMENT otherwise. */
export function parseSize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$/i.exec(text);
  if (!m) throw new ShadowError('INVALID_ARGUMENT', `--memory takes a size such as 512M or 2G, not ${JSON.stringify(text)}`);
  const power = ' kmgt'.indexOf((m[2] || ' ').toLowerCase());
  return Math.floor(Number(m[1]) * 1024 ** power);
}

/** Seconds from --timeout: a number, 0 or "none" for no limit. */
export function parseTimeout(text: string): number {
  if (/^\s*none\s*$/i.test(text)) return 0;
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new ShadowError('INVALID_ARGUMENT', `--timeout takes seconds (0 or none: no limit), not ${JSON.stringify(text)}`);
  return n;
}

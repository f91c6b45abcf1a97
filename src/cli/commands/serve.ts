// `shadowfs serve [--foreground]`: the per-user daemon. Without --foreground it starts one in
// the background and returns once it answers.
import type { Argv, CommandModule } from 'yargs';
import { ShadowClient } from '../../client/client';
import { daemonPaths } from '../../common/endpoint';
import type { LogLevel } from '../../common/log';
import * as fs from 'fs';
import { emit, reportError } from '../output';
import { ShadowError } from '../../common/errors';
import { platform } from '../../platform';

interface Args {
  foreground: boolean;
  'idle-timeout': number;
  'exit-after': number;
  'log-level': LogLevel;
  console: boolean;
  policy?: string;
  autosave: number;
  'memory-budget'?: string;
  json: boolean;
}

const envSeconds = (name: string, dflt: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : dflt;
};

export const serveCommand: CommandModule<object, Args> = {
  command: 'serve',
  describe: 'Run the shadowfs daemon for this user (started automatically by the other commands)',
  builder: (y: Argv) =>
    y
      .option('foreground', { type: 'boolean', default: false, describe: 'run in this process, logging to the console too' })
      .option('idle-timeout', {
        type: 'number',
        default: envSeconds('SHADOWFS_IDLE_TIMEOUT', 900),
        describe: 'seconds after which an unused shadow is unmounted (layers kept) [env SHADOWFS_IDLE_TIMEOUT]',
      })
      .option('exit-after', {
        type: 'number',
        default: envSeconds('SHADOWFS_EXIT_AFTER', 60),
        describe: 'seconds with no shadow and no client after which the daemon exits [env SHADOWFS_EXIT_AFTER]',
      })
      .option('log-level', { choices: ['error', 'warn', 'info', 'debug'] as const, default: 'info' as LogLevel })
      .option('console', { type: 'boolean', default: true, describe: 'also log to the console (the automatic start turns this off)' })
      .option('policy', {
        type: 'string',
        default: process.env.SHADOWFS_RUN_POLICY,
        describe: 'JSON file {"allow": [programs], "deny": [[argv prefix], ...]} for "run" [env SHADOWFS_RUN_POLICY]',
      })
      .option('autosave', {
        type: 'number',
        default:
          Number.isFinite(Number(process.env.SHADOWFS_AUTOSAVE)) && process.env.SHADOWFS_AUTOSAVE
            ? Number(process.env.SHADOWFS_AUTOSAVE)
            : 30,
        describe: 'seconds between autosaves of changed layers (what a crash can lose at most); 0 turns it off [env SHADOWFS_AUTOSAVE]',
      })
      .option('memory-budget', {
        type: 'string',
        default: process.env.SHADOWFS_MEMORY_BUDGET || undefined,
        describe:
          'memory for layer contents, all shadows together ("512M", "2G", "none"); past it the least recently used contents go to spill files; default a quarter of the machine\'s memory [env SHADOWFS_MEMORY_BUDGET]',
      })
      .option('json', { type: 'boolean', default: false, describe: 'print one JSON object per event' }) as Argv<Args>,
  handler: async (args) => {
    try {
      if (!args.foreground) {
        const client = await ShadowClient.connect();
        const st = await client.request('status');
        client.close();
        emit(
          args,
          { event: 'running', pid: st.pid, socket: st.socket, logFile: st.logFile },
          `shadowfs daemon running (pid ${st.pid}) at ${st.socket}; log: ${st.logFile}`,
        );
        return;
      }
      // The daemon's code is loaded only here, so that the other commands start quickly.
      /* eslint-disable @typescript-eslint/no-require-imports */
      const { Daemon } = require('../../daemon/server') as typeof import('../../daemon/server');
      const { createDaemonLogger } = require('../../daemon/log') as typeof import('../../daemon/log');
      const { parsePolicy } = require('../../run/policy') as typeof import('../../run/policy');
      const { setMemoryBudget } = require('../../shadow/budget') as typeof import('../../shadow/budget');
      /* eslint-enable @typescript-eslint/no-require-imports */
      // Nothing the daemon starts (git, language servers, runs) may hold what our starter left
      // open: an agent's MCP host that started the daemon passes on its own pipes.
      const inherited = platform.closeOnExecInherited?.() ?? [];
      const paths = daemonPaths();
      const log = createDaemonLogger(paths.log, { level: args['log-level'], console: args.console });
      if (inherited.length > 0)
        log.info(`kept descriptors ${inherited.join(', ')}, open when the daemon started, from the programs it starts`);
      const policy = args.policy ? parsePolicy(fs.readFileSync(args.policy, 'utf8'), args.policy) : undefined;
      if (args['memory-budget'] !== undefined) setMemoryBudget(args['memory-budget']);
      if (!(args.autosave >= 0)) throw new ShadowError('INVALID_ARGUMENT', `--autosave takes seconds (0 or more), got ${args.autosave}`);
      const daemon = new Daemon({
        paths,
        log,
        idleMs: args['idle-timeout'] * 1000,
        exitAfterMs: args['exit-after'] * 1000,
        policy,
        autosaveMs: args.autosave * 1000,
        // Test hook: a short hello deadline, so a test need not wait the default (server.ts).
        ...(envSeconds('SHADOWFS_HELLO_DEADLINE_MS', 0) > 0 ? { helloDeadlineMs: envSeconds('SHADOWFS_HELLO_DEADLINE_MS', 0) } : {}),
      });
      await daemon.start();
      const stop = (): void => void daemon.stop();
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      await daemon.done;
      await new Promise<void>((r) => log.on('finish', () => r()).end());
    } catch (err) {
      reportError(args, err);
    }
  },
};

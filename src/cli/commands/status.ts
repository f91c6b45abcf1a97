// `shadowfs status`: is the daemon running, what does it serve, what did it recover.
// Exit status 3 when no daemon runs (it is not started for this).
import type { Argv, CommandModule } from 'yargs';
import { ShadowClient } from '../../client';
import { ShadowError } from '../../common/errors';
import { emit, ExitCode, reportError } from '../output';

interface Args {
  json: boolean;
}

export const statusCommand: CommandModule<object, Args> = {
  command: 'status',
  describe: 'Show whether the daemon runs, its shadows, and stale mounts it cleaned',
  builder: (y: Argv) => y.option('json', { type: 'boolean', default: false }) as Argv<Args>,
  handler: async (args) => {
    let client: ShadowClient | undefined;
    try {
      client = await ShadowClient.connect({ autostart: false });
      const st = await client.request('status');
      emit(
        args,
        { running: true, ...st },
        [
          `daemon: running (pid ${st.pid}, up ${st.uptimeSeconds} s) at ${st.socket}`,
          `log: ${st.logFile}`,
          `memory: ${(st.memory.rss / 2 ** 20).toFixed(0)} MiB resident, ${(st.memory.heapUsed / 2 ** 20).toFixed(0)} MiB of JavaScript objects`,
          `shadows: ${st.shadows.length === 0 ? 'none' : st.shadows.map((s) => `${s.name} (${s.mounted ? s.mountPoint : 'idle'})`).join(', ')}`,
          ...(st.recovered.length ? [`cleaned stale mounts left by a crashed daemon: ${st.recovered.join(', ')}`] : []),
        ].join('\n'),
      );
    } catch (err) {
      if (err instanceof ShadowError && err.code === 'DAEMON_UNAVAILABLE') {
        emit(args, { running: false }, 'daemon: not running');
        process.exitCode = ExitCode.NOT_RUNNING;
      } else {
        reportError(args, err);
      }
    } finally {
      client?.close();
    }
  },
};

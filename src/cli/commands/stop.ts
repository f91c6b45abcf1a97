// `shadowfs stop`: stops the daemon as SIGTERM does (sessions hung up, layers saved, shadows
// unmounted) and waits until its process has gone, so that an upgrade or an uninstall can follow.
// No daemon running is no error: there is nothing to stop.
import type { Argv, CommandModule } from 'yargs';
import { ShadowClient } from '../../client/client';
import { ShadowError } from '../../common/errors';
import { emit, reportError } from '../output';
import { processAlive } from '../../common/pid';

interface Args {
  json: boolean;
  timeout: number;
}

export const stopCommand: CommandModule<object, Args> = {
  command: 'stop',
  describe:
    'Stop the daemon: hang up shell sessions, save every layer and unmount every shadow (mounting a folder again brings its layers back)',
  builder: (y: Argv) =>
    y
      .option('json', { type: 'boolean', default: false })
      .option('timeout', { type: 'number', default: 60, describe: 'Seconds to wait for the daemon to be gone' }) as Argv<Args>,
  handler: async (args) => {
    let client: ShadowClient | undefined;
    try {
      try {
        client = await ShadowClient.connect({ autostart: false });
      } catch (err) {
        if (err instanceof ShadowError && err.code === 'DAEMON_UNAVAILABLE') {
          emit(args, { running: false, stopped: false }, 'daemon: not running; nothing to stop');
          return;
        }
        throw err;
      }
      const r = await client.request('shutdown');
      client.close();
      client = undefined;
      const deadline = Date.now() + Math.max(0, args.timeout) * 1000;
      while (processAlive(r.pid) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
      if (processAlive(r.pid))
        throw new ShadowError(
          'TIMEOUT',
          `the daemon (pid ${r.pid}) was asked to stop and is still running after ${args.timeout} s; see its log`,
        );
      const what = [
        r.shadows.length ? `unmounted ${r.shadows.join(', ')} (layers saved: mounting a folder again brings them back)` : 'no shadows',
        ...(r.sessions ? [`hung up ${r.sessions} shell session${r.sessions === 1 ? '' : 's'}`] : []),
      ];
      emit(args, { running: false, stopped: true, ...r }, `stopped the daemon (pid ${r.pid}): ${what.join('; ')}`);
    } catch (err) {
      reportError(args, err);
    } finally {
      client?.close();
    }
  },
};

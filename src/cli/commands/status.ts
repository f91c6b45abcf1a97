// `shadowfs status`: is the daemon running, what does it serve, what did it recover.
// Exit status 3 when no daemon runs (it is not started for this).
import type { Argv, CommandModule } from 'yargs';
import { ShadowClient } from '../../client/client';
import { ShadowError } from '../../common/errors';
import type { ResultOf } from '../../protocol/methods';
import { emit, ExitCode, reportError, shownName } from '../output';
import { describeBudget } from './stats';

interface Args {
  json: boolean;
}

const secs = (ms: number): string => `${Math.round(ms / 1000)} s`;

/** Who is running what, in lines: shell sessions, runs, views, and who waits for each shared mount. */
function activity(st: ResultOf<'status'>): string[] {
  const out: string[] = [];
  for (const s of st.activity.shells.filter((x) => x.running))
    out.push(
      `session ${s.sessionId}: agent ${s.agent} in ${s.shadow}: ${shownName(s.argv.join(' '))} (since ${s.startedAt}, ${s.attached} attached)`,
    );
  for (const r of st.activity.runs)
    out.push(
      `run ${r.runId}: agent ${r.agent} in ${r.shadow}: ${shownName(r.argv.join(' '))} (${
        r.state === 'queued' ? `queued ${secs(r.sinceMs)} behind ${r.waitingFor ?? 'another job'}` : `running ${secs(r.sinceMs)}`
      })`,
    );
  for (const sh of st.shadows) for (const v of sh.views) out.push(`view ${v.id}: agent ${v.agent} of ${sh.name} at ${v.mountPoint}`);
  for (const q of st.activity.queues) {
    if (q.running === null && q.waiting.length === 0) continue;
    const holder =
      q.running === null ? 'nobody holds it' : `${q.running} holds it${q.runningMs === undefined ? '' : ` (${secs(q.runningMs)})`}`;
    const waits = q.waiting.map((w) => `${w.agent} ${secs(w.waitedMs)}${w.waitingFor ? ` behind ${w.waitingFor}` : ''}`);
    out.push(`shared mount of ${q.shadow}: ${holder}${waits.length ? `; waiting: ${waits.join(', ')}` : ''}`);
  }
  return out;
}

export const statusCommand: CommandModule<object, Args> = {
  command: 'status',
  describe: 'Show whether the daemon runs, its shadows, who is running what (sessions, runs, views, queues), and stale mounts it cleaned',
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
          ...(st.memory.budget ? [describeBudget(st.memory.budget)] : []),
          `shadows: ${st.shadows.length === 0 ? 'none' : st.shadows.map((s) => `${s.name} (${s.mounted ? s.mountPoint : 'idle'})`).join(', ')}`,
          ...(st.recovered.length ? [`cleaned stale mounts left by a crashed daemon: ${st.recovered.join(', ')}`] : []),
          ...activity(st),
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

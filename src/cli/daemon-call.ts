// Shared plumbing of the CLI commands that talk to the daemon: connect (starting it if needed),
// run, print a result or a coded error, set the exit status.
import { type ClientOptions, ShadowClient } from '../client/client';
import { emit, reportError } from './output';

export interface JsonFlag {
  json: boolean;
}

/** What a command waits for, on stderr (so that --json output stays one document). */
export function tell(what: string): void {
  process.stderr.write(`shadowfs: ${what}\n`);
}

/** Connects as every CLI command does: what it waits for (a daemon starting, its recovery) is said on stderr. */
export async function connectCli(options: ClientOptions = {}): Promise<ShadowClient> {
  const client = await ShadowClient.connect({ onWait: tell, ...options });
  client.on('daemon/waiting', (p) => tell(`${p.method} waits: ${p.waitingFor}`));
  return client;
}

export async function withClient<T>(
  args: JsonFlag,
  fn: (client: ShadowClient) => Promise<T>,
  human: (result: T) => string,
  options: { autostart?: boolean } = {},
): Promise<void> {
  let client: ShadowClient | undefined;
  try {
    client = await connectCli({ autostart: options.autostart });
    const result = await fn(client);
    if (client.startedDaemon) {
      // A daemon that starts cleans what a crashed one left: say so once.
      const st = await client.request('status');
      if (st.recovered.length) tell(`started the daemon; it cleaned stale mounts left by a crashed daemon: ${st.recovered.join(', ')}`);
    }
    emit(args, result as Record<string, unknown>, human(result));
  } catch (err) {
    reportError(args, err);
  } finally {
    client?.close();
  }
}

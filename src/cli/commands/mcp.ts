// `shadowfs mcp (--shadow S | --folder DIR) --agent A [--allow-apply] [--own-view]`: an MCP server on standard
// input/output for one agent on one shadow (see src/mcp/server.ts); --folder finds the shadow
// showing that folder, or mounts one. It reconnects (restricted again) after a daemon restart. The agent behind it is not trusted: its
// connection to the daemon is restricted to that agent's layer on that shadow (session.restrict)
// as it opens, before any tool is served, and the daemon holds it to that whatever the server
// sends. Logs go to standard error only: standard output carries the protocol.
import * as fs from 'fs';
import * as path from 'path';
import type { Argv, CommandModule } from 'yargs';
import { ShadowClient } from '../../client/client';
import { ShadowError } from '../../common/errors';
import { connectCli } from '../daemon-call';
import { reportError } from '../output';

interface Args {
  shadow?: string;
  folder?: string;
  agent: string;
  'allow-apply': boolean;
  'own-view': boolean;
}

export const mcpCommand: CommandModule<object, Args> = {
  command: 'mcp',
  describe: 'Serve MCP (stdio) for one agent on one shadow: file tools, run, lints, diff, patch, checkpoints (apply with --allow-apply)',
  builder: (y: Argv) =>
    y
      .option('shadow', { type: 'string', describe: 'the shadow (name or mount point)' })
      .option('folder', {
        type: 'string',
        describe: "the folder instead: the shadow showing it, mounted now if there is none (e.g. --folder . in the project's directory)",
      })
      .conflicts('shadow', 'folder')
      .check((a) => {
        if (a.shadow === undefined && a.folder === undefined) throw new Error('give --shadow or --folder');
        return true;
      })
      .option('agent', { type: 'string', demandOption: true, describe: 'the agent id whose layer the tools use' })
      .option('allow-apply', {
        type: 'boolean',
        default: false,
        describe: "offer the apply tool, which writes the agent's changes into the user's folder",
      })
      .option('own-view', {
        type: 'boolean',
        default: false,
        describe: "open a view of the agent's own first, so its runs and lints never wait for other agents (as the use_own_view tool does)",
      }) as Argv<Args>,
  handler: async (args) => {
    let client: ShadowClient | undefined;
    try {
      const shadow = args.shadow ?? (await shadowOfFolder(args.folder!));
      const scope = { shadow, agent: args.agent, allowApply: args['allow-apply'] };
      // Restricted as it opens; fails at once (on stderr) when the shadow does not exist, rather
      // than at the first tool call.
      client = await connectCli({ clientName: `shadowfs mcp ${process.pid}`, scope });
      const bound = client.scope!.folder;
      // The session is this agent's: its layer exists from the start (empty: the folder as it is).
      await client.request('layer.create', { shadow, agent: args.agent });
      const version = (
        JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', '..', 'package.json'), 'utf8')) as { version: string }
      ).version;
      // Loaded here, not at start-up: the SDK is large and only this command needs it.
      /* eslint-disable @typescript-eslint/no-require-imports */
      const { createMcpServer } = require('../../mcp/server') as typeof import('../../mcp/server');
      const { StdioServerTransport } =
        require('@modelcontextprotocol/sdk/server/stdio.js') as typeof import('@modelcontextprotocol/sdk/server/stdio.js');
      /* eslint-enable @typescript-eslint/no-require-imports */
      const server = createMcpServer(client, {
        shadow,
        agent: args.agent,
        allowApply: args['allow-apply'],
        ownView: args['own-view'],
        version,
        // After a daemon restart: the same restriction again, on a new connection (closed below as
        // the last one), to the same folder: a shadow mounted under the name meanwhile may show
        // another project, and the agent was given this one.
        reconnect: async () =>
          (client = await connectCli({ clientName: `shadowfs mcp ${process.pid}`, scope: { ...scope, folder: bound } })),
      });
      const transport = new StdioServerTransport();
      await server.connect(transport);
      // Ends when the client closes the transport or standard input.
      await new Promise<void>((resolve) => {
        server.server.onclose = () => resolve();
        process.stdin.once('end', () => resolve());
        process.stdin.once('close', () => resolve());
      });
      await server.close().catch(() => undefined);
    } catch (err) {
      // Standard output belongs to the protocol: errors go to standard error.
      reportError({ json: false }, err);
    } finally {
      client?.close();
    }
  },
};

/**
 * The shadow showing `folder` (by its real path), mounted now when there is none; asked over a
 * connection of its own, unrestricted, before the server's restricted one opens.
 */
async function shadowOfFolder(folder: string): Promise<string> {
  let real: string;
  try {
    real = fs.realpathSync(path.resolve(folder));
  } catch {
    throw new ShadowError('FOLDER_NOT_FOUND', `--folder ${folder}: no such folder`);
  }
  const c = await connectCli({ clientName: `shadowfs mcp ${process.pid} (finding the shadow)` });
  try {
    const { shadows } = await c.request('list');
    const found = shadows.find((s) => s.folder === real);
    if (found) return found.name;
    return (await c.request('mount', { folder: real })).name;
  } finally {
    c.close();
  }
}

// `shadowfs view open <shadow> <agent> [--at DIR]` / `shadowfs view close <shadow> <view>`
import * as path from 'path';
import type { Argv, CommandModule } from 'yargs';
import { withClient } from '../daemon-call';

interface OpenArgs {
  shadow: string;
  agent: string;
  at?: string;
  json: boolean;
}
interface CloseArgs {
  shadow: string;
  view: number;
  lazy: boolean;
  json: boolean;
}

const open: CommandModule<object, OpenArgs> = {
  command: 'open <shadow> <agent>',
  describe: "Mount a view that always shows one agent's layer",
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true })
      .positional('agent', { type: 'string', demandOption: true })
      .option('at', { type: 'string', describe: 'mount point (created if missing, must be empty)' })
      .option('json', { type: 'boolean', default: false }) as Argv<OpenArgs>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('view.open', { shadow: a.shadow, agent: a.agent, ...(a.at ? { mountPoint: path.resolve(a.at) } : {}) }),
      (r) => `View ${r.view} of ${r.agent} mounted at ${r.mountPoint}`,
    ),
};

const close: CommandModule<object, CloseArgs> = {
  command: 'close <shadow> <view>',
  describe: 'Unmount a view',
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true })
      .positional('view', { type: 'number', demandOption: true, describe: 'view id printed by "view open"' })
      .option('lazy', { type: 'boolean', default: false })
      .option('json', { type: 'boolean', default: false }) as Argv<CloseArgs>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('view.close', { shadow: a.shadow, view: a.view, lazy: a.lazy }),
      (r) => `Closed view ${r.view}.`,
    ),
};

export const viewCommand: CommandModule = {
  command: 'view <command>',
  describe: 'Open or close per-agent views',
  builder: (y: Argv) =>
    y
      .command(open as unknown as CommandModule)
      .command(close as unknown as CommandModule)
      .demandCommand(1),
  handler: () => undefined,
};

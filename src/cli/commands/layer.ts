// `shadowfs layer <write|rm|revert|reset|changes|cat|drop|clone> <shadow> <agent> ...`: one agent's layer.
import * as fs from 'fs';
import type { Argv, CommandModule } from 'yargs';
import { connectCli, withClient } from '../daemon-call';
import { emit, reportError, shownName } from '../output';
import { ShadowClient } from '../../client/client';
import { ShadowError } from '../../common/errors';
import { LAYER_READ_MAX_BYTES } from '../../protocol/constants';

interface Base {
  shadow: string;
  agent: string;
  json: boolean;
}

const base = (y: Argv) =>
  y
    .positional('shadow', { type: 'string', demandOption: true, describe: 'name or mount point' })
    .positional('agent', { type: 'string', demandOption: true, describe: 'agent id' })
    .option('json', { type: 'boolean', default: false });

const write: CommandModule<object, Base & { path: string; file?: string; mode?: string }> = {
  command: 'write <shadow> <agent> <path>',
  describe: "Write a file into an agent's layer (content from --file, or standard input)",
  builder: (y: Argv) =>
    base(y)
      .positional('path', { type: 'string', demandOption: true })
      .option('file', { type: 'string', describe: 'read the content from this file' })
      .option('mode', { type: 'string', describe: 'permission bits in octal, e.g. 755' }) as Argv<
      Base & { path: string; file?: string; mode?: string }
    >,
  handler: (a) =>
    withClient(
      a,
      (c) => {
        const data = fs.readFileSync(a.file ?? 0);
        const mode = a.mode === undefined ? undefined : parseInt(a.mode, 8);
        return c.request('layer.write', {
          shadow: a.shadow,
          agent: a.agent,
          path: a.path,
          data: data.toString('base64'),
          ...(mode === undefined ? {} : { mode }),
        });
      },
      (r) => `Wrote ${r.bytes} bytes to ${shownName(r.path)}.`,
    ),
};

const rm: CommandModule<object, Base & { path: string }> = {
  command: 'rm <shadow> <agent> <path>',
  describe: "Remove a file or directory from what an agent's layer shows",
  builder: (y: Argv) => base(y).positional('path', { type: 'string', demandOption: true }) as Argv<Base & { path: string }>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('layer.remove', { shadow: a.shadow, agent: a.agent, path: a.path }),
      (r) => `Removed ${shownName(r.path)}.`,
    ),
};

const revert: CommandModule<object, Base & { path: string }> = {
  command: 'revert <shadow> <agent> <path>',
  describe: "Give a path back to the folder: drop the layer's own version of it (and of everything under it)",
  builder: (y: Argv) => base(y).positional('path', { type: 'string', demandOption: true }) as Argv<Base & { path: string }>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('layer.revert', { shadow: a.shadow, agent: a.agent, path: a.path }),
      (r) => `${shownName(r.path)} shows the folder's version again.`,
    ),
};

const reset: CommandModule<object, Base> = {
  command: 'reset <shadow> <agent>',
  describe: "Drop every change of an agent's layer",
  builder: (y: Argv) => base(y) as Argv<Base>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('layer.reset', { shadow: a.shadow, agent: a.agent }),
      (r) => `Reset the layer of ${r.agent}.`,
    ),
};

const drop: CommandModule<object, Base> = {
  command: 'drop <shadow> <agent>',
  describe: "Drop an agent's layer entirely",
  builder: (y: Argv) => base(y) as Argv<Base>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('layer.drop', { shadow: a.shadow, agent: a.agent }),
      (r) => `Dropped the layer of ${r.agent}.`,
    ),
};

const clone: CommandModule<object, Base & { to: string }> = {
  command: 'clone <shadow> <agent> <to>',
  describe: "Copy an agent's layer to a new agent id (LAYER_EXISTS if that one has a layer)",
  builder: (y: Argv) =>
    base(y).positional('to', { type: 'string', demandOption: true, describe: 'the new agent id' }) as Argv<Base & { to: string }>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('layer.clone', { shadow: a.shadow, agent: a.agent, to: a.to }),
      (r) => `Copied the layer of ${r.agent} to ${r.to}.`,
    ),
};

const changes: CommandModule<object, Base> = {
  command: 'changes <shadow> <agent>',
  describe: "List what an agent's layer changed",
  builder: (y: Argv) => base(y) as Argv<Base>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('layer.changes', { shadow: a.shadow, agent: a.agent }),
      (r) =>
        r.changes.length
          ? r.changes
              .map((x) => `${x.kind.padEnd(8)} ${shownName(x.path)}${x.origin !== undefined ? ` (moved from ${shownName(x.origin)})` : ''}`)
              .join('\n')
          : 'No changes.',
    ),
};

const cat: CommandModule<object, Base & { path: string; offset?: number; length?: number }> = {
  command: 'cat <shadow> <agent> <path>',
  describe: "Print a file as an agent's layer shows it (active or not); files of any size, read a range at a time",
  builder: (y: Argv) =>
    base(y)
      .positional('path', { type: 'string', demandOption: true })
      .option('offset', { type: 'number', describe: 'Start at this byte (default 0)' })
      .option('length', { type: 'number', describe: 'Print at most this many bytes (default: to the end)' }) as Argv<
      Base & { path: string; offset?: number; length?: number }
    >,
  handler: async (a) => {
    let client: ShadowClient | undefined;
    try {
      for (const [k, v] of [
        ['offset', a.offset],
        ['length', a.length],
      ] as const)
        if (v !== undefined && (!Number.isSafeInteger(v) || v < 0))
          throw new ShadowError('INVALID_ARGUMENT', `--${k} is a whole number of bytes, 0 or more; got ${String(v)}`);
      client = await connectCli();
      const c = client;
      // A range at a time, so a file of any size passes through in pieces of at most LAYER_READ_MAX_BYTES.
      const start = a.offset ?? 0;
      const end = a.length === undefined ? Number.MAX_SAFE_INTEGER : start + a.length;
      const read = (at: number) =>
        c.request('layer.read', {
          shadow: a.shadow,
          agent: a.agent,
          path: a.path,
          offset: at,
          length: Math.min(LAYER_READ_MAX_BYTES, end - at),
        });
      if (a.json) {
        // --json: one answer as the daemon gives it: the range asked for, else the whole file
        // (FILE_TOO_LARGE past what one answer carries).
        const range = {
          ...(a.offset !== undefined ? { offset: a.offset } : {}),
          ...(a.length !== undefined ? { length: Math.min(a.length, LAYER_READ_MAX_BYTES) } : {}),
        };
        emit(a, await c.request('layer.read', { shadow: a.shadow, agent: a.agent, path: a.path, ...range }), '');
        return;
      }
      let at = start;
      let r = await read(at);
      for (;;) {
        const bytes = Buffer.from(r.data, 'base64');
        if (!process.stdout.write(bytes)) await new Promise((ok) => process.stdout.once('drain', ok));
        at += bytes.length;
        // An answer without a size comes from a daemon that reads whole files only: it was the whole file.
        if (r.size === undefined || bytes.length === 0 || at >= Math.min(end, r.size)) break;
        r = await read(at);
      }
    } catch (err) {
      reportError(a, err);
    } finally {
      client?.close();
    }
  },
};

export const layerCommand: CommandModule = {
  command: 'layer <command>',
  describe: "Work on an agent's layer: write, rm, revert, reset, changes, cat, drop, clone",
  builder: (y: Argv) =>
    y
      .command(write as unknown as CommandModule)
      .command(rm as unknown as CommandModule)
      .command(revert as unknown as CommandModule)
      .command(reset as unknown as CommandModule)
      .command(changes as unknown as CommandModule)
      .command(cat as unknown as CommandModule)
      .command(drop as unknown as CommandModule)
      .command(clone as unknown as CommandModule)
      .demandCommand(1),
  handler: () => undefined,
};

// What the shadowfs CLI accepts, read from its own yargs command modules: each builder is run
// against a recorder that notes the positionals, options and subcommands it declares. The
// generator takes help text from here; the tests check every cmdlet parameter against it (and
// check it against the real CLI's --help).
import type { CommandModule } from 'yargs';
import { activateCommand } from '../../src/cli/commands/activate';
import { auditCommand } from '../../src/cli/commands/audit';
import { demoCommand } from '../../src/cli/commands/demo';
import { doctorCommand } from '../../src/cli/commands/doctor';
import { fileCommand } from '../../src/cli/commands/file';
import { layerCommand } from '../../src/cli/commands/layer';
import { lintsCommand } from '../../src/cli/commands/lints';
import { listCommand } from '../../src/cli/commands/list';
import { maskCommand } from '../../src/cli/commands/mask';
import { mcpCommand } from '../../src/cli/commands/mcp';
import { mountCommand } from '../../src/cli/commands/mount';
import { runCommand } from '../../src/cli/commands/run';
import { reviewCommand } from '../../src/cli/commands/review';
import { serveCommand } from '../../src/cli/commands/serve';
import { radarCommand } from '../../src/cli/commands/radar';
import { shellCommand } from '../../src/cli/commands/shell';
import { statsCommand } from '../../src/cli/commands/stats';
import { statusCommand } from '../../src/cli/commands/status';
import { stopCommand } from '../../src/cli/commands/stop';
import { unmountCommand } from '../../src/cli/commands/unmount';
import { viewCommand } from '../../src/cli/commands/view';
import {
  applyCommand,
  checkpointCommand,
  checkpointsCommand,
  diffCommand,
  patchCommand,
  restoreCommand,
} from '../../src/cli/commands/work';

export type CliType = 'string' | 'number' | 'boolean';

export interface CliArg {
  name: string;
  type: CliType;
  /** Takes several values (positional `name..`, option `array: true`). */
  array: boolean;
  describe?: string;
  required: boolean;
}

export interface CliOption extends CliArg {
  aliases: string[];
  hidden: boolean;
}

export interface CliCommand {
  /** Words that name it: ['layer', 'write']. */
  path: string[];
  describe: string;
  /** In the order the command line takes them. */
  positionals: CliArg[];
  options: CliOption[];
  subcommands: CliCommand[];
  /** The yargs command module itself. */
  module: CommandModule;
}

/** The top-level command modules, in the order src/cli/main.ts registers them. */
const TOP_LEVEL: CommandModule[] = [
  mountCommand,
  unmountCommand,
  listCommand,
  layerCommand,
  activateCommand,
  maskCommand,
  viewCommand,
  runCommand,
  shellCommand,
  radarCommand,
  auditCommand,
  lintsCommand,
  diffCommand,
  patchCommand,
  applyCommand,
  reviewCommand,
  checkpointCommand,
  restoreCommand,
  checkpointsCommand,
  fileCommand,
  mcpCommand,
  statsCommand,
  statusCommand,
  stopCommand,
  serveCommand,
  doctorCommand,
  demoCommand,
] as unknown as CommandModule[];

interface YargsOpt {
  type?: string;
  array?: boolean;
  describe?: string;
  description?: string;
  desc?: string;
  demandOption?: boolean | string;
  alias?: string | string[];
  hidden?: boolean;
  choices?: readonly unknown[];
}

function typeOf(o: YargsOpt): CliType {
  if (o.type === 'number' || o.type === 'boolean') return o.type;
  return 'string';
}

/** Runs one command module's builder against a recorder and returns what it declared. */
function record(mod: CommandModule, parent: string[]): CliCommand {
  const spec = String(Array.isArray(mod.command) ? mod.command[0] : mod.command);
  const words = spec.split(/\s+/).filter(Boolean);
  const name = words[0] ?? '';
  const order = words
    .slice(1)
    .map((w) => /^[<[]([^\]>.]+)(\.\.)?[\]>]$/.exec(w))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ name: m[1] ?? '', array: m[2] === '..', required: m[0]?.startsWith('<') ?? false }));
  const positionals = new Map<string, YargsOpt>();
  const options: CliOption[] = [];
  const subModules: CommandModule[] = [];
  const recorder: object = new Proxy(
    {},
    {
      get(_t, prop) {
        return (...args: unknown[]) => {
          if (prop === 'positional') positionals.set(String(args[0]), (args[1] ?? {}) as YargsOpt);
          else if (prop === 'option' || prop === 'options') {
            const o = (args[1] ?? {}) as YargsOpt;
            const alias = o.alias === undefined ? [] : Array.isArray(o.alias) ? o.alias : [o.alias];
            options.push({
              name: String(args[0]),
              type: typeOf(o),
              array: o.array === true,
              describe: o.describe ?? o.description ?? o.desc,
              required: o.demandOption !== undefined && o.demandOption !== false,
              aliases: alias,
              hidden: o.hidden === true,
            });
          } else if (prop === 'command') subModules.push(args[0] as CommandModule);
          return recorder;
        };
      },
    },
  );
  if (typeof mod.builder === 'function') (mod.builder as (y: unknown) => unknown)(recorder);
  const path = [...parent, name];
  return {
    path,
    describe: String(mod.describe ?? ''),
    positionals: order.map((p) => {
      const o = positionals.get(p.name) ?? {};
      return { name: p.name, type: typeOf(o), array: p.array || o.array === true, describe: o.describe, required: p.required };
    }),
    options,
    subcommands: subModules.map((m) => record(m, path)),
    module: mod,
  };
}

let cached: CliCommand[] | undefined;

/** Every command of the CLI, nested as on the command line. */
export function cliCommands(): CliCommand[] {
  cached ??= TOP_LEVEL.map((m) => record(m, []));
  return cached;
}

/** The command a path of words names (a leaf or a group), or undefined. */
export function findCliCommand(path: readonly string[]): CliCommand | undefined {
  let list = cliCommands();
  let found: CliCommand | undefined;
  for (const word of path) {
    found = list.find((c) => c.path[c.path.length - 1] === word);
    if (!found) return undefined;
    list = found.subcommands;
  }
  return found;
}

/** Every command that runs something (no subcommands), depth first. */
export function leafCommands(list: CliCommand[] = cliCommands()): CliCommand[] {
  return list.flatMap((c) => (c.subcommands.length ? leafCommands(c.subcommands) : [c]));
}

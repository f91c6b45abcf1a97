// `shadowfs stats <shadow> [--json]`: what each layer of a shadow holds in memory and on disk
// (spilled contents), and the daemon's memory budget for layer contents (shared by every shadow).
import type { Argv, CommandModule } from 'yargs';
import type { MemoryBudgetStats } from '../../shadow/native';
import { withClient } from '../daemon-call';

interface Args {
  shadow: string;
  json: boolean;
}

/** Bytes for people: "812 B", "3.4 MiB". */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** The budget in one line. */
export function describeBudget(b: MemoryBudgetStats): string {
  const limit = b.limitBytes < 0 ? 'no budget' : `budget ${bytes(b.limitBytes)}`;
  return `layer contents in memory: ${bytes(b.inMemoryBytes)} in ${b.inMemoryContents} files (${limit}); spilled to disk by the budget: ${b.spilledContents} files, ${bytes(b.spilledBytes)}`;
}

export const statsCommand: CommandModule<object, Args> = {
  command: 'stats <shadow>',
  describe: "Memory and spilled bytes of each layer of a shadow, and the daemon's memory budget for layer contents",
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true, describe: 'the shadow name or mount point' })
      .option('json', { type: 'boolean', default: false }) as unknown as Argv<Args>,
  handler: (args) =>
    withClient(
      args,
      (c) => c.request('stats', { shadow: args.shadow }),
      (r) =>
        [
          ...Object.entries(r.layers).map(
            ([agent, l]) => `${agent}: ${bytes(l.memoryBytes)} in memory, ${bytes(l.spilledBytes)} spilled to disk, ${l.paths} paths`,
          ),
          ...(Object.keys(r.layers).length ? [] : ['no layers']),
          describeBudget(r.budget),
        ].join('\n'),
    ),
};

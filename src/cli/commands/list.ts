// `shadowfs list`
import type { Argv, CommandModule } from 'yargs';
import { withClient } from '../daemon-call';

interface Args {
  json: boolean;
}

export const listCommand: CommandModule<object, Args> = {
  command: 'list',
  describe: 'List the shadows the daemon serves',
  builder: (y: Argv) => y.option('json', { type: 'boolean', default: false }) as Argv<Args>,
  handler: (args) =>
    withClient(
      args,
      (c) => c.request('list'),
      (r) =>
        r.shadows.length === 0
          ? 'No shadows.'
          : r.shadows
              .map(
                (s) =>
                  `${s.name}\t${s.mounted ? s.mountPoint : '(idle, unmounted)'}\t${s.folder}\tactive: ${s.active ?? '-'}\tagents: ${s.agents.join(',') || '-'}`,
              )
              .join('\n'),
    ),
};

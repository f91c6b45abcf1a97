// `shadowfs lints <shadow> --agent A [paths...] [--edit FILE=CONTENT_FILE ...]`: what the language
// servers say about an agent's change, split into what it introduced and what the folder has.
import * as fs from 'fs';
import type { Argv, CommandModule } from 'yargs';
import { ShadowError } from '../../common/errors';
import type { ResultOf } from '../../protocol/methods';
import { withClient } from '../daemon-call';
import { ExitCode, shownName, shownText } from '../output';

interface Args {
  shadow: string;
  agent: string;
  paths?: string[];
  edit: string[];
  timeout: number;
  'quick-fixes': boolean;
  json: boolean;
}

const SEVERITY = ['', 'error', 'warning', 'info', 'hint'];

function render(r: ResultOf<'lints'>): string {
  const lines: string[] = [];
  for (const f of r.files) {
    const behind = f.waitingFor ? ` (behind ${f.waitingFor}'s job on the shared mount)` : '';
    const head = `${shownName(f.path)}: ${f.status}${behind}${f.error ? ` (${shownText(f.error)})` : ''}`;
    if (f.status !== 'fresh') {
      lines.push(head);
      continue;
    }
    lines.push(
      `${head}, ${f.introduced.length} introduced, ${f.existing.length} already in the folder${f.baseline && f.baseline !== 'fresh' && f.baseline !== 'cached' ? ` (baseline: ${f.baseline})` : ''}`,
    );
    for (const d of f.introduced) {
      lines.push(
        `  ${shownName(f.path)}:${d.range.start.line + 1}:${d.range.start.character + 1} ${SEVERITY[d.severity ?? 1] ?? ''}${d.code !== undefined ? ` ${shownName(`${d.source ?? ''}${d.code}`)}` : ''}: ${shownName(d.message.split('\n')[0])}`,
      );
    }
    for (const q of f.quickFixes ?? [])
      lines.push(`  fix for #${(q.diagnostic ?? 0) + 1}: ${shownName(q.title)} (${q.edits.length} edit${q.edits.length === 1 ? '' : 's'})`);
  }
  lines.push(`(${r.ms} ms)`);
  return lines.join('\n');
}

export const lintsCommand: CommandModule<object, Args> = {
  command: 'lints <shadow> [paths..]',
  describe: "What the language servers say about an agent's change (introduced vs already in the folder)",
  builder: (y: Argv) =>
    y
      .positional('shadow', { type: 'string', demandOption: true })
      .positional('paths', {
        type: 'string',
        array: true,
        describe: "files to check (default: the edited files, else all the agent's changed files)",
      })
      .option('agent', { type: 'string', demandOption: true, describe: 'whose layer to check' })
      .option('edit', {
        type: 'string',
        array: true,
        default: [],
        describe: "FILE=CONTENT_FILE: put CONTENT_FILE's content at FILE in the layer first (repeatable)",
      })
      .option('timeout', {
        type: 'number',
        default: 10_000,
        describe: 'deadline in milliseconds; files without a fresh answer by then say "timeout"',
      })
      .option('quick-fixes', { type: 'boolean', default: false, describe: "also list the servers' fixes for introduced diagnostics" })
      .option('json', { type: 'boolean', default: false }) as Argv<Args>,
  handler: (args) =>
    withClient(
      args,
      async (c) => {
        const edits = args.edit.map((e) => {
          const i = e.indexOf('=');
          if (i <= 0) throw new ShadowError('INVALID_ARGUMENT', `--edit takes FILE=CONTENT_FILE, got ${JSON.stringify(e)}`);
          const source = e.slice(i + 1);
          let content: string;
          try {
            content = fs.readFileSync(source, 'utf8');
          } catch (err) {
            throw new ShadowError('INVALID_ARGUMENT', `--edit ${e}: cannot read ${source}: ${(err as Error).message}`);
          }
          return { path: e.slice(0, i), content };
        });
        const r = await c.request('lints', {
          shadow: args.shadow,
          agent: args.agent,
          ...(args.paths && args.paths.length ? { paths: args.paths } : {}),
          ...(edits.length ? { edits } : {}),
          timeoutMs: Math.round(args.timeout),
          quickFixes: args['quick-fixes'],
        });
        if (r.files.some((f) => f.status === 'timeout' || f.status === 'queued' || f.status === 'error'))
          process.exitCode = ExitCode.NOT_FRESH;
        else if (r.files.some((f) => f.introduced.some((d) => (d.severity ?? 1) === 1))) process.exitCode = ExitCode.INTRODUCED_ERRORS;
        return r;
      },
      render,
    ),
};

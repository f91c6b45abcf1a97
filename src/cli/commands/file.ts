// `shadowfs file <read|write|edit|ls|glob|grep> <shadow> --agent A ...`: the agent file tools,
// each seeing the tree as A's layer shows it, without switching the shared mount.
import * as fs from 'fs';
import type { Argv, CommandModule } from 'yargs';
import { ShadowError } from '../../common/errors';
import { withClient } from '../daemon-call';
import { shownName } from '../output';

interface Base {
  shadow: string;
  agent: string;
  json: boolean;
  'include-ignored'?: boolean;
}

const base = <T extends Base>(y: Argv): Argv<T> =>
  y
    .positional('shadow', { type: 'string', demandOption: true, describe: 'name or mount point' })
    .option('agent', { type: 'string', demandOption: true, describe: 'whose layer' })
    .option('json', { type: 'boolean', default: false }) as unknown as Argv<T>;

const ignored = <T extends Base>(y: Argv<T>): Argv<T> =>
  y.option('include-ignored', { type: 'boolean', default: false, describe: 'also look at what .gitignore ignores (and .git)' }) as Argv<T>;

function lineRange(spec: string | undefined): { startLine?: number; endLine?: number } {
  if (spec === undefined) return {};
  const m = /^(\d+)?(?::(\d+)?)?$/.exec(spec);
  if (!m || (!m[1] && !m[2]))
    throw new ShadowError('INVALID_ARGUMENT', `--lines takes START, START:END, START: or :END (1-based), got ${JSON.stringify(spec)}`);
  return { ...(m[1] ? { startLine: Number(m[1]) } : {}), ...(m[2] ? { endLine: Number(m[2]) } : {}) };
}

const read: CommandModule<object, Base & { path: string; lines?: string }> = {
  command: 'read <shadow> <path>',
  describe: "Print a text file (or some of its lines) as the agent's layer shows it",
  builder: (y) =>
    base<Base & { path: string; lines?: string }>(y)
      .positional('path', { type: 'string', demandOption: true })
      .option('lines', { type: 'string', describe: 'START:END, 1-based, inclusive' }) as Argv<Base & { path: string; lines?: string }>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('file.read', { shadow: a.shadow, agent: a.agent, path: a.path, ...lineRange(a.lines) }),
      (r) => (r.binary ? `${r.path}: a binary file` : r.content.replace(/\n$/, '')),
    ),
};

const write: CommandModule<object, Base & { path: string; file?: string }> = {
  command: 'write <shadow> <path>',
  describe: "Write a text file into the agent's layer (content from --file, or standard input)",
  builder: (y) =>
    base<Base & { path: string; file?: string }>(y)
      .positional('path', { type: 'string', demandOption: true })
      .option('file', { type: 'string', describe: 'read the content from this file' }) as Argv<Base & { path: string; file?: string }>,
  handler: (a) =>
    withClient(
      a,
      (c) => c.request('file.write', { shadow: a.shadow, agent: a.agent, path: a.path, content: fs.readFileSync(a.file ?? 0, 'utf8') }),
      (r) => `${r.created ? 'Created' : 'Wrote'} ${r.path} (${r.bytes} bytes).`,
    ),
};

interface EditArgs extends Base {
  path: string;
  old?: string;
  new?: string;
  'old-file'?: string;
  'new-file'?: string;
  all: boolean;
}

const edit: CommandModule<object, EditArgs> = {
  command: 'edit <shadow> <path>',
  describe: "Replace exact text in a file of the agent's layer (an error when it occurs 0 or several times, unless --all)",
  builder: (y) =>
    base<EditArgs>(y)
      .positional('path', { type: 'string', demandOption: true })
      .option('old', { type: 'string', describe: 'the text to replace' })
      .option('new', { type: 'string', describe: 'what to put instead' })
      .option('old-file', { type: 'string', describe: 'read the text to replace from this file' })
      .option('new-file', { type: 'string', describe: 'read the replacement from this file' })
      .option('all', { type: 'boolean', default: false, describe: 'replace every occurrence' }) as Argv<EditArgs>,
  handler: (a) =>
    withClient(
      a,
      (c) => {
        const oldText = a['old-file'] !== undefined ? fs.readFileSync(a['old-file'], 'utf8') : a.old;
        const newText = a['new-file'] !== undefined ? fs.readFileSync(a['new-file'], 'utf8') : a.new;
        if (oldText === undefined || newText === undefined)
          throw new ShadowError(
            'INVALID_ARGUMENT',
            'give the text to replace (--old or --old-file) and the replacement (--new or --new-file)',
          );
        return c.request('file.edit', { shadow: a.shadow, agent: a.agent, path: a.path, oldText, newText, replaceAll: a.all });
      },
      (r) => `Replaced ${r.replacements} occurrence${r.replacements === 1 ? '' : 's'} in ${r.path}.`,
    ),
};

const ls: CommandModule<object, Base & { path?: string; recursive: boolean; limit?: number }> = {
  command: 'ls <shadow> [path]',
  describe: "List a directory as the agent's layer shows it",
  builder: (y) =>
    ignored(
      base<Base & { path?: string; recursive: boolean; limit?: number }>(y)
        .positional('path', { type: 'string' })
        .option('recursive', { alias: 'r', type: 'boolean', default: false })
        .option('limit', { type: 'number' }) as Argv<Base & { path?: string; recursive: boolean; limit?: number }>,
    ),
  handler: (a) =>
    withClient(
      a,
      (c) =>
        c.request('file.list', {
          shadow: a.shadow,
          agent: a.agent,
          ...(a.path ? { path: a.path } : {}),
          recursive: a.recursive,
          includeIgnored: a['include-ignored'],
          ...(a.limit ? { limit: a.limit } : {}),
        }),
      (r) =>
        [
          ...r.entries.map((e) => `${shownName(e.path)}${e.type === 'directory' ? '/' : e.type === 'symlink' ? '@' : ''}`),
          ...(r.truncated ? ['(more: --limit)'] : []),
        ].join('\n'),
    ),
};

const glob: CommandModule<object, Base & { pattern: string; cwd?: string; limit?: number }> = {
  command: 'glob <shadow> <pattern>',
  describe: "Paths matching a glob (e.g. 'src/**/*.ts') as the agent's layer shows the tree",
  builder: (y) =>
    ignored(
      base<Base & { pattern: string; cwd?: string; limit?: number }>(y)
        .positional('pattern', { type: 'string', demandOption: true })
        .option('cwd', { type: 'string', describe: 'match relative to this directory' })
        .option('limit', { type: 'number' }) as Argv<Base & { pattern: string; cwd?: string; limit?: number }>,
    ),
  handler: (a) =>
    withClient(
      a,
      (c) =>
        c.request('file.glob', {
          shadow: a.shadow,
          agent: a.agent,
          pattern: a.pattern,
          ...(a.cwd ? { cwd: a.cwd } : {}),
          includeIgnored: a['include-ignored'],
          ...(a.limit ? { limit: a.limit } : {}),
        }),
      (r) => [...r.paths.map(shownName), ...(r.truncated ? ['(more: --limit)'] : [])].join('\n'),
    ),
};

interface GrepArgs extends Base {
  pattern: string;
  path?: string;
  glob?: string;
  'ignore-case': boolean;
  'fixed-strings': boolean;
  context?: number;
  'max-matches'?: number;
}

const grep: CommandModule<object, GrepArgs> = {
  command: 'grep <shadow> <pattern> [path]',
  describe: "Search file contents (a JavaScript regular expression) as the agent's layer shows them",
  builder: (y) =>
    ignored(
      base<GrepArgs>(y)
        .positional('pattern', { type: 'string', demandOption: true })
        .positional('path', { type: 'string', describe: 'a file or directory (default: everything)' })
        .option('glob', { type: 'string', describe: 'only files matching this glob' })
        .option('ignore-case', { alias: 'i', type: 'boolean', default: false })
        .option('fixed-strings', { alias: 'F', type: 'boolean', default: false })
        .option('context', { alias: 'C', type: 'number', describe: 'lines of context' })
        .option('max-matches', { type: 'number' }) as Argv<GrepArgs>,
    ),
  handler: (a) =>
    withClient(
      a,
      (c) =>
        c.request('file.grep', {
          shadow: a.shadow,
          agent: a.agent,
          pattern: a.pattern,
          ...(a.path ? { path: a.path } : {}),
          ...(a.glob ? { glob: a.glob } : {}),
          ignoreCase: a['ignore-case'],
          fixedStrings: a['fixed-strings'],
          ...(a.context !== undefined ? { context: a.context } : {}),
          includeIgnored: a['include-ignored'],
          ...(a['max-matches'] ? { maxMatches: a['max-matches'] } : {}),
        }),
      (r) =>
        [
          ...r.matches.flatMap((m) => [
            ...(m.before ?? []).map((t, i) => `${shownName(m.path)}-${m.line - (m.before?.length ?? 0) + i}-${t}`),
            `${shownName(m.path)}:${m.line}:${m.text}`,
            ...(m.after ?? []).map((t, i) => `${shownName(m.path)}-${m.line + 1 + i}-${t}`),
          ]),
          ...(r.truncated ? ['(more matches: --max-matches)'] : []),
        ].join('\n'),
    ),
};

export const fileCommand: CommandModule = {
  command: 'file <command>',
  describe: 'Agent file tools on a layer (without switching the mount): read, write, edit, ls, glob, grep',
  builder: (y: Argv) =>
    y
      .command(read as unknown as CommandModule)
      .command(write as unknown as CommandModule)
      .command(edit as unknown as CommandModule)
      .command(ls as unknown as CommandModule)
      .command(glob as unknown as CommandModule)
      .command(grep as unknown as CommandModule)
      .demandCommand(1, 'name a file command'),
  handler: () => undefined,
};

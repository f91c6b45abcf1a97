// Getting work out of a layer from the command line: `diff`, `patch`, `apply` (the one command
// that writes your folder), `checkpoint`, `restore`, `checkpoints`.
import * as fs from 'fs';
import type { Argv, CommandModule } from 'yargs';
import type { ParamsOf, ResultOf } from '../../protocol/methods';
import { tell, withClient } from '../daemon-call';
import { findMergeTool, resolveWithTool } from '../merge-tool';
import { ShadowError } from '../../common/errors';
import { ExitCode, shownContent, shownName, shownText } from '../output';

interface Base {
  shadow: string;
  agent: string;
  json: boolean;
}
interface PathArgs extends Base {
  paths?: string[];
  'include-ignored': boolean;
}

const shadowAgent = <T extends Base>(y: Argv): Argv<T> =>
  y
    .positional('shadow', { type: 'string', demandOption: true, describe: 'the shadow (name or mount point)' })
    .option('agent', { type: 'string', demandOption: true, describe: 'whose layer' })
    .option('json', { type: 'boolean', default: false }) as unknown as Argv<T>;

const withPaths = <T extends PathArgs>(y: Argv): Argv<T> =>
  shadowAgent<T>(y)
    .positional('paths', { type: 'string', array: true, describe: 'only these files or directories' })
    .option('include-ignored', {
      type: 'boolean',
      default: false,
      describe: 'include the files git ignores in your folder (.git is always left out)',
    }) as Argv<T>;

function pathsOf(a: PathArgs): { paths?: string[]; includeIgnored?: boolean } {
  return { ...(a.paths && a.paths.length ? { paths: a.paths } : {}), ...(a['include-ignored'] ? { includeIgnored: true } : {}) };
}

function excludedNote(r: { excluded: Array<{ path: string; reason: string }> }): string {
  if (!r.excluded.length) return '';
  const meta = r.excluded.filter((e) => e.reason === 'repository-metadata').length;
  const ignored = r.excluded.length - meta;
  const parts = [meta ? `${meta} in .git` : '', ignored ? `${ignored} ignored by git (--include-ignored to include them)` : ''];
  return `left out: ${parts.filter(Boolean).join(', ')}`;
}

function summary(r: ResultOf<'layer.diff'>): string {
  if (!r.files.length) return '';
  return r.files
    .map(
      (f) =>
        `${f.status.padEnd(12)} ${f.oldPath ? `${shownName(f.oldPath)} -> ` : ''}${shownName(f.path)}${f.binary ? ' (binary)' : ` +${f.additions} -${f.deletions}`}`,
    )
    .join('\n');
}

/**
 * A diff or patch as printed: on a terminal, the agent's control characters shown as escapes (a
 * line must not hide itself or the one before it); to a file or a pipe (git apply), byte for byte.
 */
function onTerminal(text: string): string {
  return process.stdout.isTTY === true ? shownContent(text) : text;
}

export const diffCommand: CommandModule<object, PathArgs & { stat: boolean }> = {
  command: 'diff <shadow> [paths..]',
  describe: "A unified diff of an agent's layer against the folder",
  builder: (y) =>
    withPaths<PathArgs & { stat: boolean }>(y).option('stat', { type: 'boolean', default: false, describe: 'list the files only' }),
  handler: (args) =>
    withClient(
      args,
      (c) => c.request('layer.diff', { shadow: args.shadow, agent: args.agent, ...pathsOf(args) }),
      (r) => [args.stat ? summary(r) : onTerminal(r.text.replace(/\n$/, '')), args.stat ? excludedNote(r) : ''].filter(Boolean).join('\n'),
    ),
};

export const patchCommand: CommandModule<object, PathArgs & { output?: string }> = {
  command: 'patch <shadow> [paths..]',
  describe: "A git-format patch of an agent's layer (binary files included) for git apply",
  builder: (y) =>
    withPaths<PathArgs & { output?: string }>(y).option('output', {
      alias: 'o',
      type: 'string',
      describe: 'write the patch to this file instead of standard output',
    }),
  handler: (args) =>
    withClient(
      args,
      async (c) => {
        const r = await c.request('layer.patch', { shadow: args.shadow, agent: args.agent, ...pathsOf(args) });
        if (args.output) fs.writeFileSync(args.output, r.text);
        return r;
      },
      (r) =>
        args.output
          ? `wrote ${r.files.length} file${r.files.length === 1 ? '' : 's'} of changes to ${args.output}`
          : onTerminal(r.text.replace(/\n$/, '')),
    ),
};

interface ApplyArgs extends PathArgs {
  'dry-run': boolean;
  take: string[];
  keep: string[];
  merged: string[];
  'show-merge': boolean;
  'allow-type-changes': boolean;
  branch?: string;
  force: boolean;
  hunk: string[];
  'mark-conflicts': boolean;
  'merge-tool'?: string;
}

export function renderApply(r: ResultOf<'layer.apply'>, showMerge: boolean): string {
  const lines: string[] = [];
  if (r.branch)
    return `${r.dryRun ? 'would make' : 'made'} branch ${r.branch.name} at ${r.branch.commit}${r.branch.previous ? ` (was ${r.branch.previous})` : ''}`;
  for (const a of r.applied) lines.push(`${r.dryRun ? 'would ' : ''}${a.action.padEnd(11)} ${shownName(a.path)}`);
  for (const k of r.kept) lines.push(`kept in the layer (written to the folder too): ${shownName(k)}`);
  for (const t of r.typeChanges ?? [])
    lines.push(
      `type change: ${shownName(t.path)} ${t.from} -> ${t.to}${t.applied ? '' : r.dryRun ? '' : ' (not applied: see its conflict)'}`,
    );
  for (const l of r.links ?? []) lines.push(`symlink: ${shownName(l.path)} -> ${shownName(l.target)}`);
  for (const x of r.conflicts) {
    lines.push(`CONFLICT    ${shownName(x.path)}: ${shownText(x.reason)}`);
    if (x.merged !== null)
      lines.push(
        x.mergeConflicts === 0
          ? '            a three-way merge is clean: take it with --merged ' + shownName(x.path)
          : `            three-way merge has ${x.mergeConflicts} conflicting region${x.mergeConflicts === 1 ? '' : 's'}${showMerge ? ':' : ' (--show-merge to see it)'}`,
      );
    if (showMerge && x.regions)
      for (const g of x.regions) lines.push(`            merged lines ${g.startLine}-${g.endLine}:`, shownContent(g.text));
  }
  for (const m of r.marked ?? [])
    lines.push(`marked: ${shownName(m)} is in the agent's layer with conflict markers: resolve them there, then apply it again`);
  if (r.conflicts.length)
    lines.push(
      `${r.conflicts.length} conflict${r.conflicts.length === 1 ? '' : 's'}: nothing was written for ${r.conflicts.length === 1 ? 'it' : 'them'}; resolve with --take (the agent's), --keep (yours) or --merged PATH`,
    );
  if (!r.applied.length && !r.conflicts.length) lines.push('nothing to apply');
  const note = excludedNote(r);
  if (note) lines.push(note);
  return lines.join('\n');
}

export const applyCommand: CommandModule<object, ApplyArgs> = {
  command: 'apply <shadow> [paths..]',
  describe: "Writes an agent's changes into your folder (the one command that does); files you changed meanwhile are conflicts",
  builder: (y) =>
    withPaths<ApplyArgs>(y)
      .option('dry-run', { type: 'boolean', default: false, describe: 'show what would be written; write nothing' })
      .option('allow-type-changes', {
        type: 'boolean',
        default: false,
        describe:
          'confirm type changes (a directory replaced by a file or link, ...) and links out of your folder; without it they are refused',
      })
      .option('take', {
        type: 'string',
        array: true,
        default: [],
        describe: 'conflicting PATH: write the agent\'s version anyway (repeatable; the protocol\'s "agent" resolution)',
      })
      .option('keep', {
        type: 'string',
        array: true,
        default: [],
        describe: 'conflicting PATH: keep your version, drop the agent\'s change (repeatable; the protocol\'s "folder" resolution)',
      })
      .option('merged', {
        type: 'string',
        array: true,
        default: [],
        describe: 'conflicting PATH: write the clean three-way merge (repeatable; the protocol\'s "merged" resolution)',
      })
      .option('show-merge', {
        type: 'boolean',
        default: false,
        describe: 'print the conflicting regions of the three-way merges, with 3 lines around each',
      })
      .option('mark-conflicts', {
        type: 'boolean',
        default: false,
        describe: "write each conflicting file with conflict markers into the agent's layer, to resolve there (your folder is not written)",
      })
      .option('branch', {
        type: 'string',
        describe: "instead of files: bring the agent's commits into your repository as this new branch (nothing else of yours changes)",
      })
      .option('force', {
        type: 'boolean',
        default: false,
        describe: 'with --branch: replace an existing branch of that name',
      })
      .option('hunk', {
        type: 'string',
        array: true,
        default: [],
        describe: 'apply only this hunk (an id from review --list; repeatable), plus the paths named; the layer keeps the rest',
      })
      .option('merge-tool', {
        type: 'string',
        describe: "open each conflicting text file in your merge tool (NAME, or alone: git's merge.tool) and write what you resolve there",
      }) as Argv<ApplyArgs>,
  handler: (args) =>
    withClient(
      args,
      async (c) => {
        const resolutions: NonNullable<ParamsOf<'layer.apply'>['resolutions']> = {};
        for (const p of args.take) resolutions[p] = 'agent';
        for (const p of args.keep) resolutions[p] = 'folder';
        for (const p of args.merged) resolutions[p] = 'merged';
        const tool = args['merge-tool'];
        let folder: string | undefined;
        if (tool !== undefined) {
          const { shadows } = await c.request('list');
          folder = shadows.find((s) => s.name === args.shadow)?.folder;
          if (folder === undefined) throw new ShadowError('UNKNOWN_SHADOW', `no shadow named ${args.shadow} (shadowfs list shows them)`);
        }
        const mergeTool = tool !== undefined && folder !== undefined ? findMergeTool(folder, tool) : undefined;
        const request = {
          shadow: args.shadow,
          agent: args.agent,
          ...pathsOf(args),
          dryRun: args['dry-run'],
          ...(args['allow-type-changes'] ? { allowTypeChanges: true } : {}),
          ...(args.branch !== undefined ? { branch: args.branch, ...(args.force ? { force: true } : {}) } : {}),
          ...(args.hunk.length ? { hunks: args.hunk } : {}),
          ...(args['mark-conflicts'] ? { markConflicts: true } : {}),
          ...(mergeTool ? { includeBase: true } : {}),
        } satisfies ParamsOf<'layer.apply'>;
        let r = await c.request('layer.apply', { ...request, ...(Object.keys(resolutions).length ? { resolutions } : {}) });
        if (mergeTool && folder !== undefined && !r.dryRun && r.conflicts.length) {
          // Each text conflict in the tool, one after the other; what it resolves is written by a second apply of those paths.
          const resolved: Record<string, { content: string }> = {};
          for (const x of r.conflicts) {
            if (x.binary || x.folder === null || x.agent === null) continue;
            tell(`${shownName(x.path)}: opening ${mergeTool.name} (yours: LOCAL, the agent's: REMOTE)`);
            const out = resolveWithTool(mergeTool, folder, x);
            if ('content' in out) resolved[x.path] = out;
            else tell(`${shownName(x.path)}: ${out.refused}; it stays a conflict`);
          }
          const paths = Object.keys(resolved);
          if (paths.length) {
            const second = await c.request('layer.apply', {
              shadow: args.shadow,
              agent: args.agent,
              paths,
              resolutions: resolved,
              ...(args['allow-type-changes'] ? { allowTypeChanges: true } : {}),
            });
            r = {
              ...r,
              applied: [...r.applied, ...second.applied],
              conflicts: [...r.conflicts.filter((x) => !paths.includes(x.path)), ...second.conflicts],
            };
          }
        }
        if (r.conflicts.length) process.exitCode = ExitCode.CONFLICTS;
        return r;
      },
      (r) => renderApply(r, args['show-merge']),
    ),
};

export const checkpointCommand: CommandModule<object, Base & { name?: string }> = {
  command: 'checkpoint <shadow>',
  describe: "Saves an agent's layer as a checkpoint (kept in your state directory, across crashes and reboots)",
  builder: (y) =>
    shadowAgent<Base & { name?: string }>(y).option('name', { type: 'string', describe: 'checkpoint name (default: a timestamp)' }),
  handler: (args) =>
    withClient(
      args,
      (c) => c.request('layer.checkpoint', { shadow: args.shadow, agent: args.agent, ...(args.name ? { name: args.name } : {}) }),
      (r) => `checkpoint ${r.name}: ${r.files} file${r.files === 1 ? '' : 's'}, ${r.bytes} bytes`,
    ),
};

export const restoreCommand: CommandModule<object, Base & { name?: string }> = {
  command: 'restore <shadow>',
  describe: "Makes an agent's layer what a checkpoint holds (its current changes are dropped)",
  builder: (y) =>
    shadowAgent<Base & { name?: string }>(y).option('name', { type: 'string', describe: 'checkpoint name (default: the newest)' }),
  handler: (args) =>
    withClient(
      args,
      (c) => c.request('layer.restore', { shadow: args.shadow, agent: args.agent, ...(args.name ? { name: args.name } : {}) }),
      (r) => `restored ${r.name} (${r.paths} path${r.paths === 1 ? '' : 's'})`,
    ),
};

export const checkpointsCommand: CommandModule<object, Base> = {
  command: 'checkpoints <shadow>',
  describe: "Lists an agent's checkpoints for the shadow's folder",
  builder: (y) => shadowAgent<Base>(y),
  handler: (args) =>
    withClient(
      args,
      (c) => c.request('layer.checkpoints', { shadow: args.shadow, agent: args.agent }),
      (r) =>
        r.checkpoints.length
          ? r.checkpoints
              .map((x) => `${x.name}\t${x.createdAt}\t${x.files} files\t${x.bytes} bytes${x.auto ? '\t(autosave)' : ''}`)
              .join('\n')
          : 'no checkpoints',
    ),
};

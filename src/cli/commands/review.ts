// `shadowfs review`: an agent's changes hunk by hunk, in the manner of `git add -p`. Each hunk
// (a whole file when it cannot be cut: added, deleted, binary, a link) is shown, coloured on a
// terminal, and the user answers: y apply it to the folder, n reject it (with a reason the agent
// is told), e edit it in $EDITOR first (as git does), s skip, q quit. At the end the rejections are recorded (layer.reject; with
// --revert-rejected they leave the agent's layer too) and the accepted hunks applied
// (layer.apply with hunks). --list prints the hunks with their ids (--json: layer.hunks' answer);
// --rejections lists what was rejected.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as readline from 'readline';
import type { Argv, CommandModule } from 'yargs';
import type { ShadowClient } from '../../client/client';
import { editedNewSide } from '../../patch/review';
import type { ResultOf } from '../../protocol/methods';
import { connectCli, withClient } from '../daemon-call';
import { ExitCode, reportError, shownContent, shownName, shownText } from '../output';
import { renderApply } from './work';

interface ReviewArgs {
  shadow: string;
  agent: string;
  json: boolean;
  paths?: string[];
  list: boolean;
  rejections: boolean;
  'revert-rejected': boolean;
  'include-ignored': boolean;
}

type Unit = ResultOf<'layer.hunks'>['hunks'][number];

const paint = (on: boolean) => (code: string, s: string) => (on ? `\x1b[${code}m${s}\x1b[0m` : s);

/** A unit as the user reads it: a header line, then its text (coloured as git colours a diff). */
export function showUnit(u: Unit, colour: boolean): string {
  const c = paint(colour);
  const where = u.unit === 'hunk' ? '' : u.unit === 'mode' ? ' (mode)' : ` (${u.status}${u.binary ? ', binary' : ''})`;
  const lines = [c('1', `${shownName(u.path)}${where}  [${u.id}]`)];
  if (u.conflict) lines.push(c('33', `conflict: ${shownText(u.conflict)}`));
  // The agent's text: what it would make of the user's file, never what it makes the terminal show.
  for (const l of shownContent(u.text.replace(/\n$/, '')).split('\n'))
    lines.push(l.startsWith('@@') ? c('36', l) : l.startsWith('+') ? c('32', l) : l.startsWith('-') ? c('31', l) : l);
  return lines.join('\n');
}

const HELP = `y - apply this hunk to your folder
n - reject this hunk (you are asked why; the agent is told)
s - skip it (decide later)
q - quit; hunks not decided are skipped
e - edit this hunk in your editor ($VISUAL, $EDITOR, else vi), then apply it as edited
? - this help`;

const EDIT_GUIDE = `# ---
# To remove '-' lines, make them ' ' lines (context).
# To remove '+' lines, delete them.
# Lines starting with # will be removed.
# If you empty this file, the edit is abandoned and you are asked again.
`;

/**
 * Opens the user's editor on a hunk, as git add -p's "e" does; returns the hunk as edited, null
 * when abandoned (emptied), or an error sentence when its old side was changed.
 */
function editHunk(u: Unit, rl: readline.Interface): string | null | Error {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-review-'));
  const file = path.join(dir, 'hunk.diff');
  try {
    fs.writeFileSync(file, `# Manual hunk edit mode: ${u.path}\n${u.text}${EDIT_GUIDE}`);
    const editor = process.env.VISUAL || process.env.EDITOR || 'vi';
    // The editor owns the terminal meanwhile: readline lets go of it, and takes it back after.
    rl.pause();
    if (process.stdin.isTTY) process.stdin.setRawMode(false);
    const r = spawnSync('sh', ['-c', `${editor} "$1"`, 'editor', file], { stdio: 'inherit' });
    if (process.stdin.isTTY) process.stdin.setRawMode(true);
    rl.resume();
    if (r.status !== 0) return new Error(`the editor (${editor}) failed${r.status === null ? '' : ` with exit status ${r.status}`}`);
    const edited = fs.readFileSync(file, 'utf8');
    if (!edited.split('\n').some((l) => l !== '' && !l.startsWith('#'))) return null;
    const oldSide = u.text
      .split('\n')
      .filter((l) => l.startsWith(' ') || l.startsWith('-'))
      .map((l) => l.slice(1));
    editedNewSide(edited, oldSide);
    return edited;
  } catch (err) {
    return err as Error;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function ask(rl: readline.Interface, q: string): Promise<string | null> {
  return new Promise((resolve) => {
    const onClose = (): void => resolve(null);
    rl.once('close', onClose);
    rl.question(q, (a) => {
      rl.off('close', onClose);
      resolve(a);
    });
  });
}

async function interactive(c: ShadowClient, args: ReviewArgs): Promise<void> {
  const target = { shadow: args.shadow, agent: args.agent };
  const listed = await c.request('layer.hunks', {
    ...target,
    ...(args.paths?.length ? { paths: args.paths } : {}),
    ...(args['include-ignored'] ? { includeIgnored: true } : {}),
  });
  const colour = process.stdout.isTTY === true;
  const out = (s: string): boolean => process.stdout.write(s + '\n');
  if (!listed.hunks.length) {
    out('nothing to review');
    return;
  }
  const rl = readline.createInterface({ input: process.stdin, output: process.stdout, terminal: true });
  const accepted: string[] = [];
  const edited: Record<string, string> = {};
  const rejected: Array<{ id: string; reason: string }> = [];
  try {
    const n = listed.hunks.length;
    units: for (let i = 0; i < n; i++) {
      const u = listed.hunks[i];
      out(showUnit(u, colour));
      for (;;) {
        const what = u.unit === 'hunk' ? 'this hunk' : u.unit === 'mode' ? 'this mode change' : 'this file';
        const a = await ask(rl, paint(colour)('34;1', `(${i + 1}/${n}) Apply ${what} to your folder [y,n,s,q,e,?]? `));
        const key = (a ?? 'q').trim().toLowerCase();
        if (key === 'y') accepted.push(u.id);
        else if (key === 'n') {
          const reason = await ask(rl, 'Why (told to the agent)? ');
          if (reason === null) break units;
          rejected.push({ id: u.id, reason: reason.trim() || 'rejected by the user' });
        } else if (key === 's') {
          // left for later
        } else if (key === 'q') break units;
        else if (key === 'e') {
          if (u.unit !== 'hunk') {
            out('only a hunk of a text file can be edited');
            continue;
          }
          const e = editHunk(u, rl);
          if (e === null) out('the edit was abandoned');
          else if (e instanceof Error) out(`your edited hunk does not apply: ${e.message}`);
          else {
            edited[u.id] = e;
            break;
          }
          continue;
        } else {
          out(HELP);
          continue;
        }
        break;
      }
    }
  } finally {
    rl.close();
  }
  if (rejected.length) {
    const r = await c.request('layer.reject', { ...target, rejections: rejected, ...(args['revert-rejected'] ? { revert: true } : {}) });
    out(
      `rejected ${r.rejected.length} hunk${r.rejected.length === 1 ? '' : 's'} (the agent is told on its next tool result)` +
        (r.reverted.length ? `; taken out of the agent's layer in ${r.reverted.map(shownName).join(', ')}` : ''),
    );
    for (const n of r.notReverted ?? []) out(`kept in the agent's layer: ${shownName(n.path)} (${n.code}: ${shownText(n.message)})`);
  }
  if (accepted.length || Object.keys(edited).length) {
    const r = await c.request('layer.apply', {
      ...target,
      hunks: accepted,
      ...(Object.keys(edited).length ? { edited } : {}),
      ...(args['include-ignored'] ? { includeIgnored: true } : {}),
    });
    out(renderApply(r, false));
    if (r.conflicts.length) process.exitCode = ExitCode.CONFLICTS;
  }
  if (!accepted.length && !rejected.length && !Object.keys(edited).length) out('nothing applied, nothing rejected');
}

export const reviewCommand: CommandModule<object, ReviewArgs> = {
  command: 'review <shadow> [paths..]',
  describe:
    "Reviews an agent's changes hunk by hunk (like git add -p): apply some to your folder, reject others with a reason the agent is told",
  builder: (y) =>
    y
      .positional('shadow', { type: 'string', demandOption: true, describe: 'the shadow (name or mount point)' })
      .positional('paths', { type: 'string', array: true, describe: 'only these files or directories' })
      .option('agent', { type: 'string', demandOption: true, describe: 'whose layer' })
      .option('json', { type: 'boolean', default: false, describe: 'with --list or --rejections: the answer as JSON' })
      .option('list', { type: 'boolean', default: false, describe: 'print the hunks with their ids (for apply --hunk) and stop' })
      .option('rejections', { type: 'boolean', default: false, describe: 'list the rejections recorded for the agent' })
      .option('revert-rejected', {
        type: 'boolean',
        default: false,
        describe: "take rejected hunks out of the agent's layer too (default: the layer keeps them; the agent is told)",
      })
      .option('include-ignored', {
        type: 'boolean',
        default: false,
        describe: 'include the files git ignores in your folder',
      }) as unknown as Argv<ReviewArgs>,
  handler: async (args) => {
    const target = { shadow: args.shadow, agent: args.agent };
    if (args.rejections)
      return withClient(
        args,
        (c) => c.request('layer.rejections', target),
        (r) =>
          r.rejections.length
            ? r.rejections
                .map(
                  (x) =>
                    `${x.at}  ${shownName(x.path)}${x.lines ? ` lines ${x.lines}` : ''}  [${x.id}]${x.delivered ? '' : ' (not told yet)'}\n  ${x.reason}`,
                )
                .join('\n')
            : 'no rejections',
      );
    if (args.list || args.json)
      return withClient(
        args,
        (c) =>
          c.request('layer.hunks', {
            ...target,
            ...(args.paths?.length ? { paths: args.paths } : {}),
            ...(args['include-ignored'] ? { includeIgnored: true } : {}),
          }),
        (r) => (r.hunks.length ? r.hunks.map((u) => showUnit(u, process.stdout.isTTY === true)).join('\n') : 'no changes'),
      );
    if (!process.stdin.isTTY) {
      reportError(args, new Error('review asks at a terminal: run it in one, or use --list and apply --hunk ID'));
      process.exitCode = ExitCode.USAGE;
      return;
    }
    let client: ShadowClient | undefined;
    try {
      client = await connectCli();
      await interactive(client, args);
    } catch (err) {
      reportError(args, err);
    } finally {
      client?.close();
    }
  },
};

// The apply flow: writing an agent's change into the user's folder (apply, with a question for
// each conflict in resolveConflicts) and bringing an agent's commits into the folder's repository
// as a branch (applyBranch, onBranchExists, reportBranch). The only part of the extension that
// writes the user's folder or repository, and only through the daemon's layer.apply.
import * as vscode from 'vscode';
import type { ResultOf } from 'shadowfs/client';
import { branchNameProblem } from './branchName';
import type { CommandOptions } from './commandOptions';
import { docUri, joinRel, type ShadowContentProvider } from './content';
import type { Daemon } from './daemon';
import { checkedOutBranch, commitsNotOnHead, describeBranchTip, type CommitLine } from './git';
import { baseName, describeExcluded, groupChanges } from './model';
import type { ShadowsProvider } from './views';
import { noLinks } from './notices';

export type ApplyResult = ResultOf<'layer.apply'>;
/** What shadowfs.applyBranch answers: the daemon's result, and the commits the branch has that the folder's HEAD has not. */
export type BranchApplyResult = ApplyResult & { commits: CommitLine[] | undefined };

/** The extension's parts the apply flow uses, given by activate(). */
export interface ApplyContext {
  daemon: Daemon;
  shadows: ShadowsProvider;
  /** Holds a conflict's merge for the diff beside the user's file. */
  content: ShadowContentProvider;
  output: vscode.OutputChannel;
}

export async function apply(
  ctx: ApplyContext,
  shadow: string,
  agent: string,
  paths: string[] | undefined,
  opts: CommandOptions | undefined,
): Promise<ApplyResult | undefined> {
  const { daemon, shadows, output } = ctx;
  const client = await daemon.get();
  const what = paths ? (paths.length === 1 ? paths[0] : `${paths.length} files`) : `every change of ${agent}`;
  const folder = shadows.model.shadow(shadow)?.folder ?? 'your folder';
  // What the layer has that apply leaves out, as the view last heard it: said before asking,
  // and the ignored files offered as a second choice.
  const inScope = (p: string): boolean => !paths || paths.some((q) => p === q || p.startsWith(`${q}/`));
  const known = groupChanges(shadows.model.layers(shadow).find((l) => l.agent === agent)?.changes ?? []).excluded;
  const metaCount = known['repository-metadata'].filter((c) => inScope(c.path)).length;
  const ignoredCount = known.ignored.filter((c) => inScope(c.path)).length;
  let includeIgnored = opts?.includeIgnored === true;
  if (opts?.confirm !== false) {
    const plain = 'Apply';
    const withIgnored = `Apply Including ${ignoredCount} Ignored`;
    const notes = [
      'Files you changed since the agent copied them are not written; you choose what happens to each.',
      metaCount ? `${metaCount} change(s) in .git (git's own data) are never applied.` : '',
      ignoredCount === 0
        ? ''
        : includeIgnored
          ? `${ignoredCount} file(s) your folder's git ignores are written too.`
          : `${ignoredCount} file(s) your folder's git ignores are left out; “${withIgnored}” writes them too.`,
    ].filter(Boolean);
    const actions = ignoredCount && !includeIgnored ? [plain, withIgnored] : [plain];
    const answer = await vscode.window.showWarningMessage(
      noLinks(`Write ${what} into ${folder}?`),
      { modal: true, detail: notes.join(' ') },
      ...actions,
    );
    if (answer === undefined) return undefined;
    if (answer === withIgnored) includeIgnored = true;
  }
  const ignoredParam = includeIgnored ? { includeIgnored: true } : {};
  let result = await client.request('layer.apply', {
    shadow,
    agent,
    ...(paths ? { paths } : {}),
    ...(opts?.resolutions ? { resolutions: opts.resolutions } : {}),
    ...ignoredParam,
  });
  const leftOut = describeExcluded(result.excluded);
  output.appendLine(
    `apply ${agent} (${shadow}): ${result.applied.length} written, ${result.conflicts.length} conflict(s)${leftOut ? `; left out: ${leftOut}` : ''}`,
  );
  for (const e of result.excluded ?? []) output.appendLine(`  not applied (${e.reason}): ${e.path}`);
  const leftOutNote = leftOut ? ` Left out: ${leftOut}.` : '';
  if (result.conflicts.length && opts?.resolutions === undefined && opts?.confirm !== false) {
    result = await resolveConflicts(ctx, shadow, agent, result, includeIgnored);
    if (leftOut)
      void vscode.window.showInformationMessage(
        noLinks(`Applied ${result.applied.length} change(s) of ${agent} to ${folder}.${leftOutNote}`),
      );
  } else if (result.conflicts.length) {
    void vscode.window.showWarningMessage(
      noLinks(
        `shadowfs: ${result.conflicts.length} file(s) not applied; you changed them since ${agent} copied them: ${result.conflicts.map((c) => c.path).join(', ')}.${leftOutNote}`,
      ),
    );
  } else if (result.applied.length === 0) {
    void vscode.window.showInformationMessage(noLinks(`Nothing of ${agent}'s to write into ${folder}.${leftOutNote}`));
  } else {
    void vscode.window.showInformationMessage(
      noLinks(`Applied ${result.applied.length} change(s) of ${agent} to ${folder}.${leftOutNote}`),
    );
  }
  await shadows.refresh();
  return result;
}

/** Shows each conflict (your file beside the merge or the agent's version) and asks what to do. */
async function resolveConflicts(
  ctx: ApplyContext,
  shadow: string,
  agent: string,
  first: ApplyResult,
  includeIgnored: boolean,
): Promise<ApplyResult> {
  const { daemon, shadows, content } = ctx;
  const client = await daemon.get();
  const resolutions: Record<string, 'agent' | 'folder' | 'merged' | { content: string }> = {};
  const folder = shadows.model.shadow(shadow)?.folder ?? '';
  for (const c of first.conflicts) {
    const right = c.merged !== null ? content.hold(c.path, c.merged) : docUri({ kind: 'agent', shadow, agent, path: c.path });
    const left = c.folder !== null ? vscode.Uri.file(joinRel(folder, c.path)) : docUri({ kind: 'empty', path: c.path });
    await vscode.commands.executeCommand(
      'vscode.diff',
      left,
      right,
      `${baseName(c.path)} (yours ↔ ${c.merged !== null ? `merged with ${agent}'s` : `${agent}'s`})`,
      { preview: false },
    );
    const items: Array<vscode.QuickPickItem & { value: 'agent' | 'folder' | 'merged' | 'markers' | 'skip' }> = [];
    if (c.merged !== null && c.mergeConflicts === 0)
      items.push({ label: 'Take the merge', description: 'both changes merged cleanly', value: 'merged' });
    items.push({ label: `Take ${agent}'s version`, description: 'overwrites your changes to this file', value: 'agent' });
    items.push({ label: 'Keep yours', description: `drops ${agent}'s change to this file`, value: 'folder' });
    if (c.merged !== null && c.mergeConflicts > 0)
      items.push({
        label: 'Write the merge with conflict markers',
        description: `${c.mergeConflicts} region(s) to fix by hand in your file`,
        value: 'markers',
      });
    items.push({ label: 'Decide later', description: `leaves it in ${agent}'s layer`, value: 'skip' });
    const picked = await vscode.window.showQuickPick(items, {
      title: `${c.path}: ${c.reason}`,
      placeHolder: 'You changed this file since the agent copied it',
      ignoreFocusOut: true,
    });
    if (!picked || picked.value === 'skip') continue;
    resolutions[c.path] = picked.value === 'markers' ? { content: c.merged ?? '' } : picked.value;
  }
  const paths = Object.keys(resolutions);
  if (paths.length === 0) return first;
  const second = await client.request('layer.apply', {
    shadow,
    agent,
    paths,
    resolutions,
    ...(includeIgnored ? { includeIgnored } : {}),
  });
  return {
    ...first,
    applied: [...first.applied, ...second.applied],
    conflicts: first.conflicts.filter((c) => !paths.includes(c.path)).concat(second.conflicts),
  };
}

// The agent's commits (its HEAD in the shadow) come into the folder's repository as a new
// branch: the daemon fetches them with git, writing only new objects and that one ref. No file
// of the folder is written, and the agent's file changes stay in its layer.
export async function applyBranch(
  ctx: ApplyContext,
  shadow: string,
  agent: string,
  opts: CommandOptions | undefined,
): Promise<BranchApplyResult | undefined> {
  const { daemon, shadows } = ctx;
  const client = await daemon.get();
  const folder = shadows.model.shadow(shadow)?.folder;
  const where = folder ?? 'your repository';
  let name = opts?.branch;
  let suggestion = branchNameProblem(`${agent}-work`) ? '' : `${agent}-work`;
  for (;;) {
    if (name === undefined) {
      name = await vscode.window.showInputBox({
        title: `Apply ${agent}'s commits as a new branch of ${where}`,
        prompt:
          'The new branch. Only it and the commits it needs are written; your checked-out branch, index, files and other branches stay as they are.',
        value: suggestion,
        ignoreFocusOut: true,
        validateInput: (v) => branchNameProblem(v),
      });
      if (name === undefined) return undefined;
    } else {
      const problem = branchNameProblem(name);
      if (problem)
        throw Object.assign(new Error(`${JSON.stringify(name)} is not a valid branch name: ${problem}`), { code: 'INVALID_ARGUMENT' });
    }
    const branch: string = name;
    const request = (force: boolean): Thenable<ApplyResult> =>
      vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Bringing ${agent}'s commits into ${where} as branch ${branch}…` },
        () => client.request('layer.apply', { shadow, agent, branch, ...(force ? { force: true } : {}) }),
      );
    let result: ApplyResult;
    try {
      result = await request(false);
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'BRANCH_EXISTS') throw err;
      const choice = await onBranchExists(err as Error, folder, branch, agent, opts);
      if (choice === 'rename') {
        suggestion = branch;
        name = undefined;
        continue;
      }
      if (choice !== 'replace') return undefined;
      result = await request(true);
    }
    return reportBranch(ctx, agent, folder, result);
  }
}

/** The branch exists: replace it (asked in a modal dialog), choose another name, or stop. */
async function onBranchExists(
  err: Error,
  folder: string | undefined,
  branch: string,
  agent: string,
  opts: CommandOptions | undefined,
): Promise<'replace' | 'rename' | 'cancel'> {
  if (opts?.force === true) return 'replace';
  // Scripted without force: the caller gets BRANCH_EXISTS itself.
  if (opts?.force === false || opts?.confirm === false) throw err;
  const another = 'Choose Another Name';
  if (folder && (await checkedOutBranch(folder)) === branch) {
    // The daemon never moves the checked-out branch, even with force: offering to is no choice.
    const answer = await vscode.window.showWarningMessage(
      noLinks(`${branch} is the branch checked out in ${folder}.`),
      {
        modal: true,
        detail:
          'shadowfs never moves the branch you have checked out, not even to replace it. Choose another name for the agent’s commits.',
      },
      another,
    );
    return answer === another ? 'rename' : 'cancel';
  }
  const tip = folder ? await describeBranchTip(folder, branch) : undefined;
  const replace = 'Replace Branch';
  const answer = await vscode.window.showWarningMessage(
    noLinks(`Branch ${branch} exists already${folder ? ` in ${folder}` : ''}. Replace it with ${agent}'s commits?`),
    {
      modal: true,
      detail: `${tip ? `It points to ${tip}. ` : ''}Replaced, it points to ${agent}'s last commit instead; commits only it had are then on no branch (note the one above to get them back). Your checked-out branch, index, files and other branches are not touched.`,
    },
    replace,
    another,
  );
  return answer === replace ? 'replace' : answer === another ? 'rename' : 'cancel';
}

/** Says what the branch apply made and what it left alone; the commits go to the output channel. */
async function reportBranch(ctx: ApplyContext, agent: string, folder: string | undefined, result: ApplyResult): Promise<BranchApplyResult> {
  const { shadows, output } = ctx;
  const b = result.branch;
  if (!b) throw new Error('the daemon answered without a branch: it may be older than this extension (restart it)');
  const short = (c: string): string => c.slice(0, 10);
  const commits = folder ? await commitsNotOnHead(folder, b.commit) : undefined;
  const head = folder ? await checkedOutBranch(folder) : undefined;
  const onHead = head ? `your ${head}` : 'your HEAD';
  output.appendLine(
    `apply ${agent} as branch ${b.name} in ${folder ?? '?'}: ${b.previous ? `replaced (was ${b.previous}), ` : ''}now ${b.commit}`,
  );
  for (const c of commits ?? []) output.appendLine(`  ${short(c.commit)} ${c.subject}`);
  const made = b.previous
    ? `Branch ${b.name} now has ${agent}'s commits (${short(b.commit)}; it was ${short(b.previous)}).`
    : `Made branch ${b.name} from ${agent}'s commits (${short(b.commit)}).`;
  const brought =
    commits === undefined
      ? ''
      : commits.length === 0
        ? ` It has no commit that ${onHead} lacks.`
        : ` ${commits.length} commit(s) not on ${onHead}: "${commits[0].subject}"${commits.length > 1 ? ` and ${commits.length - 1} more` : ''}.`;
  const left = ` ${head ? `Your checked-out branch (${head})` : 'Your HEAD'}, index, files and other branches are as they were; ${agent}'s file changes stay in its layer.`;
  void vscode.window.showInformationMessage(noLinks(made + brought + left), 'Show Commits').then((a) => {
    if (a) output.show(true);
  });
  await shadows.refresh();
  return { ...result, commits };
}

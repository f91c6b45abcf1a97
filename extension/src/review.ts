// Review hunk by hunk in the editor. Over each review unit of an agent's version of a file (the
// right side of "Compare with Your File", or that version opened alone) a CodeLens offers:
// "Apply this change" — that unit alone written into the user's folder (layer.apply with hunks);
// "Reject…" — the user's rejection recorded with a reason, told to the agent on its next MCP tool
// result (layer.reject), and, if the user says so, taken out of the agent's layer. The lenses
// follow the layer (redrawn on the daemon's change feed). Also the radar's overlaps, opened as a
// comparison of the versions that collide.
import * as vscode from 'vscode';
import type { ResultOf } from 'shadowfs/client';
import { isScripted, type CommandOptions } from './commandOptions';
import { docUri, joinRel, refOf } from './content';
import type { Daemon } from './daemon';
import type { OverlapNode } from './model';
import type { ShadowsProvider } from './views';
import { noLinks } from './notices';

type Hunk = ResultOf<'layer.hunks'>['hunks'][number];

/** What a lens passes to its command: enough to act without asking the daemon again. */
export interface HunkRef {
  shadow: string;
  agent: string;
  id: string;
  path: string;
  /** The @@ header or the unit's kind, for messages. */
  label: string;
}

/** shadowfs.rejectHunk's options for scripted calls: the reason and whether to revert, without asking. */
export interface RejectOptions extends CommandOptions {
  reason?: string;
  revert?: boolean;
}

export function hunkLabel(h: Hunk): string {
  if (h.unit === 'hunk') return `lines ${h.newStart}–${h.newStart + Math.max(h.newLines, 1) - 1} (+${h.additions} −${h.deletions})`;
  if (h.unit === 'mode') return 'the mode change';
  return `the whole file (${h.status})`;
}

/**
 * Where a unit's lens goes in the agent's file (0-based): a hunk's first added or removed line,
 * past its leading context (a removal: the line that now follows it); line 0 for a whole file.
 */
export function firstChangedLine(h: Pick<Hunk, 'unit' | 'newStart' | 'text'>): number {
  if (h.unit !== 'hunk') return 0;
  let line = Math.max(h.newStart - 1, 0);
  for (const l of h.text.split('\n').slice(1)) {
    if (l.startsWith('+') || l.startsWith('-')) break;
    if (l.startsWith(' ')) line++;
  }
  return line;
}

export class ReviewLenses implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;

  constructor(private readonly daemon: Daemon) {}

  /** The layer changed (or the folder): lenses are asked for again. */
  refresh(): void {
    this.changed.fire();
  }

  async provideCodeLenses(doc: vscode.TextDocument): Promise<vscode.CodeLens[]> {
    const ref = refOf(doc.uri);
    if (ref?.kind !== 'agent') return [];
    let hunks: Hunk[];
    try {
      const client = await this.daemon.get();
      hunks = (await client.request('layer.hunks', { shadow: ref.shadow, agent: ref.agent, paths: [ref.path] })).hunks;
    } catch {
      return [];
    }
    const lenses: vscode.CodeLens[] = [];
    for (const h of hunks.filter((x) => x.path === ref.path)) {
      const line = Math.min(firstChangedLine(h), Math.max(doc.lineCount - 1, 0));
      const range = new vscode.Range(line, 0, line, 0);
      const arg: HunkRef = { shadow: ref.shadow, agent: ref.agent, id: h.id, path: h.path, label: hunkLabel(h) };
      const conflict = h.conflict ? ' (your file changed: apply resolves)' : '';
      lenses.push(
        new vscode.CodeLens(range, {
          title: `$(check) Apply ${h.unit === 'hunk' ? 'this change' : hunkLabel(h)}${conflict}`,
          command: 'shadowfs.applyHunk',
          arguments: [arg],
        }),
        new vscode.CodeLens(range, { title: '$(close) Reject…', command: 'shadowfs.rejectHunk', arguments: [arg] }),
      );
    }
    return lenses;
  }

  dispose(): void {
    this.changed.dispose();
  }
}

export interface ReviewContext {
  daemon: Daemon;
  shadows: ShadowsProvider;
  lenses: ReviewLenses;
  output: vscode.OutputChannel;
}

/** Writes one review unit into the user's folder. A conflict is reported, never forced. */
export async function applyHunk(ctx: ReviewContext, h: HunkRef, opts?: CommandOptions): Promise<ResultOf<'layer.apply'> | undefined> {
  const folder = ctx.shadows.model.shadow(h.shadow)?.folder ?? 'your folder';
  if (opts?.confirm !== false) {
    const go = 'Apply';
    const answer = await vscode.window.showInformationMessage(
      noLinks(`Write ${h.label} of ${h.path} into ${folder}?`),
      { modal: true },
      go,
    );
    if (answer !== go) return undefined;
  }
  const client = await ctx.daemon.get();
  const r = await client.request('layer.apply', { shadow: h.shadow, agent: h.agent, hunks: [h.id] });
  ctx.lenses.refresh();
  ctx.shadows.layerChanged(h.shadow, h.agent);
  if (r.conflicts.length > 0) {
    const c = r.conflicts[0];
    ctx.output.appendLine(`apply ${h.path} ${h.id}: conflict: ${c.reason}`);
    if (!isScripted(opts))
      void vscode.window.showWarningMessage(
        noLinks(
          `${h.path} changed in ${folder} since ${h.agent} copied it: nothing written. Apply the whole file from the Shadows view to choose a resolution.`,
        ),
      );
  } else if (!isScripted(opts)) {
    void vscode.window.showInformationMessage(noLinks(`Applied ${h.label} of ${h.path} to ${folder}.`));
  }
  return r;
}

/** Records the user's rejection of one unit with a reason (told to the agent), reverting it in the layer if asked. */
export async function rejectHunk(ctx: ReviewContext, h: HunkRef, opts?: RejectOptions): Promise<ResultOf<'layer.reject'> | undefined> {
  const reason =
    opts?.reason ??
    (await vscode.window.showInputBox({
      title: `Reject ${h.label} of ${h.path}`,
      prompt: `Why? ${h.agent} is told this with its next tool result.`,
      placeHolder: 'e.g. keep the old error message; callers match on it',
      validateInput: (v) => (v.length > 4000 ? 'at most 4000 characters' : undefined),
    }));
  if (reason === undefined) return undefined;
  let revert = opts?.revert;
  if (revert === undefined) {
    const keep = `Keep It in ${h.agent}'s Layer`;
    const take = `Also Take It Out of ${h.agent}'s Layer`;
    const answer = await vscode.window.showQuickPick([keep, take], {
      title: `Rejected: ${h.path}, ${h.label}`,
      placeHolder: 'The agent is told either way; taking it out changes the agent’s files',
    });
    if (answer === undefined) return undefined;
    revert = answer === take;
  }
  const client = await ctx.daemon.get();
  const r = await client.request('layer.reject', {
    shadow: h.shadow,
    agent: h.agent,
    rejections: [{ id: h.id, reason: reason.trim() || 'rejected in review' }],
    ...(revert ? { revert: true } : {}),
  });
  ctx.lenses.refresh();
  if (revert) ctx.shadows.layerChanged(h.shadow, h.agent);
  const stayed = r.notReverted?.find((n) => n.path === h.path);
  if (!isScripted(opts)) {
    if (stayed)
      void vscode.window.showWarningMessage(
        noLinks(
          `Rejected ${h.label} of ${h.path}; ${h.agent} is told on its next tool result. It stays in ${h.agent}'s layer: ${stayed.message}`,
        ),
      );
    else
      void vscode.window.showInformationMessage(
        noLinks(
          `Rejected ${h.label} of ${h.path}${revert ? ` and took it out of ${h.agent}'s layer` : ''}; ${h.agent} is told on its next tool result.`,
        ),
      );
  }
  return r;
}

/** Opens the versions an overlap is about: two agents' versions, or the user's file beside the agent's copy. */
export async function openOverlap(ctx: ReviewContext, node: OverlapNode): Promise<void> {
  const o = node.overlap;
  const agentDoc = (agent: string): vscode.Uri => docUri({ kind: 'agent', shadow: node.shadow, agent, path: o.path });
  if (o.kind === 'layers' && o.agents.length >= 2) {
    await vscode.commands.executeCommand(
      'vscode.diff',
      agentDoc(o.agents[0]),
      agentDoc(o.agents[1]),
      `${o.path} (${o.agents[0]} ↔ ${o.agents[1]})`,
    );
    return;
  }
  const root = ctx.shadows.model.shadow(node.shadow)?.folder;
  const left = root && o.folder !== null ? vscode.Uri.file(joinRel(root, o.path)) : docUri({ kind: 'empty', path: o.path });
  await vscode.commands.executeCommand('vscode.diff', left, agentDoc(o.agents[0]), `${o.path} (your file ↔ ${o.agents[0]}'s copy)`);
}

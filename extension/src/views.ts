// The Shadows view (shadows → agents' layers → changed files, kept current from the daemon's
// change feed; under each layer the agent's work first, then collapsed groups of what diff, patch
// and apply leave out: .git, ignored files; beside the layers the shadow's shell sessions and
// views), the decorations of its files (A/M/D like source
// control, dimmed for what is left out), and the Agent Lints
// view, which shows what the language servers say about an agent's change apart from the
// user's own Problems.
import * as vscode from 'vscode';
import * as path from 'path';
import type { ChangeInfo, Diagnostic, Overlap, ResultOf, ShadowClient, ShadowInfo, ShellInfo } from 'shadowfs/client';
import { docUri, refOf } from './content';
import { oneLine, shellWord } from './notices';
import type { Daemon } from './daemon';
import {
  baseName,
  describeCounts,
  excludedGroupDescription,
  excludedGroupLabel,
  excludedShort,
  excludedWhy,
  kindLetter,
  overlapDescription,
  overlapDetail,
  parentOf,
  sessionLabel,
  sessionState,
  ShadowsModel,
  type ExcludedGroupNode,
  type FileNode,
  type LayerNode,
  type Node,
  type OverlapNode,
  type SessionNode,
  type ViewNode,
} from './model';

type LintsResult = ResultOf<'lints'>;
type Diag = Diagnostic;

const KIND_ICON: Record<ChangeInfo['kind'], string> = {
  added: 'diff-added',
  modified: 'diff-modified',
  deleted: 'diff-removed',
  metadata: 'diff-renamed',
};
const KIND_COLOR: Record<ChangeInfo['kind'], string> = {
  added: 'gitDecoration.addedResourceForeground',
  modified: 'gitDecoration.modifiedResourceForeground',
  deleted: 'gitDecoration.deletedResourceForeground',
  metadata: 'gitDecoration.renamedResourceForeground',
};

export class ShadowsProvider implements vscode.TreeDataProvider<Node>, vscode.FileDecorationProvider, vscode.Disposable {
  readonly model = new ShadowsModel();
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly decorationsChanged = new vscode.EventEmitter<vscode.Uri[] | undefined>();
  readonly onDidChangeFileDecorations = this.decorationsChanged.event;
  private pending = new Map<string, { shadow: string; agent: string }>();
  private full = false;
  private sessions = false;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private lastError: string | undefined;

  constructor(private readonly daemon: Daemon) {}

  /** Asks the daemon for everything again. */
  async refresh(): Promise<void> {
    this.full = true;
    await this.flush();
  }

  /** Refreshes one layer soon (notifications come in bursts). */
  layerChanged(shadow: string, agent: string): void {
    this.pending.set(`${shadow}\u0000${agent}`, { shadow, agent });
    this.schedule();
  }

  /**
   * Refreshes the shell sessions soon. They have no notification of their own: asked after
   * layer changes (a session's writes), an agent terminal opening or closing, and with every full
   * refresh; one shell.list for all shadows.
   */
  sessionsChanged(): void {
    this.sessions = true;
    this.schedule();
  }

  /** A radar/changed notification: the overlaps it names, replaced or cleared, shown at once. */
  overlapsChanged(shadow: string, added: readonly Overlap[], cleared: readonly Overlap[]): void {
    if (this.model.updateOverlaps(shadow, added, cleared)) this.changed.fire(undefined);
    else this.shadowsChanged();
  }

  /** Refreshes everything soon. */
  shadowsChanged(): void {
    this.full = true;
    this.schedule();
  }

  /** Resolves once no refresh is waiting or running (for tests and commands). */
  async settled(): Promise<void> {
    while (this.timer || this.running) {
      if (this.timer) {
        clearTimeout(this.timer);
        this.timer = undefined;
        await this.flush();
      }
      await this.running;
    }
  }

  get error(): string | undefined {
    return this.lastError;
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, 150);
  }

  private async flush(): Promise<void> {
    while (this.running) await this.running;
    const full = this.full;
    const sessions = this.sessions;
    const layers = [...this.pending.values()];
    this.full = false;
    this.sessions = false;
    this.pending.clear();
    this.running = this.load(full, sessions, layers).finally(() => (this.running = undefined));
    await this.running;
  }

  private async load(full: boolean, sessions: boolean, layers: Array<{ shadow: string; agent: string }>): Promise<void> {
    let client;
    let sessionList: Promise<void> | undefined;
    let overlaps: Promise<void>[] = [];
    try {
      client = await this.daemon.get();
      if (full || sessions) sessionList = this.loadSessions(client);
      if (full) {
        const { shadows } = await client.request('list');
        this.model.setShadows(shadows);
        layers = shadows.filter((s) => s.mounted).flatMap((s) => s.agents.map((agent) => ({ shadow: s.name, agent })));
        overlaps = shadows.filter((s) => s.mounted).map((s) => this.loadOverlaps(client!, s.name));
      }
      this.lastError = undefined;
    } catch (err) {
      await sessionList;
      this.lastError = (err as Error).message;
      this.model.setShadows([]);
      this.model.setSessions([]);
      this.changed.fire(undefined);
      return;
    }
    await Promise.all([sessionList, ...overlaps, ...layers.map(({ shadow, agent }) => this.loadLayer(client, shadow, agent))]);
    this.changed.fire(undefined);
    this.decorationsChanged.fire(undefined);
  }

  private async loadOverlaps(client: ShadowClient, shadow: string): Promise<void> {
    try {
      this.model.setOverlaps(shadow, (await client.request('radar', { shadow })).overlaps);
    } catch {
      // An older daemon, or the shadow went: no overlaps to show.
      this.model.setOverlaps(shadow, []);
    }
  }

  private async loadSessions(client: ShadowClient): Promise<void> {
    try {
      const { sessions } = await client.request('shell.list', {});
      this.model.setSessions(sessions);
    } catch {
      // A daemon without sessions (older, or a platform without them): none to show.
      this.model.setSessions([]);
    }
  }

  private async loadLayer(client: ShadowClient, shadow: string, agent: string): Promise<void> {
    try {
      const { changes } = await client.request('layer.changes', { shadow, agent });
      this.model.setChanges(shadow, agent, changes);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'UNKNOWN_AGENT' || code === 'UNKNOWN_SHADOW') {
        this.full = true;
        this.schedule();
      } else {
        this.model.setError(shadow, agent, (err as Error).message);
      }
    }
  }

  getTreeItem(node: Node): vscode.TreeItem {
    switch (node.kind) {
      case 'shadow':
        return shadowItem(node.info);
      case 'overlap':
        return overlapItem(node);
      case 'layer':
        return layerItem(node);
      case 'session':
        return sessionItem(node);
      case 'view':
        return viewItem(node);
      case 'excluded':
        return excludedGroupItem(node);
      case 'file':
        return fileItem(node);
    }
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (!node) return this.model.roots();
    if (node.kind === 'shadow') {
      const name = node.info.name;
      return [...this.model.overlaps(name), ...this.model.layers(name), ...this.model.sessions(name), ...this.model.views(name)];
    }
    if (node.kind === 'layer') {
      // An idle shadow's layers are asked for when opened, not before (asking mounts it again).
      if (!node.changes && !node.error) {
        try {
          await this.loadLayer(await this.daemon.get(), node.shadow, node.agent);
        } catch {
          // shown as the daemon's state
        }
      }
      // The agent's work, then what diff, patch and apply leave out (collapsed groups).
      return [...this.model.files(node.shadow, node.agent), ...this.model.excludedGroups(node.shadow, node.agent)];
    }
    if (node.kind === 'excluded') return this.model.excludedFiles(node);
    return [];
  }

  getParent(node: Node): Node | undefined {
    if (node.kind === 'shadow') return undefined;
    const info = this.model.shadow(node.shadow);
    if (!info) return undefined;
    if (node.kind === 'layer' || node.kind === 'session' || node.kind === 'view' || node.kind === 'overlap')
      return { kind: 'shadow', info };
    const reason = node.kind === 'file' ? node.change.excluded : undefined;
    if (reason) return this.model.excludedGroups(node.shadow, node.agent).find((g) => g.reason === reason);
    return this.model.layers(node.shadow).find((l) => l.agent === node.agent);
  }

  provideFileDecoration(uri: vscode.Uri): vscode.FileDecoration | undefined {
    const ref = refOf(uri);
    if (ref?.kind !== 'agent') return undefined;
    const change = this.model.changeAt(ref.shadow, ref.agent, ref.path);
    if (!change) return undefined;
    if (change.excluded)
      return new vscode.FileDecoration(
        kindLetter(change.kind),
        `${change.kind}, not applied: ${excludedShort(change.excluded)}`,
        new vscode.ThemeColor('gitDecoration.ignoredResourceForeground'),
      );
    return new vscode.FileDecoration(kindLetter(change.kind), change.kind, new vscode.ThemeColor(KIND_COLOR[change.kind]));
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.changed.dispose();
    this.decorationsChanged.dispose();
  }
}

function shadowItem(info: ShadowInfo): vscode.TreeItem {
  const item = new vscode.TreeItem(info.name, vscode.TreeItemCollapsibleState.Expanded);
  item.id = `shadow:${info.name}`;
  item.description = info.mounted ? info.folder : `${info.folder} (idle)`;
  // Plain text, never a MarkdownString: it holds names (and, below, an agent's command line)
  // that markdown would turn into links, images or misleading text.
  item.tooltip = `${oneLine(info.name)} shows ${oneLine(info.folder)}\nmounted at ${oneLine(info.mountPoint)}${info.mounted ? '' : ' (unmounted while idle; layers kept)'}\nthe shared mount shows: ${info.active === null ? 'the folder (read-only)' : `agent ${oneLine(info.active)}`}`;
  item.iconPath = new vscode.ThemeIcon('folder-library');
  item.contextValue = 'shadow';
  return item;
}

function overlapItem(node: OverlapNode): vscode.TreeItem {
  const o = node.overlap;
  const item = new vscode.TreeItem(o.path, vscode.TreeItemCollapsibleState.None);
  item.id = `overlap:${node.shadow}/${o.id}`;
  item.description = overlapDescription(o);
  item.tooltip = `${overlapDetail(o)}\nNoticed ${new Date(o.since).toLocaleString()}.`;
  item.iconPath = new vscode.ThemeIcon(
    'warning',
    new vscode.ThemeColor(o.kind === 'layers' ? 'list.warningForeground' : 'list.errorForeground'),
  );
  item.contextValue = `overlap.${o.kind}`;
  item.command = { command: 'shadowfs.openOverlap', title: 'Compare the versions that collide', arguments: [node] };
  return item;
}

function layerItem(node: LayerNode): vscode.TreeItem {
  const item = new vscode.TreeItem(node.agent, vscode.TreeItemCollapsibleState.Expanded);
  item.id = `layer:${node.shadow}/${node.agent}`;
  const counts = node.error ? `error: ${node.error}` : describeCounts(node.changes);
  item.description = node.active ? `active${counts ? ` · ${counts}` : ''}` : counts;
  item.tooltip = `Agent ${node.agent}'s layer in shadow ${node.shadow}${node.active ? ' (shown on the shared mount)' : ''}${counts ? `\n${counts}` : ''}`;
  item.iconPath = new vscode.ThemeIcon(node.active ? 'layers-active' : 'layers');
  item.contextValue = node.active ? 'layer.active' : 'layer';
  return item;
}

function sessionItem(node: SessionNode): vscode.TreeItem {
  const s: ShellInfo = node.info;
  const item = new vscode.TreeItem(sessionLabel(s), vscode.TreeItemCollapsibleState.None);
  item.id = `session:${node.shadow}/${s.sessionId}`;
  item.description = sessionState(s);
  item.tooltip = [
    `Shell session ${s.sessionId} of agent ${oneLine(s.agent)} in shadow ${oneLine(node.shadow)}: ${s.argv.map(shellWord).join(' ') || '(the shell)'}`,
    `started ${new Date(s.startedAt).toLocaleString()} in ${oneLine(s.cwd)}, ${s.cols}×${s.rows}`,
    s.running
      ? `running, ${s.attached} terminal(s) joined; it sees and writes ${s.agent}'s layer only`
      : `${sessionState(s)}; ${s.agent}'s layer keeps what it wrote`,
    s.protections.length ? `confined by: ${s.protections.join(', ')}` : '',
  ]
    .filter(Boolean)
    .join('\n');
  item.iconPath = new vscode.ThemeIcon(s.running ? 'terminal' : 'debug-stop');
  item.contextValue = s.running ? 'session.running' : 'session.ended';
  return item;
}

function viewItem(node: ViewNode): vscode.TreeItem {
  const item = new vscode.TreeItem(`view of ${node.view.agent}`, vscode.TreeItemCollapsibleState.None);
  item.id = `view:${node.shadow}/${node.view.id}`;
  item.description = node.view.mountPoint;
  item.tooltip = `A mount of shadow ${node.shadow} of its own, at ${node.view.mountPoint}, that always shows agent ${node.view.agent}'s layer (its sessions and its MCP server's runs use it; nobody waits for the shared mount)`;
  item.iconPath = new vscode.ThemeIcon('eye');
  item.contextValue = 'view';
  return item;
}

function excludedGroupItem(node: ExcludedGroupNode): vscode.TreeItem {
  const item = new vscode.TreeItem(excludedGroupLabel(node.reason), vscode.TreeItemCollapsibleState.Collapsed);
  item.id = `excluded:${node.shadow}/${node.agent}/${node.reason}`;
  item.description = excludedGroupDescription(node.reason, node.changes.length);
  item.tooltip = `${node.changes.length} change(s) of ${node.agent} that diff, patch and apply leave out.\n${excludedWhy(node.reason)}`;
  item.iconPath = new vscode.ThemeIcon(node.reason === 'repository-metadata' ? 'git-commit' : 'eye-closed');
  item.contextValue = `excluded.${node.reason}`;
  return item;
}

function fileItem(node: FileNode): vscode.TreeItem {
  const { change } = node;
  const item = new vscode.TreeItem(baseName(change.path), vscode.TreeItemCollapsibleState.None);
  item.id = `file:${node.shadow}/${node.agent}/${change.path}`;
  item.resourceUri = docUri({ kind: 'agent', shadow: node.shadow, agent: node.agent, path: change.path });
  const what = `${change.path}: ${change.kind}${change.type === 'file' ? '' : ` (${change.type})`} by ${node.agent}`;
  if (change.excluded) {
    // Left out of diff, patch and apply: said on the item itself, and a look only (no apply here).
    const parent = parentOf(change.path);
    item.description = `${parent ? `${parent} · ` : ''}${excludedShort(change.excluded)}`;
    item.tooltip = `${what}; not applied.\n${excludedWhy(change.excluded)}`;
    item.iconPath = new vscode.ThemeIcon(KIND_ICON[change.kind], new vscode.ThemeColor('disabledForeground'));
    item.contextValue = `excludedFile.${change.kind}.${change.excluded}`;
    item.command = { command: 'shadowfs.openDiff', title: "Look at the agent's change (read-only)", arguments: [node] };
    return item;
  }
  item.description = parentOf(change.path);
  item.tooltip = what;
  item.iconPath = new vscode.ThemeIcon(KIND_ICON[change.kind]);
  item.contextValue = `file.${change.kind}`;
  item.command = { command: 'shadowfs.openDiff', title: 'Compare with your file', arguments: [node] };
  return item;
}

/** A node of the Agent Lints view. */
export type LintNode =
  | { kind: 'run'; shadow: string; agent: string; result: LintsResult }
  | { kind: 'file'; shadow: string; agent: string; file: LintsResult['files'][number] }
  | { kind: 'existing'; shadow: string; agent: string; file: LintsResult['files'][number] }
  | { kind: 'diag'; shadow: string; agent: string; path: string; diag: Diag; existing: boolean };

const SEVERITY_ICON = ['error', 'error', 'warning', 'info', 'lightbulb'];

export class LintsProvider implements vscode.TreeDataProvider<LintNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<LintNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private last: LintNode | undefined;

  show(shadow: string, agent: string, result: LintsResult): void {
    this.last = { kind: 'run', shadow, agent, result };
    this.changed.fire(undefined);
  }

  clear(): void {
    this.last = undefined;
    this.changed.fire(undefined);
  }

  getTreeItem(node: LintNode): vscode.TreeItem {
    switch (node.kind) {
      case 'run': {
        const introduced = node.result.files.reduce((n, f) => n + f.introduced.length, 0);
        const item = new vscode.TreeItem(`${node.agent} in ${node.shadow}`, vscode.TreeItemCollapsibleState.Expanded);
        item.description = `${introduced} introduced · ${node.result.files.length} file(s) · ${Math.round(node.result.ms)} ms`;
        item.iconPath = new vscode.ThemeIcon('checklist');
        return item;
      }
      case 'file': {
        const f = node.file;
        const item = new vscode.TreeItem(baseName(f.path), vscode.TreeItemCollapsibleState.Expanded);
        item.resourceUri = docUri({ kind: 'agent', shadow: node.shadow, agent: node.agent, path: f.path });
        const status = f.status === 'fresh' ? `${f.introduced.length} introduced` : f.status + (f.error ? `: ${f.error}` : '');
        item.description = `${parentOf(f.path)} · ${status}${f.server ? ` · ${f.server}` : ''}`;
        item.iconPath = new vscode.ThemeIcon(f.status !== 'fresh' ? 'question' : f.introduced.length ? 'error' : 'pass');
        return item;
      }
      case 'existing': {
        const item = new vscode.TreeItem(`in your folder too (${node.file.existing.length})`, vscode.TreeItemCollapsibleState.Collapsed);
        item.iconPath = new vscode.ThemeIcon('history');
        return item;
      }
      case 'diag': {
        const d = node.diag;
        const item = new vscode.TreeItem(d.message.split('\n')[0], vscode.TreeItemCollapsibleState.None);
        item.description = `${d.source ?? ''}${d.code !== undefined ? `(${d.code})` : ''} [${d.range.start.line + 1}, ${d.range.start.character + 1}]`;
        item.tooltip = d.message;
        item.iconPath = new vscode.ThemeIcon(SEVERITY_ICON[d.severity ?? 1] ?? 'error');
        item.command = { command: 'shadowfs.openLint', title: 'Show in the agent’s version', arguments: [node] };
        return item;
      }
    }
  }

  getChildren(node?: LintNode): LintNode[] {
    if (!node) return this.last ? [this.last] : [];
    const { shadow, agent } = node;
    if (node.kind === 'run') return node.result.files.map((file) => ({ kind: 'file', shadow, agent, file }));
    if (node.kind === 'file') {
      const out: LintNode[] = node.file.introduced.map((diag) => ({
        kind: 'diag',
        shadow,
        agent,
        path: node.file.path,
        diag,
        existing: false,
      }));
      if (node.file.existing.length) out.push({ kind: 'existing', shadow, agent, file: node.file });
      return out;
    }
    if (node.kind === 'existing')
      return node.file.existing.map((diag) => ({ kind: 'diag', shadow, agent, path: node.file.path, diag, existing: true }));
    return [];
  }

  dispose(): void {
    this.changed.dispose();
  }
}

export type { LintsResult };

/** Whether two folder paths name the same folder (case-insensitively on Windows). */
export function samePath(a: string, b: string): boolean {
  const na = path.resolve(a);
  const nb = path.resolve(b);
  return process.platform === 'win32' ? na.toLowerCase() === nb.toLowerCase() : na === nb;
}

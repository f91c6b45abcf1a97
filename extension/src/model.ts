// What the Shadows view shows, kept apart from the VS Code API so that it can be tested on its
// own: shadows, their agents' layers (the active one marked, with counts of changed files) and
// each layer's changed files: first the agent's work (what diff, patch and apply carry), then,
// grouped by reason, what they leave out (git's own data under .git, files git ignores); beside
// the layers, the shadow's shell sessions (shell.list) and its agents' views. Built from the
// daemon's answers (layer.changes marks what is left out); the view turns it into tree items.
import type { ChangeInfo, Overlap, ShadowInfo, ShellInfo } from 'shadowfs/client';
import { oneLine } from './notices';

export type ChangeKind = ChangeInfo['kind'];
/** Why diff, patch and apply leave a changed path out. */
export type ExcludedReason = NonNullable<ChangeInfo['excluded']>;
/** The reasons in the order the view shows their groups. */
export const EXCLUDED_REASONS: readonly ExcludedReason[] = ['repository-metadata', 'ignored'];

export interface ShadowNode {
  readonly kind: 'shadow';
  readonly info: ShadowInfo;
}

export interface LayerNode {
  readonly kind: 'layer';
  readonly shadow: string;
  readonly agent: string;
  readonly active: boolean;
  /** undefined until the layer's changes were asked for (or when asking failed). */
  readonly changes: readonly ChangeInfo[] | undefined;
  readonly error?: string;
}

export interface FileNode {
  readonly kind: 'file';
  readonly shadow: string;
  readonly agent: string;
  /** The folder the shadow shows. */
  readonly folder: string;
  readonly change: ChangeInfo;
}

/** The changes of a layer that diff, patch and apply leave out for one reason. */
export interface ExcludedGroupNode {
  readonly kind: 'excluded';
  readonly shadow: string;
  readonly agent: string;
  readonly reason: ExcludedReason;
  /** The group's entries as the view lists them (visibleChanges). */
  readonly changes: readonly ChangeInfo[];
}

/** An interactive program run as an agent in its own view of the shadow (shadowfs shell). */
export interface SessionNode {
  readonly kind: 'session';
  readonly shadow: string;
  readonly info: ShellInfo;
}

/** A view of the shadow: a mount of its own that always shows one agent's layer. */
export interface ViewNode {
  readonly kind: 'view';
  readonly shadow: string;
  readonly view: ShadowInfo['views'][number];
}

/** An overlap the conflict radar reports: two agents change the same path, or the folder moved under an agent's copy. */
export interface OverlapNode {
  readonly kind: 'overlap';
  readonly shadow: string;
  readonly overlap: Overlap;
}

export type Node = ShadowNode | OverlapNode | LayerNode | SessionNode | ViewNode | ExcludedGroupNode | FileNode;

/** An overlap's description in the view: who collides with whom. */
export function overlapDescription(o: Overlap): string {
  if (o.kind === 'layers') return `changed by ${o.agents.join(' and ')}`;
  const now = o.folder === null ? 'deleted in your folder' : 'changed in your folder';
  return `${now} since ${o.agents[0]} copied it`;
}

/** An overlap's longer explanation (the tooltip), with what to do about it. */
export function overlapDetail(o: Overlap): string {
  if (o.kind === 'layers')
    return `${o.path}: agents ${o.agents.join(', ')} each changed it, to different contents. Applying one and then the other reports a conflict for the second; compare them before you apply either.`;
  return `${o.path}: the file in your folder ${o.folder === null ? 'was deleted' : 'changed'} after agent ${o.agents[0]} copied it into its layer. The agent works on an older version; applying its change reports a conflict.`;
}

/** A session's label: the agent and its program ("claude: bash"). */
export function sessionLabel(s: ShellInfo): string {
  const program = s.argv.length ? [baseName(s.argv[0]), ...s.argv.slice(1)].join(' ') : 'shell';
  return `${oneLine(s.agent)}: ${oneLine(program)}`;
}

/** A session's state, short: "running · 1 attached", "exited 0", "ended by SIGHUP". */
export function sessionState(s: ShellInfo): string {
  if (s.running) return `running · ${s.attached} attached`;
  if (s.signal) return `ended by ${s.signal}`;
  return `exited ${s.exitCode ?? '?'}`;
}

/**
 * The changes a person looks at: files, symlinks and special files, and whole directories only
 * when the layer deleted them (an added or modified directory shows through its files).
 */
export function visibleChanges(changes: readonly ChangeInfo[]): ChangeInfo[] {
  return changes
    .filter((c) => c.type !== 'directory' || c.kind === 'deleted')
    .slice()
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * A layer's visible changes split in two: the agent's work (what diff, patch and apply carry) and,
 * by reason, what they leave out.
 */
export function groupChanges(changes: readonly ChangeInfo[]): { work: ChangeInfo[]; excluded: Record<ExcludedReason, ChangeInfo[]> } {
  const work: ChangeInfo[] = [];
  const excluded: Record<ExcludedReason, ChangeInfo[]> = { 'repository-metadata': [], ignored: [] };
  for (const c of visibleChanges(changes)) {
    if (c.excluded) excluded[c.excluded].push(c);
    else work.push(c);
  }
  return { work, excluded };
}

/** Counts of the agent's work by kind, for a layer's description ("2 added, 1 modified"). */
export function countChanges(changes: readonly ChangeInfo[]): Record<ChangeKind, number> {
  const counts: Record<ChangeKind, number> = { added: 0, modified: 0, deleted: 0, metadata: 0 };
  for (const c of groupChanges(changes).work) counts[c.kind]++;
  return counts;
}

export function describeCounts(changes: readonly ChangeInfo[] | undefined): string {
  if (!changes) return '';
  const counts = countChanges(changes);
  const parts = (['added', 'modified', 'deleted', 'metadata'] as const).filter((k) => counts[k] > 0).map((k) => `${counts[k]} ${k}`);
  const { excluded } = groupChanges(changes);
  const out = EXCLUDED_REASONS.reduce((n, r) => n + excluded[r].length, 0);
  return `${parts.length ? parts.join(', ') : 'no changes'}${out ? ` · ${out} not applied` : ''}`;
}

/** The title of a group of left-out changes (short: the view is narrow). */
export function excludedGroupLabel(reason: ExcludedReason): string {
  return reason === 'repository-metadata' ? 'Repository metadata (.git)' : 'Ignored by git';
}

/** A group's description: how many, and what becomes of them ("14 · not applied"). */
export function excludedGroupDescription(reason: ExcludedReason, count: number): string {
  return `${count} · ${reason === 'repository-metadata' ? 'not applied' : 'not applied unless included'}`;
}

/** Why one entry is left out, short (a file item's description). */
export function excludedShort(reason: ExcludedReason): string {
  return reason === 'repository-metadata' ? "git's own data: never applied" : 'ignored by git: not applied unless included';
}

/** Why entries are left out, in full (tooltips). */
export function excludedWhy(reason: ExcludedReason): string {
  return reason === 'repository-metadata'
    ? "Git's own data (a .git directory or file, at any depth: index, refs, logs, objects). Diff, patch and apply never carry it, so that the agent's git commands cannot move your branch or replace your index; bring the agent's commits in with “Apply Agent's Commits as a Branch…”."
    : "Files your folder's git ignores (build output, caches, logs). Diff, patch and apply leave them out unless you include them (Apply Layer asks when there are any).";
}

/**
 * What an apply, diff or patch left out, from its result's `excluded` list: "12 in .git (never
 * applied), 2 ignored by git"; "" when nothing was.
 */
export function describeExcluded(excluded: ReadonlyArray<{ path: string; reason: ExcludedReason }> | undefined): string {
  if (!excluded?.length) return '';
  const meta = excluded.filter((e) => e.reason === 'repository-metadata').length;
  const ignored = excluded.filter((e) => e.reason === 'ignored').length;
  return [meta ? `${meta} in .git (never applied)` : '', ignored ? `${ignored} ignored by git` : ''].filter(Boolean).join(', ');
}

/** The letter VS Code's source control uses for a kind of change. */
export function kindLetter(kind: ChangeKind): string {
  return { added: 'A', modified: 'M', deleted: 'D', metadata: 'P' }[kind];
}

/** Where a path's parent is, for a file item's description ("" at the root). */
export function parentOf(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

export function baseName(rel: string): string {
  return rel.slice(rel.lastIndexOf('/') + 1);
}

/** The shadows and layers the daemon has, with each layer's changes once known. */
export class ShadowsModel {
  private shadows: ShadowInfo[] = [];
  private readonly changes = new Map<string, { changes?: readonly ChangeInfo[]; error?: string }>();
  private sessionList: ShellInfo[] = [];
  private readonly radar = new Map<string, Map<string, Overlap>>();

  setShadows(list: readonly ShadowInfo[]): void {
    this.shadows = [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const live = new Set(this.shadows.flatMap((s) => s.agents.map((a) => key(s.name, a))));
    for (const k of [...this.changes.keys()]) if (!live.has(k)) this.changes.delete(k);
    for (const k of [...this.radar.keys()]) if (!this.shadows.some((s) => s.name === k)) this.radar.delete(k);
  }

  /** A shadow's overlaps as the radar request answered them (replacing what was known). */
  setOverlaps(shadow: string, list: readonly Overlap[]): void {
    this.radar.set(shadow, new Map(list.map((o) => [o.id, o])));
  }

  /** A radar/changed notification: added replace by id, cleared go. False when the shadow's overlaps were never asked for. */
  updateOverlaps(shadow: string, added: readonly Overlap[], cleared: readonly Overlap[]): boolean {
    const m = this.radar.get(shadow);
    if (!m) return false;
    for (const o of cleared) m.delete(o.id);
    for (const o of added) m.set(o.id, o);
    return true;
  }

  /** A shadow's overlaps: agents' collisions first, then the folder's, by path. */
  overlaps(shadow: string): OverlapNode[] {
    if (!this.shadow(shadow)) return [];
    return [...(this.radar.get(shadow)?.values() ?? [])]
      .sort(
        (a, b) =>
          (a.kind === b.kind ? 0 : a.kind === 'layers' ? -1 : 1) || (a.path < b.path ? -1 : a.path > b.path ? 1 : a.id < b.id ? -1 : 1),
      )
      .map((overlap) => ({ kind: 'overlap', shadow, overlap }));
  }

  /** The daemon's shell sessions (shell.list), of every shadow. */
  setSessions(list: readonly ShellInfo[]): void {
    this.sessionList = [...list];
  }

  /** A shadow's sessions: running ones first, then by agent and start. */
  sessions(shadow: string): SessionNode[] {
    if (!this.shadow(shadow)) return [];
    return this.sessionList
      .filter((s) => s.shadow === shadow)
      .sort(
        (a, b) =>
          Number(b.running) - Number(a.running) ||
          (a.agent < b.agent ? -1 : a.agent > b.agent ? 1 : 0) ||
          (a.startedAt < b.startedAt ? -1 : a.startedAt > b.startedAt ? 1 : 0),
      )
      .map((info) => ({ kind: 'session', shadow, info }));
  }

  /** A shadow's views (one agent's layer each), by agent. */
  views(shadow: string): ViewNode[] {
    const info = this.shadow(shadow);
    if (!info) return [];
    return [...info.views]
      .sort((a, b) => (a.agent < b.agent ? -1 : a.agent > b.agent ? 1 : a.id - b.id))
      .map((view) => ({ kind: 'view', shadow, view }));
  }

  setChanges(shadow: string, agent: string, changes: readonly ChangeInfo[]): void {
    this.changes.set(key(shadow, agent), { changes });
  }

  setError(shadow: string, agent: string, error: string): void {
    this.changes.set(key(shadow, agent), { error });
  }

  shadowList(): readonly ShadowInfo[] {
    return this.shadows;
  }

  shadow(name: string): ShadowInfo | undefined {
    return this.shadows.find((s) => s.name === name);
  }

  /** The shadow of a folder (the workspace's), if the daemon has one. */
  shadowOfFolder(folder: string, samePath: (a: string, b: string) => boolean): ShadowInfo | undefined {
    return this.shadows.find((s) => samePath(s.folder, folder));
  }

  roots(): ShadowNode[] {
    return this.shadows.map((info) => ({ kind: 'shadow', info }));
  }

  layers(shadow: string): LayerNode[] {
    const info = this.shadow(shadow);
    if (!info) return [];
    return [...info.agents].sort().map((agent) => {
      const c = this.changes.get(key(shadow, agent));
      return { kind: 'layer', shadow, agent, active: info.active === agent, changes: c?.changes, error: c?.error };
    });
  }

  /** The agent's work in a layer: the changes diff, patch and apply carry. */
  files(shadow: string, agent: string): FileNode[] {
    const info = this.shadow(shadow);
    const c = this.changes.get(key(shadow, agent));
    if (!info || !c?.changes) return [];
    return groupChanges(c.changes).work.map((change) => ({ kind: 'file', shadow, agent, folder: info.folder, change }));
  }

  /** A layer's groups of left-out changes, the empty ones omitted. */
  excludedGroups(shadow: string, agent: string): ExcludedGroupNode[] {
    const c = this.changes.get(key(shadow, agent));
    if (!this.shadow(shadow) || !c?.changes) return [];
    const { excluded } = groupChanges(c.changes);
    return EXCLUDED_REASONS.filter((reason) => excluded[reason].length > 0).map((reason) => ({
      kind: 'excluded',
      shadow,
      agent,
      reason,
      changes: excluded[reason],
    }));
  }

  /** The entries of a group of left-out changes. */
  excludedFiles(group: ExcludedGroupNode): FileNode[] {
    const info = this.shadow(group.shadow);
    if (!info) return [];
    return group.changes.map((change) => ({ kind: 'file', shadow: group.shadow, agent: group.agent, folder: info.folder, change }));
  }

  /** The change a layer has at a path, if any. */
  changeAt(shadow: string, agent: string, rel: string): ChangeInfo | undefined {
    return this.changes.get(key(shadow, agent))?.changes?.find((c) => c.path === rel);
  }
}

function key(shadow: string, agent: string): string {
  return `${shadow}\u0000${agent}`;
}

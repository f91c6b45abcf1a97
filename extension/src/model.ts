// What the Shadows view shows, kept apart from the VS Code API so that it can be tested on its
// own: shadows, their agents' layers (the active one marked, with counts of changed files) and
// each layer's changed files. Built from the daemon's answers; the view turns it into tree items.
import type { ChangeInfo, ShadowInfo } from 'shadowfs/client';

export type ChangeKind = ChangeInfo['kind'];

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
  readonly lower: string;
  readonly change: ChangeInfo;
}

export type Node = ShadowNode | LayerNode | FileNode;

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

/** Counts by kind, for a layer's description ("2 added, 1 modified"). */
export function countChanges(changes: readonly ChangeInfo[]): Record<ChangeKind, number> {
  const counts: Record<ChangeKind, number> = { added: 0, modified: 0, deleted: 0, metadata: 0 };
  for (const c of visibleChanges(changes)) counts[c.kind]++;
  return counts;
}

export function describeCounts(changes: readonly ChangeInfo[] | undefined): string {
  if (!changes) return '';
  const counts = countChanges(changes);
  const parts = (['added', 'modified', 'deleted', 'metadata'] as const).filter((k) => counts[k] > 0).map((k) => `${counts[k]} ${k}`);
  return parts.length ? parts.join(', ') : 'no changes';
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

  setShadows(list: readonly ShadowInfo[]): void {
    this.shadows = [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const live = new Set(this.shadows.flatMap((s) => s.agents.map((a) => key(s.name, a))));
    for (const k of [...this.changes.keys()]) if (!live.has(k)) this.changes.delete(k);
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
    return this.shadows.find((s) => samePath(s.lower, folder));
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

  files(shadow: string, agent: string): FileNode[] {
    const info = this.shadow(shadow);
    const c = this.changes.get(key(shadow, agent));
    if (!info || !c?.changes) return [];
    return visibleChanges(c.changes).map((change) => ({ kind: 'file', shadow, agent, lower: info.lower, change }));
  }

  /** The change a layer has at a path, if any. */
  changeAt(shadow: string, agent: string, rel: string): ChangeInfo | undefined {
    return this.changes.get(key(shadow, agent))?.changes?.find((c) => c.path === rel);
  }
}

function key(shadow: string, agent: string): string {
  return `${shadow}\u0000${agent}`;
}

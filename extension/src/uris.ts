// The `shadowfs:` URIs of the read-only documents that show an agent's version of a file (or a
// conflict's merge) without it ever being a file: the path is the file's path in the shadow, so
// that the editor's title and language follow it; the query says whose version it is.
// Pure string work, tested without VS Code.

export const SCHEME = 'shadowfs';

export type DocRef =
  /** The file as the agent's layer shows it. */
  | { readonly kind: 'agent'; readonly shadow: string; readonly agent: string; readonly path: string }
  /** The file in the user's folder (root), read-only: the folder's side of a change diff, patch and apply leave out. */
  | { readonly kind: 'folder'; readonly root: string; readonly path: string }
  /** Nothing: the absent side of an added or deleted file. */
  | { readonly kind: 'empty'; readonly path: string }
  /** Text the extension holds (a conflict's merge), by id. */
  | { readonly kind: 'memory'; readonly id: string; readonly path: string };

/** The URI's path and query, for vscode.Uri.from({ scheme: SCHEME, path, query }). */
export function toUriParts(ref: DocRef): { path: string; query: string } {
  const path = '/' + ref.path;
  const q = new URLSearchParams();
  q.set('kind', ref.kind);
  if (ref.kind === 'agent') {
    q.set('shadow', ref.shadow);
    q.set('agent', ref.agent);
  } else if (ref.kind === 'memory') {
    q.set('id', ref.id);
  } else if (ref.kind === 'folder') {
    q.set('root', ref.root);
  }
  return { path, query: q.toString() };
}

/** Reads a `shadowfs:` URI's path and query back; undefined when it is not one of ours. */
export function fromUriParts(path: string, query: string): DocRef | undefined {
  if (!path.startsWith('/') || path.length < 2) return undefined;
  const rel = path.slice(1);
  if (rel.split('/').some((s) => s === '' || s === '.' || s === '..')) return undefined;
  const q = new URLSearchParams(query);
  switch (q.get('kind')) {
    case 'agent': {
      const shadow = q.get('shadow');
      const agent = q.get('agent');
      if (!shadow || !agent) return undefined;
      return { kind: 'agent', shadow, agent, path: rel };
    }
    case 'folder': {
      const root = q.get('root');
      return root ? { kind: 'folder', root, path: rel } : undefined;
    }
    case 'empty':
      return { kind: 'empty', path: rel };
    case 'memory': {
      const id = q.get('id');
      return id ? { kind: 'memory', id, path: rel } : undefined;
    }
    default:
      return undefined;
  }
}

// The read-only `shadowfs:` documents: an agent's version of a file, read through the daemon
// (layer.read), never written anywhere the user's editor or language servers look; the empty side
// of an added or deleted file; a read-only look at a file of the user's folder (the folder's side
// of a change that apply leaves out, such as .git/index); and texts the extension holds (a
// conflict's merge).
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { Daemon } from './daemon';
import { fromUriParts, SCHEME, toUriParts, type DocRef } from './uris';

export function docUri(ref: DocRef): vscode.Uri {
  return vscode.Uri.from({ scheme: SCHEME, ...toUriParts(ref) });
}

export function refOf(uri: vscode.Uri): DocRef | undefined {
  return uri.scheme === SCHEME ? fromUriParts(uri.path, uri.query) : undefined;
}

/** The path of a file of the user's folder (root) from its slash-separated path in the shadow. */
export function joinRel(root: string, rel: string): string {
  return vscode.Uri.joinPath(vscode.Uri.file(root), ...rel.split('/')).fsPath;
}

/** Text of a file's bytes, or a line saying it is binary. */
export function textOf(data: Buffer): string {
  if (data.subarray(0, 8000).includes(0)) return `(binary file, ${data.length} bytes)`;
  return data.toString('utf8');
}

/** The most of a folder file a read-only look shows as text. */
const FOLDER_TEXT_MAX = 16 * 1024 * 1024;

/** A file of the user's folder as text for a read-only look: binary and large files are named, not read whole. */
async function folderText(root: string, rel: string): Promise<string> {
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(path.join(root, ...rel.split('/')), fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0));
  } catch (err) {
    // Absent in the folder (the agent added it): that side is empty.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
    return `shadowfs: cannot read ${rel} in your folder: ${(err as Error).message}`;
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return `(not a regular file: ${rel})`;
    const head = Buffer.alloc(Math.min(8000, st.size));
    await handle.read(head, 0, head.length, 0);
    if (head.includes(0)) return `(binary file, ${st.size} bytes)`;
    if (st.size > FOLDER_TEXT_MAX) return `(file of ${st.size} bytes: too large to show here)`;
    return (await handle.readFile()).toString('utf8');
  } finally {
    await handle.close();
  }
}

export class ShadowContentProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly memory = new Map<string, string>();
  private nextId = 1;

  constructor(private readonly daemon: Daemon) {}

  /** Holds a text (a merge) for a document; returns its URI. */
  hold(path: string, text: string): vscode.Uri {
    const id = String(this.nextId++);
    this.memory.set(id, text);
    return docUri({ kind: 'memory', id, path });
  }

  /** Tells open documents of a layer (or of one path of it) that their content changed. */
  layerChanged(shadow: string, agent: string | null, paths?: readonly string[]): void {
    for (const doc of vscode.workspace.textDocuments) {
      const ref = refOf(doc.uri);
      if (ref?.kind !== 'agent' || ref.shadow !== shadow || (agent !== null && ref.agent !== agent)) continue;
      if (paths && !paths.includes(ref.path)) continue;
      this.changed.fire(doc.uri);
    }
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const ref = refOf(uri);
    if (!ref) return `shadowfs: ${uri.toString()} is not a document this extension knows`;
    if (ref.kind === 'empty') return '';
    if (ref.kind === 'memory') return this.memory.get(ref.id) ?? '';
    if (ref.kind === 'folder') return folderText(ref.root, ref.path);
    try {
      const client = await this.daemon.get();
      const at = { shadow: ref.shadow, agent: ref.agent, path: ref.path };
      // Its head first (a range: a file of any size answers it), as for the folder's side:
      // binary and large files are named, not read whole.
      const head = await client.request('layer.read', { ...at, offset: 0, length: 8000 });
      const data = Buffer.from(head.data, 'base64');
      const size = head.size ?? data.length;
      if (data.includes(0)) return `(binary file, ${size} bytes)`;
      if (size <= data.length) return data.toString('utf8');
      if (size > FOLDER_TEXT_MAX) return `(file of ${size} bytes: too large to show here)`;
      return textOf(Buffer.from((await client.request('layer.read', at)).data, 'base64'));
    } catch (err) {
      const code = (err as { code?: string }).code;
      // The agent deleted it: its side of the diff is empty.
      if (code === 'NOT_FOUND') return '';
      return `shadowfs: cannot read ${ref.path} as agent ${ref.agent} sees it: ${(err as Error).message}${code ? ` (${code})` : ''}`;
    }
  }

  dispose(): void {
    this.changed.dispose();
    this.memory.clear();
  }
}

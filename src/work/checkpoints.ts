// Checkpoints of agents' layers, persisted in the per-user state directory so that a layer comes
// back after a daemon crash or a reboot. Cheap: contents are stored once by their SHA-256 (a
// checkpoint is a small manifest naming blobs), so unchanged files cost nothing the second time.
// Each checkpoint also keeps, where the folder still has it, the content the agent started from
// (its base), so that apply can make three-way merges later, and the base records themselves,
// so that a restored layer still knows which folder version each file came from.
//
// Layout: <state>/checkpoints/<folder key>/blobs/<sha256>
//                                          /<agent>/<name>.json
// where <folder key> is a hash of the folder's real path (a shadow's name may change; the folder
// is what the layer is relative to). Every file is written beside and renamed into place, so a
// crash never leaves a half-written checkpoint.
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../errors';
import type { ChangeBase } from '../native';
import { stateDir } from '../platform';
import type { Shadow } from '../shadow';
import { collect, folderSide, sameIdentity } from './collect';

const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;

export interface CheckpointEntry {
  path: string;
  type: 'file' | 'symlink' | 'dir' | 'deleted';
  /** Permission bits of files and directories. */
  mode?: number;
  /** SHA-256 of a file's content (a blob). */
  blob?: string;
  target?: string;
  base?: ChangeBase;
  /** SHA-256 of the content the agent started from, where the folder still had it. */
  baseBlob?: string;
}

export interface CheckpointManifest {
  version: 1;
  name: string;
  agent: string;
  folder: string;
  createdAt: string;
  /** When the layer started (see Shadow.layerSince). */
  layerSince?: number;
  /** Whether autosave made it. */
  auto: boolean;
  entries: CheckpointEntry[];
}

export interface CheckpointInfo {
  name: string;
  createdAt: string;
  auto: boolean;
  files: number;
  bytes: number;
}

function writeAtomic(file: string, data: Buffer | string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

export function checkName(name: unknown): string {
  if (typeof name !== 'string' || !NAME_RE.test(name) || name === '.' || name === '..')
    throw new ShadowError('INVALID_ARGUMENT', `a checkpoint name is 1 to 64 letters, digits, ".", "_" or "-", got ${JSON.stringify(name)}`);
  return name;
}

export class CheckpointStore {
  readonly root: string;

  constructor(readonly folder: string) {
    const key = crypto.createHash('sha256').update(folder).digest('hex').slice(0, 24);
    this.root = path.join(stateDir(), 'checkpoints', key);
  }

  private blobPath(hash: string): string {
    return path.join(this.root, 'blobs', hash);
  }

  private putBlob(data: Buffer): string {
    const hash = crypto.createHash('sha256').update(data).digest('hex');
    const file = this.blobPath(hash);
    if (!fs.existsSync(file)) writeAtomic(file, data);
    return hash;
  }

  private getBlob(hash: string): Buffer {
    try {
      return fs.readFileSync(this.blobPath(hash));
    } catch {
      throw new ShadowError('INTERNAL', `checkpoint content ${hash} is missing from ${this.root}; the checkpoint is damaged`);
    }
  }

  private manifestPath(agent: string, name: string): string {
    return path.join(this.root, agent, `${name}.json`);
  }

  /** Saves `agent`'s layer as checkpoint `name` (replacing one of that name). */
  async save(shadow: Shadow, agent: string, name: string, auto = false): Promise<CheckpointInfo> {
    checkName(name);
    const layer = shadow.layer(agent);
    const changes = await layer.changes();
    const c = await collect(shadow, agent);
    const entries: CheckpointEntry[] = [];
    const seen = new Set<string>();
    let bytes = 0;
    const addDeleted = (p: string) => {
      if (!seen.has(p)) entries.push({ path: p, type: 'deleted' });
      seen.add(p);
    };
    // Deletions: the folder's files and directories the layer no longer shows.
    for (const f of c.files) if (f.new === null) addDeleted(f.path);
    for (const d of c.dirsRemoved) addDeleted(d);
    for (const ch of changes) {
      if (ch.kind === 'deleted') {
        addDeleted(ch.path);
        continue;
      }
      if (ch.type === 'special') continue;
      const st = await layer.stat(ch.path).catch(() => null);
      if (!st) continue;
      seen.add(ch.path);
      if (st.type === 'directory') entries.push({ path: ch.path, type: 'dir', mode: st.mode });
      else if (st.type === 'symlink') entries.push({ path: ch.path, type: 'symlink', target: await layer.readlink(ch.path) });
      else if (st.type === 'file') {
        const data = await layer.readFile(ch.path);
        bytes += data.length;
        const e: CheckpointEntry = { path: ch.path, type: 'file', mode: st.mode, blob: this.putBlob(data) };
        const base = shadow.baseOverride(agent, ch.path) ?? ch.base;
        if (base) {
          e.base = base;
          const known = shadow.baseBlob(agent, ch.path);
          if (known) e.baseBlob = known;
          else {
            // The folder's file is still the one the agent started from: keep its content.
            const now = await folderSide(shadow.lower, ch.path);
            if (now && typeof now === 'object' && now.kind === 'file' && sameIdentity(path.join(shadow.lower, ch.path), base))
              e.baseBlob = this.putBlob(now.data);
          }
        }
        entries.push(e);
      }
    }
    entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const m: CheckpointManifest = {
      version: 1,
      name,
      agent,
      folder: this.folder,
      createdAt: new Date().toISOString(),
      ...(shadow.layerSince(agent) === undefined ? {} : { layerSince: shadow.layerSince(agent) }),
      auto,
      entries,
    };
    writeAtomic(this.manifestPath(agent, name), JSON.stringify(m));
    return { name, createdAt: m.createdAt, auto, files: entries.filter((e) => e.type === 'file').length, bytes };
  }

  read(agent: string, name: string): CheckpointManifest {
    checkName(name);
    let text: string;
    try {
      text = fs.readFileSync(this.manifestPath(agent, name), 'utf8');
    } catch {
      throw new ShadowError('UNKNOWN_CHECKPOINT', `agent ${agent} has no checkpoint named ${name} (see "shadowfs checkpoints")`);
    }
    const m = JSON.parse(text) as CheckpointManifest;
    if (m.version !== 1 || !Array.isArray(m.entries)) throw new ShadowError('INTERNAL', `the checkpoint ${name} of ${agent} is damaged`);
    return m;
  }

  list(agent: string): CheckpointInfo[] {
    let names: string[];
    try {
      names = fs.readdirSync(path.join(this.root, agent)).filter((n) => n.endsWith('.json'));
    } catch {
      return [];
    }
    const out: CheckpointInfo[] = [];
    for (const n of names) {
      try {
        const m = this.read(agent, n.slice(0, -5));
        out.push({
          name: m.name,
          createdAt: m.createdAt,
          auto: m.auto,
          files: m.entries.filter((e) => e.type === 'file').length,
          bytes: m.entries.reduce(
            (s, e) => s + (e.blob ? (fs.statSync(this.blobPath(e.blob), { throwIfNoEntry: false })?.size ?? 0) : 0),
            0,
          ),
        });
      } catch {
        // a damaged manifest is left out of the list
      }
    }
    return out.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  }

  /** Agents with checkpoints for this folder. */
  agents(): string[] {
    try {
      return fs
        .readdirSync(this.root, { withFileTypes: true })
        .filter((d) => d.isDirectory() && d.name !== 'blobs')
        .map((d) => d.name);
    } catch {
      return [];
    }
  }

  /** The newest checkpoint of `agent`, if any. */
  latest(agent: string): CheckpointInfo | undefined {
    return this.list(agent).at(-1);
  }

  /** Makes `agent`'s layer exactly what checkpoint `name` holds (its current changes are dropped). */
  async restore(shadow: Shadow, agent: string, name: string): Promise<{ name: string; paths: number }> {
    const m = this.read(agent, name);
    const layer = await shadow.createLayer(agent);
    await layer.reset();
    // Deletions first, shallowest first; then directories, files and links in path order.
    const deleted = m.entries.filter((e) => e.type === 'deleted');
    for (const e of deleted) {
      await layer.remove(e.path).catch((err: unknown) => {
        if ((err as { code?: string }).code !== 'NOT_FOUND') throw err;
      });
    }
    for (const e of m.entries) {
      if (e.type === 'dir') {
        await layer.mkdir(e.path, { mode: e.mode ?? 0o755 }).catch(async (err: unknown) => {
          // The folder has it already (the agent changed its mode): set the mode.
          if ((err as { errno?: number }).errno === os.constants.errno.EEXIST) await layer.chmod(e.path, e.mode ?? 0o755);
          else throw err;
        });
      } else if (e.type === 'file') {
        await layer.write(e.path, this.getBlob(e.blob!), { mode: e.mode ?? 0o644 });
        // Writing over a folder file keeps that file's mode: set the checkpoint's.
        await layer.chmod(e.path, e.mode ?? 0o644);
      } else if (e.type === 'symlink') {
        // The folder may have something there (the agent retargeted a link): the layer's link replaces it.
        await layer.remove(e.path).catch((err: unknown) => {
          if ((err as { code?: string }).code !== 'NOT_FOUND') throw err;
        });
        await layer.symlink(e.target!, e.path);
      }
    }
    shadow.setLayerSince(agent, m.layerSince);
    shadow.clearBaseOverrides(agent);
    for (const e of m.entries) if (e.base) shadow.setBaseOverride(agent, e.path, e.base, e.baseBlob);
    return { name, paths: m.entries.length };
  }

  /** Bytes of a base blob recorded by a checkpoint. */
  baseContent(hash: string): Buffer | null {
    try {
      return fs.readFileSync(this.blobPath(hash));
    } catch {
      return null;
    }
  }

  remove(agent: string, name: string): void {
    checkName(name);
    fs.rmSync(this.manifestPath(agent, name), { force: true });
  }
}

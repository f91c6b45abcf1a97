// Handlers for an agent's layer: create, drop, clone and list layers; write, remove, revert and
// read paths in one; reset it; what it changed (changes, diff, patch); apply it to the folder;
// checkpoints. The diffs, apply and checkpoints are the work service's.
import type { Logger } from 'winston';
import { ShadowError } from '../../common/errors';
import { normalizeRelPath } from '../../common/paths';
import { DEFAULT_MASK, type MaskInfo } from '../../shadow/mask';
import * as files from '../../work/files';
import type { ShadowManager } from '../manager';
import { type Changes, type Handlers, shadowOf } from './context';

/** A checkpoint name from the time: cp-20261122-104501. */
function defaultCheckpointName(): string {
  return `cp-${new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15)}`;
}

const rel = (p: { path: string }): string => normalizeRelPath(p.path);

export function layerHandlers(m: ShadowManager, log: Logger) {
  return {
    'layer.create': async (p) => {
      await (await shadowOf(m, p)).createLayer(p.agent);
      return { agent: p.agent };
    },
    'layer.drop': async (p) => {
      const work = await m.work(p.shadow);
      await work.shadow.dropLayer(p.agent);
      // Dropped on purpose: its autosave must not bring it back after a stop, crash or reboot.
      await work.forgetAutosave(p.agent);
      return { agent: p.agent };
    },
    'layer.clone': async (p) => {
      await (await shadowOf(m, p)).cloneLayer(p.agent, p.to);
      return { agent: p.agent, to: p.to };
    },
    'layer.list': async (p) => {
      const s = await shadowOf(m, p);
      return { agents: await s.agents(), active: s.active };
    },
    'layer.write': async (p) => {
      const s = await shadowOf(m, p);
      const data = Buffer.from(p.data, 'base64');
      await s.layer(p.agent).write(rel(p), data, p.mode === undefined ? {} : { mode: p.mode });
      return { path: rel(p), bytes: data.length };
    },
    'layer.remove': async (p) => {
      await (await shadowOf(m, p)).layer(p.agent).remove(rel(p));
      return { path: rel(p) };
    },
    'layer.revert': async (p) => {
      await (await shadowOf(m, p)).layer(p.agent).revert(rel(p));
      return { path: rel(p) };
    },
    'layer.read': async (p) => files.readLayerRange((await shadowOf(m, p)).layer(p.agent), rel(p), { offset: p.offset, length: p.length }),
    'layer.mask': async (p) => {
      const s = await shadowOf(m, p);
      const sets = [p.globs !== undefined, p.offered === true, p.clear === true].filter(Boolean).length;
      if (sets > 1) throw new ShadowError('INVALID_ARGUMENT', 'give one of globs, offered and clear (or none, to read the mask)');
      let info: MaskInfo;
      if (sets === 0) {
        info = p.agent === null ? { globs: s.defaultMask, source: s.defaultMask.length ? 'default' : 'none' } : s.maskOf(p.agent);
      } else {
        info = await s.setMask(p.agent, p.clear === true ? null : p.offered === true ? [...DEFAULT_MASK] : (p.globs ?? []));
        m.saveState(); // a crash brings the shadow back with its masks
        log.info('mask set', { shadow: p.shadow, agent: p.agent, globs: info.globs });
      }
      return { agent: p.agent, ...info, offered: [...DEFAULT_MASK] };
    },
    'layer.reset': async (p) => {
      await (await shadowOf(m, p)).layer(p.agent).reset();
      return { agent: p.agent };
    },
    'layer.changes': async (p) => {
      await shadowOf(m, p);
      return { changes: await (await m.work(p.shadow)).changes(p.agent) };
    },
    'layer.diff': async (p) => (await m.work(p.shadow)).diff(p.agent, p.paths, { includeIgnored: p.includeIgnored === true }),
    'layer.patch': async (p) => (await m.work(p.shadow)).patch(p.agent, p.paths, { includeIgnored: p.includeIgnored === true }),
    'layer.apply': async (p) => {
      const work = await m.work(p.shadow);
      const r = await work.apply(p.agent, {
        paths: p.paths,
        dryRun: p.dryRun === true,
        resolutions: p.resolutions,
        includeIgnored: p.includeIgnored === true,
        allowTypeChanges: p.allowTypeChanges === true,
        ...(p.branch !== undefined ? { branch: p.branch, force: p.force === true } : {}),
        ...(p.hunks !== undefined ? { hunks: p.hunks } : {}),
        ...(p.edited !== undefined ? { edited: p.edited } : {}),
        ...(p.markConflicts === true ? { markConflicts: true } : {}),
        ...(p.includeBase === true ? { includeBase: true } : {}),
      });
      log.info('applied a layer to the folder', {
        shadow: p.shadow,
        agent: p.agent,
        dryRun: r.dryRun,
        applied: r.applied.length,
        conflicts: r.conflicts.length,
        ...(p.hunks !== undefined ? { hunks: p.hunks.length } : {}),
        ...(r.branch ? { branch: r.branch.name, commit: r.branch.commit } : {}),
      });
      return r;
    },
    'layer.hunks': async (p) => {
      await shadowOf(m, p);
      return (await m.work(p.shadow)).hunks(p.agent, p.paths, { includeIgnored: p.includeIgnored === true });
    },
    'layer.reject': async (p) => {
      await shadowOf(m, p);
      const r = await (await m.work(p.shadow)).reject(p.agent, p.rejections, { revert: p.revert === true });
      log.info('recorded rejections', { shadow: p.shadow, agent: p.agent, rejected: r.rejected.length, reverted: r.reverted.length });
      return r;
    },
    'layer.rejections': async (p) => ({ rejections: (await m.work(p.shadow)).rejections(p.agent, p.take === true) }),
    'layer.checkpoint': async (p) => {
      const w = await m.work(p.shadow);
      await w.shadow.createLayer(p.agent);
      return w.checkpoint(p.agent, p.name ?? defaultCheckpointName());
    },
    'layer.restore': async (p) => {
      const w = await m.work(p.shadow);
      const name = p.name ?? w.checkpoints(p.agent).at(-1)?.name;
      if (!name)
        throw new ShadowError(
          'UNKNOWN_CHECKPOINT',
          `agent ${p.agent} has no checkpoint for this folder (make one with "shadowfs checkpoint")`,
        );
      return w.restore(p.agent, name);
    },
    'layer.checkpoints': async (p) => ({ checkpoints: (await m.work(p.shadow)).checkpoints(p.agent) }),
  } satisfies Partial<Handlers>;
}

export const layerChanges = {
  'layer.drop': (p) => ({ agent: p.agent, event: 'dropped' }),
  'layer.clone': (p) => ({ agent: p.to, event: 'cloned', from: p.agent }),
  'layer.write': (p, r) => ({ agent: p.agent, event: 'written', path: r.path }),
  'layer.remove': (p, r) => ({ agent: p.agent, event: 'removed', path: r.path }),
  'layer.revert': (p, r) => ({ agent: p.agent, event: 'reverted', path: r.path }),
  'layer.reset': (p) => ({ agent: p.agent, event: 'reset' }),
  'layer.restore': (p) => ({ agent: p.agent, event: 'restored' }),
  'layer.reject': (p, r) =>
    r.reverted.length
      ? { agent: p.agent, event: 'changed', changes: r.reverted.map((path) => ({ path, kind: 'modified', type: 'file' })) }
      : undefined,
  // Only what reached the folder: a dry run, or an apply that wrote nothing, is not news.
  'layer.apply': (p, r) =>
    r.dryRun || !r.applied.length
      ? r.marked?.length
        ? { agent: p.agent, event: 'changed', changes: r.marked.map((path) => ({ path, kind: 'modified', type: 'file' })) }
        : undefined
      : {
          agent: p.agent,
          event: 'applied',
          changes: r.applied.map((a) => ({ path: a.path, kind: a.action === 'delete' ? 'deleted' : 'modified', type: 'file' })),
        },
} satisfies Changes;

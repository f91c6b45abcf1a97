// Handlers for shadows as a whole: mount, unmount, list, which layer the shared mount shows
// (activate), views of their own for agents, and stats.
import { addon } from '../../shadow/native';
import { ShadowError } from '../../common/errors';
import type { ShadowManager } from '../manager';
import { MAX_AGENT_VIEWS, viewCapRefusal } from '../scope';
import { type Changes, type Handlers, shadowOf } from './context';
import type { Runs } from './run';
import type { Shells } from './shell';

export function shadowHandlers(m: ShadowManager, runs: Runs, shells: Shells) {
  /** Views being opened for agents' restricted connections, per shadow and agent (the cap counts them). */
  const opening = new Map<object, Map<string, number>>();
  return {
    mount: async (p) => {
      addon(); // NATIVE_UNAVAILABLE / WINFSP_MISSING before anything else
      return m.mount(p);
    },
    unmount: async (p) => {
      // A run's namespace holds its own copy of the shadow, which would outlive the unmount:
      // the runs in it end first (their results say cancelled), and its shell sessions (hung up).
      const shadow = m.get(p.shadow).shadow;
      await Promise.all([runs.cancelIn(shadow), shells.closeIn(shadow)]);
      return { name: await m.unmount(p.shadow, p.lazy === true) };
    },
    list: async () => ({ shadows: await m.list() }),
    activate: async (p, ctx) => {
      const s = await shadowOf(m, p);
      if (p.agent !== null) await s.createLayer(p.agent);
      // The user's choice holds between jobs (Shadow.pin): an agent's run switches the shared
      // mount to its layer and, once no job is left, back. An agent's own connection may show
      // its layer (scope.ts refuses it while the user has pinned another) but pins nothing.
      // Either way the switch waits for a running job to end.
      const r = ctx.client.scope ? await s.activateBetweenJobs(p.agent) : await s.pin(p.agent);
      m.saveState(); // a crash brings the shadow back showing this layer
      return { active: s.active, ...(s.pinned !== undefined ? { pinned: s.pinned } : {}), ...r };
    },
    'view.open': async (p, ctx) => {
      const s = await shadowOf(m, p);
      if (!ctx.client.scope) {
        const v = await s.openView(p.agent, { mountPoint: p.mountPoint });
        m.saveState();
        return { view: v.viewId, agent: v.agentId, mountPoint: v.mountPoint };
      }
      // An agent's cap (scope.ts) counts the views being opened too: asked at once, the requests
      // would each see the views open so far and all pass (review: 6 views on one connection).
      const mine = opening.get(s) ?? new Map<string, number>();
      opening.set(s, mine);
      const open = [...s.views].filter((v) => v.agentId === p.agent && v.open).length;
      if (open + (mine.get(p.agent) ?? 0) >= MAX_AGENT_VIEWS) throw new ShadowError('SCOPE_DENIED', viewCapRefusal(ctx.client.scope));
      mine.set(p.agent, (mine.get(p.agent) ?? 0) + 1);
      try {
        const v = await s.openView(p.agent, { mountPoint: p.mountPoint });
        m.saveState();
        return { view: v.viewId, agent: v.agentId, mountPoint: v.mountPoint };
      } finally {
        const n = (mine.get(p.agent) ?? 1) - 1;
        if (n > 0) mine.set(p.agent, n);
        else mine.delete(p.agent);
        if (mine.size === 0) opening.delete(s);
      }
    },
    'view.close': async (p) => {
      const s = await shadowOf(m, p);
      const v = [...s.views].find((x) => x.viewId === p.view);
      if (!v) throw new ShadowError('NOT_FOUND', `shadow ${p.shadow} has no open view ${p.view}`);
      // A shell session runs in its agent's view (an MCP server's own view may be the same one):
      // closing it would pull the files out from under the session's program.
      if (shells.sessions.runningOf(s, v.agentId))
        throw new ShadowError(
          'MOUNT_BUSY',
          `view ${p.view} is where a shell session of agent ${v.agentId} runs: it closes when the agent's last session ends`,
        );
      await v.close({ lazy: p.lazy === true });
      m.saveState();
      // The language servers that answered in it go with it.
      await m.get(p.shadow).lints?.releaseClosedViews();
      return { view: p.view };
    },
    stats: async (p) => (await shadowOf(m, p)).stats(),
  } satisfies Partial<Handlers>;
}

export const shadowChanges = {
  activate: (p) => ({ agent: p.agent, event: 'activated' }),
} satisfies Changes;

// Handlers for shell sessions (shell.open, attach, detach, input, resize, close, list), and which
// connections are joined to each: they get its output (shell/output) and its end (shell/exit).
// A connection that closes is detached; the session goes on until its program exits, so the
// user can join it again (shadowfs shell). Restricted connections (agents) are refused by the
// dispatcher: shell methods are not in the protocol's ScopedMethods.
import { ShadowError } from '../../common/errors';
import type { ShellInfo } from '../../protocol/shell';
import type { Shadow } from '../../shadow';
import { type ShellSession, ShellSessions } from '../../shell/sessions';
import type { ShadowManager } from '../manager';
import { type Client, envOf, type Handlers } from './context';

/** Output a joined connection may leave unread before it is detached from the session. */
const MAX_UNREAD_BYTES = 8 * 1024 * 1024;

export class Shells {
  readonly sessions = new ShellSessions();
  /** Connections joined to each session, by session id. */
  private readonly joined = new Map<string, Set<Client>>();
  /** The name of each session's shadow, as the daemon knows it. */
  private readonly shadowNames = new Map<string, string>();

  busy(shadow: Shadow): boolean {
    return this.sessions.busy(shadow);
  }

  /** Ends the sessions of `shadow` before it is unmounted. */
  closeIn(shadow: Shadow): Promise<void> {
    return this.sessions.closeIn(shadow);
  }

  /** A session as the protocol describes it. */
  describe(s: ShellSession): ShellInfo {
    return {
      sessionId: s.id,
      shadow: this.shadowNames.get(s.id) ?? s.shadow.mountPoint,
      agent: s.agent,
      argv: s.argv,
      cwd: s.cwd,
      pid: s.pid,
      startedAt: new Date(s.startedAt).toISOString(),
      running: s.running,
      ...(s.exit ? { exitCode: s.exit.exitCode, signal: s.exit.signal } : {}),
      cols: s.cols,
      rows: s.rows,
      attached: this.joined.get(s.id)?.size ?? 0,
      protections: s.protections,
      ...(s.unprotectedReason === undefined ? {} : { unprotectedReason: s.unprotectedReason }),
    };
  }

  /** Every session, running ones first (status). */
  list(): ShellInfo[] {
    return this.sessions.list().map((s) => this.describe(s));
  }

  handlers(m: ShadowManager) {
    // A crash recovery unmounts the views the state file names: sessions' views too.
    this.sessions.onViews = () => m.saveState();
    const info = (s: ShellSession): ShellInfo => this.describe(s);
    const find = (id: string): ShellSession => {
      const s = this.sessions.get(id);
      if (!s) throw new ShadowError('NOT_FOUND', `no shell session ${id} (shadowfs shell --list shows them)`);
      return s;
    };
    return {
      'shell.open': async (p, ctx) => {
        const entry = m.get(p.shadow);
        const shadow = await m.use(entry);
        const env = envOf(p.env);
        const s = await this.sessions.start(shadow, {
          agent: p.agent,
          argv: p.argv,
          cwd: p.cwd,
          cols: p.cols,
          rows: p.rows,
          term: p.term,
          env,
          noNetwork: p.noNetwork,
          unprotected: p.unprotected,
          writable: p.writable,
          readable: p.readable,
        });
        this.shadowNames.set(s.id, entry.name);
        this.wire(s);
        this.join(s, ctx.client);
        return info(s);
      },
      'shell.attach': async (p, ctx) => {
        let s: ShellSession | undefined;
        if (p.sessionId !== undefined) s = find(p.sessionId);
        else {
          if (p.shadow === undefined || p.agent === undefined)
            throw new ShadowError('INVALID_ARGUMENT', 'name the session: sessionId, or shadow and agent');
          const shadow = m.get(p.shadow).shadow;
          s = this.sessions.runningOf(shadow, p.agent);
          if (!s) throw new ShadowError('NOT_FOUND', `agent ${p.agent} has no shell session running in ${p.shadow}`);
        }
        this.join(s, ctx.client);
        return { ...info(s), scrollback: s.scrollback().toString('base64') };
      },
      'shell.detach': async (p, ctx) => {
        find(p.sessionId);
        this.joined.get(p.sessionId)?.delete(ctx.client);
        return { sessionId: p.sessionId };
      },
      'shell.input': async (p) => {
        const s = find(p.sessionId);
        if (!s.running) throw new ShadowError('NOT_FOUND', `shell session ${p.sessionId} has ended`);
        const data = Buffer.from(p.data, 'base64');
        s.write(data);
        return { sessionId: s.id, bytes: data.length };
      },
      'shell.resize': async (p) => {
        const s = find(p.sessionId);
        s.resize(p.cols, p.rows);
        return { sessionId: s.id, cols: s.cols, rows: s.rows };
      },
      'shell.close': async (p) => {
        const s = find(p.sessionId);
        await s.close();
        return info(s);
      },
      'shell.list': async (p) => {
        const shadow = p.shadow === undefined ? undefined : m.get(p.shadow).shadow;
        return { sessions: this.sessions.list(shadow).map(info) };
      },
    } satisfies Partial<Handlers>;
  }

  /** Sends a session's output and end to the connections joined to it. */
  private wire(s: ShellSession): void {
    const send = (method: 'shell/output' | 'shell/exit', params: object): void => {
      const joined = this.joined.get(s.id);
      for (const c of joined ?? []) {
        // A connection that restricted itself after joining (an agent's) hears nothing of a session.
        if (c.rpc.socket.destroyed || c.scope) continue;
        // One that stopped reading is let go rather than buffered without bound: the program goes
        // on, and joining again shows the recent output.
        if (c.rpc.socket.writableLength > MAX_UNREAD_BYTES) {
          joined?.delete(c);
          continue;
        }
        try {
          void c.rpc.connection.sendNotification(method, params).catch(() => undefined);
        } catch {
          // that connection is going away
        }
      }
    };
    s.on('data', (b: Buffer) => send('shell/output', { sessionId: s.id, data: b.toString('base64') }));
    s.once('exit', (e: { exitCode: number | null; signal: string | null }) => {
      send('shell/exit', { sessionId: s.id, exitCode: e.exitCode, signal: e.signal });
      this.joined.delete(s.id);
    });
  }

  private join(s: ShellSession, client: Client): void {
    let set = this.joined.get(s.id);
    if (!set) this.joined.set(s.id, (set = new Set()));
    if (set.has(client)) return;
    set.add(client);
    client.closed.signal.addEventListener('abort', () => set.delete(client), { once: true });
  }
}

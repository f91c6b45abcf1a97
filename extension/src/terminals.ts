// Agent terminals: an integrated terminal whose program is `shadowfs shell <shadow> --agent A`,
// so the terminal is the session's own (raw keys, resizes, the exit status), the agent's program
// running in its own view of the shadow. The same command joins the agent's running session
// when it has one. The session list has no notification of its own: opening and closing these
// terminals are the events the extension sees, so each asks the Shadows view to look again.
import * as fs from 'fs';
import * as vscode from 'vscode';
import type { ShadowInfo } from 'shadowfs/client';
import type { Daemon } from './daemon';
import { shellCommand, type Installation } from './locate';
import type { ShadowsProvider } from './views';

/** The terminal's name: shadow and agent, as the terminal list shows it. */
export function agentTerminalName(shadow: string, agent: string): string {
  return `shadowfs: ${agent} in ${shadow}`;
}

export class AgentTerminals implements vscode.Disposable {
  private readonly open = new Map<vscode.Terminal, { shadow: string; agent: string }>();
  private readonly subscriptions: vscode.Disposable[] = [];
  private disposed = false;

  constructor(
    private readonly daemon: Daemon,
    private readonly shadows: ShadowsProvider,
  ) {
    this.subscriptions.push(
      vscode.window.onDidCloseTerminal((t) => {
        if (!this.open.delete(t)) return;
        // The CLI has left the session (or the session ended): attached counts and states change.
        this.shadows.shadowsChanged();
      }),
    );
  }

  /** Opens a terminal running the agent's session in the shadow (joining it when it runs already). */
  start(installation: Installation, shadow: ShadowInfo, agent: string): vscode.Terminal {
    const { command, args } = shellCommand(installation.executable, shadow, agent);
    const terminal = vscode.window.createTerminal({
      name: agentTerminalName(shadow.name, agent),
      shellPath: command,
      shellArgs: args,
      // The session starts where the CLI stands, when that is in the folder: its root.
      cwd: fs.existsSync(shadow.folder) ? shadow.folder : undefined,
      iconPath: new vscode.ThemeIcon('layers'),
    });
    this.open.set(terminal, { shadow: shadow.name, agent });
    terminal.show();
    void this.watchForSession(shadow.name, agent);
    return terminal;
  }

  /** The terminals this extension opened that are still open, with their shadow and agent. */
  list(): Array<{ terminal: vscode.Terminal; shadow: string; agent: string }> {
    return [...this.open].map(([terminal, s]) => ({ terminal, ...s }));
  }

  /** Looks for the session the terminal starts (a few cheap asks), then refreshes the view once. */
  private async watchForSession(shadow: string, agent: string): Promise<void> {
    for (let i = 0; i < 40 && !this.disposed; i++) {
      await new Promise((r) => setTimeout(r, 500));
      try {
        const client = await this.daemon.get();
        const { sessions } = await client.request('shell.list', { shadow });
        if (sessions.some((s) => s.agent === agent && s.running && s.attached > 0)) break;
      } catch {
        break;
      }
    }
    if (!this.disposed) this.shadows.shadowsChanged();
  }

  dispose(): void {
    this.disposed = true;
    for (const d of this.subscriptions.splice(0)) d.dispose();
    this.open.clear();
  }
}

// Registers shadowfs's MCP server with VS Code's agent mode: a server definition provider (the
// editor's MCP API, VS Code 1.101 and later) that offers one `shadowfs mcp --shadow S --agent A`
// per shadow and agent the daemon knows, and tells the editor when that set changes (it follows
// the Shadows view, which follows the daemon's notifications). On an editor without the API the
// extension works as before, without it.
import * as vscode from 'vscode';
import type { Installation } from './locate';
import { daemonEnv, mcpServerSpecs, type McpServerSpec } from './mcpServers';
import type { ShadowsProvider } from './views';

/** The provider's id, as package.json's contributes.mcpServerDefinitionProviders names it. */
export const MCP_PROVIDER_ID = 'shadowfs.mcp';

// The parts of VS Code's MCP API used here, declared from its vscode.d.ts (McpStdioServerDefinition,
// McpServerDefinitionProvider, lm.registerMcpServerDefinitionProvider): the @types/vscode this
// package builds with (1.90, its lowest supported editor) predates them.
export interface McpStdioServerDefinition {
  readonly label: string;
  cwd?: vscode.Uri;
  command: string;
  args: string[];
  env: Record<string, string | number | null>;
  version?: string;
}
type McpStdioServerDefinitionClass = new (
  label: string,
  command: string,
  args?: string[],
  env?: Record<string, string | number | null>,
  version?: string,
) => McpStdioServerDefinition;
interface McpServerDefinitionProvider {
  readonly onDidChangeMcpServerDefinitions?: vscode.Event<void>;
  provideMcpServerDefinitions(token: vscode.CancellationToken): vscode.ProviderResult<McpStdioServerDefinition[]>;
  resolveMcpServerDefinition?(
    server: McpStdioServerDefinition,
    token: vscode.CancellationToken,
  ): vscode.ProviderResult<McpStdioServerDefinition>;
}
interface McpApi {
  lm?: { registerMcpServerDefinitionProvider?: (id: string, provider: McpServerDefinitionProvider) => vscode.Disposable };
  McpStdioServerDefinition?: McpStdioServerDefinitionClass;
}

export class McpServers implements McpServerDefinitionProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeMcpServerDefinitions = this.changed.event;
  private readonly subscriptions: vscode.Disposable[] = [];
  private last = '';
  /** Whether this editor has the MCP API and took the provider. */
  readonly registered: boolean;
  /** How many times the editor was told the servers changed (for tests). */
  changes = 0;

  constructor(
    private readonly shadows: ShadowsProvider,
    private readonly installation: () => Installation | undefined,
    api: McpApi = vscode as unknown as McpApi,
  ) {
    this.Definition = api.McpStdioServerDefinition;
    const register = api.lm?.registerMcpServerDefinitionProvider;
    let registered = false;
    if (typeof register === 'function' && typeof this.Definition === 'function') {
      this.subscriptions.push(register(MCP_PROVIDER_ID, this));
      registered = true;
    }
    this.registered = registered;
    // The view's model is refreshed on the daemon's notifications (shadow/changed, layer/changed):
    // the editor hears of a change only when the set of servers did change.
    this.subscriptions.push(
      this.shadows.onDidChangeTreeData(() => {
        const now = JSON.stringify(this.specs());
        if (now === this.last) return;
        this.last = now;
        this.changes++;
        this.changed.fire();
      }),
    );
  }

  private readonly Definition: McpStdioServerDefinitionClass | undefined;

  /** The servers, as plain data: one per shadow and agent the daemon knows. */
  specs(): McpServerSpec[] {
    const inst = this.installation();
    if (!inst) return [];
    return mcpServerSpecs(this.shadows.model.shadowList(), inst.executable, inst.version, daemonEnv(process.env));
  }

  /** What the editor asks for (also called by tests): the current servers, once the view has loaded. */
  async provideMcpServerDefinitions(): Promise<McpStdioServerDefinition[]> {
    await this.shadows.settled();
    const specs = this.specs();
    this.last = JSON.stringify(specs);
    const Definition = this.Definition;
    if (!Definition) return [];
    return specs.map((s) => new Definition(s.label, s.command, s.args, s.env, s.version));
  }

  /** Called when the editor starts a server: one whose shadow or agent is gone is not started. */
  async resolveMcpServerDefinition(server: McpStdioServerDefinition): Promise<McpStdioServerDefinition | undefined> {
    const known = (): boolean => this.specs().some((s) => s.label === server.label);
    await this.shadows.settled();
    if (!known()) await this.shadows.refresh();
    return known() ? server : undefined;
  }

  dispose(): void {
    for (const d of this.subscriptions.splice(0)) d.dispose();
    this.changed.dispose();
  }
}

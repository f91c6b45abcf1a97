// The MCP servers the extension offers VS Code's agent mode: one `shadowfs mcp` per shadow and
// agent the daemon knows, run with the installation the extension already uses. Free of the VS
// Code API (mcp.ts hands these to the editor), so that it is tested on its own.
import type { ShadowInfo } from 'shadowfs/client';
import { mcpCommand } from './locate';

/** What VS Code needs to start one server (the fields of its McpStdioServerDefinition). */
export interface McpServerSpec {
  label: string;
  shadow: string;
  agent: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  /** The installation's version: when it changes, VS Code offers to refresh the tools. */
  version: string;
}

/**
 * The variables that say where the daemon is (its runtime and state directories): passed on so
 * that the server reaches the daemon this editor talks to, whatever environment the editor gives
 * the processes it starts.
 */
export const DAEMON_ENV = ['XDG_RUNTIME_DIR', 'SHADOWFS_STATE_DIR'] as const;

export function daemonEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of DAEMON_ENV) {
    const v = env[k];
    if (v) out[k] = v;
  }
  return out;
}

/** One server per shadow and agent, sorted by shadow, then agent. */
export function mcpServerSpecs(
  shadows: readonly ShadowInfo[],
  executable: string,
  installedVersion: string,
  env: Record<string, string>,
  platform: NodeJS.Platform = process.platform,
): McpServerSpec[] {
  const out: McpServerSpec[] = [];
  for (const s of [...shadows].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    for (const agent of [...s.agents].sort()) {
      const { command, args } = mcpCommand(executable, s.name, agent, platform);
      out.push({
        label: mcpServerLabel(s.name, agent),
        shadow: s.name,
        agent,
        command,
        args,
        env: { ...env },
        version: installedVersion,
      });
    }
  }
  return out;
}

/** How the editor lists a server: the agent first (that is who uses the tools), then where. */
export function mcpServerLabel(shadow: string, agent: string): string {
  return `shadowfs: ${agent} in ${shadow}`;
}

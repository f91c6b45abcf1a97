// The quick picks a command asks with when it is run from the palette rather than on a node of
// the Shadows view: a shadow, an agent's layer, a layer or a new agent's, an agent of a shadow.
import * as vscode from 'vscode';
import type { ShadowInfo } from 'shadowfs/client';
import type { Daemon } from './daemon';
import type { LayerNode } from './model';
import { agentIdProblem, uniqueAgentName } from './names';
import type { ShadowsProvider } from './views';

/** The extension's parts the pickers use, given by activate(). */
export interface PickerContext {
  daemon: Daemon;
  shadows: ShadowsProvider;
  /** The shadow of the window's folder, preselected when several are offered. */
  workspaceShadow(): ShadowInfo | undefined;
}

export interface Pickers {
  pickShadow(): Promise<ShadowInfo | undefined>;
  pickLayer(title: string): Promise<LayerNode | undefined>;
  pickLayerOrNew(title: string): Promise<{ shadow: string; agent: string } | undefined>;
  pickAgent(shadow: ShadowInfo, title: string): Promise<string | undefined>;
}

export function pickers(ctx: PickerContext): Pickers {
  const { daemon, shadows, workspaceShadow } = ctx;
  const pickShadow = async (): Promise<ShadowInfo | undefined> => {
    await daemon.get();
    await shadows.refresh();
    const list = shadows.model.shadowList();
    if (list.length === 0) throw new Error('there are no shadows; mount this folder first (shadowfs: Mount This Folder)');
    if (list.length === 1) return list[0];
    const mine = workspaceShadow();
    const picked = await vscode.window.showQuickPick(
      list.map((s) => ({ label: s.name, description: s.folder, picked: s === mine, info: s })),
      { placeHolder: 'Which shadow?' },
    );
    return picked?.info;
  };
  const pickLayer = async (title: string): Promise<LayerNode | undefined> => {
    const shadow = await pickShadow();
    if (!shadow) return undefined;
    const layers = shadows.model.layers(shadow.name);
    if (layers.length === 0) throw new Error(`no agent has a layer in ${shadow.name} yet`);
    if (layers.length === 1) return layers[0];
    const picked = await vscode.window.showQuickPick(
      layers.map((l) => ({ label: l.agent, description: l.active ? 'active' : '', layer: l })),
      { title },
    );
    return picked?.layer;
  };
  const pickLayerOrNew = async (title: string): Promise<{ shadow: string; agent: string } | undefined> => {
    const shadow = await pickShadow();
    if (!shadow) return undefined;
    const layers = shadows.model.layers(shadow.name);
    const fresh = uniqueAgentName('vscode', shadow.agents);
    const picked = await vscode.window.showQuickPick(
      [...layers.map((l) => ({ label: l.agent, description: l.active ? 'active' : '' })), { label: fresh, description: 'a new layer' }],
      { title },
    );
    return picked ? { shadow: shadow.name, agent: picked.label } : undefined;
  };

  /** An agent of the shadow, or a new one (its name asked, a free one offered). */
  const pickAgent = async (shadow: ShadowInfo, title: string): Promise<string | undefined> => {
    const fresh = uniqueAgentName('vscode', shadow.agents);
    const NEW = 'New agent…';
    const picked = await vscode.window.showQuickPick(
      [
        ...[...shadow.agents].sort().map((a) => ({ label: a, description: shadow.active === a ? 'active' : 'has a layer' })),
        { label: NEW, description: 'a new layer' },
      ],
      { title, placeHolder: 'The session sees and writes this agent’s layer only' },
    );
    if (!picked) return undefined;
    if (picked.label !== NEW) return picked.label;
    return vscode.window.showInputBox({
      title,
      prompt: 'The new agent’s id (it names its layer)',
      value: fresh,
      validateInput: agentIdProblem,
    });
  };

  return { pickShadow, pickLayer, pickLayerOrNew, pickAgent };
}

// The shadowfs extension: shows what agents changed in shadows of the user's folders, compares
// it with the user's files, checks it with the shadow's language servers and applies it when the
// user says so. All of it through the daemon (the installed package's shadowfs/client). This file
// wires the parts together on activation (views, status bar, the change feed) and registers the
// commands; the apply flow, the only code that writes the user's folder, is in apply.ts, and the
// palette's quick picks in pickers.ts.
import * as crypto from 'crypto';
import * as vscode from 'vscode';
import type { NotificationParamsOf, ResultOf, ShadowInfo } from 'shadowfs/client';
import { apply, applyBranch, type ApplyContext, type BranchApplyResult } from './apply';
import { isScripted, type CommandOptions } from './commandOptions';
import { docUri, joinRel, ShadowContentProvider } from './content';
import { Daemon, type DaemonState } from './daemon';
import { locate, type Installation } from './locate';
import { McpServers } from './mcp';
import { baseName, describeExcluded, type FileNode, type Node } from './model';
import { pickers } from './pickers';
import { applyHunk, openOverlap, rejectHunk, ReviewLenses, type HunkRef, type RejectOptions } from './review';
import { AgentTerminals } from './terminals';
import { LintsProvider, samePath, ShadowsProvider, type LintNode } from './views';
import { noLinks } from './notices';

// The types a script of the commands (the extension's tests) needs, where they always were.
export type { BranchApplyResult, CommandOptions };

/** What activate() returns: the extension's parts, for other extensions and for its tests. */
export interface ShadowfsApi {
  daemon: Daemon;
  shadows: ShadowsProvider;
  shadowsView: vscode.TreeView<Node>;
  lints: LintsProvider;
  content: ShadowContentProvider;
  /** The MCP servers offered to VS Code's agent mode (registered only where the editor has the API). */
  mcp: McpServers;
  /** The agent terminals this window opened and that are still open. */
  terminals: AgentTerminals;
  /** The per-hunk Apply/Reject lenses over an agent's version of a file. */
  review: ReviewLenses;
  installation(): Installation | undefined;
}

type RunResult = ResultOf<'run'>;

let output: vscode.OutputChannel;

export async function activate(context: vscode.ExtensionContext): Promise<ShadowfsApi> {
  output = vscode.window.createOutputChannel('shadowfs');
  context.subscriptions.push(output);
  let installation: Installation | undefined;
  let locateError: string | undefined;

  const settings = (): { installation: Installation; idleTimeoutSeconds: number; clientName: string } => {
    const cfg = vscode.workspace.getConfiguration('shadowfs');
    installation = locate(cfg.get<string>('path', ''), process.env.PATH);
    return {
      installation,
      idleTimeoutSeconds: cfg.get<number>('idleTimeout', 900),
      clientName: `shadowfs-vscode ${String(context.extension.packageJSON.version)} (VS Code ${vscode.version})`,
    };
  };

  const daemon = new Daemon(() => {
    try {
      const s = settings();
      locateError = undefined;
      return s;
    } catch (err) {
      locateError = (err as Error).message;
      throw err;
    }
  });
  context.subscriptions.push({ dispose: () => daemon.dispose() });

  const content = new ShadowContentProvider(daemon);
  const shadows = new ShadowsProvider(daemon);
  const lints = new LintsProvider();
  const shadowsView = vscode.window.createTreeView('shadowfs.shadows', { treeDataProvider: shadows, showCollapseAll: true });
  const lintsView = vscode.window.createTreeView('shadowfs.lints', { treeDataProvider: lints });
  context.subscriptions.push(
    content,
    shadows,
    lints,
    shadowsView,
    lintsView,
    vscode.workspace.registerTextDocumentContentProvider('shadowfs', content),
    vscode.window.registerFileDecorationProvider(shadows),
  );
  const review = new ReviewLenses(daemon);
  context.subscriptions.push(review, vscode.languages.registerCodeLensProvider({ scheme: 'shadowfs' }, review));
  const mcp = new McpServers(shadows, () => installation);
  const terminals = new AgentTerminals(daemon, shadows);
  context.subscriptions.push(mcp, terminals);
  output.appendLine(
    mcp.registered
      ? "MCP: offering shadowfs's MCP server to agent mode, one per shadow and agent"
      : 'MCP: this editor has no MCP server definition API (VS Code 1.101+); not registering',
  );

  // ---- status bar ----
  const status = vscode.window.createStatusBarItem('shadowfs.status', vscode.StatusBarAlignment.Left, 10);
  status.name = 'shadowfs';
  status.command = 'shadowfs.focus';
  context.subscriptions.push(status);
  const updateStatus = (): void => {
    const s: DaemonState = daemon.state;
    if (locateError) {
      status.text = '$(warning) shadowfs';
      status.tooltip = locateError;
    } else if (s.kind === 'connecting') {
      status.text = '$(sync~spin) shadowfs';
      status.tooltip = 'Connecting to the shadowfs daemon…';
    } else if (s.kind === 'disconnected') {
      status.text = '$(debug-disconnect) shadowfs';
      status.tooltip = `The shadowfs daemon is not connected: ${s.reason}\nClick to open the Shadows view (refreshing it connects again).`;
    } else {
      const mine = workspaceShadow();
      const list = shadows.model.shadowList();
      status.text = mine
        ? `$(layers) ${mine.name}: ${mine.active ?? 'folder'}`
        : `$(layers) shadowfs${list.length ? ` (${list.length})` : ''}`;
      status.tooltip = `shadowfs daemon ${s.pid}${s.started ? ' (started by VS Code)' : ''}\n${
        mine
          ? `this folder's shadow ${mine.name} shows ${mine.active === null ? 'the folder, read-only' : `agent ${mine.active}'s layer`}`
          : `${list.length} shadow(s); none of this folder`
      }`;
    }
    status.show();
  };
  const workspaceShadow = (): ShadowInfo | undefined => {
    for (const f of vscode.workspace.workspaceFolders ?? []) {
      if (f.uri.scheme !== 'file') continue;
      const s = shadows.model.shadowOfFolder(f.uri.fsPath, samePath);
      if (s) return s;
    }
    return undefined;
  };
  context.subscriptions.push(
    shadows.onDidChangeTreeData(() => {
      // Said in the view itself, so that an unreachable daemon does not look like "no shadows".
      shadowsView.message = shadows.error ? `Cannot reach the shadowfs daemon: ${shadows.error}` : undefined;
      updateStatus();
      void vscode.commands.executeCommand('setContext', 'shadowfs.hasWorkspaceShadow', workspaceShadow() !== undefined);
    }),
  );
  const stopState = daemon.onState((s) => {
    updateStatus();
    if (s.kind === 'connected') shadows.shadowsChanged();
    if (s.kind === 'disconnected') shadows.shadowsChanged();
  });
  context.subscriptions.push({ dispose: stopState });

  // ---- the change feed ----
  const stopFeed = daemon.onNotification((method, params) => {
    if (method === 'shadow/changed') {
      shadows.shadowsChanged();
    } else if (method === 'radar/changed') {
      const r = params as NotificationParamsOf<'radar/changed'>;
      shadows.overlapsChanged(r.shadow, r.added, r.cleared);
      // The folder moved under a layer: the hunks and their conflict marks change with it.
      review.refresh();
    } else if (method === 'layer/changed') {
      const p = params as { shadow: string; agent: string | null; event: string; path?: string; changes?: Array<{ path: string }> };
      if (
        p.agent === null ||
        ['dropped', 'cloned', 'activated', 'restored', 'reset'].includes(p.event) ||
        !shadows.model.shadow(p.shadow)?.agents.includes(p.agent)
      ) {
        shadows.shadowsChanged();
      } else {
        shadows.layerChanged(p.shadow, p.agent);
      }
      // Sessions send no notification of their own; their writes are what the extension sees.
      shadows.sessionsChanged();
      const paths = p.changes?.map((c) => c.path) ?? (p.path ? [p.path] : undefined);
      review.refresh();
      content.layerChanged(p.shadow, p.agent, p.event === 'written' || p.event === 'removed' || p.event === 'changed' ? paths : undefined);
    }
  });
  context.subscriptions.push({ dispose: stopFeed });

  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (!e.affectsConfiguration('shadowfs')) return;
      daemon.reconfigure();
      updateStatus();
      shadows.shadowsChanged();
    }),
  );

  // ---- commands ----
  const { pickShadow, pickLayer, pickLayerOrNew, pickAgent } = pickers({ daemon, shadows, workspaceShadow });
  const applyContext: ApplyContext = { daemon, shadows, content, output };
  const command = (id: string, fn: (...args: never[]) => unknown): void => {
    context.subscriptions.push(
      vscode.commands.registerCommand(id, async (...args: never[]) => {
        try {
          return await fn(...args);
        } catch (err) {
          const code = (err as { code?: unknown }).code;
          const message = `shadowfs: ${(err as Error).message}${typeof code === 'string' ? ` (${code})` : ''}`;
          output.appendLine(`${id}: ${message}`);
          void vscode.window.showErrorMessage(noLinks(message));
          // A scripted call (it passed { confirm: false }) gets the error itself.
          if (args.some((a) => isScripted(a))) throw err;
          return undefined;
        }
      }),
    );
  };
  const confirm = async (opts: CommandOptions | undefined, message: string, detail: string, action: string): Promise<boolean> => {
    if (opts?.confirm === false) return true;
    const answer = await vscode.window.showWarningMessage(noLinks(message), { modal: true, detail }, action);
    return answer === action;
  };

  command('shadowfs.focus', () => vscode.commands.executeCommand('shadowfs.shadows.focus'));
  command('shadowfs.refresh', async () => {
    await daemon.get();
    await shadows.refresh();
  });

  command('shadowfs.mount', async (arg?: vscode.Uri) => {
    const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file');
    let folder = arg instanceof vscode.Uri ? arg.fsPath : undefined;
    if (!folder) {
      if (folders.length === 0) throw new Error('open a folder first: the shadow is made of a folder on this machine');
      folder =
        folders.length === 1
          ? folders[0].uri.fsPath
          : (await vscode.window.showWorkspaceFolderPick({ placeHolder: 'Which folder should get a shadow?' }))?.uri.fsPath;
      if (!folder) return undefined;
    }
    const client = await daemon.get();
    await shadows.refresh();
    const existing = shadows.model.shadowOfFolder(folder, samePath);
    if (existing) {
      // One shadow per folder is what a person means; a second would split the agents' layers.
      void vscode.window.showInformationMessage(
        noLinks(`${folder} already has shadow ${existing.name}, mounted at ${existing.mountPoint}.`),
      );
      return existing;
    }
    const info = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Mounting a shadow of ${folder}…` },
      () => client.request('mount', { folder }),
    );
    await shadows.refresh();
    const restored = info.restored?.length ? ` Restored from autosave: ${info.restored.join(', ')}.` : '';
    void vscode.window.showInformationMessage(
      noLinks(`Shadow ${info.name} of ${info.folder} is mounted at ${info.mountPoint}.${restored}`),
    );
    return info;
  });

  command('shadowfs.unmount', async (node?: Node, opts?: CommandOptions) => {
    const shadow = node?.kind === 'shadow' ? node.info.name : (await pickShadow())?.name;
    if (!shadow) return undefined;
    const info = shadows.model.shadow(shadow);
    const agents = info?.agents.length ?? 0;
    if (
      !(await confirm(
        opts,
        `Unmount shadow ${shadow}?`,
        `Its ${agents} agent layer(s) are dropped with it; your folder is not touched.`,
        'Unmount',
      ))
    )
      return undefined;
    const client = await daemon.get();
    const r = await client.request('unmount', { shadow });
    await shadows.refresh();
    return r;
  });

  command('shadowfs.activate', async (node?: Node) => {
    const layer = node?.kind === 'layer' ? node : await pickLayer('Which agent’s layer should the shared mount show?');
    if (!layer) return undefined;
    const client = await daemon.get();
    const r = await client.request('activate', { shadow: layer.shadow, agent: layer.agent });
    await shadows.refresh();
    return r;
  });

  command('shadowfs.showFolder', async (node?: Node) => {
    const shadow = node?.kind === 'shadow' ? node.info.name : (await pickShadow())?.name;
    if (!shadow) return undefined;
    const client = await daemon.get();
    const r = await client.request('activate', { shadow, agent: null });
    await shadows.refresh();
    return r;
  });

  command('shadowfs.reset', async (node?: Node, opts?: CommandOptions) => {
    const layer = node?.kind === 'layer' ? node : await pickLayer('Which agent’s layer should be emptied?');
    if (!layer) return undefined;
    if (
      !(await confirm(
        opts,
        `Reset ${layer.agent}'s layer in ${layer.shadow}?`,
        'Everything the agent changed is dropped (checkpoints are kept). Your folder is not touched.',
        'Reset',
      ))
    )
      return undefined;
    const client = await daemon.get();
    const r = await client.request('layer.reset', { shadow: layer.shadow, agent: layer.agent });
    await shadows.refresh();
    return r;
  });

  command('shadowfs.checkpoint', async (node?: Node, opts?: CommandOptions) => {
    const layer = node?.kind === 'layer' ? node : await pickLayer('Checkpoint which agent’s layer?');
    if (!layer) return undefined;
    let name = opts?.name;
    if (name === undefined) {
      name = await vscode.window.showInputBox({
        title: `Checkpoint ${layer.agent}'s layer`,
        prompt: 'A name (letters, digits, ".", "_", "-"); empty for a timestamp',
        validateInput: (v) => (v === '' || /^[A-Za-z0-9._-]{1,64}$/.test(v) ? undefined : 'use 1 to 64 letters, digits, ".", "_" or "-"'),
      });
      if (name === undefined) return undefined;
    }
    const client = await daemon.get();
    const r = await client.request('layer.checkpoint', { shadow: layer.shadow, agent: layer.agent, ...(name ? { name } : {}) });
    void vscode.window.showInformationMessage(noLinks(`Checkpoint ${r.name}: ${r.files} file(s) of ${layer.agent}'s layer saved.`));
    return r;
  });

  command('shadowfs.restore', async (node?: Node, opts?: CommandOptions) => {
    const layer = node?.kind === 'layer' ? node : await pickLayer('Restore which agent’s layer?');
    if (!layer) return undefined;
    const client = await daemon.get();
    let name = opts?.name;
    if (name === undefined) {
      const { checkpoints } = await client.request('layer.checkpoints', { shadow: layer.shadow, agent: layer.agent });
      if (checkpoints.length === 0) {
        void vscode.window.showInformationMessage(noLinks(`${layer.agent} has no checkpoints in ${layer.shadow}.`));
        return undefined;
      }
      const picked = await vscode.window.showQuickPick(
        [...checkpoints].reverse().map((c) => ({
          label: c.name,
          description: `${new Date(c.createdAt).toLocaleString()}${c.auto ? ' · autosave' : ''}`,
          detail: `${c.files} file(s), ${c.bytes} bytes`,
        })),
        { title: `Restore ${layer.agent}'s layer from a checkpoint`, placeHolder: 'Its current changes are replaced' },
      );
      if (!picked) return undefined;
      name = picked.label;
    }
    if (
      !(await confirm(
        opts,
        `Restore ${layer.agent}'s layer from ${name}?`,
        'The layer becomes what the checkpoint holds; its current changes are dropped.',
        'Restore',
      ))
    )
      return undefined;
    const r = await client.request('layer.restore', { shadow: layer.shadow, agent: layer.agent, name });
    await shadows.refresh();
    return r;
  });

  command('shadowfs.openDiff', async (node?: FileNode) => {
    if (node?.kind !== 'file') throw new Error('choose a changed file in the Shadows view');
    const { change, shadow, agent, folder } = node;
    // A change apply leaves out (.git/index, an ignored build file) is a look only: both sides
    // read-only, so that nobody edits git's own files from here by mistake.
    const mine =
      change.kind === 'added'
        ? docUri({ kind: 'empty', path: change.path })
        : change.excluded
          ? docUri({ kind: 'folder', root: folder, path: change.path })
          : vscode.Uri.file(joinRel(folder, change.path));
    const theirs = docUri(
      change.kind === 'deleted' ? { kind: 'empty', path: change.path } : { kind: 'agent', shadow, agent, path: change.path },
    );
    const title = `${baseName(change.path)} (yours ↔ ${agent}${change.excluded ? ', not applied' : ''})`;
    await vscode.commands.executeCommand('vscode.diff', mine, theirs, title, { preview: true });
    return { left: mine.toString(), right: theirs.toString() };
  });

  command('shadowfs.openAgentVersion', async (node?: FileNode) => {
    if (node?.kind !== 'file') throw new Error('choose a changed file in the Shadows view');
    const uri = docUri({ kind: 'agent', shadow: node.shadow, agent: node.agent, path: node.change.path });
    await vscode.window.showTextDocument(uri, { preview: true });
  });

  command('shadowfs.showPatch', async (node?: Node, opts?: CommandOptions) => {
    const layer = node?.kind === 'layer' ? node : await pickLayer('Show which agent’s change as a patch?');
    if (!layer) return undefined;
    const client = await daemon.get();
    const r = await client.request('layer.patch', {
      shadow: layer.shadow,
      agent: layer.agent,
      ...(opts?.includeIgnored ? { includeIgnored: true } : {}),
    });
    const doc = await vscode.workspace.openTextDocument({ content: r.text || '# no changes\n', language: 'diff' });
    await vscode.window.showTextDocument(doc, { preview: true });
    // The patch text stays exactly what git apply takes; what it leaves out is said beside it.
    const left = describeExcluded(r.excluded);
    if (left) {
      output.appendLine(`patch ${layer.agent} (${layer.shadow}): ${r.files.length} file(s); left out: ${left}`);
      void vscode.window.showInformationMessage(noLinks(`Patch of ${layer.agent}'s change: ${r.files.length} file(s). Left out: ${left}.`));
    }
    return r;
  });

  command('shadowfs.applyLayer', async (node?: Node, opts?: CommandOptions) => {
    const layer = node?.kind === 'layer' ? node : await pickLayer('Apply which agent’s change to your folder?');
    if (!layer) return undefined;
    return apply(applyContext, layer.shadow, layer.agent, undefined, opts);
  });

  command('shadowfs.applyFile', async (node?: FileNode, opts?: CommandOptions) => {
    if (node?.kind !== 'file') throw new Error('choose a changed file in the Shadows view');
    if (node.change.excluded === 'repository-metadata')
      throw Object.assign(
        new Error(
          `${node.change.path} is git's own data (.git): apply never writes it. To bring the agent's commits in, use “Apply Agent's Commits as a Branch…”.`,
        ),
        { code: 'INVALID_ARGUMENT' },
      );
    // An ignored file chosen by itself is meant: it is applied with the ignored files included.
    return apply(
      applyContext,
      node.shadow,
      node.agent,
      [node.change.path],
      node.change.excluded === 'ignored' ? { ...opts, includeIgnored: true } : opts,
    );
  });

  // The agent's commits (its HEAD in the shadow) come into the folder's repository as a new
  // branch: the daemon fetches them with git, writing only new objects and that one ref. No file
  // of the folder is written, and the agent's file changes stay in its layer.
  command('shadowfs.applyBranch', async (node?: Node, opts?: CommandOptions): Promise<BranchApplyResult | undefined> => {
    const layer = node?.kind === 'layer' ? node : await pickLayer('Bring which agent’s commits into your repository?');
    if (!layer) return undefined;
    return applyBranch(applyContext, layer.shadow, layer.agent, opts);
  });

  command('shadowfs.lints', async (node?: Node) => {
    const layer = node?.kind === 'layer' ? node : await pickLayer('Check which agent’s change?');
    if (!layer) return undefined;
    const client = await daemon.get();
    const r = await vscode.window.withProgress({ location: { viewId: 'shadowfs.lints' }, title: `Checking ${layer.agent}'s change…` }, () =>
      client.request('lints', { shadow: layer.shadow, agent: layer.agent, timeoutMs: 60_000 }),
    );
    lints.show(layer.shadow, layer.agent, r);
    await vscode.commands.executeCommand('shadowfs.lints.focus');
    return r;
  });

  command('shadowfs.openLint', async (node?: LintNode) => {
    if (node?.kind !== 'diag') return;
    const { start, end } = node.diag.range;
    const uri = docUri({ kind: 'agent', shadow: node.shadow, agent: node.agent, path: node.path });
    await vscode.window.showTextDocument(uri, {
      preview: true,
      selection: new vscode.Range(start.line, start.character, end.line, end.character),
    });
  });

  let lastCommandLine = '';
  command('shadowfs.run', async (node?: Node, opts?: CommandOptions): Promise<RunResult | undefined> => {
    const layer = node?.kind === 'layer' ? { shadow: node.shadow, agent: node.agent } : await pickLayerOrNew('Run as which agent?');
    if (!layer) return undefined;
    let line = opts?.commandLine;
    if (line === undefined) {
      line = await vscode.window.showInputBox({
        title: `Run in shadow ${layer.shadow} as ${layer.agent}`,
        prompt: 'A shell command line; it sees the agent’s layer, and its writes go there',
        value: lastCommandLine,
      });
      if (!line) return undefined;
      lastCommandLine = line;
    }
    const client = await daemon.get();
    const runId = `vscode-${crypto.randomBytes(6).toString('hex')}`;
    output.show(true);
    output.appendLine(`$ ${line}    [shadow ${layer.shadow}, agent ${layer.agent}, run ${runId}]`);
    const decoder = { stdout: new TextDecoder(), stderr: new TextDecoder() };
    const stop = client.on('run/output', (p) => {
      if (p.runId === runId) output.append(decoder[p.stream].decode(Buffer.from(p.data, 'base64'), { stream: true }));
    });
    try {
      const r = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `shadowfs: ${line} (as ${layer.agent})`, cancellable: true },
        (_progress, token) => {
          const cancel = (): void => void client.request('run.cancel', { runId }).catch(() => undefined);
          token.onCancellationRequested(cancel);
          opts?.cancellation?.onCancellationRequested(cancel);
          return client.request('run', { shadow: layer.shadow, agent: layer.agent, argv: [line], shell: true, runId });
        },
      );
      const how = r.cancelled ? 'cancelled' : r.timedOut ? 'timed out' : r.signal ? `killed by ${r.signal}` : `exit code ${r.exitCode}`;
      output.appendLine(
        `[${how} after ${Math.round(r.durationMs)} ms${r.queuedMs > 50 ? `, waited ${Math.round(r.queuedMs)} ms for the shadow` : ''}]`,
      );
      return r;
    } finally {
      stop();
    }
  });

  command('shadowfs.newAgentTerminal', async (node?: Node, opts?: CommandOptions) => {
    // From a shadow: ask for the agent. From a layer: that agent. From the palette: ask for both.
    let shadow: ShadowInfo | undefined;
    let agent = opts?.agent;
    if (node?.kind === 'shadow') shadow = node.info;
    else if (node?.kind === 'layer' || node?.kind === 'session') {
      shadow = shadows.model.shadow(node.shadow);
      agent ??= node.kind === 'layer' ? node.agent : node.info.agent;
    } else shadow = await pickShadow();
    if (!shadow) return undefined;
    agent ??= await pickAgent(shadow, `New agent terminal in ${shadow.name}: which agent?`);
    if (!agent) return undefined;
    await daemon.get();
    const inst = installation;
    if (!inst) throw new Error(locateError ?? 'shadowfs is not located yet');
    const terminal = terminals.start(inst, shadow, agent);
    return { name: terminal.name, shadow: shadow.name, agent };
  });

  // ---- review, hunk by hunk (the lenses over an agent's version), and the radar's overlaps ----
  const reviewContext = { daemon, shadows, lenses: review, output };
  command('shadowfs.applyHunk', (h: HunkRef, opts?: CommandOptions) => applyHunk(reviewContext, h, opts));
  command('shadowfs.rejectHunk', (h: HunkRef, opts?: RejectOptions) => rejectHunk(reviewContext, h, opts));
  command('shadowfs.openOverlap', async (node?: Node) => {
    if (node?.kind !== 'overlap') throw new Error('choose an overlap under a shadow in the Shadows view');
    await openOverlap(reviewContext, node);
  });

  // A session's terminal joins the agent's running session (its first, when it has several).
  command('shadowfs.joinSession', (node?: Node, opts?: CommandOptions) =>
    vscode.commands.executeCommand('shadowfs.newAgentTerminal', node, opts),
  );

  command('shadowfs.closeSession', async (node?: Node, opts?: CommandOptions) => {
    if (node?.kind !== 'session') throw new Error('choose a shell session in the Shadows view');
    const s = node.info;
    if (
      !(await confirm(
        opts,
        `End ${s.agent}'s session (${s.argv.join(' ') || 'shell'}) in ${node.shadow}?`,
        `As closing its terminal would: the program gets SIGHUP, whatever is left is killed a few seconds later. ${s.agent}'s layer keeps what it wrote.`,
        'End Session',
      ))
    )
      return undefined;
    const client = await daemon.get();
    const r = await client.request('shell.close', { sessionId: s.sessionId });
    await shadows.refresh();
    return r;
  });

  updateStatus();
  // Connect now: the view fills in, and the daemon starts if it is not running.
  void shadows.refresh().then(() => {
    if (shadows.error) output.appendLine(`could not reach the daemon: ${shadows.error}`);
    updateStatus();
  });

  return { daemon, shadows, shadowsView, lints, content, mcp, terminals, review, installation: () => installation };
}

export function deactivate(): void {
  // Disposables registered on the context close the connection; the daemon keeps running for
  // other clients and exits on its own when nothing uses it.
}

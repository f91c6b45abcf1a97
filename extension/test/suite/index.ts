// The in-editor tests: loaded by a real VS Code (code-server's workbench with the smoke-test
// driver, see test/vscode in the repository) as the extension's test module, they drive the
// extension through its commands and read its views, against a real daemon that the extension
// starts itself and a real mount of the workspace folder. Mocha comes from the repository;
// results go to the JSON file named by $SHADOWFS_VSCODE_RESULTS.
import * as assert from 'assert';
import { execFileSync, spawn } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { ShadowInfo } from 'shadowfs/client';
import type { BranchApplyResult, CommandOptions, ShadowfsApi } from '../../src/extension';
import type { McpStdioServerDefinition } from '../../src/mcp';
import type { ExcludedGroupNode, FileNode, LayerNode, Node, OverlapNode, SessionNode, ShadowNode, ViewNode } from '../../src/model';
import { toUriParts } from '../../src/uris';

export function run(): Promise<void> {
  // Mocha 12 is an ES module: required from CommonJS, its class is the namespace's Mocha.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const mod = require('mocha') as { Mocha?: typeof import('mocha'); default?: typeof import('mocha') };
  const Mocha = mod.Mocha ?? mod.default ?? (mod as unknown as typeof import('mocha'));
  const results = process.env.SHADOWFS_VSCODE_RESULTS;
  const mocha = new Mocha({
    ui: 'bdd',
    timeout: 120_000,
    color: false,
    ...(results ? { reporter: 'json', reporterOptions: { output: results } } : {}),
  });
  mocha.suite.emit('pre-require', globalThis, 'suite', mocha);
  defineTests();
  return new Promise((resolve, reject) => {
    mocha.run((failures) => (failures ? reject(new Error(`${failures} in-editor test(s) failed`)) : resolve()));
  });
}

const AGENT = 'claude';
const conf: CommandOptions = { confirm: false };

/** Polls until `probe` gives a value (not undefined/false) or the time is up. */
async function eventually<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Every file of a folder (but .git) with its content's hash. */
function fingerprint(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (r === '.git') continue;
      if (e.isDirectory()) walk(r);
      else
        out.set(
          r,
          crypto
            .createHash('sha256')
            .update(fs.readFileSync(path.join(dir, r)))
            .digest('hex'),
        );
    }
  };
  walk('');
  return out;
}

/** The paths whose content differs between two fingerprints. */
function differing(a: Map<string, string>, b: Map<string, string>): string[] {
  const keys = new Set([...a.keys(), ...b.keys()]);
  return [...keys].filter((k) => a.get(k) !== b.get(k)).sort();
}

function defineTests(): void {
  describe('the shadowfs extension in a real VS Code', function () {
    let api: ShadowfsApi;
    let folder: string;
    let shadow: ShadowInfo;
    let initial: Map<string, string>;

    const layerNode = async (): Promise<LayerNode> =>
      eventually(`agent ${AGENT}'s layer in the Shadows view`, async () => {
        const roots = await api.shadows.getChildren();
        const s = roots.find((r) => r.kind === 'shadow' && r.info.name === shadow.name);
        if (!s) return undefined;
        return (await api.shadows.getChildren(s)).find((l): l is LayerNode => l.kind === 'layer' && l.agent === AGENT);
      });
    /** The view's file items of the agent's layer, once `ready` says they are what is expected. */
    const fileNodes = async (what: string, ready: (files: FileNode[]) => boolean): Promise<FileNode[]> =>
      eventually(what, async () => {
        const files = (await api.shadows.getChildren(await layerNode())).filter((n): n is FileNode => n.kind === 'file');
        return ready(files) ? files : undefined;
      });
    const kinds = (files: FileNode[]): string[] => files.map((f) => `${f.change.kind} ${f.change.path}`);
    const runAsAgent = async (line: string): Promise<void> => {
      const r = await vscode.commands.executeCommand<{ exitCode: number | null; stderr: string }>('shadowfs.run', await layerNodeOrNew(), {
        ...conf,
        commandLine: line,
      });
      assert.ok(r, 'the run command answered');
      assert.strictEqual(r.exitCode, 0, `"${line}" failed: ${r.stderr}`);
    };
    const layerNodeOrNew = async (): Promise<Node> => {
      const roots = await api.shadows.getChildren();
      const s = roots.find((r) => r.kind === 'shadow' && r.info.name === shadow.name);
      const existing = s ? (await api.shadows.getChildren(s)).find((l) => l.kind === 'layer' && l.agent === AGENT) : undefined;
      return existing ?? { kind: 'layer', shadow: shadow.name, agent: AGENT, active: false, changes: undefined };
    };

    before(async function () {
      const ext = vscode.extensions.getExtension<ShadowfsApi>('shadowfs.shadowfs-vscode');
      assert.ok(ext, 'the extension is loaded');
      api = await ext.activate();
      folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? '';
      assert.ok(folder, 'a workspace folder is open');
      initial = fingerprint(folder);
    });

    it('starts the daemon itself when none is running, and connects to it', async () => {
      const state = await eventually('a connection to the daemon', () =>
        api.daemon.state.kind === 'connected' ? api.daemon.state : undefined,
      );
      assert.strictEqual(state.started, true, 'no daemon ran before this test: the extension had to start it');
      assert.ok(state.pid > 0);
      // Started with the configured executable and idle timeout (the settings the harness wrote).
      const argv = fs.readFileSync(`/proc/${state.pid}/cmdline`, 'utf8').split('\0');
      assert.ok(
        argv.some((a) => a.endsWith('bin/shadowfs.js')),
        argv.join(' '),
      );
      assert.deepStrictEqual(argv.slice(argv.indexOf('serve')), ['serve', '--foreground', '--no-console', '--idle-timeout', '600', '']);
      assert.strictEqual(api.installation()?.packageRoot, process.env.SHADOWFS_REPO);
    });

    it('mounts the workspace folder, and the view lists the shadow', async () => {
      const info = await vscode.commands.executeCommand<ShadowInfo>('shadowfs.mount');
      assert.ok(info, 'mount answered');
      shadow = info;
      assert.strictEqual(info.folder, folder);
      assert.strictEqual(info.lower, folder, 'lower, the former name, is kept for one protocol version');
      const roots = await api.shadows.getChildren();
      assert.deepStrictEqual(
        roots.map((r) => (r.kind === 'shadow' ? r.info.name : r.kind)),
        [info.name],
      );
      assert.ok(fs.readFileSync(path.join(info.mountPoint, 'src', 'app.ts'), 'utf8').includes('greet'), 'the mount shows the folder');
      // Asking again gives the same shadow, not a second one.
      const again = await vscode.commands.executeCommand<ShadowInfo>('shadowfs.mount');
      assert.strictEqual(again?.name, info.name);
      assert.strictEqual((await api.shadows.getChildren()).length, 1);
    });

    it("shows an agent's change (made through the mount by a command run as the agent) live, from the change feed", async () => {
      await runAsAgent(
        `sed -i 's/Hello/Howdy/' src/app.ts && printf 'notes by the agent\\n' > notes.md && rm old.txt && mkdir -p docs && echo guide > docs/guide.md`,
      );
      const files = await fileNodes('the three changes in the view', (f) => f.length === 4);
      assert.deepStrictEqual(kinds(files), ['added docs/guide.md', 'added notes.md', 'deleted old.txt', 'modified src/app.ts']);
      const layer = await layerNode();
      assert.match(api.shadows.getTreeItem(layer).description as string, /2 added, 1 modified, 1 deleted/);
      // A later write through the mount reaches the view without anyone refreshing it.
      await vscode.commands.executeCommand('shadowfs.activate', layer);
      await eventually('the layer marked active', async () => (await layerNode()).active);
      fs.writeFileSync(path.join(shadow.mountPoint, 'later.txt'), 'written through the mount\n');
      await runAsAgent('echo more >> later.txt');
      await fileNodes('later.txt in the view', (f) => f.some((n) => n.change.path === 'later.txt'));
      assert.deepStrictEqual(differing(initial, fingerprint(folder)), [], "nothing reached the user's folder");
    });

    it("opens the diff editor between the user's file and the agent's version, which is never a file", async () => {
      const files = await fileNodes('src/app.ts in the view', (f) => f.some((n) => n.change.path === 'src/app.ts'));
      const app = files.find((f) => f.change.path === 'src/app.ts');
      assert.ok(app);
      await vscode.commands.executeCommand('shadowfs.openDiff', app);
      const tab = await eventually('the diff tab', () => {
        const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
        return input instanceof vscode.TabInputTextDiff ? input : undefined;
      });
      assert.strictEqual(tab.original.scheme, 'file');
      assert.strictEqual(tab.original.fsPath, path.join(folder, 'src', 'app.ts'));
      assert.strictEqual(tab.modified.scheme, 'shadowfs');
      const left = await vscode.workspace.openTextDocument(tab.original);
      const right = await vscode.workspace.openTextDocument(tab.modified);
      assert.strictEqual(left.getText(), fs.readFileSync(path.join(folder, 'src', 'app.ts'), 'utf8'));
      assert.ok(left.getText().includes('Hello') && !left.getText().includes('Howdy'));
      assert.strictEqual(right.getText(), left.getText().replace('Hello', 'Howdy'), "the agent's version, read through the daemon");
      assert.strictEqual(right.languageId, 'typescript', 'the language follows the path');
      // Deleted and added files diff against an empty side.
      const old = files.find((f) => f.change.path === 'old.txt');
      await vscode.commands.executeCommand('shadowfs.openDiff', old);
      const del = await eventually('the deleted file diff', () => {
        const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
        return input instanceof vscode.TabInputTextDiff && input.original.fsPath.endsWith('old.txt') ? input : undefined;
      });
      assert.strictEqual((await vscode.workspace.openTextDocument(del.modified)).getText(), '');
      const opened = vscode.workspace.textDocuments.filter((d) => d.uri.scheme === 'file' && d.uri.fsPath.startsWith(shadow.mountPoint));
      assert.deepStrictEqual(
        opened.map((d) => d.uri.fsPath),
        [],
        "the agent's versions are never opened as files",
      );
      await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    });

    it("shows a sparse file of 5 GiB in the agent's layer by its size, read by ranges (#27: hostile content is just content)", async () => {
      await runAsAgent('truncate -s 5G big.bin && printf data >> big.bin');
      const files = await fileNodes('big.bin in the view', (f) => f.some((n) => n.change.path === 'big.bin'));
      await vscode.commands.executeCommand(
        'shadowfs.openDiff',
        files.find((f) => f.change.path === 'big.bin'),
      );
      const tab = await eventually('the big file diff', () => {
        const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
        return input instanceof vscode.TabInputTextDiff && input.modified.path.endsWith('big.bin') ? input : undefined;
      });
      assert.strictEqual((await vscode.workspace.openTextDocument(tab.modified)).getText(), `(binary file, ${5 * 1024 ** 3 + 4} bytes)`);
      await vscode.commands.executeCommand('workbench.action.closeAllEditors');
      await runAsAgent('rm big.bin');
      await fileNodes('big.bin gone from the view', (f) => !f.some((n) => n.change.path === 'big.bin'));
    });

    it("shows the language servers' findings on the agent's change in its own view, not in Problems", async () => {
      await runAsAgent(`printf 'export const count: number = "three";\\n' >> src/util.ts`);
      await fileNodes('src/util.ts in the view', (f) => f.some((n) => n.change.path === 'src/util.ts'));
      const r = await vscode.commands.executeCommand<{
        files: Array<{ path: string; status: string; introduced: Array<{ message: string }> }>;
      }>('shadowfs.lints', await layerNode());
      assert.ok(r, 'lints answered');
      const util = r.files.find((f) => f.path === 'src/util.ts');
      assert.ok(util, `src/util.ts was checked: ${JSON.stringify(r.files.map((f) => [f.path, f.status]))}`);
      assert.strictEqual(util.status, 'fresh');
      assert.ok(
        util.introduced.some((d) => /not assignable to type 'number'/.test(d.message)),
        `the agent's type error is reported: ${JSON.stringify(util.introduced)}`,
      );
      // The Agent Lints view shows it.
      const [runNode] = api.lints.getChildren();
      assert.ok(runNode, 'the view has the result');
      const fileNode = api.lints.getChildren(runNode).find((n) => n.kind === 'file' && n.file.path === 'src/util.ts');
      assert.ok(fileNode);
      const diags = api.lints.getChildren(fileNode).filter((n) => n.kind === 'diag' && !n.existing);
      assert.ok(diags.some((n) => /not assignable/.test(String(api.lints.getTreeItem(n).label))));
      // ...and the user's Problems do not.
      const problems = vscode.languages.getDiagnostics().flatMap(([uri, ds]) => ds.map((d) => `${uri.toString()}: ${d.message}`));
      assert.deepStrictEqual(
        problems.filter((p) => p.startsWith('shadowfs:') || /"three"/.test(p)),
        [],
      );
    });

    it('runs a command as the agent with its output in the output channel, and cancels it', async () => {
      const source = new vscode.CancellationTokenSource();
      const started = path.join(shadow.mountPoint, 'started.txt');
      const pending = vscode.commands.executeCommand<{ cancelled: boolean; exitCode: number | null; stdout: string }>(
        'shadowfs.run',
        await layerNode(),
        { ...conf, commandLine: 'echo started > started.txt; echo running; sleep 120', cancellation: source.token },
      );
      // The run has the shadow (its layer active) once its first write shows through the mount.
      await eventually('the run to start', () => fs.existsSync(started));
      source.cancel();
      const r = await pending;
      assert.ok(r);
      assert.strictEqual(r.cancelled, true, 'the run was cancelled, not left to finish');
      assert.match(r.stdout, /running/);
      await runAsAgent('rm started.txt');
    });

    it('checkpoints and restores a layer', async () => {
      const layer = await layerNode();
      const cp = await vscode.commands.executeCommand<{ name: string; files: number }>('shadowfs.checkpoint', layer, {
        ...conf,
        name: 'before-reset',
      });
      assert.strictEqual(cp?.name, 'before-reset');
      await vscode.commands.executeCommand('shadowfs.reset', layer, conf);
      await fileNodes('an empty layer after reset', (f) => f.length === 0);
      await vscode.commands.executeCommand('shadowfs.restore', await layerNode(), { ...conf, name: 'before-reset' });
      const files = await fileNodes('the restored changes', (f) => f.length === 6);
      assert.deepStrictEqual(kinds(files), [
        'added docs/guide.md',
        'added later.txt',
        'added notes.md',
        'deleted old.txt',
        'modified src/app.ts',
        'modified src/util.ts',
      ]);
      assert.deepStrictEqual(differing(initial, fingerprint(folder)), []);
    });

    it('applies a file to the folder only when asked, and reports a conflict when the user changed the same file', async () => {
      let files = await fileNodes('notes.md in the view', (f) => f.some((n) => n.change.path === 'notes.md'));
      const notes = files.find((f) => f.change.path === 'notes.md');
      assert.deepStrictEqual(differing(initial, fingerprint(folder)), [], 'nothing written before apply');
      const applied = await vscode.commands.executeCommand<{ applied: Array<{ path: string }>; conflicts: unknown[] }>(
        'shadowfs.applyFile',
        notes,
        conf,
      );
      assert.deepStrictEqual(
        applied?.applied.map((a) => a.path),
        ['notes.md'],
      );
      assert.strictEqual(fs.readFileSync(path.join(folder, 'notes.md'), 'utf8'), 'notes by the agent\n');
      assert.deepStrictEqual(differing(initial, fingerprint(folder)), ['notes.md'], 'apply wrote that one file');
      await fileNodes('notes.md gone from the layer', (f) => !f.some((n) => n.change.path === 'notes.md'));

      // The user edits src/app.ts (another line) while the agent's version waits.
      const appPath = path.join(folder, 'src', 'app.ts');
      const mine = fs.readFileSync(appPath, 'utf8').replace('return', 'return /* mine */');
      fs.writeFileSync(appPath, mine);
      const afterEdit = fingerprint(folder);
      files = await fileNodes('src/app.ts in the view', (f) => f.some((n) => n.change.path === 'src/app.ts'));
      const app = files.find((f) => f.change.path === 'src/app.ts');
      const r = await vscode.commands.executeCommand<{
        applied: unknown[];
        conflicts: Array<{ path: string; merged: string | null; mergeConflicts: number }>;
      }>('shadowfs.applyFile', app, conf);
      assert.ok(r);
      assert.deepStrictEqual(r.applied, []);
      assert.deepStrictEqual(
        r.conflicts.map((c) => c.path),
        ['src/app.ts'],
      );
      assert.strictEqual(fs.readFileSync(appPath, 'utf8'), mine, "the user's edit is kept: nothing written for a conflict");
      assert.deepStrictEqual(differing(afterEdit, fingerprint(folder)), []);
      assert.strictEqual(r.conflicts[0].mergeConflicts, 0, 'different lines merge cleanly');

      // Resolved as "take the merge": both changes land.
      const merged = await vscode.commands.executeCommand<{ applied: Array<{ path: string }> }>('shadowfs.applyFile', app, {
        ...conf,
        resolutions: { 'src/app.ts': 'merged' },
      });
      assert.deepStrictEqual(
        merged?.applied.map((a) => a.path),
        ['src/app.ts'],
      );
      const text = fs.readFileSync(appPath, 'utf8');
      assert.ok(text.includes('Howdy') && text.includes('/* mine */'), text);
      assert.deepStrictEqual(differing(initial, fingerprint(folder)), ['notes.md', 'src/app.ts']);
    });

    it("brings the agent's commits (made with git in the shadow) into the folder's repository as a new branch; HEAD, index, files and other refs stay; an existing branch only when replaced", async () => {
      const git = (...args: string[]): string =>
        execFileSync('git', ['--no-optional-locks', ...args], { cwd: folder, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
      /** What of the user's repository must not change: HEAD, the index's entries, the refs, the files. */
      const userState = (): Record<string, unknown> => ({
        head: git('symbolic-ref', 'HEAD'),
        headCommit: git('rev-parse', 'HEAD'),
        index: git('ls-files', '--stage'),
        status: git('status', '--porcelain'),
        refs: git('for-each-ref', '--format=%(refname) %(objectname)')
          .split('\n')
          .filter((l) => !l.startsWith('refs/heads/claude-work ')),
        files: [...fingerprint(folder)],
      });
      const agentGit = async (line: string): Promise<string> => {
        const r = await vscode.commands.executeCommand<{ exitCode: number | null; stdout: string; stderr: string }>(
          'shadowfs.run',
          await layerNode(),
          { ...conf, commandLine: `git -c user.name=Agent -c user.email=agent@example.com ${line}` },
        );
        assert.strictEqual(r?.exitCode, 0, `git ${line} in the shadow failed: ${r?.stderr}`);
        return r.stdout.trim();
      };
      const before = userState();
      const userHead = before.headCommit as string;
      const userBranch = git('symbolic-ref', '--short', 'HEAD');
      await agentGit('add -A');
      await agentGit('commit -q -m "agent: the guide and the count"');
      const agentHead = await agentGit('rev-parse HEAD');
      assert.notStrictEqual(agentHead, userHead);
      assert.deepStrictEqual(userState(), before, "the agent's commit stays in its layer");

      const made = await vscode.commands.executeCommand<BranchApplyResult>('shadowfs.applyBranch', await layerNode(), {
        ...conf,
        branch: 'claude-work',
      });
      assert.ok(made, 'the command answered');
      assert.deepStrictEqual(made.branch, { name: 'claude-work', commit: agentHead, previous: null });
      assert.deepStrictEqual(made.applied, [], 'no file is written');
      assert.deepStrictEqual(
        made.commits?.map((c) => [c.commit, c.subject]),
        [[agentHead, 'agent: the guide and the count']],
        "the commits the branch brought: those not on the user's HEAD",
      );
      assert.strictEqual(git('rev-parse', 'refs/heads/claude-work'), agentHead);
      assert.strictEqual(git('rev-parse', 'claude-work^'), userHead, "the agent's commit sits on the user's");
      assert.strictEqual(git('show', `${agentHead}:docs/guide.md`), 'guide', "the agent's files are in the commit's tree");
      assert.deepStrictEqual(userState(), before, "the user's HEAD, index, refs and files are as they were");

      // The same name again: refused, the branch unmoved.
      await agentGit('commit -q --amend -m "agent: the guide and the count, amended"');
      const amended = await agentGit('rev-parse HEAD');
      await assert.rejects(
        Promise.resolve(vscode.commands.executeCommand('shadowfs.applyBranch', await layerNode(), { ...conf, branch: 'claude-work' })),
        (err: Error) => /claude-work exists already/.test(err.message),
      );
      assert.strictEqual(git('rev-parse', 'refs/heads/claude-work'), agentHead);
      // Replaced when asked.
      const replaced = await vscode.commands.executeCommand<BranchApplyResult>('shadowfs.applyBranch', await layerNode(), {
        ...conf,
        branch: 'claude-work',
        force: true,
      });
      assert.deepStrictEqual(replaced?.branch, { name: 'claude-work', commit: amended, previous: agentHead });
      assert.strictEqual(git('rev-parse', 'refs/heads/claude-work'), amended);
      // The branch the user has checked out is never moved, replace or not; a name git refuses never reaches it.
      await assert.rejects(
        Promise.resolve(
          vscode.commands.executeCommand('shadowfs.applyBranch', await layerNode(), { ...conf, branch: userBranch, force: true }),
        ),
        (err: Error) => /checked out/.test(err.message),
      );
      await assert.rejects(
        Promise.resolve(vscode.commands.executeCommand('shadowfs.applyBranch', await layerNode(), { ...conf, branch: 'a..b' })),
        (err: Error) => /not a valid branch name: "\.\." is not allowed/.test(err.message),
      );
      assert.deepStrictEqual(userState(), before, "the user's HEAD, index, refs and files are as they were");
      // The agent's files are still its layer's to apply or not.
      await fileNodes('the layer unchanged by the branch', (f) => f.some((n) => n.change.path === 'docs/guide.md'));
    });

    it("keeps what the agent's git commands changed under .git, and what git ignores, out of its work: apart in collapsed groups, a read-only look; apply and patch leave them out and say so", async () => {
      // The branch test above ran git add and commit in the shadow; git status and a build into
      // the folders .gitignore names (build/, *.log) come on top.
      await runAsAgent('git status --porcelain > /dev/null && mkdir -p build && echo out > build/out.js && echo log > debug.log');
      const groupsOf = async (): Promise<ExcludedGroupNode[]> =>
        (await api.shadows.getChildren(await layerNode())).filter((n): n is ExcludedGroupNode => n.kind === 'excluded');
      const groups = await eventually('both groups of left-out changes', async () => {
        const g = await groupsOf();
        return g.length === 2 && g[1].changes.some((c) => c.path === 'debug.log') ? g : undefined;
      });
      const work = await fileNodes('the work without .git', () => true);
      assert.deepStrictEqual(
        work.filter((f) => f.change.path.split('/').includes('.git') || f.change.excluded || /^(build\/|debug\.log)/.test(f.change.path)),
        [],
        `the agent's work holds neither .git nor ignored files: ${kinds(work).join(', ')}`,
      );
      assert.ok(
        work.some((f) => f.change.path === 'docs/guide.md'),
        'the work is still listed',
      );
      assert.deepStrictEqual(
        groups.map((g) => g.reason),
        ['repository-metadata', 'ignored'],
      );
      const [meta, ignored] = groups;
      const metaItem = api.shadows.getTreeItem(meta);
      assert.strictEqual(metaItem.label, 'Repository metadata (.git)');
      assert.strictEqual(metaItem.collapsibleState, vscode.TreeItemCollapsibleState.Collapsed);
      assert.strictEqual(metaItem.description, `${meta.changes.length} · not applied`);
      assert.match(String(metaItem.tooltip), /Diff, patch and apply never carry it/);
      assert.strictEqual(api.shadows.getTreeItem(ignored).label, 'Ignored by git');
      assert.strictEqual(api.shadows.getTreeItem(ignored).description, '2 · not applied unless included');
      const metaFiles = (await api.shadows.getChildren(meta)) as FileNode[];
      const metaPaths = metaFiles.map((f) => f.change.path);
      for (const p of ['.git/index', '.git/COMMIT_EDITMSG'])
        assert.ok(metaPaths.includes(p), `${p} is in the .git group: ${metaPaths.join(', ')}`);
      assert.ok(
        metaPaths.some((p) => p.startsWith('.git/objects/')) && metaPaths.every((p) => p.startsWith('.git/')),
        metaPaths.join(', '),
      );
      assert.deepStrictEqual(
        ((await api.shadows.getChildren(ignored)) as FileNode[]).map((f) => f.change.path),
        ['build/out.js', 'debug.log'],
      );
      const index = metaFiles.find((f) => f.change.path === '.git/index');
      assert.ok(index);
      const indexItem = api.shadows.getTreeItem(index);
      assert.match(String(indexItem.description), /^\.git · git's own data: never applied$/);
      assert.match(String(indexItem.tooltip), /never carry it/);
      assert.match(String(indexItem.contextValue), /^excludedFile\.modified\.repository-metadata$/);
      assert.strictEqual(api.shadows.getParent(index)?.kind, 'excluded', 'an entry sits in its group');
      assert.match(String(api.shadows.getTreeItem(await layerNode()).description), /· \d+ not applied/);

      // A look only: both sides of the diff are read-only documents, the user's .git/index
      // shown as what it is.
      const diff = await vscode.commands.executeCommand<{ left: string; right: string }>('shadowfs.openDiff', index);
      assert.ok(diff);
      const tab = await eventually('the .git/index diff tab', () => {
        const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
        return input instanceof vscode.TabInputTextDiff && input.modified.path.endsWith('/.git/index') ? input : undefined;
      });
      assert.strictEqual(tab.original.scheme, 'shadowfs', "the user's side is read-only too");
      assert.strictEqual(tab.modified.scheme, 'shadowfs');
      assert.match((await vscode.workspace.openTextDocument(tab.original)).getText(), /^\(binary file, \d+ bytes\)$/);
      assert.match((await vscode.workspace.openTextDocument(tab.modified)).getText(), /^\(binary file, \d+ bytes\)$/);
      assert.match(vscode.window.tabGroups.activeTabGroup.activeTab?.label ?? '', /index \(yours ↔ claude, not applied\)/);
      const head = metaFiles.find((f) => f.change.path === '.git/COMMIT_EDITMSG');
      await vscode.commands.executeCommand('shadowfs.openDiff', head);
      const headTab = await eventually('the COMMIT_EDITMSG diff tab', () => {
        const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
        return input instanceof vscode.TabInputTextDiff && input.modified.path.endsWith('/COMMIT_EDITMSG') ? input : undefined;
      });
      assert.match((await vscode.workspace.openTextDocument(headTab.modified)).getText(), /agent: the guide and the count/);
      await vscode.commands.executeCommand('workbench.action.closeAllEditors');

      // The patch leaves both out and says so in its result.
      const patch = await vscode.commands.executeCommand<{ text: string; excluded: Array<{ path: string; reason: string }> }>(
        'shadowfs.showPatch',
        await layerNode(),
        conf,
      );
      assert.ok(patch);
      assert.doesNotMatch(patch.text, /\.git\/|debug\.log|build\/out\.js/);
      assert.ok(patch.excluded.some((e) => e.path === '.git/index' && e.reason === 'repository-metadata'));
      assert.ok(patch.excluded.some((e) => e.path === 'debug.log' && e.reason === 'ignored'));
      await vscode.commands.executeCommand('workbench.action.closeAllEditors');

      const git = (...args: string[]): string =>
        execFileSync('git', ['--no-optional-locks', ...args], { cwd: folder, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
      const repo = (): string[] => [git('rev-parse', 'HEAD'), git('ls-files', '--stage'), git('for-each-ref')];
      const before = repo();
      const files = fingerprint(folder);
      // An entry of .git is never applied, not even when asked for by itself.
      await assert.rejects(Promise.resolve(vscode.commands.executeCommand('shadowfs.applyFile', index, conf)), (err: Error) =>
        /git's own data \(\.git\): apply never writes it/.test(err.message),
      );
      // Asked for as a path (a script can), the daemon leaves all of .git out and says so.
      const whole = await vscode.commands.executeCommand<{ applied: unknown[]; excluded: Array<{ path: string; reason: string }> }>(
        'shadowfs.applyFile',
        { ...index, change: { path: '.git', kind: 'modified', type: 'directory' } } satisfies FileNode,
        conf,
      );
      assert.ok(whole);
      assert.deepStrictEqual(whole.applied, []);
      assert.ok(
        whole.excluded.length > 2 && whole.excluded.every((e) => e.reason === 'repository-metadata'),
        JSON.stringify(whole.excluded),
      );
      // An ignored file by path, not included: left out.
      const notIncluded = await vscode.commands.executeCommand<{ applied: unknown[]; excluded: Array<{ path: string; reason: string }> }>(
        'shadowfs.applyFile',
        { ...index, change: { path: 'debug.log', kind: 'added', type: 'file' } } satisfies FileNode,
        conf,
      );
      assert.deepStrictEqual(notIncluded?.applied, []);
      assert.deepStrictEqual(notIncluded?.excluded, [{ path: 'debug.log', reason: 'ignored' }]);
      assert.deepStrictEqual(repo(), before, "the user's HEAD, index and refs are as they were");
      assert.deepStrictEqual(differing(files, fingerprint(folder)), [], 'nothing was written');
      // The ignored file chosen in its group is applied: choosing it is including it.
      const chosen = ((await api.shadows.getChildren(ignored)) as FileNode[]).find((f) => f.change.path === 'debug.log');
      const applied = await vscode.commands.executeCommand<{ applied: Array<{ path: string }>; excluded: unknown[] }>(
        'shadowfs.applyFile',
        chosen,
        conf,
      );
      assert.deepStrictEqual(
        applied?.applied.map((a) => a.path),
        ['debug.log'],
      );
      assert.deepStrictEqual(applied?.excluded, []);
      assert.deepStrictEqual(differing(files, fingerprint(folder)), ['debug.log']);
      assert.deepStrictEqual(repo(), before);
      await eventually('debug.log gone from the ignored group', async () => {
        const g = await groupsOf();
        return g.some((x) => x.reason === 'ignored' && x.changes.some((c) => c.path === 'debug.log')) ? undefined : true;
      });
    });

    const shadowNode = async (): Promise<ShadowNode> =>
      eventually('the shadow in the view', async () =>
        (await api.shadows.getChildren()).find((r): r is ShadowNode => r.kind === 'shadow' && r.info.name === shadow.name),
      );

    type McpAnswer = { result?: { content?: Array<{ text?: string }>; tools?: Array<{ name: string }>; serverInfo?: { name: string } } };

    it("offers VS Code's agent mode one MCP server per shadow and agent, started with the extension's shadowfs; the server answers as that agent", async () => {
      assert.strictEqual(
        api.mcp.registered,
        true,
        `this VS Code (${vscode.version}) has the MCP server definition API and took the provider`,
      );
      const McpStdio = (vscode as unknown as { McpStdioServerDefinition?: new (...a: never[]) => McpStdioServerDefinition })
        .McpStdioServerDefinition;
      assert.ok(McpStdio, 'the API has McpStdioServerDefinition');
      const defs = await api.mcp.provideMcpServerDefinitions();
      const agents = [...(api.shadows.model.shadow(shadow.name)?.agents ?? [])].sort();
      assert.ok(agents.includes(AGENT), agents.join(', '));
      assert.deepStrictEqual(
        defs.map((d) => d.label),
        agents.map((a) => `shadowfs: ${a} in ${shadow.name}`),
        'one server per agent the daemon knows in the one shadow',
      );
      const def = defs.find((d) => d.label === `shadowfs: ${AGENT} in ${shadow.name}`);
      assert.ok(def);
      assert.ok(def instanceof McpStdio, "the editor's own definition class");
      assert.strictEqual(def.command, api.installation()?.executable);
      assert.strictEqual(def.command, path.join(process.env.SHADOWFS_REPO ?? '', 'bin', 'shadowfs.js'), 'the shadowfs the settings name');
      assert.deepStrictEqual(def.args, ['mcp', `--shadow=${shadow.name}`, `--agent=${AGENT}`]);
      assert.deepStrictEqual(def.env, { XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR, SHADOWFS_STATE_DIR: process.env.SHADOWFS_STATE_DIR });
      assert.strictEqual(await api.mcp.resolveMcpServerDefinition(def), def, 'a known server is started as it is');
      assert.strictEqual(
        await api.mcp.resolveMcpServerDefinition(new McpStdio(...(['shadowfs: nobody in nowhere', def.command, def.args] as never[]))),
        undefined,
        'a server whose shadow or agent is gone is not started',
      );

      // Started as the editor starts it: an MCP client over its stdio, reading the agent's layer.
      const server = spawn(def.command, def.args, {
        env: { ...process.env, ...(def.env as Record<string, string>) },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      const answers = new Map<
        number,
        { result?: { content?: Array<{ text?: string }>; tools?: Array<{ name: string }>; serverInfo?: { name: string } } }
      >();
      let buffered = '';
      let stderr = '';
      server.stdout.on('data', (b: Buffer) => {
        buffered += b.toString('utf8');
        for (let i = buffered.indexOf('\n'); i >= 0; i = buffered.indexOf('\n')) {
          const line = buffered.slice(0, i);
          buffered = buffered.slice(i + 1);
          const msg = JSON.parse(line) as McpAnswer & { id?: number };
          if (typeof msg.id === 'number') answers.set(msg.id, msg);
        }
      });
      server.stderr.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
      const send = (msg: object): boolean => server.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...msg })}\n`);
      const answer = (id: number) => eventually(`the MCP server's answer ${id} (stderr: ${stderr})`, () => answers.get(id));
      try {
        send({
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'suite', version: '1' } },
        });
        assert.strictEqual((await answer(1)).result?.serverInfo?.name, 'shadowfs');
        send({ method: 'notifications/initialized' });
        send({ id: 2, method: 'tools/list' });
        const tools = (await answer(2)).result?.tools?.map((t) => t.name) ?? [];
        for (const t of ['read_file', 'write_file', 'run_command']) assert.ok(tools.includes(t), tools.join(', '));
        send({ id: 3, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'src/util.ts' } } });
        const text = (await answer(3)).result?.content?.map((c) => c.text ?? '').join('') ?? '';
        assert.match(text, /count: number = "three"/, `the agent's version of src/util.ts, not the folder's: ${text}`);
      } finally {
        server.stdin.end();
        const gone = new Promise((r) => server.once('exit', r));
        if (server.exitCode === null) await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
        if (server.exitCode === null) server.kill('SIGKILL');
      }
      assert.doesNotMatch(fs.readFileSync(path.join(folder, 'src', 'util.ts'), 'utf8'), /three/);
    });

    it('opens an agent terminal in the shadow: what is typed runs as the agent in its own view, its writes reach its layer only, the view lists the session and its view, and the MCP servers follow', async () => {
      const agent = 'codex';
      const client = await api.daemon.get();
      const mcpChanges = api.mcp.changes;
      const opened = await vscode.commands.executeCommand<{ name: string; shadow: string; agent: string }>(
        'shadowfs.newAgentTerminal',
        await shadowNode(),
        { ...conf, agent },
      );
      assert.deepStrictEqual(opened, { name: `shadowfs: ${agent} in ${shadow.name}`, shadow: shadow.name, agent });
      const terminal = await eventually('the agent terminal', () => vscode.window.terminals.find((t) => t.name === opened.name));
      try {
        assert.deepStrictEqual(
          api.terminals.list().map((t) => [t.terminal, t.shadow, t.agent]),
          [[terminal, shadow.name, agent]],
        );
        // The terminal's program is the CLI joined to a session of its own in the daemon.
        const session = await eventually('the session, joined by the terminal', async () => {
          const { sessions } = await client.request('shell.list', { shadow: shadow.name });
          return sessions.find((x) => x.agent === agent && x.running && x.attached === 1);
        });
        // The view lists it (nobody refreshed it) and the view the session opened for the agent.
        const listed = await eventually('the session in the Shadows view', async () =>
          (await api.shadows.getChildren(await shadowNode())).find(
            (n): n is SessionNode => n.kind === 'session' && n.info.sessionId === session.sessionId && n.info.attached === 1,
          ),
        );
        const item = api.shadows.getTreeItem(listed);
        assert.match(String(item.label), new RegExp(`^${agent}: `));
        assert.strictEqual(item.description, 'running · 1 attached');
        assert.strictEqual(item.contextValue, 'session.running');
        assert.strictEqual(api.shadows.getParent(listed)?.kind, 'shadow');
        const view = await eventually("the agent's view in the Shadows view", async () =>
          (await api.shadows.getChildren(await shadowNode())).find((n): n is ViewNode => n.kind === 'view' && n.view.agent === agent),
        );
        assert.strictEqual(api.shadows.getTreeItem(view).label, `view of ${agent}`);

        terminal.sendText('echo hi > from-terminal.txt && pwd > where.txt');
        const changes = await eventually("from-terminal.txt in the agent's layer", async () => {
          const r = await client.request('layer.changes', { shadow: shadow.name, agent });
          return r.changes.some((c) => c.path === 'from-terminal.txt') && r.changes.some((c) => c.path === 'where.txt')
            ? r.changes
            : undefined;
        });
        assert.deepStrictEqual(
          changes.map((c) => `${c.kind} ${c.path}`).sort(),
          ['added from-terminal.txt', 'added where.txt'],
          'the layer holds exactly what was typed',
        );
        const read = await client.request('file.read', { shadow: shadow.name, agent, path: 'from-terminal.txt' });
        assert.strictEqual(read.content, 'hi\n');
        const where = await client.request('file.read', { shadow: shadow.name, agent, path: 'where.txt' });
        assert.strictEqual(where.content, `${folder}\n`, "the session runs at the folder's own path");
        assert.ok(!fs.existsSync(path.join(folder, 'from-terminal.txt')), 'the folder did not get it');
        assert.ok(!fs.existsSync(path.join(folder, 'where.txt')));
        const claude = await client.request('layer.changes', { shadow: shadow.name, agent: AGENT });
        assert.ok(!claude.changes.some((c) => c.path === 'from-terminal.txt'), 'nor did another agent');
        // The new agent has its layer in the view, and a server for agent mode.
        await eventually("codex's layer in the view", async () =>
          (await api.shadows.getChildren(await shadowNode())).some((n) => n.kind === 'layer' && n.agent === agent),
        );
        await eventually('the editor told of the new server', () => api.mcp.changes > mcpChanges);
        assert.ok((await api.mcp.provideMcpServerDefinitions()).some((d) => d.label === `shadowfs: ${agent} in ${shadow.name}`));

        // The program's exit ends the terminal's program with its status, and the view says so.
        terminal.sendText('exit 5');
        const status = await eventually("the terminal's exit status", () => terminal.exitStatus);
        assert.strictEqual(status.code, 5, 'the exit status passes through the session to the terminal');
        const ended = await eventually('the session shown as ended', async () => {
          await vscode.commands.executeCommand('shadowfs.refresh');
          return (await api.shadows.getChildren(await shadowNode())).find(
            (n): n is SessionNode => n.kind === 'session' && n.info.sessionId === session.sessionId && !n.info.running,
          );
        });
        assert.strictEqual(api.shadows.getTreeItem(ended).description, 'exited 5');
      } finally {
        terminal.dispose();
        const { sessions } = await client.request('shell.list', { shadow: shadow.name });
        for (const x of sessions.filter((y) => y.agent === agent && y.running))
          await client.request('shell.close', { sessionId: x.sessionId });
      }
      assert.deepStrictEqual(
        differing(initial, fingerprint(folder)).filter((p) => !['notes.md', 'src/app.ts', 'debug.log'].includes(p)),
        [],
      );
    });

    it('ends a running session from the view, as closing its terminal would', async () => {
      const agent = 'codex';
      const client = await api.daemon.get();
      const started = await client.request('shell.open', { shadow: shadow.name, agent, argv: ['sleep', '600'], cols: 80, rows: 24 });
      try {
        await vscode.commands.executeCommand('shadowfs.refresh');
        const node = (await api.shadows.getChildren(await shadowNode())).find(
          (n): n is SessionNode => n.kind === 'session' && n.info.sessionId === started.sessionId,
        );
        assert.ok(node, 'the view lists the session');
        assert.strictEqual(api.shadows.getTreeItem(node).label, `${agent}: sleep 600`);
        const closed = await vscode.commands.executeCommand<{ running: boolean; signal?: string | null; exitCode?: number | null }>(
          'shadowfs.closeSession',
          node,
          conf,
        );
        assert.ok(closed);
        assert.strictEqual(closed.running, false, 'the command answers once the session has ended');
        const after = (await api.shadows.getChildren(await shadowNode())).find(
          (n): n is SessionNode => n.kind === 'session' && n.info.sessionId === started.sessionId,
        );
        assert.ok(after && !after.info.running, 'shown as ended');
        assert.strictEqual(
          api.shadows.getTreeItem(after).description,
          closed.signal ? `ended by ${closed.signal}` : `exited ${String(closed.exitCode)}`,
        );
      } finally {
        await client.request('shell.close', { sessionId: started.sessionId }).catch(() => undefined);
      }
    });

    it("reviews an agent's change hunk by hunk in its version's editor: Apply writes that hunk only, Reject records the reason the agent is told and can take it out of its layer", async () => {
      const agent = 'gemini';
      const client = await api.daemon.get();
      const rel = 'review.txt';
      const original = fs.readFileSync(path.join(folder, rel), 'utf8');
      await client.request('file.edit', { shadow: shadow.name, agent, path: rel, oldText: 'line 2\n', newText: 'line 2, by the agent\n' });
      await client.request('file.edit', {
        shadow: shadow.name,
        agent,
        path: rel,
        oldText: 'line 27\n',
        newText: 'line 27, by the agent\n',
      });
      const uri = vscode.Uri.from({ scheme: 'shadowfs', ...toUriParts({ kind: 'agent', shadow: shadow.name, agent, path: rel }) });
      const lensesOf = async (n: number): Promise<vscode.CodeLens[]> =>
        eventually(`${n} lenses over ${agent}'s ${rel}`, async () => {
          const l = (await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', uri)) ?? [];
          return l.length === n ? l : undefined;
        });
      // Opened as the diff's right side, as the view's "Compare with Your File" opens it.
      await vscode.commands.executeCommand('vscode.diff', vscode.Uri.file(path.join(folder, rel)), uri, `${rel} review`);
      let lenses = await lensesOf(4);
      assert.deepStrictEqual(
        lenses.map((l) => [l.range.start.line, l.command?.command]),
        [
          [1, 'shadowfs.applyHunk'],
          [1, 'shadowfs.rejectHunk'],
          [26, 'shadowfs.applyHunk'],
          [26, 'shadowfs.rejectHunk'],
        ],
        'an Apply and a Reject lens on the first changed line of each hunk',
      );
      assert.match(lenses[0].command?.title ?? '', /Apply this change/);

      // Apply the first hunk: the folder gets line 2 only.
      const applied = await vscode.commands.executeCommand<{ applied: Array<{ path: string }>; conflicts: unknown[] }>(
        lenses[0].command!.command,
        ...(lenses[0].command!.arguments ?? []),
        conf,
      );
      assert.deepStrictEqual(
        applied?.applied.map((a) => a.path),
        [rel],
      );
      assert.deepStrictEqual(applied?.conflicts, []);
      const inFolder = fs.readFileSync(path.join(folder, rel), 'utf8');
      assert.strictEqual(inFolder, original.replace('line 2\n', 'line 2, by the agent\n'), 'that hunk, and only it, reached the folder');

      // The lenses follow: the second hunk is left. Reject it with a reason, taking it out of the layer.
      lenses = await lensesOf(2);
      assert.strictEqual(lenses[0].range.start.line, 26);
      const rejected = await vscode.commands.executeCommand<{ rejected: Array<{ reason: string; path: string }>; reverted: string[] }>(
        lenses[1].command!.command,
        ...(lenses[1].command!.arguments ?? []),
        { ...conf, reason: 'keep line 27 as it is: a test matches it', revert: true },
      );
      assert.deepStrictEqual(
        rejected?.rejected.map((r) => [r.path, r.reason]),
        [[rel, 'keep line 27 as it is: a test matches it']],
      );
      assert.deepStrictEqual(rejected?.reverted, [rel]);
      const told = await client.request('layer.rejections', { shadow: shadow.name, agent });
      assert.ok(
        told.rejections.some((r) => r.path === rel && r.reason === 'keep line 27 as it is: a test matches it'),
        'the rejection is kept for the agent, with its reason',
      );
      const layerText = (await client.request('file.read', { shadow: shadow.name, agent, path: rel })).content;
      assert.strictEqual(layerText, inFolder, "the agent's file is the folder's now: the rejected hunk left its layer");
      await lensesOf(0);
      assert.strictEqual(fs.readFileSync(path.join(folder, rel), 'utf8'), inFolder, 'rejecting wrote nothing to the folder');
      await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
    });

    it("shows the conflict radar's overlaps under the shadow as they happen: the user edits a file an agent holds a copy of, and the overlap goes when the file is back", async () => {
      const agent = 'gemini';
      const client = await api.daemon.get();
      // The agent appends to README.md through a run: its layer copies the file (and records what it copied).
      const ran = await vscode.commands.executeCommand<{ exitCode: number | null; stderr: string }>(
        'shadowfs.run',
        { kind: 'layer', shadow: shadow.name, agent, active: false, changes: undefined },
        { ...conf, commandLine: "echo 'from gemini' >> README.md" },
      );
      assert.strictEqual(ran?.exitCode, 0, ran?.stderr);
      const readme = path.join(folder, 'README.md');
      const before = fs.readFileSync(readme, 'utf8');
      // The user's own edit in the folder, under the agent's copy.
      fs.writeFileSync(readme, `${before}\nMore from the user.\n`);
      const overlapNode = async (): Promise<OverlapNode | undefined> =>
        (await api.shadows.getChildren(await shadowNode())).find(
          (n): n is OverlapNode => n.kind === 'overlap' && n.overlap.path === 'README.md' && n.overlap.kind === 'folder',
        );
      // Nobody refreshes: the radar's notification brings it.
      const node = await eventually('the overlap in the Shadows view', overlapNode);
      assert.deepStrictEqual(node.overlap.agents, [agent]);
      const item = api.shadows.getTreeItem(node);
      assert.strictEqual(item.label, 'README.md');
      assert.strictEqual(item.description, `changed in your folder since ${agent} copied it`);
      assert.strictEqual(item.contextValue, 'overlap.folder');
      assert.strictEqual(item.command?.command, 'shadowfs.openOverlap');
      await vscode.commands.executeCommand('shadowfs.openOverlap', node);
      await eventually('the comparison open', () =>
        vscode.window.tabGroups.activeTabGroup.activeTab?.label.includes(`README.md (your file ↔ ${agent}'s copy)`),
      );
      await vscode.commands.executeCommand('workbench.action.closeActiveEditor');
      // The user puts the file back: the overlap goes.
      fs.writeFileSync(readme, before);
      await eventually('the overlap gone from the view', async () => (await overlapNode()) === undefined);
      await client.request('layer.revert', { shadow: shadow.name, agent, path: 'README.md' });
    });

    it('comes back by itself after the daemon crashes: a new daemon, the shadow mounted again, the layer from autosave', async () => {
      const before = api.daemon.state;
      assert.strictEqual(before.kind, 'connected');
      await runAsAgent('echo saved > after-crash.txt');
      // Autosave runs every second in this test (SHADOWFS_AUTOSAVE=1, set by the harness).
      await new Promise((r) => setTimeout(r, 2500));
      process.kill(before.pid, 'SIGKILL');
      const after = await eventually('a connection to a new daemon', () =>
        api.daemon.state.kind === 'connected' && api.daemon.state.pid !== before.pid ? api.daemon.state : undefined,
      );
      assert.strictEqual(after.started, true, 'the extension started the new daemon');
      await vscode.commands.executeCommand('shadowfs.refresh');
      const files = await fileNodes('the layer back after the crash', (f) => f.some((n) => n.change.path === 'after-crash.txt'));
      assert.ok(files.some((n) => n.change.path === 'src/util.ts'));
      const again = api.shadows.model.shadow(shadow.name);
      assert.ok(again?.mounted, 'the shadow is mounted again');
      assert.ok(fs.existsSync(path.join(again.mountPoint, 'after-crash.txt')), 'its mount shows the layer');
      shadow = again;
    });

    it('unmounts the shadow', async () => {
      const roots = await api.shadows.getChildren();
      await vscode.commands.executeCommand('shadowfs.unmount', roots[0], conf);
      await eventually('an empty Shadows view', async () => (await api.shadows.getChildren()).length === 0);
    });

    it('says in the view, with the code, when the shadowfs setting names no installation; works again once fixed', async () => {
      const cfg = vscode.workspace.getConfiguration('shadowfs');
      const good = cfg.get<string>('path');
      await cfg.update('path', '/nonexistent/shadowfs', vscode.ConfigurationTarget.Global);
      try {
        await assert.rejects(Promise.resolve(vscode.commands.executeCommand('shadowfs.refresh', conf)), (err: Error) =>
          /\/nonexistent\/shadowfs, which does not exist/.test(err.message),
        );
        await vscode.commands.executeCommand('shadowfs.refresh').then(undefined, () => undefined);
        await eventually('the message in the view', () =>
          /Cannot reach the shadowfs daemon: .*does not exist/.test(api.shadowsView.message ?? ''),
        );
      } finally {
        await cfg.update('path', good, vscode.ConfigurationTarget.Global);
      }
      await vscode.commands.executeCommand('shadowfs.refresh');
      await eventually('the message gone', () => api.shadowsView.message === undefined);
      assert.strictEqual(api.daemon.state.kind, 'connected');
    });
  });
}

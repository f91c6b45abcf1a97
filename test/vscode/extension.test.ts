// The VS Code extension in a real VS Code: code-server (VS Code for the browser; its extension
// host runs here in Node) driven by Debian's Chromium. First the extension's in-editor suite
// (extension/test/suite) runs inside the extension host against a real daemon, which the
// extension starts itself, and a real mount of the workspace (its MCP servers for agent mode and
// an agent terminal's shell session among what it checks); then the packaged .vsix is
// installed and the view, a diff and the status bar are checked and photographed through the
// browser. The user's folder is watched throughout: only what apply wrote may change.
// Needs the toolchain of scripts/vscode/setup.sh and a built extension (npm run test:vscode
// does both).
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { repoRoot, tempDir } from '../helpers/fixtures';
import { stopTestDaemon } from '../helpers/hooks';
import {
  installVsix,
  openBrowser,
  openWorkbench,
  resolveToolchain,
  runExtensionTests,
  screenshot,
  startCodeServer,
  type CodeServer,
} from './harness';

const extensionDir = path.join(repoRoot, 'extension');
const outputDir = path.join(repoRoot, 'test-output', 'vscode');
const cli = path.join(repoRoot, 'bin', 'shadowfs.js');

/** A small TypeScript project under git (build output and logs ignored): the user's folder. */
function makeWorkspace(label: string): string {
  const dir = tempDir(label);
  const files: Record<string, string> = {
    'README.md': '# greeter\n\nA tiny project the tests shadow.\n',
    'tsconfig.json':
      JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', module: 'commonjs', noEmit: true }, include: ['src'] }, null, 2) +
      '\n',
    'src/app.ts': [
      "import { shout } from './util';",
      '',
      'export function greet(name: string): string {',
      "  const greeting = 'Hello';",
      "  const punctuation = '!';",
      "  const separator = ', ';",
      '  const loud = false;',
      '  const text = greeting + separator + name + punctuation;',
      '  return loud ? shout(text) : text;',
      '}',
      '',
    ].join('\n'),
    'src/util.ts': 'export function shout(s: string): string {\n  return s.toUpperCase();\n}\n',
    'old.txt': 'an old file the agent deletes\n',
    // The per-hunk review test's file: two changes far apart make two hunks.
    'review.txt': Array.from({ length: 30 }, (_, i) => `line ${i + 1}\n`).join(''),
    '.gitignore': 'build/\n*.log\n',
  };
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  const git = (...args: string[]): void => {
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: dir, stdio: 'ignore' });
  };
  git('init', '-q');
  git('add', '-A');
  git('commit', '-q', '-m', 'initial');
  return dir;
}

/** Every path under `dir` that changes while it runs (inotify, recursive), .git aside. */
class FolderWatch {
  private readonly seen = new Set<string>();
  private readonly watcher: fs.FSWatcher;
  constructor(dir: string) {
    this.watcher = fs.watch(dir, { recursive: true, persistent: false }, (_ev, name) => {
      const rel = String(name);
      if (rel !== '.git' && !rel.startsWith('.git/')) this.seen.add(rel);
    });
  }
  async stop(): Promise<string[]> {
    await new Promise((r) => setTimeout(r, 200));
    this.watcher.close();
    return [...this.seen].sort();
  }
}

/** Adds the in-editor suite's counts to the run's total (see test/helpers/reporter.ts). */
function addToStats(passes: number, failures: number, pending: number): void {
  const file = process.env.SHADOWFS_TEST_STATS;
  if (!file) return;
  let before = { passes: 0, failures: 0, pending: 0 };
  try {
    const text = fs.readFileSync(file, 'utf8');
    if (text.trim()) before = JSON.parse(text) as typeof before;
  } catch {
    // no earlier pass
  }
  fs.writeFileSync(
    file,
    JSON.stringify({ passes: before.passes + passes, failures: before.failures + failures, pending: before.pending + pending }),
  );
}

interface MochaJson {
  stats: { passes: number; failures: number; pending: number; tests: number };
  tests: Array<{ fullTitle: string; err: { message?: string; stack?: string } }>;
}

describe('the VS Code extension, in a real VS Code (code-server + Chromium)', function () {
  this.timeout(600_000);

  before(function () {
    // Missing prerequisites fail here, with what to run.
    resolveToolchain();
    for (const f of ['dist/extension.js', 'dist/test/suite.js']) {
      assert.ok(
        fs.existsSync(path.join(extensionDir, f)),
        `extension/${f} is missing: build the extension (npm run test:vscode builds it)`,
      );
    }
    fs.mkdirSync(outputDir, { recursive: true });
  });

  afterEach(() => stopTestDaemon());

  it('passes its in-editor tests inside the extension host, against a daemon it starts and a real mount', async function () {
    const workspace = makeWorkspace('vscode-ws');
    const watch = new FolderWatch(workspace);
    const results = path.join(tempDir('vscode-results'), 'results.json');
    const logs: string[] = [];
    let exit: number;
    try {
      exit = await runExtensionTests({
        workspace,
        extensionDevelopmentPath: extensionDir,
        extensionTestsPath: path.join(extensionDir, 'dist', 'test', 'suite.js'),
        serverOptions: {
          env: {
            SHADOWFS_VSCODE_RESULTS: results,
            SHADOWFS_REPO: repoRoot,
            // The daemon the extension starts lives in this run's private runtime and state
            // directories (test/helpers/hooks.ts), where the hooks stop it.
            XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR,
            SHADOWFS_STATE_DIR: process.env.SHADOWFS_STATE_DIR,
            // The crash test needs the layer saved soon.
            SHADOWFS_AUTOSAVE: '1',
          },
          settings: { 'shadowfs.path': cli, 'shadowfs.idleTimeout': 600 },
        },
        timeoutMs: 420_000,
        screenshotDir: outputDir,
        logsDir: path.join(outputDir, 'suite-logs'),
        onLog: (l) => logs.push(l),
      });
    } finally {
      const touched = await watch.stop();
      // apply writes each file beside itself under a temporary name, then renames it over.
      const unexpected = touched.filter(
        (p) =>
          !/^(notes\.md|src\/app\.ts|debug\.log|review\.txt|README\.md|(src\/)?\.(notes\.md|app\.ts|debug\.log|review\.txt)\.shadowfs-[0-9a-f]+|src)$/.test(
            p,
          ),
      );
      assert.deepStrictEqual(
        unexpected,
        [],
        `only apply (notes.md, src/app.ts, the ignored debug.log chosen by itself, one hunk of review.txt) and the user's own edits (src/app.ts, README.md) may touch the folder; seen: ${touched.join(', ')}`,
      );
    }
    assert.ok(
      fs.existsSync(results),
      `the in-editor suite wrote no results (exit code ${exit}); last log lines:\n${logs.slice(-40).join('\n')}`,
    );
    const json = JSON.parse(fs.readFileSync(results, 'utf8')) as MochaJson;
    for (const t of json.tests) process.stdout.write(`      ${t.err?.message ? '✗' : '✓'} [in VS Code] ${t.fullTitle}\n`);
    addToStats(json.stats.passes, json.stats.failures, json.stats.pending);
    const failed = json.tests.filter((t) => t.err?.message);
    assert.deepStrictEqual(
      failed.map((t) => `${t.fullTitle}: ${t.err.stack ?? t.err.message}`),
      [],
      'in-editor tests failed',
    );
    assert.strictEqual(json.stats.pending, 0, 'nothing may be skipped');
    assert.ok(json.stats.passes >= 17, `all in-editor tests ran (${json.stats.passes} passed)`);
    assert.strictEqual(exit, 0, 'the workbench reported success');
  });

  it("installs from its .vsix; the Shadows view, a diff, the status bar, a run started from the palette and cancelled from its notification, an apply with a conflict, the agent's commits applied as a branch over an existing one, and the .git changes its git commands made shown apart from its work work in the page (screenshots in test-output/vscode)", async function () {
    const vsix = fs.readdirSync(path.join(extensionDir, 'dist')).find((f) => f.endsWith('.vsix'));
    assert.ok(vsix, 'the .vsix is built (npm run test:vscode packages it)');
    const workspace = makeWorkspace('vscode-ui');
    const run = (...args: string[]): string => execFileSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
    // An agent's work, done the way agents do it: through the CLI, in the shadow.
    const events = run('mount', workspace, '--name', 'greeter', '--json').trim().split('\n');
    const info = JSON.parse(events[events.length - 1]) as { mountPoint: string };
    let server: CodeServer | undefined;
    const browser = await openBrowser();
    try {
      run(
        'run',
        'greeter',
        '--agent',
        'claude',
        '--',
        'sh',
        '-c',
        "sed -i 's/Hello/Howdy/' src/app.ts && printf 'notes\\n' > notes.md && rm old.txt",
      );
      run('activate', 'greeter', 'claude');
      assert.ok(fs.readFileSync(path.join(info.mountPoint, 'src', 'app.ts'), 'utf8').includes('Howdy'));

      const dir = tempDir('vscode-ui-server');
      const extensionsDir = path.join(dir, 'extensions');
      await installVsix(
        { extensionsDir, userDataDir: path.join(dir, 'user-data'), home: path.join(dir, 'home') },
        path.join(extensionDir, 'dist', vsix),
      );
      assert.ok(
        fs.readdirSync(extensionsDir).some((d) => d.startsWith('shadowfs.shadowfs-vscode-')),
        'the .vsix installed into the extensions folder',
      );
      server = await startCodeServer({
        dir,
        extensionsDir,
        keep: true,
        smokeTestDriver: false,
        env: { XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR, SHADOWFS_STATE_DIR: process.env.SHADOWFS_STATE_DIR },
        settings: {
          'shadowfs.path': cli,
          'workbench.startupEditor': 'none',
          'workbench.tips.enabled': false,
          // The screenshots show the extension, not the editor's chat panel.
          'chat.disableAIFeatures': true,
          'workbench.secondarySideBar.defaultVisibility': 'hidden',
        },
      });
      const page = await openWorkbench(browser, server, workspace);
      await page.locator('.activitybar [aria-label^="shadowfs"]').first().click();
      const tree = page.locator('[id="workbench.view.extension.shadowfs"] .monaco-list-row, .pane-body .monaco-list-row');
      await tree.filter({ hasText: 'claude' }).first().waitFor({ timeout: 60_000 });
      // The file's row, not the radar's overlap on it (shown above the layers once the user edits it).
      const row = tree.filter({ hasText: 'app.ts', hasNotText: 'copied it' }).first();
      await row.waitFor({ timeout: 30_000 });
      const rows = await tree.allInnerTexts();
      const text = rows.join('\n');
      assert.match(text, /greeter/);
      assert.match(text, /claude[\s\S]*active/);
      assert.match(text, /app\.ts/);
      assert.match(text, /notes\.md/);
      assert.match(text, /old\.txt/);
      const status = page.locator('.statusbar-item', { hasText: 'greeter: claude' });
      await status.first().waitFor({ timeout: 30_000 });
      await screenshot(page, path.join(outputDir, 'shadows-view.png'));

      await row.click();
      const diff = page.locator('.monaco-diff-editor');
      await diff.first().waitFor({ timeout: 30_000 });
      await page.locator('.monaco-diff-editor .modified-in-monaco-diff-editor', { hasText: 'Howdy' }).first().waitFor({ timeout: 30_000 });
      await page.locator('.monaco-diff-editor .original-in-monaco-diff-editor', { hasText: 'Hello' }).first().waitFor({ timeout: 30_000 });
      const tab = await page.locator('.tabs-container .tab.active').innerText();
      assert.match(tab, /app\.ts \(yours ↔ claude\)/);
      await screenshot(page, path.join(outputDir, 'diff.png'));

      // From the palette: run a command as the agent, watch its output, cancel it from its
      // notification.
      const quick = page.locator('.quick-input-widget');
      const quickInput = quick.locator('input');
      await page.keyboard.press('F1');
      await quickInput.waitFor({ state: 'visible', timeout: 15_000 });
      await quickInput.fill('>shadowfs: Run a Command in the Shadow as an Agent');
      await quick.locator('.monaco-list-row').first().filter({ hasText: 'Run a Command in the Shadow' }).waitFor({ timeout: 15_000 });
      await page.keyboard.press('Enter');
      await quick.locator('.monaco-list-row', { hasText: 'a new layer' }).first().waitFor({ timeout: 15_000 });
      await quickInput.fill('claude');
      await quick.locator('.monaco-list-row').first().filter({ hasText: 'claude' }).waitFor({ timeout: 15_000 });
      await page.keyboard.press('Enter');
      await quick.getByText('A shell command line').first().waitFor({ timeout: 15_000 });
      await quickInput.fill('echo started-by-the-ui; sleep 120');
      await page.keyboard.press('Enter');
      const panel = page.locator('.part.panel');
      await panel.getByText('started-by-the-ui').first().waitFor({ timeout: 30_000 });
      const toast = page.locator('.notification-toast', { hasText: 'started-by-the-ui' });
      await toast.first().waitFor({ timeout: 30_000 });
      await screenshot(page, path.join(outputDir, 'run.png'));
      await toast.locator('.monaco-button', { hasText: 'Cancel' }).first().click();
      await panel
        .getByText(/\[cancelled\s+after\s+\d+\s+ms/) /* Monaco renders spaces as no-break spaces */
        .first()
        .waitFor({ timeout: 30_000 });
      await screenshot(page, path.join(outputDir, 'run-cancelled.png'));

      // The user edits the file the agent changed; applying the agent's version from the view
      // shows the conflict (the user's file beside the merge) and writes only what is chosen.
      const appPath = path.join(workspace, 'src', 'app.ts');
      const mine = fs.readFileSync(appPath, 'utf8').replace('return', 'return /* mine */');
      fs.writeFileSync(appPath, mine);
      // The radar notices at once and the view shows the overlap above the layers (the rows move):
      // the user sees it before reaching for Apply.
      await tree.filter({ hasText: 'changed in your folder since claude copied it' }).first().waitFor({ timeout: 30_000 });
      await screenshot(page, path.join(outputDir, 'radar.png'));
      await row.hover();
      await row.locator('.action-label[aria-label="Apply File to Your Folder"]').click();
      const dialog = page.locator('.monaco-dialog-box');
      await dialog.getByText('Write src/app.ts into').first().waitFor({ timeout: 15_000 });
      await dialog.locator('.monaco-button', { hasText: 'Apply' }).first().click();
      await page.locator('.tabs-container .tab.active', { hasText: "app.ts (yours ↔ merged with claude's)" }).waitFor({ timeout: 30_000 });
      await quick.locator('.monaco-list-row', { hasText: 'Take the merge' }).first().waitFor({ timeout: 15_000 });
      assert.strictEqual(fs.readFileSync(appPath, 'utf8'), mine, 'nothing is written while the user decides');
      await page.locator('.monaco-diff-editor .modified-in-monaco-diff-editor', { hasText: 'mine' }).first().waitFor({ timeout: 15_000 });
      await screenshot(page, path.join(outputDir, 'conflict.png'));
      await quick.locator('.monaco-list-row', { hasText: 'Take the merge' }).first().click();
      await row.waitFor({ state: 'detached', timeout: 30_000 });
      const merged = fs.readFileSync(appPath, 'utf8');
      assert.ok(merged.includes('Howdy') && merged.includes('/* mine */'), merged);

      // The agent commits with git in the shadow; the user has a branch of the name it will ask
      // for. From the palette: a name git refuses is refused with the reason as it is typed; the
      // existing branch is replaced only once the modal dialog says so; nothing else of the
      // user's repository moves.
      const git = (...args: string[]): string =>
        execFileSync('git', ['--no-optional-locks', ...args], { cwd: workspace, encoding: 'utf8' }).trim();
      const agentGit = (line: string): string =>
        run(
          'run',
          'greeter',
          '--agent',
          'claude',
          '--',
          'sh',
          '-c',
          `git -c user.name=Agent -c user.email=agent@example.com ${line}`,
        ).trim();
      agentGit('add -A');
      agentGit('commit -q -m "agent: notes"');
      const agentHead = agentGit('rev-parse HEAD');
      git('branch', 'claude-work');
      const userState = (): string[] => [
        git('symbolic-ref', 'HEAD'),
        git('ls-files', '--stage'),
        git('status', '--porcelain'),
        ...git('for-each-ref', '--format=%(refname) %(objectname)')
          .split('\n')
          .filter((l) => !l.startsWith('refs/heads/claude-work ')),
      ];
      const before = userState();
      const userTip = git('rev-parse', 'HEAD');
      await page.keyboard.press('F1');
      await quickInput.waitFor({ state: 'visible', timeout: 15_000 });
      await quickInput.fill(">shadowfs: Apply Agent's Commits as a Branch");
      await quick.locator('.monaco-list-row').first().filter({ hasText: "Apply Agent's Commits as a Branch" }).waitFor({ timeout: 15_000 });
      await page.keyboard.press('Enter');
      // The shadow has the layer the mount made ("default") besides claude's.
      await quick.getByText('Bring which agent’s commits into your repository?').first().waitFor({ timeout: 15_000 });
      await quick.locator('.monaco-list-row', { hasText: 'claude' }).first().click();
      await quick.getByText("Apply claude's commits as a new branch").first().waitFor({ timeout: 15_000 });
      assert.strictEqual(await quickInput.inputValue(), 'claude-work', 'a name is suggested');
      await quickInput.fill('claude..work');
      await quick.getByText('".." is not allowed').first().waitFor({ timeout: 15_000 });
      await screenshot(page, path.join(outputDir, 'branch-name.png'));
      await page.keyboard.press('Enter');
      await quickInput.fill('claude-work');
      await quick.getByText('".." is not allowed').first().waitFor({ state: 'hidden', timeout: 15_000 });
      await page.keyboard.press('Enter');
      await dialog.getByText('Branch claude-work exists already').first().waitFor({ timeout: 30_000 });
      await dialog
        .getByText(`It points to ${userTip.slice(0, 7)}`)
        .first()
        .waitFor({ timeout: 15_000 });
      assert.strictEqual(git('rev-parse', 'claude-work'), userTip, 'nothing is replaced while the user decides');
      await screenshot(page, path.join(outputDir, 'branch-exists.png'));
      await dialog.locator('.monaco-button', { hasText: 'Replace Branch' }).first().click();
      await page
        .locator('.notification-toast', { hasText: "Branch claude-work now has claude's commits" })
        .first()
        .waitFor({ timeout: 30_000 });
      await screenshot(page, path.join(outputDir, 'branch-made.png'));
      assert.strictEqual(git('rev-parse', 'claude-work'), agentHead);
      assert.strictEqual(git('log', '-1', '--format=%s', 'claude-work'), 'agent: notes');
      assert.deepStrictEqual(userState(), before, "the user's HEAD, index, files' status and other refs are as they were");

      // What git wrote in the shadow (index, logs, objects, refs) is not listed as the agent's
      // work: it sits in its own collapsed group, each entry saying why it is not applied.
      const metaGroup = tree.filter({ hasText: /Repository metadata \(\.git\)\s*\d+ · not applied/ }).first();
      await metaGroup.waitFor({ timeout: 30_000 });
      const gitFile = /^(index|COMMIT_EDITMSG|HEAD|ORIG_HEAD|[0-9a-f]{38})\b/;
      assert.deepStrictEqual(
        (await tree.allInnerTexts()).filter((t) => gitFile.test(t)),
        [],
        "no entry of .git among the agent's files while its group is collapsed",
      );
      assert.strictEqual(await metaGroup.getAttribute('aria-expanded'), 'false', 'the group starts collapsed');
      await screenshot(page, path.join(outputDir, 'excluded-collapsed.png'));
      await metaGroup.click();
      const indexRow = tree.filter({ hasText: /^index/ }).first();
      await indexRow.waitFor({ timeout: 30_000 });
      assert.match(await indexRow.innerText(), /git's own data: never applied/);
      const expanded = await tree.allInnerTexts();
      const groupAt = expanded.findIndex((t) => t.startsWith('Repository metadata (.git)'));
      assert.ok(groupAt > 0, expanded.join(' | '));
      const gitRows = expanded.map((t, i) => [t, i] as const).filter(([t]) => gitFile.test(t));
      assert.ok(gitRows.length >= 3, `the group lists git's files: ${expanded.join(' | ')}`);
      assert.ok(
        gitRows.every(([t, i]) => i > groupAt && /never applied/.test(t)),
        `every .git entry is under the group, saying why: ${expanded.join(' | ')}`,
      );
      await screenshot(page, path.join(outputDir, 'excluded-expanded.png'));
      await indexRow.click();
      await page.locator('.tabs-container .tab.active', { hasText: 'index (yours ↔ claude, not applied)' }).waitFor({ timeout: 30_000 });
      await page.locator('.monaco-diff-editor', { hasText: 'binary file' }).first().waitFor({ timeout: 30_000 });
      await screenshot(page, path.join(outputDir, 'excluded-diff.png'));
      assert.deepStrictEqual(userState(), before, 'looking changes nothing');
    } catch (err) {
      if (server) {
        const pages = browser.contexts().flatMap((c) => c.pages());
        if (pages[0]) await screenshot(pages[0], path.join(outputDir, 'ui-failure.png')).catch(() => undefined);
        (err as Error).message += `\ncode-server log: ${server.logPath}`;
      }
      throw err;
    } finally {
      await browser.close().catch(() => undefined);
      await server?.stop();
      try {
        run('unmount', 'greeter');
      } catch {
        // stopTestDaemon takes the mount down with the daemon
      }
    }
    assert.strictEqual(fs.existsSync(path.join(workspace, 'notes.md')), false, 'what was not applied stayed in the layer');
    assert.ok(fs.existsSync(path.join(workspace, 'old.txt')), 'what was not applied stayed in the layer');
  });
});

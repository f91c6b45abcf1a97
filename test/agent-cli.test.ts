// A real agent CLI, as developers run it, inside a shell session: Anthropic's Claude Code
// (pinned, installed by scripts/agents/setup.sh into .cache/agents) starts on a real terminal in
// `shadowfs shell`, takes a prompt typed at its prompt, and runs its own Write and Bash tools —
// its own file I/O and its own shell — at the folder's own path. Everything it writes, through
// relative paths, the folder's absolute path or /proc, lands in the agent's layer; the folder is
// hashed and watched throughout.
//
// The one part that is not real is the model: this machine cannot reach api.anthropic.com, so
// Claude Code is pointed (ANTHROPIC_BASE_URL) at test/helpers/anthropic-double.ts, a scripted
// stand-in for the Messages API written from Anthropic's API documentation. It decides which
// tool Claude Code calls next; Claude Code itself (its TUI, permission rules, tools, shell, the
// results it reports back) is the unmodified release.
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { AnthropicDouble } from './helpers/anthropic-double';
import { FolderGuard, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';
import { CliTerminal } from './helpers/terminal';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Claude Code's binary, installed on first use (a clear failure when the registry is out of reach). */
function claudeBinary(): string {
  try {
    return execFileSync('bash', [path.join(repoRoot, 'scripts', 'agents', 'setup.sh'), '--print-bin'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim();
  } catch (err) {
    throw new Error(`Claude Code is needed for this test and could not be installed (scripts/agents/setup.sh): ${(err as Error).message}`);
  }
}

/** What a terminal shows, roughly: escape sequences out (Claude Code moves the cursor instead of printing spaces). */
function screen(out: string): string {
  return out
    .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, '')
    .replace(/\x1b\[[0-9;?<>=]*[A-Za-z~]/g, '')
    .replace(/\x1b[()][A-Z0-9]|\x1b[=>]/g, '');
}

describe('a real agent CLI in a shell session: Claude Code runs its own tools, and the folder stays untouched', function () {
  this.timeout(240_000);
  let folder: string;
  let guard: FolderGuard | undefined;
  let client: ShadowClient | undefined;
  let api: AnthropicDouble | undefined;
  let term: CliTerminal | undefined;
  let claude: string;

  before(function () {
    this.timeout(600_000); // a first install downloads about 80 MB
    claude = claudeBinary();
  });

  beforeEach(async () => {
    folder = tempDir('agent-cli');
    git(folder, 'init', '-q', '-b', 'main');
    git(folder, 'config', 'user.email', 'test@example.invalid');
    git(folder, 'config', 'user.name', 'test');
    fs.mkdirSync(path.join(folder, 'src'));
    fs.writeFileSync(path.join(folder, 'src', 'app.js'), 'console.log(1);\n');
    fs.writeFileSync(path.join(folder, 'README.md'), '# app\n');
    git(folder, 'add', '-A');
    git(folder, 'commit', '-q', '-m', 'base');
    guard = new FolderGuard(folder);
    client = await ShadowClient.connect();
  });

  afterEach(async () => {
    term?.kill();
    term = undefined;
    try {
      if (client) {
        const { sessions } = await client.request('shell.list', {});
        await Promise.all(sessions.filter((s) => s.running).map((s) => client!.request('shell.close', { sessionId: s.sessionId })));
        for (const s of (await client.request('list')).shadows) await client.request('unmount', { shadow: s.name });
      }
    } finally {
      client?.close();
      client = undefined;
      await api?.stop();
      api = undefined;
      stopTestDaemon();
      const g = guard;
      guard = undefined;
      await g?.check();
    }
  });

  it('writes through its Write tool and its shell, by relative, absolute and /proc paths: all in its layer', async () => {
    const trigger = 'SHADOWFS-AGENT-TASK';
    api = new AnthropicDouble(trigger, [
      { kind: 'tool', name: 'Write', input: { file_path: path.join(folder, 'src', 'agent-note.txt'), content: 'written by claude\n' } },
      {
        kind: 'tool',
        name: 'Bash',
        input: {
          description: 'look around and write through other paths',
          command: [
            'pwd',
            'git status --porcelain',
            'cat src/agent-note.txt',
            'echo appended >> README.md',
            `echo one > /proc/self/root${folder}/via-proc-self.txt`,
            `echo two > /proc/1/root${folder}/via-proc-1.txt`,
            `echo three > /proc/$PPID/cwd/via-parent-cwd.txt`,
            'echo BASH-END',
          ].join('; '),
        },
      },
      { kind: 'text', text: 'AGENT-TASK-DONE' },
    ]);
    const url = await api.start();
    const config = tempDir('claude-config');
    // What a user does once by hand: onboarding done, the API key approved, the folder trusted.
    fs.writeFileSync(
      path.join(config, '.claude.json'),
      JSON.stringify({
        hasCompletedOnboarding: true,
        theme: 'dark',
        customApiKeyResponses: { approved: ['sk-shadowfs-test'], rejected: [] },
        projects: { [folder]: { hasTrustDialogAccepted: true } },
      }),
    );
    term = new CliTerminal(
      [
        'shell',
        folder,
        '--agent',
        'claude',
        '--writable',
        config,
        '--readable',
        path.dirname(claude),
        '--env',
        `CLAUDE_CONFIG_DIR=${config}`,
        '--env',
        `ANTHROPIC_BASE_URL=${url}`,
        '--env',
        'ANTHROPIC_API_KEY=sk-shadowfs-test',
        '--env',
        'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1',
        '--',
        claude,
        '--allowedTools',
        'Write',
        'Bash',
      ],
      { cwd: folder, cols: 120, rows: 40 },
    );
    const t = term;
    await t.waitFor(/session [0-9a-f]{12}/, 0, 60_000);
    // Its prompt is drawn when it shows the shortcuts hint.
    await t.waitFor(/for(?:\s|\x1b\[[0-9;]*[A-Za-z])*shortcuts/, 0, 60_000);
    t.type(`${trigger}: leave a note\r`);
    const from = t.output.length;
    await t.waitFor(/AGENT-TASK-DONE/, from, 90_000);

    // What Claude Code's tools reported back to the model.
    assert.strictEqual(api.results.length, 2, `tool results: ${JSON.stringify(api.results)}; requests: ${api.seen.join(', ')}`);
    assert.match(api.results[0].content, /File created successfully/);
    assert.ok(!api.results[1].isError, api.results[1].content);
    const bash = api.results[1].content.split('\n');
    assert.strictEqual(bash[0], folder, 'its shell starts at the folder’s own path');
    assert.ok(bash.includes('?? src/agent-note.txt'), `git in the session sees the agent's file: ${api.results[1].content}`);
    assert.ok(bash.includes('written by claude'), api.results[1].content);
    assert.ok(bash.includes('BASH-END'), api.results[1].content);
    // The session's first process (the launcher, not dumpable) does not lend its root to the agent.
    assert.match(api.results[1].content, /via-proc-1\.txt: Permission denied/);

    // Exit the way a user does; the CLI reports what the agent changed.
    const end = t.output.length;
    t.type('/exit');
    await new Promise((r) => setTimeout(r, 500));
    t.type('\r');
    assert.strictEqual(await t.exited, 0, screen(t.output.slice(end)));
    assert.match(screen(t.output.slice(end)), /agent claude changed \d+ paths? in .*your folder is untouched/);

    const { shadows } = await client!.request('list');
    const changes = (await client!.request('layer.changes', { shadow: shadows[0].name, agent: 'claude' })).changes;
    const changed = changes
      .filter((c) => !c.excluded)
      .map((c) => `${c.kind} ${c.path}`)
      .sort();
    for (const want of ['added src/agent-note.txt', 'added via-parent-cwd.txt', 'added via-proc-self.txt', 'modified README.md'])
      assert.ok(changed.includes(want), `${want} in ${JSON.stringify(changed)}`);
    const note = await client!.request('file.read', { shadow: shadows[0].name, agent: 'claude', path: 'src/agent-note.txt' });
    assert.strictEqual(note.content, 'written by claude\n');
    for (const f of ['src/agent-note.txt', 'via-proc-self.txt', 'via-proc-1.txt', 'via-parent-cwd.txt'])
      assert.ok(!fs.existsSync(path.join(folder, f)), `${f} is not in the folder`);
    assert.strictEqual(fs.readFileSync(path.join(folder, 'README.md'), 'utf8'), '# app\n');
  });
});

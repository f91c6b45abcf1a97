// Real agent CLIs, as developers run them, inside shell sessions: Anthropic's Claude Code and
// OpenAI's Codex CLI (pinned, installed by scripts/agents/setup.sh into .cache/agents) start on a
// real terminal in `shadowfs shell`, take a prompt typed at their prompt, and run their own tools
// — their own file I/O and their own shell — at the folder's own path. Everything they write,
// through relative paths, the folder's absolute path or /proc, lands in the agent's layer; the
// folder is hashed and watched throughout.
//
// The one part that is not real is the model: this machine cannot reach Anthropic's or OpenAI's
// API, so each CLI is pointed (ANTHROPIC_BASE_URL; a Codex model provider's base_url) at a
// scripted stand-in written from that API's documentation (test/helpers/anthropic-double.ts,
// test/helpers/openai-responses-double.ts). It decides which tool the CLI calls next; the CLI
// itself (its TUI, permission rules, tools, shell, the results it reports back) is the
// unmodified release.
import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ShadowClient } from '../src/client';
import { AnthropicDouble } from './helpers/anthropic-double';
import { OpenAIResponsesDouble } from './helpers/openai-responses-double';
import { FolderGuard, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';
import { CliTerminal } from './helpers/terminal';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** An agent CLI's binary, installed on first use (a clear failure when the registry is out of reach). */
function agentBinary(name: 'claude' | 'codex'): string {
  try {
    return execFileSync('bash', [path.join(repoRoot, 'scripts', 'agents', 'setup.sh'), '--print-bin', name], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim();
  } catch (err) {
    throw new Error(`${name} is needed for this test and could not be installed (scripts/agents/setup.sh): ${(err as Error).message}`);
  }
}

/** What a terminal shows, roughly: escape sequences out (Claude Code moves the cursor instead of printing spaces). */
function screen(out: string): string {
  return out
    .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, '')
    .replace(/\x1b\[[0-9;?<>=]*[A-Za-z~]/g, '')
    .replace(/\x1b[()][A-Z0-9]|\x1b[=>]/g, '');
}

/** Output text, escape sequences allowed between the words (TUIs move the cursor instead of printing spaces). */
function words(text: string): RegExp {
  return new RegExp(text.split(' ').join('(?:\\s|\\x1b\\[[0-9;?]*[A-Za-z])*'));
}

/** What each agent's own shell tool is asked to run: look around, then write through every path that leads to the folder. */
function hostileShellLine(folder: string): string {
  return [
    'pwd',
    'git status --porcelain',
    'echo appended >> README.md',
    `echo one > /proc/self/root${folder}/via-proc-self.txt`,
    `echo two > /proc/1/root${folder}/via-proc-1.txt`,
    `echo three > /proc/$PPID/cwd/via-parent-cwd.txt`,
    'echo SHELL-END',
  ].join('; ');
}

describe('real agent CLIs in shell sessions: Claude Code and Codex run their own tools, and the folder stays untouched', function () {
  this.timeout(240_000);
  let folder: string;
  let guard: FolderGuard | undefined;
  let client: ShadowClient | undefined;
  let api: AnthropicDouble | undefined;
  let codexApi: OpenAIResponsesDouble | undefined;
  let term: CliTerminal | undefined;
  let claude: string;
  let codex: string;
  const homes: string[] = [];

  before(function () {
    this.timeout(600_000); // a first install downloads about 200 MB
    claude = agentBinary('claude');
    codex = agentBinary('codex');
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
      await codexApi?.stop();
      codexApi = undefined;
      for (const h of homes.splice(0)) fs.rmSync(h, { recursive: true, force: true });
      stopTestDaemon();
      const g = guard;
      guard = undefined;
      await g?.check();
    }
  });

  /** The agent's layer holds what its shell wrote through every path (and `also`); the folder none of it. */
  async function landedInLayer(agent: string, also: string[]): Promise<void> {
    const { shadows } = await client!.request('list');
    const changes = (await client!.request('layer.changes', { shadow: shadows[0].name, agent })).changes;
    const changed = changes.filter((c) => !c.excluded).map((c) => `${c.kind} ${c.path}`);
    for (const want of [...also, 'added via-parent-cwd.txt', 'added via-proc-self.txt', 'modified README.md'])
      assert.ok(changed.includes(want), `${want} in ${JSON.stringify(changed)}`);
    for (const f of ['via-proc-self.txt', 'via-proc-1.txt', 'via-parent-cwd.txt'])
      assert.ok(!fs.existsSync(path.join(folder, f)), `${f} is not in the folder`);
    assert.strictEqual(fs.readFileSync(path.join(folder, 'README.md'), 'utf8'), '# app\n');
  }

  it('Claude Code writes through its Write tool and its shell, by relative, absolute and /proc paths: all in its layer', async () => {
    const trigger = 'SHADOWFS-AGENT-TASK';
    api = new AnthropicDouble(trigger, [
      { kind: 'tool', name: 'Write', input: { file_path: path.join(folder, 'src', 'agent-note.txt'), content: 'written by claude\n' } },
      {
        kind: 'tool',
        name: 'Bash',
        input: {
          description: 'look around and write through other paths',
          command: `cat src/agent-note.txt; ${hostileShellLine(folder)}`,
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
    await t.waitFor(words('for shortcuts'), 0, 60_000);
    t.type(`${trigger}: leave a note\r`);
    const from = t.output.length;
    await t.waitFor(/AGENT-TASK-DONE/, from, 90_000);

    // What Claude Code's tools reported back to the model.
    assert.strictEqual(api.results.length, 2, `tool results: ${JSON.stringify(api.results)}; requests: ${api.seen.join(', ')}`);
    assert.match(api.results[0].content, /File created successfully/);
    assert.ok(!api.results[1].isError, api.results[1].content);
    const bash = api.results[1].content.split('\n');
    assert.ok(bash.includes(folder), 'its shell starts at the folder’s own path');
    assert.ok(bash.includes('?? src/agent-note.txt'), `git in the session sees the agent's file: ${api.results[1].content}`);
    assert.ok(bash.includes('written by claude'), api.results[1].content);
    assert.ok(bash.includes('SHELL-END'), api.results[1].content);
    // The session's first process (the launcher, not dumpable) does not lend its root to the agent.
    assert.match(api.results[1].content, /via-proc-1\.txt: Permission denied/);

    // Exit the way a user does; the CLI reports what the agent changed.
    const end = t.output.length;
    t.type('/exit');
    await new Promise((r) => setTimeout(r, 500));
    t.type('\r');
    assert.strictEqual(await t.exited, 0, screen(t.output.slice(end)));
    assert.match(screen(t.output.slice(end)), /agent claude changed \d+ paths? in .*your folder is untouched/);

    await landedInLayer('claude', ['added src/agent-note.txt']);
    const { shadows } = await client!.request('list');
    const note = await client!.request('file.read', { shadow: shadows[0].name, agent: 'claude', path: 'src/agent-note.txt' });
    assert.strictEqual(note.content, 'written by claude\n');
    assert.ok(!fs.existsSync(path.join(folder, 'src', 'agent-note.txt')));
  });
  it('Codex runs its shell tool in the session (its own sandbox off: the session is the sandbox): every write in its layer', async () => {
    const trigger = 'SHADOWFS-CODEX-TASK';
    codexApi = new OpenAIResponsesDouble(trigger, [
      { kind: 'call', name: 'exec_command', arguments: { cmd: `echo from codex > src/codex-note.txt; ${hostileShellLine(folder)}` } },
      { kind: 'text', text: 'CODEX-TASK-DONE' },
    ]);
    const url = await codexApi.start();
    // Codex refuses to put its helper binaries under /tmp, so its home is not a temporary directory.
    const home = path.join(repoRoot, '.cache', 'agents', `home-codex-${process.pid}-${Date.now()}`);
    fs.mkdirSync(home, { recursive: true });
    homes.push(home);
    // A model provider of its own, and the folder trusted: what a user writes once in config.toml.
    fs.writeFileSync(
      path.join(home, 'config.toml'),
      [
        'model = "shadowfs-test"',
        'model_provider = "shadowfs_double"',
        '[model_providers.shadowfs_double]',
        'name = "shadowfs test double"',
        `base_url = "${url}"`,
        'wire_api = "responses"',
        'env_key = "SHADOWFS_TEST_KEY"',
        `[projects."${folder}"]`,
        'trust_level = "trusted"',
        '',
      ].join('\n'),
    );
    term = new CliTerminal(
      [
        'shell',
        folder,
        '--agent',
        'codex',
        '--writable',
        home,
        '--readable',
        path.join(repoRoot, '.cache', 'agents'),
        '--env',
        `CODEX_HOME=${home}`,
        '--env',
        'SHADOWFS_TEST_KEY=sk-shadowfs-test',
        '--',
        codex,
        // Codex's own sandbox (bubblewrap) needs user namespaces, which a session does not give:
        // the session confines it instead (docs/shell-sessions.md).
        '--sandbox',
        'danger-full-access',
        '--ask-for-approval',
        'never',
      ],
      { cwd: folder, cols: 120, rows: 40 },
    );
    const t = term;
    await t.waitFor(/session [0-9a-f]{12}/, 0, 60_000);
    await t.waitFor(words('Ask Codex to do anything'), 0, 60_000);
    // Typed, then Enter on its own: a burst with the Enter in it reads as a paste.
    t.type(`${trigger}: leave a note`);
    await new Promise((r) => setTimeout(r, 800));
    const from = t.output.length;
    t.type('\r');
    await t.waitFor(/CODEX-TASK-DONE/, from, 90_000);

    assert.strictEqual(
      codexApi.outputs.length,
      1,
      `call outputs: ${JSON.stringify(codexApi.outputs)}; requests: ${codexApi.seen.join(', ')}`,
    );
    const out = codexApi.outputs[0].output;
    const lines = out.split('\n');
    assert.ok(lines.includes(folder), `its shell starts at the folder's own path: ${out}`);
    assert.ok(lines.includes('?? src/codex-note.txt'), `git in the session sees the agent's file: ${out}`);
    assert.ok(lines.includes('SHELL-END'), out);
    assert.match(out, /via-proc-1\.txt: Permission denied/);

    const end = t.output.length;
    t.type('/quit');
    await new Promise((r) => setTimeout(r, 500));
    t.type('\r');
    assert.strictEqual(await t.exited, 0, screen(t.output.slice(end)));
    assert.match(screen(t.output.slice(end)), /agent codex changed \d+ paths? in .*your folder is untouched/);
    await landedInLayer('codex', ['added src/codex-note.txt']);
    assert.ok(!fs.existsSync(path.join(folder, 'src', 'codex-note.txt')));
  });
});

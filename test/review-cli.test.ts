// Per-hunk review (#32) through a real daemon and mount: layer.hunks and layer.apply with hunks
// over RPC; `shadowfs review --list --json` and `apply --hunk`; `shadowfs review` answered at a
// real pseudo-terminal (node-pty) as a user answers git add -p (accept, reject with a reason,
// skip, quit); rejections recorded, readable by the agent's restricted connection (which may not
// record or apply them), and told to the agent once, on its next MCP tool result.
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ShadowClient } from '../src/client';
import { ShadowError } from '../src/common/errors';
import { repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';
import { CliTerminal } from './helpers/terminal';
import { agentNotes, LINES, makeReviewRepo } from './helpers/review-repo';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');
const b64 = (s: string): string => Buffer.from(s).toString('base64');

/** The CLI on a pseudo-terminal of its own (no $VISUAL: the review's editor is $EDITOR), answering prompts. */
class Terminal extends CliTerminal {
  constructor(args: string[], extraEnv: Record<string, string> = {}) {
    super(args, { cols: 120, rows: 40, env: { VISUAL: undefined, ...extraEnv } });
  }

  /** Waits for `prompt`, then types `answer` and Enter; returns where the prompt ended. */
  async answer(prompt: RegExp, answer: string, from: number): Promise<number> {
    const at = await this.waitFor(prompt, from);
    this.type(`${answer}\r`);
    return at;
  }
}

function cli(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cliPath, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function denied(what: string, p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    assert.strictEqual((err as ShadowError).code, 'SCOPE_DENIED', `${what}: ${(err as Error).message}`);
    return;
  }
  assert.fail(`${what} went through on a restricted connection`);
}

describe('review through the daemon: RPC, CLI, a terminal, and the agent told through MCP', function () {
  this.timeout(120_000);
  let user: ShadowClient;
  const mounted: string[] = [];

  before(async () => {
    user = await ShadowClient.connect({ clientName: 'review-test user' });
  });
  afterEach(async () => {
    for (const s of mounted.splice(0)) await user.request('unmount', { shadow: s, lazy: true }).catch(() => undefined);
  });
  after(() => {
    user.close();
    stopTestDaemon();
  });

  it('layer.hunks and review --list --json agree; apply --hunk writes one hunk; the restricted agent may list but not apply or reject', async () => {
    const repo = makeReviewRepo('review-rpc');
    await user.request('mount', { folder: repo, name: 'rv-rpc' });
    mounted.push('rv-rpc');
    await user.request('layer.write', { shadow: 'rv-rpc', agent: 'a', path: 'notes.txt', data: b64(agentNotes()) });
    const listed = await user.request('layer.hunks', { shadow: 'rv-rpc', agent: 'a' });
    assert.strictEqual(listed.hunks.length, 3);
    const viaCli = cli('review', 'rv-rpc', '--agent', 'a', '--list', '--json');
    assert.strictEqual(viaCli.status, 0, viaCli.stderr);
    assert.deepStrictEqual((JSON.parse(viaCli.stdout) as typeof listed).hunks, listed.hunks);
    const human = cli('review', 'rv-rpc', '--agent', 'a', '--list');
    assert.match(human.stdout, new RegExp(`notes\\.txt  \\[${listed.hunks[1].id}\\]\\n@@ -37,7 \\+37,7 @@`));
    assert.ok(!human.stdout.includes('\x1b['), 'no colour when stdout is not a terminal');

    const agent = await ShadowClient.connect({
      clientName: 'review-test agent',
      scope: { shadow: 'rv-rpc', agent: 'a', allowApply: false },
    });
    try {
      assert.deepStrictEqual((await agent.request('layer.hunks', { shadow: 'rv-rpc', agent: 'a' })).hunks, listed.hunks);
      await denied('another agent', agent.request('layer.hunks', { shadow: 'rv-rpc', agent: 'b' }));
      await denied('apply hunks', agent.request('layer.apply', { shadow: 'rv-rpc', agent: 'a', hunks: [listed.hunks[0].id] }));
      await denied(
        'reject',
        agent.request('layer.reject', { shadow: 'rv-rpc', agent: 'a', rejections: [{ id: listed.hunks[0].id, reason: 'x' }] }),
      );
      assert.deepStrictEqual((await agent.request('layer.rejections', { shadow: 'rv-rpc', agent: 'a' })).rejections, []);
    } finally {
      agent.close();
    }

    const applied = cli('apply', 'rv-rpc', '--agent', 'a', '--hunk', listed.hunks[1].id);
    assert.strictEqual(applied.status, 0, applied.stderr + applied.stdout);
    assert.match(applied.stdout, /write\s+notes\.txt/);
    const expected = [...LINES];
    expected[39] = 'line 40, by the agent\n';
    assert.strictEqual(fs.readFileSync(path.join(repo, 'notes.txt'), 'utf8'), expected.join(''));
    const left = await user.request('layer.hunks', { shadow: 'rv-rpc', agent: 'a' });
    assert.deepStrictEqual(
      left.hunks.map((h) => h.id),
      [listed.hunks[0].id, listed.hunks[2].id],
    );
    // A stale id: CONFLICT, exit status of an error, nothing written.
    const stale = cli('apply', 'rv-rpc', '--agent', 'a', '--hunk', listed.hunks[1].id, '--json');
    assert.notStrictEqual(stale.status, 0);
    assert.match(stale.stdout + stale.stderr, /CONFLICT/);
    assert.strictEqual(fs.readFileSync(path.join(repo, 'notes.txt'), 'utf8'), expected.join(''));
  });

  it('shadowfs review at a terminal: y applies, n asks why and records it, s skips; the agent is told once on its next MCP tool result', async () => {
    const repo = makeReviewRepo('review-tty');
    await user.request('mount', { folder: repo, name: 'rv-tty' });
    mounted.push('rv-tty');
    await user.request('layer.write', { shadow: 'rv-tty', agent: 'claude', path: 'notes.txt', data: b64(agentNotes()) });
    await user.request('layer.write', { shadow: 'rv-tty', agent: 'claude', path: 'added.txt', data: b64('new\n') });
    const listed = (await user.request('layer.hunks', { shadow: 'rv-tty', agent: 'claude' })).hunks;
    assert.deepStrictEqual(
      listed.map((h) => h.path),
      ['added.txt', 'notes.txt', 'notes.txt', 'notes.txt'],
    );

    const t = new Terminal(['review', 'rv-tty', '--agent', 'claude']);
    try {
      let at = 0;
      at = await t.answer(/\(1\/4\) Apply this file to your folder \[y,n,s,q,e,\?\]\? /, '?', at);
      at = await t.answer(/n - reject this hunk[\s\S]*\(1\/4\) Apply this file/, 's', at);
      at = await t.answer(/\(2\/4\) Apply this hunk/, 'y', at);
      at = await t.answer(/\(3\/4\) Apply this hunk/, 'n', at);
      at = await t.answer(/Why \(told to the agent\)\? /, 'keep line 40 as it is', at);
      await t.answer(/\(4\/4\) Apply this hunk/, 'q', at);
      assert.strictEqual(await t.exited, 0, t.output);
    } finally {
      t.kill();
    }
    const out = t.output;
    // Shown as git shows a hunk, coloured on a terminal: the header cyan, removed red, added green.
    assert.match(out, /\x1b\[36m@@ -2,7 \+2,7 @@\x1b\[0m/);
    assert.match(out, /\x1b\[31m-line 5\x1b\[0m/);
    assert.match(out, /\x1b\[32m\+line 5, by the agent\x1b\[0m/);
    assert.match(out, /rejected 1 hunk/);
    assert.match(out, /write\s+notes\.txt/);
    const expected = [...LINES];
    expected[4] = 'line 5, by the agent\n';
    assert.strictEqual(fs.readFileSync(path.join(repo, 'notes.txt'), 'utf8'), expected.join(''), 'only the accepted hunk was written');
    assert.ok(!fs.existsSync(path.join(repo, 'added.txt')), 'the skipped file was not');
    const recorded = (await user.request('layer.rejections', { shadow: 'rv-tty', agent: 'claude' })).rejections;
    assert.deepStrictEqual(
      recorded.map((r) => [r.id, r.path, r.lines, r.reason, r.delivered, r.reverted]),
      [[listed[2].id, 'notes.txt', '37-43', 'keep line 40 as it is', false, false]],
    );
    // The layer kept the rejected hunk (no --revert-rejected), and the skipped and quit ones.
    assert.deepStrictEqual(
      (await user.request('layer.hunks', { shadow: 'rv-tty', agent: 'claude' })).hunks.map((h) => h.id),
      [listed[0].id, listed[2].id, listed[3].id],
    );

    // The agent, through MCP: told on its next tool result, whatever the tool, and only once.
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [cliPath, 'mcp', '--shadow', 'rv-tty', '--agent', 'claude'],
      env,
      stderr: 'pipe',
    });
    const client = new Client({ name: 'review-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      const names = (await client.listTools()).tools.map((x) => x.name);
      assert.ok(!names.includes('review_hunks') && !names.includes('apply'), 'the user side is not offered without --allow-apply');
      type R = { isError?: boolean; content: Array<{ text?: string }> };
      const text = (r: R): string => r.content.map((c) => c.text ?? '').join('\n');
      const first = (await client.callTool({ name: 'read_file', arguments: { path: 'README-none.md' } })) as R;
      assert.strictEqual(first.isError, true, 'an error result carries the note too');
      assert.match(
        text(first),
        /the user rejected your change to notes\.txt lines 37-43: keep line 40 as it is \(it is still in your layer/,
      );
      const second = (await client.callTool({ name: 'read_file', arguments: { path: 'notes.txt', startLine: 1, endLine: 2 } })) as R;
      assert.ok(!text(second).includes('rejected'), text(second));
    } finally {
      await client.close();
    }
    assert.strictEqual((await user.request('layer.rejections', { shadow: 'rv-tty', agent: 'claude' })).rejections[0].delivered, true);
  });

  it('--revert-rejected takes a rejected hunk out of the layer; with --allow-apply MCP offers review_hunks and apply takes hunks', async () => {
    const repo = makeReviewRepo('review-revert');
    await user.request('mount', { folder: repo, name: 'rv-rev' });
    mounted.push('rv-rev');
    await user.request('layer.write', { shadow: 'rv-rev', agent: 'claude', path: 'notes.txt', data: b64(agentNotes()) });
    const listed = (await user.request('layer.hunks', { shadow: 'rv-rev', agent: 'claude' })).hunks;
    const t = new Terminal(['review', 'rv-rev', '--agent', 'claude', '--revert-rejected']);
    try {
      let at = 0;
      at = await t.answer(/\(1\/3\) Apply this hunk/, 'n', at);
      at = await t.answer(/Why \(told to the agent\)\? /, 'not this one', at);
      at = await t.answer(/\(2\/3\) Apply this hunk/, 's', at);
      await t.answer(/\(3\/3\) Apply this hunk/, 's', at);
      assert.strictEqual(await t.exited, 0, t.output);
    } finally {
      t.kill();
    }
    assert.match(t.output, /taken out of the agent's layer in notes\.txt/);
    assert.strictEqual(fs.readFileSync(path.join(repo, 'notes.txt'), 'utf8'), LINES.join(''), 'the folder is not written');
    const layerText = Buffer.from(
      (await user.request('layer.read', { shadow: 'rv-rev', agent: 'claude', path: 'notes.txt' })).data,
      'base64',
    ).toString();
    assert.strictEqual(layerText, agentNotes().replace('line 5, by the agent\n', 'line 5\n'));

    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [cliPath, 'mcp', '--shadow', 'rv-rev', '--agent', 'claude', '--allow-apply'],
      env,
      stderr: 'pipe',
    });
    const client = new Client({ name: 'review-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      type R = { isError?: boolean; content: Array<{ text?: string }> };
      const hunks = (await client.callTool({ name: 'review_hunks', arguments: {} })) as R;
      const body = JSON.parse(hunks.content[0].text!) as { hunks: Array<{ id: string }> };
      assert.deepStrictEqual(
        body.hunks.map((h) => h.id),
        [listed[1].id, listed[2].id],
      );
      assert.match(
        hunks.content[1]?.text ?? '',
        /rejected your change to notes\.txt lines 2-8: not this one \(it was taken out of your layer\)/,
      );
      const r = (await client.callTool({ name: 'apply', arguments: { hunks: [listed[2].id] } })) as R;
      assert.ok(!r.isError, JSON.stringify(r));
    } finally {
      await client.close();
    }
    const expected = [...LINES];
    expected.splice(50, 0, 'a line the agent added\n');
    assert.strictEqual(fs.readFileSync(path.join(repo, 'notes.txt'), 'utf8'), expected.join(''));
  });
  it('e opens $EDITOR on the hunk as git does: an edit that changes the old side is refused and asked again; the edited hunk is what reaches the folder', async () => {
    const repo = makeReviewRepo('review-edit');
    await user.request('mount', { folder: repo, name: 'rv-edit' });
    mounted.push('rv-edit');
    await user.request('layer.write', { shadow: 'rv-edit', agent: 'a', path: 'notes.txt', data: b64(agentNotes()) });
    const listed = (await user.request('layer.hunks', { shadow: 'rv-edit', agent: 'a' })).hunks;
    // An editor that first breaks the hunk (changes a removed line), then edits it properly.
    const dir = tempDir('review-editor');
    const editor = path.join(dir, 'editor.sh');
    const count = path.join(dir, 'count');
    fs.writeFileSync(
      editor,
      [
        '#!/bin/sh',
        `n=$(cat ${count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > ${count}`,
        `grep -q '^# Manual hunk edit mode: notes.txt' "$1" || exit 3`,
        `if [ $n = 1 ]; then sed -i 's/^-line 5$/-line FIVE/' "$1"; else sed -i 's/^+line 5, by the agent$/+line 5, edited by the user/' "$1"; fi`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const t = new Terminal(['review', 'rv-edit', '--agent', 'a'], { EDITOR: editor });
    try {
      let at = 0;
      at = await t.answer(/\(1\/3\) Apply this hunk/, 'e', at);
      at = await t.waitFor(/your edited hunk does not apply: [^\n]*no longer the folder's lines/, at);
      at = await t.answer(/\(1\/3\) Apply this hunk/, 'e', at);
      at = await t.answer(/\(2\/3\) Apply this hunk/, 'y', at);
      await t.answer(/\(3\/3\) Apply this hunk/, 'q', at);
      assert.strictEqual(await t.exited, 0, t.output);
    } finally {
      t.kill();
    }
    assert.strictEqual(fs.readFileSync(count, 'utf8').trim(), '2');
    const expected = [...LINES];
    expected[4] = 'line 5, edited by the user\n';
    expected[39] = 'line 40, by the agent\n';
    assert.strictEqual(fs.readFileSync(path.join(repo, 'notes.txt'), 'utf8'), expected.join(''));
    // The layer keeps the agent's file: its line 5 against yours, and its line 51, are left.
    const left = (await user.request('layer.hunks', { shadow: 'rv-edit', agent: 'a' })).hunks;
    assert.strictEqual(left.length, 2);
    assert.match(left[0].text, /-line 5, edited by the user\n\+line 5, by the agent\n/);
    assert.strictEqual(left[1].id, listed[2].id);
    assert.strictEqual(left[0].conflict, undefined);
  });

  it('conflicts as reviewers read them: apply --show-merge and the MCP apply result carry only the conflicting regions; --mark-conflicts writes the markers into the layer', async () => {
    const repo = makeReviewRepo('review-conflict');
    const big = Array.from({ length: 2000 }, (_, i) => `row ${i + 1}\n`);
    fs.writeFileSync(path.join(repo, 'big.txt'), big.join(''));
    spawnSync('git', ['-C', repo, 'add', '-A']);
    spawnSync('git', ['-C', repo, 'commit', '-q', '-m', 'big']);
    await user.request('mount', { folder: repo, name: 'rv-cf' });
    mounted.push('rv-cf');
    const agent = [...big];
    // With what would redraw the line on a terminal: --show-merge must show it, not obey it.
    agent[999] = 'row 1000, by the agent\x1b[2K\r\u2028(all good)\n';
    await user.request('layer.write', { shadow: 'rv-cf', agent: 'claude', path: 'big.txt', data: b64(agent.join('')) });
    const mine = [...big];
    mine[999] = 'row 1000, by you\n';
    fs.writeFileSync(path.join(repo, 'big.txt'), mine.join(''));

    const shown = cli('apply', 'rv-cf', '--agent', 'claude', '--dry-run', '--show-merge');
    assert.strictEqual(shown.status, 6, shown.stderr);
    assert.match(shown.stdout, /merged lines 997-1009:\nrow 997\nrow 998\nrow 999\n<<<<<<< folder\nrow 1000, by you\n/);
    assert.ok(!/^row 1$/m.test(shown.stdout) && !/^row 2000$/m.test(shown.stdout), 'not the whole file');
    assert.ok(shown.stdout.length < 2000, `${shown.stdout.length} characters`);
    assert.ok(shown.stdout.includes('row 1000, by the agent\\e[2K\\r\\u2028(all good)'), shown.stdout);
    assert.ok(!/[\x1b\r\u2028]/.test(shown.stdout), 'no control character reaches the terminal');

    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [cliPath, 'mcp', '--shadow', 'rv-cf', '--agent', 'claude', '--allow-apply'],
      env,
      stderr: 'pipe',
    });
    const client = new Client({ name: 'review-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      type R = { isError?: boolean; content: Array<{ text?: string }> };
      const r = (await client.callTool({ name: 'apply', arguments: { dryRun: true } })) as R;
      const text = r.content[0].text!;
      const body = JSON.parse(text) as { conflicts: Array<{ path: string; regions: Array<{ text: string }>; merged?: string }> };
      assert.strictEqual(body.conflicts[0].path, 'big.txt');
      assert.strictEqual(body.conflicts[0].merged, undefined, 'no whole copies');
      assert.match(body.conflicts[0].regions[0].text, /<<<<<<< folder\nrow 1000, by you/);
      assert.ok(text.length < 3000, `${text.length} characters`);
    } finally {
      await client.close();
    }

    const marked = cli('apply', 'rv-cf', '--agent', 'claude', '--mark-conflicts');
    assert.strictEqual(marked.status, 6, marked.stderr);
    assert.match(marked.stdout, /marked: big\.txt is in the agent's layer with conflict markers/);
    assert.strictEqual(fs.readFileSync(path.join(repo, 'big.txt'), 'utf8'), mine.join(''), 'your folder is not written');
    const inLayer = Buffer.from(
      (await user.request('layer.read', { shadow: 'rv-cf', agent: 'claude', path: 'big.txt' })).data,
      'base64',
    ).toString();
    assert.match(
      inLayer,
      /^row 999\n<<<<<<< folder\nrow 1000, by you\n\|\|\|\|\|\|\| base\nrow 1000\n=======\nrow 1000, by the agent\x1b\[2K\r\u2028\(all good\)\n>>>>>>> agent\nrow 1001$/m,
    );
  });

  it("apply --merge-tool opens the user's merge tool (git's merge.tool and mergetool.NAME.cmd) on each conflict and writes what it resolved; a tool that fails or leaves markers changes nothing", async () => {
    const repo = makeReviewRepo('review-mergetool');
    const rows = Array.from({ length: 40 }, (_, i) => `row ${i + 1}\n`);
    fs.writeFileSync(path.join(repo, 'big.txt'), rows.join(''));
    spawnSync('git', ['-C', repo, 'add', '-A']);
    spawnSync('git', ['-C', repo, 'commit', '-q', '-m', 'big']);
    await user.request('mount', { folder: repo, name: 'rv-mt' });
    mounted.push('rv-mt');
    // The agent reads the file (its base is recorded) and changes row 20; you change row 20 too.
    await user.request('file.edit', {
      shadow: 'rv-mt',
      agent: 'claude',
      path: 'big.txt',
      oldText: 'row 20\n',
      newText: 'row 20, by the agent\n',
    });
    const mine = rows.join('').replace('row 20\n', 'row 20, by you\n');
    fs.writeFileSync(path.join(repo, 'big.txt'), mine);

    // A merge tool is any program: this one records what it was given, then does what $MODE says.
    const dir = tempDir('mergetool');
    const seen = path.join(dir, 'seen');
    const tool = path.join(dir, 'tool.sh');
    fs.writeFileSync(
      tool,
      [
        '#!/bin/sh',
        `{ echo "BASE:"; cat "$BASE"; echo "LOCAL:"; cat "$LOCAL"; echo "REMOTE:"; cat "$REMOTE"; echo "MERGED:"; cat "$MERGED"; } > ${seen}`,
        'case "$MODE" in',
        '  fail) exit 1 ;;',
        '  markers) exit 0 ;;',
        '  *) sed "s/^row 20, by you$/row 20, by you and the agent/" "$LOCAL" > "$MERGED" ;;',
        'esac',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const gitconfig = path.join(dir, 'gitconfig');
    fs.writeFileSync(gitconfig, `[merge]\n\ttool = fake\n[mergetool "fake"]\n\tcmd = ${tool} "$BASE" "$LOCAL" "$REMOTE" "$MERGED"\n`);
    const apply = (mode: string, ...extra: string[]): { status: number | null; stdout: string; stderr: string } => {
      const r = spawnSync(process.execPath, [cliPath, 'apply', 'rv-mt', '--agent', 'claude', ...extra], {
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, GIT_CONFIG_GLOBAL: gitconfig, MODE: mode },
      });
      return { status: r.status, stdout: r.stdout, stderr: r.stderr };
    };

    const failed = apply('fail', '--merge-tool');
    assert.strictEqual(failed.status, 6, failed.stderr);
    assert.match(failed.stderr, /big\.txt: the merge tool fake exited with 1; it stays a conflict/);
    assert.strictEqual(fs.readFileSync(path.join(repo, 'big.txt'), 'utf8'), mine, 'nothing written');
    // What the tool was given: the base, yours, the agent's, and the merge with its markers.
    const given = fs.readFileSync(seen, 'utf8');
    assert.match(given, /^BASE:\n(row \d+\n){19}row 20\nrow 21\n/);
    assert.match(given, /LOCAL:\n(row \d+\n){19}row 20, by you\n/);
    assert.match(given, /REMOTE:\n(row \d+\n){19}row 20, by the agent\n/);
    assert.match(given, /MERGED:\n[\s\S]*<<<<<<< folder\nrow 20, by you\n[\s\S]*>>>>>>> agent\n/);

    const markers = apply('markers', '--merge-tool', 'fake');
    assert.strictEqual(markers.status, 6, markers.stderr);
    assert.match(markers.stderr, /big\.txt: the merged file still holds conflict markers; it stays a conflict/);
    assert.strictEqual(fs.readFileSync(path.join(repo, 'big.txt'), 'utf8'), mine, 'nothing written');

    const unknown = apply('resolve', '--merge-tool', 'no-such-tool');
    assert.strictEqual(unknown.status, 1);
    assert.match(
      unknown.stderr,
      /INVALID_ARGUMENT: merge tool no-such-tool has no command: set it with git config --global mergetool\.no-such-tool\.cmd/,
    );

    const resolved = apply('resolve', '--merge-tool');
    assert.strictEqual(resolved.status, 0, resolved.stderr + resolved.stdout);
    assert.match(resolved.stdout, /write\s+big\.txt/);
    assert.strictEqual(
      fs.readFileSync(path.join(repo, 'big.txt'), 'utf8'),
      mine.replace('row 20, by you\n', 'row 20, by you and the agent\n'),
    );
    assert.deepStrictEqual(
      fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith('shadowfs-merge-')),
      [],
      'its files are gone',
    );
  });
});

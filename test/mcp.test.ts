// The MCP server (`shadowfs mcp`) driven by the official SDK's own client over a real stdio
// transport, against a real daemon and a real mount: an agent reads, edits, runs, checkpoints
// and produces a patch that git apply accepts, through MCP alone; apply is offered only when
// the server was started with --allow-apply, and then writes the folder. The server's own
// connection to the daemon is restricted to its agent before it serves a tool, so the daemon
// holds it to that agent's layer whatever it sends.
import * as assert from 'assert';
import { execFileSync, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ShadowClient } from '../src/client';
import { FolderGuard, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function makeRepo(): string {
  const dir = tempDir('mcp-repo');
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'config', 'user.email', 'test@example.invalid');
  git(dir, 'config', 'user.name', 'test');
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(
    path.join(dir, 'src', 'greet.js'),
    "function greet(name) {\n  return 'hello ' + name;\n}\nmodule.exports = { greet };\n",
  );
  fs.writeFileSync(path.join(dir, 'README.md'), '# greet\n');
  fs.writeFileSync(path.join(dir, '.gitignore'), 'node_modules/\n');
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'base');
  return dir;
}

type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };

async function connect(
  args: string[],
): Promise<{ client: Client; call: (name: string, a?: Record<string, unknown>) => Promise<ToolResult> }> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  const transport = new StdioClientTransport({ command: process.execPath, args: [cliPath, 'mcp', ...args], env, stderr: 'pipe' });
  const client = new Client({ name: 'shadowfs-test', version: '1.0.0' });
  await client.connect(transport);
  const call = async (name: string, a: Record<string, unknown> = {}) => (await client.callTool({ name, arguments: a })) as ToolResult;
  return { client, call };
}

const textOf = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('');

describe('the MCP server, through the SDK client over stdio', function () {
  this.timeout(120_000);
  let daemon: ShadowClient;
  const mounted: string[] = [];

  before(async () => {
    daemon = await ShadowClient.connect({ clientName: 'mcp-test user' });
  });
  afterEach(async () => {
    for (const s of mounted.splice(0)) await daemon.request('unmount', { shadow: s, lazy: true }).catch(() => undefined);
  });
  after(() => {
    daemon.close();
    stopTestDaemon();
  });

  it('an agent reads, edits, runs, checkpoints and makes a patch git apply takes, through MCP alone; the folder is untouched', async () => {
    const repo = makeRepo();
    const guard = new FolderGuard(repo);
    await daemon.request('mount', { folder: repo, name: 'mcp-proj' });
    mounted.push('mcp-proj');
    const { client, call } = await connect(['--shadow', 'mcp-proj', '--agent', 'claude']);
    try {
      const tools = (await client.listTools()).tools;
      const names = tools.map((t) => t.name).sort();
      for (const n of [
        'read_file',
        'write_file',
        'edit_file',
        'grep',
        'glob',
        'list_directory',
        'run_command',
        'lints',
        'diff',
        'patch',
        'checkpoint',
        'restore_checkpoint',
      ])
        assert.ok(names.includes(n), `${n} in ${names.join(', ')}`);
      assert.ok(!names.includes('apply'), 'apply is not offered without --allow-apply');
      // The server's connection came restricted to this agent, apply not allowed, before it served
      // a tool: every connection but this test's own is that one.
      const st = await daemon.request('status');
      assert.deepStrictEqual(
        st.clients.filter((c) => c.client !== 'mcp-test user').map((c) => c.scope),
        [{ shadow: 'mcp-proj', agent: 'claude', allowApply: false }],
      );
      const apply = await call('apply');
      assert.strictEqual(apply.isError, true, textOf(apply));
      // Hidden parameters do not reach the daemon either: the tool's schema refuses them.
      const weaker = await call('run_command', { argv: ['true'], unprotected: true, originalPath: false });
      assert.strictEqual(weaker.isError, true, textOf(weaker));
      // Input schemas come from the protocol: the edit tool's fields, without shadow/agent.
      const edit = tools.find((t) => t.name === 'edit_file')!;
      assert.deepStrictEqual(Object.keys(edit.inputSchema.properties ?? {}).sort(), ['expect', 'newText', 'oldText', 'path', 'replaceAll']);

      assert.match(textOf(await call('read_file', { path: 'src/greet.js' })), /return 'hello ' \+ name;/);
      const bad = await call('edit_file', { path: 'src/greet.js', oldText: 'nowhere', newText: 'x' });
      assert.strictEqual(bad.isError, true);
      assert.match(textOf(bad), /^NO_MATCH: /);
      const ok = await call('edit_file', { path: 'src/greet.js', oldText: "'hello ' + name", newText: '`hello, ${name}!`' });
      assert.ok(!ok.isError, textOf(ok));
      assert.ok(!(await call('write_file', { path: 'src/shout.js', content: "module.exports = (s) => s.toUpperCase() + '!';\n" })).isError);
      assert.match(textOf(await call('grep', { pattern: 'hello, \\$\\{name\\}' })), /src\/greet\.js/);
      const run = await call('run_command', {
        argv: ['node', '-e', "console.log(require('./src/greet.js').greet('mcp'), require('./src/shout.js')('x'))"],
      });
      assert.match(textOf(run), /exit code 0/);
      assert.match(textOf(run), /hello, mcp! X!/);
      assert.ok(!(await call('checkpoint', { name: 'good' })).isError);
      const patch = textOf(await call('patch'));
      assert.match(patch, /^diff --git a\/src\/greet\.js b\/src\/greet\.js/m);
      // More work, undone by the checkpoint.
      await call('write_file', { path: 'src/greet.js', content: 'broken\n' });
      assert.ok(!(await call('restore_checkpoint', { name: 'good' })).isError);
      assert.match(textOf(await call('read_file', { path: 'src/greet.js' })), /hello, \$\{name\}!/);
      // The patch applies in a clean clone.
      const clone = tempDir('mcp-clone');
      git(clone, 'clone', '-q', '--no-hardlinks', repo, '.'); // hard links would let git touch the folder's objects
      const file = path.join(tempDir('mcp-patch'), 'p.patch');
      fs.writeFileSync(file, patch.endsWith('\n') ? patch : `${patch}\n`);
      git(clone, 'apply', '--index', file);
      assert.match(fs.readFileSync(path.join(clone, 'src', 'greet.js'), 'utf8'), /`hello, \$\{name\}!`/);
      assert.ok(fs.existsSync(path.join(clone, 'src', 'shout.js')));
      const unknown = await call('read_file', { path: '../etc/passwd' });
      assert.strictEqual(unknown.isError, true);
      assert.match(textOf(unknown), /INVALID_PATH/);
    } finally {
      await client.close();
    }
    await guard.check();
  });

  it('with default flags an agent cannot write the folder through run_command: its PATH and LD_PRELOAD reach only its own command', async () => {
    const repo = makeRepo();
    const guard = new FolderGuard(repo);
    await daemon.request('mount', { folder: repo, name: 'mcp-escape' });
    mounted.push('mcp-escape');
    const { client, call } = await connect(['--shadow', 'mcp-escape', '--agent', 'mallory']);
    try {
      // Fake unshare, sh, mount and env in the agent's own tool directory, each writing the folder
      // by its absolute path; before the launcher, the daemon ran `unshare` from the caller's PATH.
      const evil = `#!/bin/sh\necho pwned > ${repo}/PWNED-$(basename "$0") 2>/dev/null; exec /usr/bin/$(basename "$0") "$@"\n`;
      for (const tool of ['unshare', 'sh', 'mount', 'env', 'setpriv', 'nsenter']) {
        const w = await call('write_file', { path: `.tools/${tool}`, content: evil });
        assert.ok(!w.isError, textOf(w));
      }
      assert.ok(!(await call('run_command', { argv: ['/bin/chmod', '-R', '755', '.tools'] })).isError);
      const shadowTools = path.join(repo, '.tools');
      const r = await call('run_command', {
        argv: ['sh', '-c', `echo x > ${repo}/ABS; umount -l ${repo}; echo y > ${repo}/AFTER; echo done`],
        env: [`PATH=${shadowTools}:/usr/bin:/bin`, 'LD_PRELOAD=/nonexistent/evil.so'],
      });
      assert.match(textOf(r), /done/, textOf(r));
      // What the command wrote through the folder's path landed in the agent's layer.
      assert.match(textOf(await call('read_file', { path: 'ABS' })), /x/);
      assert.ok(!fs.existsSync(path.join(repo, 'ABS')) && !fs.existsSync(path.join(repo, 'AFTER')));
      assert.deepStrictEqual(
        fs.readdirSync(repo).filter((f) => f.startsWith('PWNED')),
        [],
        'no fake tool wrote the folder',
      );
    } finally {
      await client.close();
    }
    await guard.check();
  });

  it('with --allow-apply the apply tool writes the folder, and reports your own edit as a conflict', async () => {
    const repo = makeRepo();
    await daemon.request('mount', { folder: repo, name: 'mcp-apply' });
    mounted.push('mcp-apply');
    const { client, call } = await connect(['--shadow', 'mcp-apply', '--agent', 'claude', '--allow-apply']);
    try {
      assert.ok((await client.listTools()).tools.some((t) => t.name === 'apply'));
      const st = await daemon.request('status');
      assert.ok(
        st.clients.some((c) => c.scope?.shadow === 'mcp-apply' && c.scope.agent === 'claude' && c.scope.allowApply),
        JSON.stringify(st.clients),
      );
      await call('edit_file', { path: 'README.md', oldText: '# greet', newText: '# greet, by the agent' });
      await call('write_file', { path: 'NEW.md', content: 'new\n' });
      fs.writeFileSync(path.join(repo, 'README.md'), '# greet, by you\n');
      // The result is the first item: the radar may add a note after it (the user's edit under the agent's copy).
      const r = JSON.parse((await call('apply')).content[0].text ?? '') as {
        applied: Array<{ path: string }>;
        conflicts: Array<{ path: string; merged?: string; regions: Array<{ text: string }> }>;
      };
      assert.deepStrictEqual(
        r.applied.map((a) => a.path),
        ['NEW.md'],
      );
      assert.deepStrictEqual(
        r.conflicts.map((c) => c.path),
        ['README.md'],
      );
      // Only the conflicting regions reach the model, not three whole copies of the file.
      assert.match(r.conflicts[0].regions[0].text, /<<<<<<< folder/);
      assert.strictEqual(r.conflicts[0].merged, undefined);
      assert.strictEqual(fs.readFileSync(path.join(repo, 'NEW.md'), 'utf8'), 'new\n');
      assert.strictEqual(fs.readFileSync(path.join(repo, 'README.md'), 'utf8'), '# greet, by you\n');
    } finally {
      await client.close();
    }
  });

  it('refuses to start for a shadow that does not exist, with a coded error on stderr', () => {
    const r = spawnSync(process.execPath, [cliPath, 'mcp', '--shadow', 'nosuch-shadow', '--agent', 'a'], {
      encoding: 'utf8',
      input: '',
      timeout: 60_000,
    });
    assert.strictEqual(r.status, 1);
    assert.strictEqual(r.stdout, '', 'standard output belongs to the protocol');
    assert.match(r.stderr, /UNKNOWN_SHADOW/);
  });
});

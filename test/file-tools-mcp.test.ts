// The agent file tools' single native jobs seen from an MCP client: many edit_file calls sent at
// once to one file (over one stdio connection, through the daemon, to writeText/editText) each
// append a line, and every line lands exactly once; write_file racing edits leaves one write's
// content with some of the edits after it, never a mix.
// The test that tells the single job from the old stat/read/write jobs is in file-tools.test.ts
// (through the Layer API the old path lost lines); over MCP the requests reach the daemon spaced
// out enough that the old path happened to pass here too, so this one checks the whole route.
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ShadowClient } from '../src/client';
import { FolderGuard, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');
type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };
const textOf = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('');

type Call = (name: string, args: Record<string, unknown>) => Promise<ToolResult>;

/** Mounts `folder` as `name` through the daemon and starts `shadowfs mcp` for `agent` on it, over stdio. */
async function mcpSession(daemon: ShadowClient, folder: string, name: string, agent: string): Promise<{ client: Client; call: Call }> {
  await daemon.request('mount', { folder, name });
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [cliPath, 'mcp', '--shadow', name, '--agent', agent],
    env,
    stderr: 'pipe',
  });
  const client = new Client({ name: 'shadowfs-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, call: async (tool, args) => (await client.callTool({ name: tool, arguments: args })) as ToolResult };
}

describe('file tools over MCP: concurrent edits of one file never interleave', function () {
  this.timeout(120_000);
  let daemon: ShadowClient;

  before(async () => {
    daemon = await ShadowClient.connect({ clientName: 'file-tools-mcp test' });
  });
  after(() => {
    daemon.close();
    stopTestDaemon();
  });

  it('30 edit_file calls at once, each appending a line: all present exactly once, the folder untouched', async () => {
    const folder = tempDir('mcp-atomic');
    fs.writeFileSync(path.join(folder, 'log.txt'), 'BEGIN\nEND\n');
    const guard = new FolderGuard(folder);
    const { client, call } = await mcpSession(daemon, folder, 'mcp-atomic', 'editor');
    try {
      const n = 30;
      const results = await Promise.all(
        Array.from({ length: n }, (_, i) => call('edit_file', { path: 'log.txt', oldText: 'END\n', newText: `line ${i}\nEND\n` })),
      );
      for (const r of results) assert.ok(!r.isError, textOf(r));
      const read = textOf(await call('read_file', { path: 'log.txt' }));
      // After the "log.txt: lines a-b of c, hash h" header, lines numbered as cat -n prints them.
      const lines = read
        .split('\n')
        .slice(1)
        .map((l) => l.replace(/^ *\d+\t/, ''));
      assert.strictEqual(lines[0], 'BEGIN', read);
      for (let i = 0; i < n; i++) assert.strictEqual(lines.filter((l) => l === `line ${i}`).length, 1, `line ${i} once in:\n${read}`);
      assert.strictEqual(lines[n + 1], 'END', read);
      // Whole-file writes racing edits: the file is always one write's content, edited or not.
      const mixed = await Promise.all([
        call('write_file', { path: 'log.txt', content: 'A\nEND\n' }),
        call('edit_file', { path: 'log.txt', oldText: 'END\n', newText: 'x\nEND\n' }),
        call('write_file', { path: 'log.txt', content: 'B\nEND\n' }),
        call('edit_file', { path: 'log.txt', oldText: 'END\n', newText: 'y\nEND\n' }),
      ]);
      for (const r of mixed) assert.ok(!r.isError, textOf(r));
      const last = textOf(await call('read_file', { path: 'log.txt' }))
        .split('\n')
        .slice(1)
        .map((l) => l.replace(/^ *\d+\t/, ''))
        .join('\n');
      assert.match(last, /^[AB]\n(x\n|y\n|x\ny\n|y\nx\n)?END$/, last);
      await guard.check();
    } finally {
      await client.close();
      await daemon.request('unmount', { shadow: 'mcp-atomic', lazy: true }).catch(() => undefined);
    }
  });

  it('stat-then-write: read_file names the hash, write_file and edit_file with expect.hash write only while it holds (CONFLICT after)', async () => {
    const folder = tempDir('mcp-expect');
    fs.writeFileSync(path.join(folder, 'cfg.txt'), 'v1\n');
    const guard = new FolderGuard(folder);
    const { client, call } = await mcpSession(daemon, folder, 'mcp-expect', 'careful');
    try {
      const seen = /hash ([0-9a-f]{16})/.exec(textOf(await call('read_file', { path: 'cfg.txt' })))?.[1];
      assert.ok(seen, 'read_file names the content hash');
      // Over RPC the same read gives hash, size and mtimeMs as fields.
      const rpc = await daemon.request('file.read', { shadow: 'mcp-expect', agent: 'careful', path: 'cfg.txt' });
      assert.strictEqual(rpc.hash, seen);
      assert.strictEqual(rpc.size, 3);
      const first = await call('write_file', { path: 'cfg.txt', content: 'v2\n', expect: { hash: seen } });
      assert.ok(!first.isError, textOf(first));
      // Another writer saw v1 too: its write is refused, and nothing of it lands.
      const stale = await call('write_file', { path: 'cfg.txt', content: 'v2-other\n', expect: { hash: seen } });
      assert.ok(stale.isError, textOf(stale));
      assert.match(textOf(stale), /CONFLICT/);
      const staleEdit = await call('edit_file', { path: 'cfg.txt', oldText: 'v', newText: 'w', expect: { hash: seen } });
      assert.ok(staleEdit.isError && /CONFLICT/.test(textOf(staleEdit)), textOf(staleEdit));
      await assert.rejects(
        daemon.request('file.write', { shadow: 'mcp-expect', agent: 'careful', path: 'cfg.txt', content: 'x', expect: { exists: false } }),
        (e: { code?: string }) => e.code === 'CONFLICT',
      );
      const now = await daemon.request('file.read', { shadow: 'mcp-expect', agent: 'careful', path: 'cfg.txt' });
      assert.strictEqual(now.content, 'v2\n');
      const ok = await daemon.request('file.edit', {
        shadow: 'mcp-expect',
        agent: 'careful',
        path: 'cfg.txt',
        oldText: 'v2',
        newText: 'v3',
        expect: { hash: now.hash },
      });
      assert.strictEqual(ok.replacements, 1);
    } finally {
      await client.close();
      await daemon.request('unmount', { shadow: 'mcp-expect' });
      await guard.check();
      guard.stop();
    }
  });
});

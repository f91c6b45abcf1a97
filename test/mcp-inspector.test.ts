// The MCP server driven by a real MCP client other than our own: the MCP inspector's CLI (npm
// @modelcontextprotocol/inspector, `--cli`), which starts `shadowfs mcp` over stdio for each call,
// against a real daemon and mount. Every tool is called through it at least once (its further
// calls, with other arguments, through the SDK client on one server) and its answer
// checked: reads numbered 1-based with offset and limit, results bounded (a run's output, lists),
// absolute paths inside the project taken as relative, background runs polled, errors that start
// with their code and say what to do. Then, with the environment an MCP client leaves a server
// (HOME, LOGNAME, PATH, SHELL, TERM, USER only): the server finds the daemon without
// XDG_RUNTIME_DIR, mounts on demand with --folder, and reconnects after a daemon restart.
import * as assert from 'assert';
import { execFile, execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ShadowClient } from '../src/client';
import { TOOLS } from '../src/mcp/tools';
import { FolderGuard, repoRoot, tempDir } from './helpers/fixtures';
import { stopTestDaemon } from './helpers/hooks';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');
const inspectorPath = path.join(repoRoot, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');

type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };
const textOf = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');

/** The environment the MCP SDK's stdio transport gives a server by default. */
function strippedEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { HOME: home };
  for (const k of ['LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER']) if (process.env[k] !== undefined) env[k] = process.env[k];
  return env;
}

/** One inspector CLI call (`--cli`) against `shadowfs mcp <serverArgs>`; its JSON answer. */
function inspect(serverArgs: string[], cli: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ json: unknown; stderr: string }> {
  // The inspector starts the server with only the SDK's default environment: without this test's
  // XDG_RUNTIME_DIR the server would find a daemon through the runtime record in $HOME, which on a
  // shared machine may be another user's of the same account (seen: UNKNOWN_SHADOW, then
  // "Connection closed"). The calls that test that finding pass an environment without it.
  const toServer = env.XDG_RUNTIME_DIR ? ['-e', `XDG_RUNTIME_DIR=${env.XDG_RUNTIME_DIR}`] : [];
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [inspectorPath, '--cli', ...toServer, ...cli, '--', process.execPath, cliPath, 'mcp', ...serverArgs],
      { env, encoding: 'utf8', timeout: 120_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        try {
          resolve({ json: JSON.parse(stdout), stderr });
        } catch {
          reject(new Error(`inspector failed (${err?.message ?? 'no JSON'}):\n${stdout}\n${stderr}`));
        }
      },
    );
  });
}

/**
 * The agents with a view of `shadow`, once they are `want` (a server closes its view as it ends,
 * which may come just after its client had its answer): asked again for a while before the
 * caller's assertion sees what there is.
 */
async function viewAgents(daemon: ShadowClient, shadow: string, want: string[]): Promise<string[]> {
  let agents: string[] = [];
  for (let i = 0; i < 200; i++) {
    agents = (await daemon.request('list')).shadows.find((x) => x.name === shadow)!.views.map((v) => v.agent);
    if (JSON.stringify(agents) === JSON.stringify(want)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return agents;
}

function makeProject(): string {
  const dir = tempDir('mcp-insp');
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: dir });
  fs.mkdirSync(path.join(dir, 'src'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "name": "insp", "private": true }\n');
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', module: 'commonjs', noEmit: true }, include: ['src'] }),
  );
  fs.writeFileSync(path.join(dir, 'src', 'a.ts'), 'export function add(a: number, b: number): number {\n  return a + b;\n}\n');
  fs.writeFileSync(path.join(dir, 'src', 'b.ts'), "import { add } from './a';\n\nexport const three = add(1, 2);\n");
  fs.writeFileSync(path.join(dir, 'long.txt'), Array.from({ length: 2500 }, (_, i) => `line ${i + 1}`).join('\n') + '\n');
  fs.writeFileSync(path.join(dir, 'wide.txt'), `${'x'.repeat(5000)}\nshort\n`);
  for (let i = 0; i < 250; i++) fs.writeFileSync(path.join(dir, `many-${String(i).padStart(3, '0')}.log`), `entry ${i}\n`);
  return dir;
}

describe('the MCP server driven by the MCP inspector CLI', function () {
  this.timeout(600_000);
  let daemon: ShadowClient;
  const mounted: string[] = [];
  const savedHome = process.env.HOME;
  const savedReadable = process.env.SHADOWFS_RUN_READABLE;
  const savedRecord = process.env.SHADOWFS_RUNTIME_RECORD;

  before(async () => {
    // Language servers run confined; from a worktree whose node_modules is a link they need its target readable.
    process.env.SHADOWFS_RUN_READABLE = fs.realpathSync(path.join(repoRoot, 'node_modules'));
    daemon = await ShadowClient.connect({ clientName: 'mcp-inspector test' });
  });
  afterEach(async () => {
    for (const s of mounted.splice(0)) await daemon.request('unmount', { shadow: s, lazy: true }).catch(() => undefined);
  });
  after(() => {
    daemon.close();
    stopTestDaemon();
    process.env.HOME = savedHome;
    if (savedRecord !== undefined) process.env.SHADOWFS_RUNTIME_RECORD = savedRecord;
    if (savedReadable === undefined) delete process.env.SHADOWFS_RUN_READABLE;
    else process.env.SHADOWFS_RUN_READABLE = savedReadable;
  });

  it('calls every tool once at least, each answer shaped as agents read it; the folder is untouched', async () => {
    const repo = makeProject();
    const guard = new FolderGuard(repo);
    await daemon.request('mount', { folder: repo, name: 'insp' });
    mounted.push('insp');
    const server = ['--shadow', 'insp', '--agent', 'claude', '--allow-apply'];
    const called = new Set<string>();
    // Each tool's first call goes through the inspector (a server process per call); its further
    // calls, which try other arguments, through the SDK client on one server with the same flags:
    // an inspector call costs over a second of two Node processes starting, and the answers'
    // shape is the server's, whichever client reads it.
    let sdk: Client | undefined;
    const call = async (tool: string, args: Record<string, unknown> = {}): Promise<ToolResult> => {
      if (!called.has(tool)) {
        called.add(tool);
        const r = await inspect(server, ['--method', 'tools/call', '--tool-name', tool, '--tool-args-json', JSON.stringify(args)]);
        return r.json as ToolResult;
      }
      if (!sdk) {
        const transport = new StdioClientTransport({
          command: process.execPath,
          args: [cliPath, 'mcp', ...server],
          env: { ...process.env } as Record<string, string>,
          stderr: 'pipe',
        });
        sdk = new Client({ name: 'mcp-inspector test, further calls', version: '1.0.0' });
        await sdk.connect(transport);
      }
      return (await sdk.callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 })) as ToolResult;
    };
    try {
      const ok = async (tool: string, args: Record<string, unknown> = {}): Promise<string> => {
        const r = await call(tool, args);
        assert.ok(!r.isError, `${tool}: ${textOf(r)}`);
        return textOf(r);
      };

      const listed = (await inspect(server, ['--method', 'tools/list'])).json as { tools: Array<{ name: string }> };
      const names = listed.tools.map((t) => t.name).sort();
      assert.deepStrictEqual(names, [...TOOLS.map((t) => t.name), 'review_hunks', 'apply'].sort());

      // Reads: numbered 1-based like cat -n, 2000 lines by default, offset and limit, long lines cut.
      const head = await ok('read_file', { path: 'long.txt' });
      assert.match(head, /^long\.txt: lines 1-2000 of 2500, hash [0-9a-f]{16}\n {5}1\tline 1\n/);
      assert.match(head, /\[500 more lines; read on with offset 2001\]$/);
      assert.strictEqual(
        await ok('read_file', { path: 'long.txt', offset: 2499, limit: 5 }),
        'long.txt: lines 2499-2500 of 2500, hash ' + /hash ([0-9a-f]{16})/.exec(head)![1] + '\n  2499\tline 2499\n  2500\tline 2500',
      );
      assert.match(await ok('read_file', { path: 'wide.txt' }), /^ {5}1\tx{2000}… \[line cut: 3000 more characters\]\n {5}2\tshort$/m);
      // Absolute paths inside the folder (as runs see them) or the mount point are relative to the root; outside, INVALID_PATH names the root.
      assert.match(await ok('read_file', { path: path.join(repo, 'src', 'a.ts'), limit: 1 }), /^src\/a\.ts: lines 1-1 of 3/);
      const info = (await daemon.request('list')).shadows.find((s) => s.name === 'insp')!;
      assert.match(await ok('read_file', { path: path.join(info.mountPoint, 'src/b.ts'), offset: 3 }), /\n {5}3\texport const three/);
      const outside = await call('read_file', { path: '/etc/passwd' });
      assert.strictEqual(outside.isError, true);
      assert.match(
        textOf(outside),
        new RegExp(`^INVALID_PATH: /etc/passwd is outside the project; give a path relative to its root ${repo}`),
      );
      assert.match(textOf(outside), /\nWhat to do: /);

      // Edits come back with the lints of the change.
      const edit = await ok('edit_file', { path: 'src/b.ts', oldText: 'add(1, 2)', newText: "add(1, 'two')" });
      assert.match(edit, /^edited src\/b\.ts: 1 replacement/);
      assert.match(edit, /lints: (your change introduced 1 problem\(s\):\nsrc\/b\.ts:3:\d+: error: |no fresh answer within 3 s)/);
      const wrote = await ok('write_file', { path: 'src/c.ts', content: "import { add } from './a';\nexport const four = add(2, 2);\n" });
      assert.match(wrote, /^wrote src\/c\.ts: \d+ bytes, a new file/);
      const lints = await ok('lints', { paths: ['src/b.ts'], timeoutMs: 60_000 });
      assert.match(lints, /^src\/b\.ts: 1 introduced by the change, 0 already in the folder/);
      assert.match(lints, /\n {2}src\/b\.ts:3:\d+: error: Argument of type 'string'/);
      const noMatch = await call('edit_file', { path: 'src/b.ts', oldText: 'nowhere', newText: 'x' });
      assert.match(textOf(noMatch), /^NO_MATCH: .*\nWhat to do: read_file the lines again/s);
      // Arguments the schema refuses get the same code-first shape.
      assert.match(textOf(await call('read_file', { path: 'src/a.ts', offset: 0 })), /^INVALID_ARGUMENT: .*\nWhat to do: /s);

      // Navigation: 1-based line and a symbol name; answers as path:line:column.
      assert.match(await ok('definition', { path: 'src/c.ts', line: 2, symbol: 'add' }), /^src\/a\.ts:1:17$/m);
      assert.match(await ok('references', { path: 'src/a.ts', line: 1, symbol: 'add' }), /src\/c\.ts:1:10/);
      assert.match(await ok('hover', { path: 'src/c.ts', line: 2, symbol: 'add' }), /add\(a: number, b: number\): number/);

      // Lists are bounded, saying how many more and how to narrow.
      const glob = await ok('glob', { pattern: '*.log' });
      assert.strictEqual(glob.split('\n').length, 201);
      assert.match(glob, /\[… 50 more; narrow the pattern\]$/);
      const listing = await ok('list_directory', {});
      assert.match(listing, /^long\.txt \(\d+ bytes\)$/m);
      assert.match(listing, /\[… \d+ more; list a subdirectory/);
      const grep = await ok('grep', { pattern: 'entry', glob: '*.log' });
      assert.match(grep, /^many-\d{3}\.log:1:entry \d+$/m);
      assert.match(grep, /more matches not shown \(200 shown/);
      assert.match(
        await ok('grep', { pattern: 'return a', context: 1 }),
        /^src\/a\.ts-1-export function add.*\nsrc\/a\.ts:2:  return a \+ b;\nsrc\/a\.ts-3-\}$/m,
      );

      // Runs: a shell command line, at the folder's own path; output capped at its head and tail.
      const pwd = await ok('run_command', { command: 'pwd; echo hi | tr a-z A-Z' });
      assert.match(pwd, new RegExp(`^exit code 0, \\d+ ms\\n--- stdout\\n${repo}\\nHI\\n?$`));
      const flood = await ok('run_command', { argv: ['node', '-e', "process.stdout.write('a'.repeat(300000) + 'END')"] });
      assert.ok(flood.length < 20_000, `${flood.length} characters`);
      assert.match(flood, /\[… \d+ bytes left out of 300003; run it again with its output redirected to a file/);
      assert.match(flood, /aEND$/);
      // run_output and cancel_run work on a background run of the same server process only: each
      // inspector call is a process of its own, so here they answer NOT_FOUND, as they must for an
      // unknown id (the polling itself is tested with the SDK client below).
      assert.match(textOf(await call('run_output', { runId: 'mcp-nosuch' })), /^NOT_FOUND: no background run "mcp-nosuch"/);
      assert.match(textOf(await call('cancel_run', { runId: 'mcp-nosuch' })), /^NOT_FOUND: /);
      assert.match(await ok('run_command', { command: 'sleep 1', background: true }), /^started run mcp-[0-9a-f]+ in the background/);

      // Files: move, delete, revert, changes, diff, patch, checkpoints.
      await ok('write_file', { path: 'tmp/old-name.txt', content: 'moving\n' });
      assert.match(
        await ok('move_file', { from: 'tmp/old-name.txt', to: path.join(repo, 'tmp', 'new-name.txt') }),
        /^moved tmp\/old-name\.txt to tmp\/new-name\.txt/,
      );
      assert.match(await ok('read_file', { path: 'tmp/new-name.txt' }), /\t?moving/);
      assert.match(textOf(await call('read_file', { path: 'tmp/old-name.txt' })), /^NOT_FOUND: /);
      assert.match(
        textOf(await call('move_file', { from: 'src', to: 'lib' })),
        /^IS_DIRECTORY: src is a directory; move_file moves one file/,
      );
      assert.match(await ok('delete_file', { path: 'many-000.log' }), /^deleted many-000\.log/);
      const changes = await ok('changes');
      assert.match(changes, /^deleted many-000\.log$/m);
      assert.match(changes, /^modified src\/b\.ts$/m);
      assert.match(changes, /^added tmp\/new-name\.txt$/m);
      assert.match(await ok('revert', { path: 'many-000.log' }), /^reverted many-000\.log/);
      assert.doesNotMatch(await ok('changes'), /many-000/);
      assert.match(await ok('diff', { paths: ['src/b.ts'] }), /^-export const three = add\(1, 2\);$/m);
      assert.match(await ok('patch', { paths: [path.join(repo, 'src/c.ts')] }), /^diff --git a\/src\/c\.ts b\/src\/c\.ts/m);
      assert.match(await ok('checkpoint', { name: 'one' }), /^checkpoint one: \d+ files/);
      assert.match(await ok('list_checkpoints'), /^\{"name":"one","createdAt":"[^"]+","auto":false,/m);
      await ok('write_file', { path: 'src/c.ts', content: 'broken\n' });
      assert.match(await ok('restore_checkpoint', { name: 'one' }), /^restored checkpoint one/);
      assert.match(await ok('read_file', { path: 'src/c.ts' }), /export const four/);
      // What its own programs did through the mount (the file tools above are not programs: not in it).
      assert.match(await ok('run_command', { command: 'echo audited > tmp/by-a-run.txt' }), /^exit code 0,/);
      assert.match(await ok('audit', { path: 'tmp/by-a-run.txt' }), /^\S+ \S+\[\d+\] create\(w\) tmp\/by-a-run\.txt 8B$/m);

      // A view of its own, opened for the call's server and closed as that server ends.
      assert.match(await ok('use_own_view'), /^opened a view of your own at \/.*It stays open until this server ends\.$/);
      assert.deepStrictEqual(await viewAgents(daemon, 'insp', []), []);

      await guard.check(); // apply is the one tool that writes the folder
      // The user's side of review: the changes as hunks with ids.
      const hunks = JSON.parse(await ok('review_hunks', {})) as { hunks: Array<{ id: string; path: string }> };
      assert.ok(
        hunks.hunks.some((h) => h.path === 'tmp/new-name.txt' && h.id.length > 0),
        JSON.stringify(hunks).slice(0, 500),
      );
      // Apply: compact JSON.
      const applied = JSON.parse(await ok('apply', { paths: ['tmp/new-name.txt'] })) as { applied: Array<{ path: string }> };
      assert.deepStrictEqual(
        applied.applied.map((a) => a.path),
        ['tmp/new-name.txt'],
      );
      assert.strictEqual(fs.readFileSync(path.join(repo, 'tmp', 'new-name.txt'), 'utf8'), 'moving\n');
      fs.rmSync(path.join(repo, 'tmp'), { recursive: true });

      assert.deepStrictEqual(
        names.filter((n) => !called.has(n)),
        [],
        'every tool was called',
      );
    } finally {
      await sdk?.close();
    }
  });

  it('without XDG_RUNTIME_DIR (an MCP client strips it), --folder finds the daemon and mounts on demand', async () => {
    const repo = makeProject();
    const home = tempDir('mcp-home');
    // This test's daemon runs with its own HOME, where it records its runtime directory.
    stopTestDaemon();
    daemon.close();
    process.env.HOME = home;
    delete process.env.SHADOWFS_RUNTIME_RECORD; // the record under HOME, as for a user
    daemon = await ShadowClient.connect({ clientName: 'mcp-inspector test' });
    const record = JSON.parse(fs.readFileSync(path.join(home, '.local', 'state', 'shadowfs', 'daemon-runtime.json'), 'utf8')) as {
      pid: number;
    };
    assert.strictEqual(record.pid, daemon.daemonPid);
    assert.ok(!(await daemon.request('list')).shadows.some((s) => s.folder === fs.realpathSync(repo)));
    const env = strippedEnv(home);
    const r = await inspect(
      ['--folder', repo, '--agent', 'gemini'],
      ['--method', 'tools/call', '--tool-name', 'glob', '--tool-arg', 'pattern=src/*.ts'],
      env,
    );
    assert.strictEqual(textOf(r.json as ToolResult), 'src/a.ts\nsrc/b.ts', r.stderr);
    // It used this daemon (no second one started elsewhere) and mounted the folder there.
    const shadow = (await daemon.request('list')).shadows.find((s) => s.folder === fs.realpathSync(repo));
    assert.ok(shadow, 'mounted on demand');
    mounted.push(shadow.name);
    // A second server for the same folder finds that shadow instead of mounting another.
    await inspect(
      ['--folder', repo, '--agent', 'gemini'],
      ['--method', 'tools/call', '--tool-name', 'glob', '--tool-arg', 'pattern=*.json'],
      env,
    );
    assert.strictEqual((await daemon.request('list')).shadows.filter((s) => s.folder === fs.realpathSync(repo)).length, 1);
  });

  it('an agent with a view of its own (use_own_view, --own-view) runs and gets lints while another agent holds the shared mount', async () => {
    const repo = makeProject();
    const guard = new FolderGuard(repo);
    await daemon.request('mount', { folder: repo, name: 'insp-view' });
    mounted.push('insp-view');
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [cliPath, 'mcp', '--shadow', 'insp-view', '--agent', 'bee'],
      env: { ...process.env } as Record<string, string>,
      stderr: 'pipe',
    });
    const client = new Client({ name: 'own-view-test', version: '1.0.0' });
    await client.connect(transport);
    const progress: string[] = [];
    const call = async (name: string, a: Record<string, unknown> = {}): Promise<string> => {
      const r = (await client.callTool({ name, arguments: a }, undefined, {
        onprogress: (p) => progress.push(`${name}: ${p.message ?? ''}`),
        timeout: 300_000,
      })) as ToolResult;
      assert.ok(!r.isError, `${name}: ${textOf(r)}`);
      return textOf(r);
    };
    const queue = async () => (await daemon.request('status')).activity.queues.find((q) => q.shadow === 'insp-view');
    let holder: Promise<unknown> | undefined;
    try {
      // Bee's edit breaks b.ts; its first lints (nobody else about) also learn the folder's own.
      await call('write_file', { path: 'src/b.ts', content: "import { add } from './a';\n\nexport const three: string = add(1, 2);\n" });
      assert.match(await call('lints', { timeoutMs: 60_000 }), /src\/b\.ts: 1 introduced by the change/);

      // Agent ay's run holds the shared mount until its layer has a stop file.
      let held = true;
      holder = daemon
        .request('run', {
          shadow: 'insp-view',
          agent: 'ay',
          runId: 'ay-run',
          argv: ['sh', '-c', 'while [ ! -e stop ]; do sleep 0.05; done'],
        })
        .finally(() => (held = false));
      for (let i = 0; i < 400 && (await queue())?.running !== 'ay'; i++) await new Promise((r) => setTimeout(r, 50));
      assert.strictEqual((await queue())?.running, 'ay');

      // Without a view of its own, bee's questions queue behind ay and say so.
      assert.match(await call('lints', { timeoutMs: 500 }), /src\/b\.ts: queued: .*busy with ay.*use_own_view/);
      assert.match(await call('hover', { path: 'src/b.ts', line: 3, symbol: 'add', timeoutMs: 500 }), /^hover: queued: .*busy with ay/);

      // With one, its run and its lints go on while ay still holds the shared mount.
      assert.match(await call('use_own_view'), /^opened a view of your own at \//);
      assert.match(await call('use_own_view'), /^you already have a view of your own/);
      const view = (await daemon.request('list')).shadows.find((x) => x.name === 'insp-view')!.views.find((v) => v.agent === 'bee')!;
      assert.ok(view, 'bee has a view');
      assert.match(
        await call('run_command', { command: 'pwd; cat src/b.ts' }),
        new RegExp(`exit code 0[^]*${fs.realpathSync(repo)}\n[^]*three: string`),
      );
      const lints = await call('lints', { timeoutMs: 120_000 });
      assert.match(lints, /src\/b\.ts: 1 introduced by the change, 0 already in the folder/);
      assert.match(lints, /src\/b\.ts:3:\d+: error: Type 'number' is not assignable to type 'string'/);
      assert.match(
        await call('hover', { path: 'src/b.ts', line: 3, symbol: 'add', timeoutMs: 120_000 }),
        /add\(a: number, b: number\): number/,
      );
      // An absolute path inside its view is the project's too.
      assert.match(await call('read_file', { path: path.join(view.mountPoint, 'src', 'b.ts') }), /three: string/);
      // All the while ay held the shared mount, and nothing of bee's waited for it.
      assert.ok(held, "ay's run still holds the shared mount");
      const q = await queue();
      assert.strictEqual(q?.running, 'ay');
      assert.deepStrictEqual(q?.waiting, []);
      assert.deepStrictEqual(progress, [], 'no progress says bee waited');

      // `shadowfs mcp --own-view` opens the view before its first tool, and closes it as it ends.
      const once = (
        await inspect(
          ['--shadow', 'insp-view', '--agent', 'cee', '--own-view'],
          ['--method', 'tools/call', '--tool-name', 'run_command', '--tool-arg', 'command=echo from cee'],
        )
      ).json as ToolResult;
      assert.ok(!once.isError, textOf(once));
      assert.match(textOf(once), /exit code 0[^]*from cee/);
      assert.ok(held, "ay's run still holds the shared mount");
      assert.deepStrictEqual(await viewAgents(daemon, 'insp-view', ['bee']), ['bee']);
    } finally {
      await daemon.request('file.write', { shadow: 'insp-view', agent: 'ay', path: 'stop', content: '' }).catch(() => undefined);
      await holder?.catch(() => undefined);
      await client.close();
    }
    // The server closed its view as it ended.
    assert.deepStrictEqual(await viewAgents(daemon, 'insp-view', []), []);
    await guard.check();
  });

  it('a session of the SDK client (its default environment) goes on after the daemon was stopped and started again, radar and rejection notes included', async () => {
    const repo = makeProject();
    const home = tempDir('mcp-home2');
    stopTestDaemon();
    daemon.close();
    process.env.HOME = home;
    delete process.env.SHADOWFS_RUNTIME_RECORD; // the record under HOME, as for a user
    daemon = await ShadowClient.connect({ clientName: 'mcp-inspector test' });
    await daemon.request('mount', { folder: repo, name: 'insp-restart' });
    mounted.push('insp-restart');
    // No env given: the SDK passes only HOME, LOGNAME, PATH, SHELL, TERM and USER.
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [cliPath, 'mcp', '--shadow', 'insp-restart', '--agent', 'codex'],
      stderr: 'pipe',
    });
    const client = new Client({ name: 'restart-test', version: '1.0.0' });
    await client.connect(transport);
    const call = async (name: string, a: Record<string, unknown> = {}) =>
      textOf((await client.callTool({ name, arguments: a })) as ToolResult);
    try {
      // A background run, polled until it ends.
      const started = await call('run_command', { command: 'for i in 1 2 3; do echo tick $i; sleep 0.2; done; exit 3', background: true });
      const id = /run (mcp-[0-9a-f]+)/.exec(started)![1];
      let all = '';
      for (let i = 0; i < 60 && !/ended:/.test(all); i++) all += `${await call('run_output', { runId: id, wait: 5 })}\n`;
      assert.match(all, /tick 1\n(.|\n)*tick 3/);
      assert.match(all, new RegExp(`run ${id} ended: exit code 3`));
      const long = /run (mcp-[0-9a-f]+)/.exec(await call('run_command', { command: 'sleep 60', background: true }))![1];
      assert.match(await call('cancel_run', { runId: long }), /cancelled/);
      let end = '';
      for (let i = 0; i < 30 && !/ended/.test(end); i++) end = await call('run_output', { runId: long, wait: 5 });
      assert.match(end, /\(cancelled\)/);

      assert.match(await call('read_file', { path: 'src/a.ts' }), /^src\/a\.ts: lines 1-3 of 3/);
      assert.match(await call('use_own_view'), /^opened a view of your own/);
      stopTestDaemon();
      daemon.close();
      daemon = await ShadowClient.connect({ clientName: 'mcp-inspector test' });
      if (!(await daemon.request('list')).shadows.some((s) => s.name === 'insp-restart'))
        await daemon.request('mount', { folder: repo, name: 'insp-restart' });
      assert.match(await call('read_file', { path: 'src/b.ts' }), /^src\/b\.ts: lines 1-3 of 3/);
      // Its view (which the daemon's end took away) is there again.
      assert.deepStrictEqual(await viewAgents(daemon, 'insp-restart', ['codex']), ['codex']);
      // Restricted again, to its own agent.
      const st = await daemon.request('status');
      assert.deepStrictEqual(
        st.clients.filter((c) => c.scope).map((c) => c.scope),
        [{ shadow: 'insp-restart', agent: 'codex', allowApply: false }],
      );

      // The notes still reach the agent on the new connection: an overlap the radar notices now
      // (told by radar/changed, which only the new connection hears) ...
      assert.doesNotMatch(await call('write_file', { path: 'src/a.ts', content: 'export const a = 1;\n' }), /shadowfs radar/);
      await daemon.request('layer.write', {
        shadow: 'insp-restart',
        agent: 'other',
        path: 'src/a.ts',
        data: Buffer.from('export const a = 2;\n').toString('base64'),
      });
      let told = '';
      for (let i = 0; i < 50 && !/\[shadowfs radar\]/.test(told); i++) {
        told = await call('changes');
        if (!/\[shadowfs radar\]/.test(told)) await new Promise((r) => setTimeout(r, 100));
      }
      assert.match(told, /\[shadowfs radar\] agent other also changed src\/a\.ts, differently/);
      assert.doesNotMatch(await call('changes'), /shadowfs radar/, 'told once');
      // ... and a rejection the user records now.
      const hunk = (await daemon.request('layer.hunks', { shadow: 'insp-restart', agent: 'codex' })).hunks.find(
        (h) => h.path === 'src/a.ts',
      )!;
      await daemon.request('layer.reject', { shadow: 'insp-restart', agent: 'codex', rejections: [{ id: hunk.id, reason: 'keep add' }] });
      assert.match(await call('changes'), /Note from shadowfs:\nthe user rejected your change to src\/a\.ts.*: keep add/);

      // The daemon stops again, and the user mounts another project under the same name (a second
      // clone of the same repository, say). The server stays with the folder its agent was given:
      // it does not follow the name there (review: its next call read, ran in and applied to the
      // other project).
      stopTestDaemon();
      daemon.close();
      daemon = await ShadowClient.connect({ clientName: 'mcp-inspector test' });
      await daemon.request('unmount', { shadow: 'insp-restart' }).catch(() => undefined);
      const other = makeProject();
      fs.writeFileSync(path.join(other, '.env'), 'OTHER_SECRET=1\n');
      const otherGuard = new FolderGuard(other);
      await daemon.request('mount', { folder: other, name: 'insp-restart' });
      const refused = (await client.callTool({ name: 'read_file', arguments: { path: '.env' } })) as ToolResult;
      assert.strictEqual(refused.isError, true, textOf(refused));
      assert.match(textOf(refused), /UNKNOWN_SHADOW: shadow "insp-restart" shows .* now, not .*, the folder this connection is for/);
      assert.doesNotMatch(textOf(refused), /OTHER_SECRET/);
      const run = (await client.callTool({ name: 'run_command', arguments: { command: 'cat .env; touch pwned' } })) as ToolResult;
      assert.strictEqual(run.isError, true, textOf(run));
      assert.ok(
        !(await daemon.request('layer.list', { shadow: 'insp-restart' })).agents.includes('codex'),
        'no layer of its agent made there',
      );
      assert.deepStrictEqual(
        (await daemon.request('status')).clients.filter((c) => c.scope),
        [],
        'no connection is restricted to the other project',
      );
      await otherGuard.check();
    } finally {
      await client.close();
    }
  });
});

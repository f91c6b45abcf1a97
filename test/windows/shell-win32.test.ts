// Shell sessions on Windows (src/shell through src/platform/win32-session.ts): the program on a
// ConPTY pseudo console made by node-pty's conpty.node, started through the session launcher in
// the session's Job Object, typed into, resized, its output kept for a terminal that joins again,
// its exit status passed back, and closed. Runs only on Windows; on Linux under wine with
//   scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json
//
// WHAT THIS IS NOT: no view is mounted. A view is a WinFsp mount, and WinFsp's driver cannot run
// under wine, so the session manager (ShellSessions) gets a stand-in Shadow whose agent's view is
// a plain directory: what runs is everything from ShellSessions.start down to the program on the
// pseudo console and back, not the mount.
//
// WINE DOES NOT ENFORCE INTEGRITY LEVELS (every token reads High there): a session is refused
// unless unprotected, and runs unprotected (protections ['job']). On a real Windows the refusal
// test is skipped and the others expect 'low-integrity' too. Wine's ConPTY does not pass a resize
// on to the console (the program keeps reading the first size): under wine the test checks that
// the resize is accepted and remembered, on Windows that the program sees the new size. Wine's
// powershell.exe is a stub: nothing here uses it.
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ShadowError } from '../../src/common/errors';
import type { Shadow, View } from '../../src/shadow';
import { type ShellSession, ShellSessions } from '../../src/shell/sessions';

type Ffi = typeof import('ffi-rs');

/** Whether this is wine (its ntdll exports wine_get_version). */
function underWine(): boolean {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const f = require('ffi-rs') as Ffi;
  f.open({ library: 'test-shell-ntdll', path: 'ntdll.dll' });
  try {
    f.load({ library: 'test-shell-ntdll', funcName: 'wine_get_version', retType: f.DataType.String, paramsType: [], paramsValue: [] });
    return true;
  } catch {
    return false;
  }
}

/** A Shadow stand-in whose agents' views are plain directories under `views` (see the header). */
function standIn(folder: string, views: string): { shadow: Shadow; opened: string[]; closed: string[] } {
  const open = new Map<string, View>();
  const opened: string[] = [];
  const closed: string[] = [];
  const shadow = {
    folder,
    mountPoint: path.join(views, 'shared'),
    viewOf: (agent: string) => open.get(agent),
    openView: async (agent: string) => {
      const dir = path.join(views, agent);
      fs.mkdirSync(dir, { recursive: true });
      const view = {
        agent,
        mountPoint: dir,
        open: true,
        close: async () => {
          (view as { open: boolean }).open = false;
          open.delete(agent);
          closed.push(agent);
        },
      } as unknown as View;
      open.set(agent, view);
      opened.push(agent);
      return view;
    },
  } as unknown as Shadow;
  return { shadow, opened, closed };
}

/** The program the sessions run: says where it is, answers each line typed, exits as told. */
const PROGRAM = `'use strict';
const fs = require('fs');
const size = () => process.stdout.getWindowSize().join('x');
fs.writeFileSync('made-by-session.txt', 'from ' + process.env.SHADOWFS_AGENT);
process.stdout.write('ready tty=' + process.stdin.isTTY + ' size=' + size() + ' cwd=' + process.cwd() + '\\n');
let line = '';
process.stdin.on('data', (d) => {
  line += d.toString();
  let nl;
  while ((nl = line.indexOf('\\n')) >= 0) {
    const cmd = line.slice(0, nl).replace(/\\r$/, '');
    line = line.slice(nl + 1);
    if (cmd === 'size') process.stdout.write('size=' + size() + '\\n');
    else if (cmd.startsWith('exit ')) process.exit(Number(cmd.slice(5)));
    else if (cmd !== 'hang') process.stdout.write('got:' + cmd + '\\n');
  }
});
`;

/** Resolves once the session's output so far (escape sequences removed) satisfies `test`. */
async function output(s: ShellSession, test: (text: string) => boolean, what: string): Promise<string> {
  const text = (): string =>
    s
      .scrollback()
      .toString('utf8')
      .replace(/\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07/g, '');
  const deadline = Date.now() + 30_000;
  while (!test(text())) {
    if (Date.now() > deadline || !s.running) assert.fail(`${what}: the session's output was ${JSON.stringify(text())}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return text();
}

describe('shell sessions on Windows: ConPTY, the Job Object, the launcher (no view mounted: see the header)', function () {
  this.timeout(120_000);
  let wine = false;
  let base = '';
  let folder = '';
  let views = '';
  let program = '';
  let sessions: ShellSessions;
  let stand: ReturnType<typeof standIn>;

  before(function () {
    if (process.platform !== 'win32') this.skip();
    wine = underWine();
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-shell-win-'));
    folder = path.join(base, 'folder');
    views = path.join(base, 'views');
    fs.mkdirSync(folder);
    fs.mkdirSync(views);
    program = path.join(base, 'program.js');
    fs.writeFileSync(program, PROGRAM);
  });

  beforeEach(() => {
    sessions = new ShellSessions();
    stand = standIn(folder, views);
  });

  afterEach(async () => {
    await sessions.closeAll();
  });

  after(() => {
    if (base) fs.rmSync(base, { recursive: true, force: true });
  });

  it('refuses a session whose token cannot be lowered, starting nothing and closing the view it opened (wine)', async function () {
    if (!wine) this.skip();
    const err = await sessions.start(stand.shadow, { agent: 'refused', argv: [process.execPath, program], cols: 80, rows: 24 }).then(
      () => assert.fail('the session started'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ShadowError, String(err));
    assert.strictEqual(err.code, 'NAMESPACE_UNAVAILABLE');
    assert.match(err.message, /Low integrity/);
    assert.match(err.message, /--unprotected/);
    // The launcher was never let go: the program did not run (give a stray one time to show).
    await new Promise((r) => setTimeout(r, 3000));
    assert.ok(!fs.existsSync(path.join(views, 'refused', 'made-by-session.txt')), 'the program ran');
    assert.deepStrictEqual(stand.closed, ['refused']);
    assert.strictEqual(sessions.list().length, 0);
  });

  it('runs a program on a pseudo console in the view: output, typing, resize, rejoin, exit status', async () => {
    const s = await sessions.start(stand.shadow, {
      agent: 'alice',
      argv: [process.execPath, program],
      cols: 100,
      rows: 30,
      unprotected: true,
    });
    assert.deepStrictEqual(s.protections, wine ? ['job'] : ['job', 'low-integrity']);
    if (wine) assert.match(s.unprotectedReason ?? '', /Low integrity/);
    const view = path.join(views, 'alice');
    const first = await output(s, (t) => t.includes('ready'), 'the program did not start');
    assert.match(first, /ready tty=true size=100x30 cwd=(\S+)/);
    assert.strictEqual(/cwd=(\S+)/.exec(first)?.[1].toLowerCase(), view.toLowerCase());
    assert.strictEqual(fs.readFileSync(path.join(view, 'made-by-session.txt'), 'utf8'), 'from alice');
    assert.ok(!fs.existsSync(path.join(folder, 'made-by-session.txt')), 'the folder was written');

    s.write(Buffer.from('hello\r'));
    await output(s, (t) => t.includes('got:hello'), 'typing did not reach the program');

    s.resize(120, 40);
    assert.deepStrictEqual([s.cols, s.rows], [120, 40]);
    s.write(Buffer.from('size\r'));
    const sized = await output(s, (t) => t.includes('size=1'), 'the program did not answer size');
    // Wine's ConPTY keeps the console at its first size (see the header).
    assert.match(sized, wine ? /size=100x30/ : /size=120x40/);

    // A terminal that joins again finds the running session of the agent and its output so far.
    assert.strictEqual(sessions.runningOf(stand.shadow, 'alice'), s);
    assert.match(s.scrollback().toString('utf8'), /got:hello/);

    s.write(Buffer.from('exit 7\r'));
    assert.deepStrictEqual(await s.ended(), { exitCode: 7, signal: null });
    assert.strictEqual(s.running, false);
    // The view opened for the session is closed with its last session.
    for (let i = 0; i < 50 && !stand.closed.includes('alice'); i++) await new Promise((r) => setTimeout(r, 100));
    assert.deepStrictEqual(stand.closed, ['alice']);
  });

  it("starts the user's command interpreter (%ComSpec%) by default, with the agent in its environment", async () => {
    const s = await sessions.start(stand.shadow, { agent: 'bob', cols: 80, rows: 24, unprotected: true });
    assert.strictEqual(s.argv.length, 1);
    assert.match(s.argv[0], /cmd\.exe$/i);
    s.write(Buffer.from('echo typed-%SHADOWFS_AGENT%-%SHADOWFS_SHELL%\r'));
    await output(s, (t) => t.includes(`typed-bob-${s.id}`), 'cmd.exe did not echo');
    s.write(Buffer.from('exit 3\r'));
    assert.deepStrictEqual(await s.ended(), { exitCode: 3, signal: null });
  });

  it('closes a session whose program goes on: the console closed, then the job ended', async () => {
    const s = await sessions.start(stand.shadow, {
      agent: 'carol',
      argv: [process.execPath, program],
      cols: 80,
      rows: 24,
      unprotected: true,
    });
    await output(s, (t) => t.includes('ready'), 'the program did not start');
    s.write(Buffer.from('hang\r'));
    const pid = s.pid;
    const end = await s.close();
    assert.strictEqual(s.running, false);
    assert.strictEqual(end.signal, null);
    assert.strictEqual(typeof end.exitCode, 'number');
    assert.throws(() => process.kill(pid, 0), 'the launcher is still alive');
  });

  it('answers NOT_FOUND for a program that is not there, and closes the view', async () => {
    await assert.rejects(
      sessions.start(stand.shadow, { agent: 'dave', argv: ['no-such-program-here'], cols: 80, rows: 24, unprotected: true }),
      (e: unknown) => e instanceof ShadowError && e.code === 'NOT_FOUND',
    );
    assert.deepStrictEqual(stand.closed, ['dave']);
  });
});

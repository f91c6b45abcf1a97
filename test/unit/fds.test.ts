// Descriptors the daemon hands on (src/platform/linux-fds.ts), on real processes: a child started
// with a descriptor open (a shell's `30</dev/null`, as an agent's MCP host may leave one open when
// it starts the daemon) passes it on to what it starts until it marks it close-on-exec; the daemon
// does so at its start. (Node marks its first few descriptors close-on-exec as it starts, so a
// low one, or a spawn's extra 'pipe' at 3, would show nothing; here Node 22 leaves 20 and up.)
import * as assert from 'assert';
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { processAlive } from '../../src/common/pid';
import { inheritableFdsOf } from '../helpers/fds';
import { eventually } from '../helpers/fixtures';

const root = path.join(__dirname, '..', '..', '..');
/** `argv` started by bash (dash takes one digit) with descriptor 30 open on /dev/null, not close-on-exec. */
const withFd30 = (argv: string[]): string[] => ['-c', 'exec "$@" 30</dev/null', 'bash', ...argv];

describe('unit: descriptors the daemon hands on (Linux)', () => {
  before(function () {
    if (process.platform !== 'linux') this.skip();
  });

  it('closeOnExecInherited marks what the process was started with, and a program it starts then has none of it', () => {
    // The child lists its grandchild's descriptors before and after the call.
    const script = `
      const { execFileSync } = require('child_process');
      const fds = require(${JSON.stringify(path.join(root, 'dist', 'src', 'platform', 'linux-fds.js'))});
      const ls = () => execFileSync('sh', ['-c', 'ls /proc/$$/fd'], { encoding: 'utf8' }).split('\\n').filter(Boolean).map(Number);
      const before = { inheritable: fds.inheritableFds(), grandchild: ls() };
      const marked = fds.closeOnExecInherited();
      process.stdout.write(JSON.stringify({ before, marked, after: { inheritable: fds.inheritableFds(), grandchild: ls() } }));`;
    const r = spawnSync('bash', withFd30([process.execPath, '-e', script]), { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
    assert.strictEqual(r.status, 0);
    const out = JSON.parse(r.stdout) as {
      before: { inheritable: number[]; grandchild: number[] };
      marked: number[];
      after: { inheritable: number[]; grandchild: number[] };
    };
    assert.ok(out.before.inheritable.includes(30), JSON.stringify(out));
    assert.ok(out.before.grandchild.includes(30), 'without the mark a started program holds descriptor 30');
    assert.ok(out.marked.includes(30), JSON.stringify(out));
    assert.deepStrictEqual(out.after.inheritable, []);
    assert.ok(!out.after.grandchild.includes(30), JSON.stringify(out));
  });

  it('a daemon started with a descriptor open keeps it from every program it starts', async () => {
    const rt = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-fds-'));
    fs.chmodSync(rt, 0o700);
    const env = { ...process.env, XDG_RUNTIME_DIR: rt, XDG_STATE_HOME: path.join(rt, 'state'), HOME: rt };
    const daemon = spawn(
      'bash',
      withFd30([process.execPath, path.join(root, 'bin', 'shadowfs.js'), 'serve', '--foreground', '--no-console']),
      {
        env,
        stdio: 'ignore',
      },
    );
    try {
      const pidFile = path.join(rt, 'shadowfs', 'daemon.pid');
      await eventually(() => fs.existsSync(path.join(rt, 'shadowfs', 'daemon.sock')), 30_000, 'the daemon to listen');
      assert.strictEqual(Number(fs.readFileSync(pidFile, 'utf8')), daemon.pid);
      assert.ok(fs.existsSync(`/proc/${daemon.pid}/fd/30`), 'the daemon still has descriptor 30 (it is not closed, only kept)');
      assert.deepStrictEqual(inheritableFdsOf(daemon.pid!), []);
      // The log is written behind the daemon's back (winston's stream): wait for the line.
      const log = path.join(rt, 'shadowfs', 'daemon.log');
      await eventually(
        () => fs.existsSync(log) && /kept descriptors (\d+, )*30(, \d+)*, open when the daemon started/.test(fs.readFileSync(log, 'utf8')),
        30_000,
        'the daemon to log the descriptor it kept',
      );
    } finally {
      daemon.kill('SIGTERM');
      await eventually(() => !processAlive(daemon.pid!), 30_000, 'the daemon to stop');
      fs.rmSync(rt, { recursive: true, force: true });
    }
  });
});

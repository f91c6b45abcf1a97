// The shadowfs CLI on a pseudo-terminal the test holds (node-pty), as a user's terminal would
// hold it: what it printed, keys typed into it, resizes, and its exit status. For the tests of
// interactive commands (shell sessions, review). node-pty is an optional dependency: a machine
// where it did not build fails these tests with a message saying so.
import * as path from 'path';
import { eventually, repoRoot } from './fixtures';

const cliPath = path.join(repoRoot, 'bin', 'shadowfs.js');

interface Pty {
  onData(fn: (d: string) => void): void;
  onExit(fn: (e: { exitCode: number; signal?: number }) => void): void;
  write(s: string): void;
  resize(cols: number, rows: number): void;
  kill(sig?: string): void;
}

function loadPty(): { spawn(file: string, args: string[], o: Record<string, unknown>): Pty } {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- an optional dependency: its absence is the test's failure
    return require('node-pty') as { spawn(file: string, args: string[], o: Record<string, unknown>): Pty };
  } catch (err) {
    throw new Error(`node-pty did not load (${(err as Error).message}): npm install builds it (needs python3, make and a C++ compiler)`);
  }
}

export interface TerminalOptions {
  cwd?: string;
  cols?: number;
  rows?: number;
  /** Variables set (or, with undefined, removed) in the CLI's environment besides the test's own. */
  env?: Record<string, string | undefined>;
}

export class CliTerminal {
  private out = '';
  readonly exited: Promise<number>;
  private readonly term: Pty;

  constructor(args: string[], opts: TerminalOptions = {}) {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...process.env, ...opts.env, TERM: 'xterm-256color' })) if (v !== undefined) env[k] = v;
    this.term = loadPty().spawn(process.execPath, [cliPath, ...args], {
      cwd: opts.cwd ?? repoRoot,
      env,
      cols: opts.cols ?? 100,
      rows: opts.rows ?? 30,
      name: 'xterm-256color',
    });
    this.term.onData((d) => (this.out += d));
    this.exited = new Promise((r) => this.term.onExit((e) => r(e.exitCode)));
  }

  get output(): string {
    return this.out;
  }

  type(s: string): void {
    this.term.write(s);
  }

  resize(cols: number, rows: number): void {
    this.term.resize(cols, rows);
  }

  /** Waits until the output from `from` on matches `re`; returns where the match ends. */
  async waitFor(re: RegExp, from = 0, ms = 20_000): Promise<number> {
    let end = -1;
    await eventually(
      () => {
        const m = re.exec(this.out.slice(from));
        if (m) end = from + m.index + m[0].length;
        return m !== null;
      },
      ms,
      `${re} in the terminal`,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; it shows:\n${this.out.slice(-2000)}`);
    });
    return end;
  }

  kill(): void {
    try {
      this.term.kill('SIGKILL');
    } catch {
      // gone
    }
  }
}

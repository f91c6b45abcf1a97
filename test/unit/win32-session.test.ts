// The parts of Windows shell sessions that are plain computation (src/platform/win32-session.ts),
// checked on any OS: the launcher's command line as node.exe will split it, the ConPTY version
// check, the default program; and, on Linux, that a session cannot be asked to go unconfined.
// The sessions themselves run under wine in test/windows/shell-win32.test.ts.
import * as assert from 'assert';
import { ShadowError } from '../../src/common/errors';
import { platform } from '../../src/platform';
import { checkConPty, CONPTY_BUILD, defaultWindowsShell, quoteWindowsArgument } from '../../src/platform/win32-session';
import { SESSION_LAUNCHER } from '../../src/platform/win32-launcher';
import type { Shadow } from '../../src/shadow';
import { ShellSession } from '../../src/shell/session';

/**
 * Splits a command line as the Microsoft C runtime does for a program's argv (written from its
 * documented rules, "Parsing C command-line arguments"): blanks separate arguments outside quotes;
 * 2n backslashes before a quote give n and the quote opens or closes; 2n+1 give n and a literal
 * quote; backslashes elsewhere are literal; "" inside quotes is a literal quote.
 */
function splitCommandLine(line: string): string[] {
  const out: string[] = [];
  let j = 0;
  for (;;) {
    while (line[j] === ' ' || line[j] === '\t') j++;
    if (j >= line.length) return out;
    let arg = '';
    let quoted = false;
    while (j < line.length) {
      const c = line[j];
      if (c === '\\') {
        let n = 0;
        while (line[j] === '\\') {
          n++;
          j++;
        }
        arg += '\\'.repeat(line[j] === '"' ? n >> 1 : n);
        if (line[j] === '"' && n % 2 === 1) {
          arg += '"';
          j++;
        }
        continue;
      }
      if (c === '"') {
        if (quoted && line[j + 1] === '"') {
          arg += '"';
          j += 2;
        } else {
          quoted = !quoted;
          j++;
        }
        continue;
      }
      if (!quoted && (c === ' ' || c === '\t')) break;
      arg += c;
      j++;
    }
    out.push(arg);
  }
}

describe('Windows shell sessions: the parts that are computation', () => {
  it('quotes arguments so that node.exe splits them back as they were', () => {
    const args = [
      'plain',
      '',
      'two words',
      'C:\\Program Files\\node\\node.exe',
      'ends in a backslash\\',
      'trailing\\\\',
      'say "hi"',
      '\\"already\\"',
      '"',
      'tab\there',
      'new\nline',
      '-e',
      SESSION_LAUNCHER,
      '--',
    ];
    const line = args.map(quoteWindowsArgument).join(' ');
    assert.deepStrictEqual(splitCommandLine(line), args);
    assert.strictEqual(quoteWindowsArgument('C:\\Windows\\System32\\cmd.exe'), 'C:\\Windows\\System32\\cmd.exe');
    assert.strictEqual(quoteWindowsArgument('a b\\'), '"a b\\\\"');
  });

  it('refuses Windows before the pseudo console node-pty uses, with NOT_SUPPORTED', () => {
    for (const old of ['10.0.17763', '10.0.18308', '6.3.9600', 'nonsense']) {
      assert.throws(
        () => checkConPty(old),
        (e: unknown) => e instanceof ShadowError && e.code === 'NOT_SUPPORTED' && e.message.includes(String(CONPTY_BUILD)),
        old,
      );
    }
    for (const ok of [`10.0.${CONPTY_BUILD}`, '10.0.19045', '10.0.26100']) checkConPty(ok);
  });

  it('starts %ComSpec% by default (its letter case as Windows gives it), else cmd.exe under SystemRoot', () => {
    assert.strictEqual(defaultWindowsShell({ ComSpec: 'D:\\Win\\system32\\cmd.exe' }), 'D:\\Win\\system32\\cmd.exe');
    assert.strictEqual(defaultWindowsShell({ COMSPEC: 'C:\\x\\cmd.exe' }), 'C:\\x\\cmd.exe');
    assert.strictEqual(defaultWindowsShell({ SystemRoot: 'E:\\Windows' }), 'E:\\Windows\\System32\\cmd.exe');
    assert.strictEqual(defaultWindowsShell({}), 'C:\\Windows\\System32\\cmd.exe');
  });

  it('a Linux session cannot be asked to go without its confinement (unprotected is for Windows)', async function () {
    if (platform.name !== 'linux') this.skip();
    const shadow = { folder: '/nonexistent-folder' } as unknown as Shadow;
    await assert.rejects(
      ShellSession.start(shadow, '/nonexistent-view', { agent: 'a', cols: 80, rows: 24, unprotected: true }),
      (e: unknown) => e instanceof ShadowError && e.code === 'NOT_SUPPORTED' && /Windows only/.test(e.message),
    );
  });
});

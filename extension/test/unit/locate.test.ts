import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { cliCommand, daemonCommand, findOnPath, locate, LocateError, mcpCommand, packageRootOf, shellCommand } from '../../src/locate';

describe('extension: finding the shadowfs installation', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shadowfs-ext-locate-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A fake installation: a package.json and the files locate() looks for (not run). */
  const install = (root: string, built = true): string => {
    fs.mkdirSync(path.join(root, 'bin'), { recursive: true });
    fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'shadowfs', version: '9.8.7' }));
    fs.writeFileSync(path.join(root, 'bin', 'shadowfs.js'), '#!/usr/bin/env node\n', { mode: 0o755 });
    if (built) {
      fs.mkdirSync(path.join(root, 'dist', 'src', 'client'), { recursive: true });
      fs.writeFileSync(path.join(root, 'dist', 'src', 'client', 'index.js'), '');
    }
    return path.join(root, 'bin', 'shadowfs.js');
  };

  it('follows an npm-style symlink on the PATH to the package', () => {
    const exe = install(path.join(dir, 'lib', 'node_modules', 'shadowfs'));
    fs.mkdirSync(path.join(dir, 'bin'));
    fs.symlinkSync(exe, path.join(dir, 'bin', 'shadowfs'));
    assert.strictEqual(findOnPath(`/nonexistent:${path.join(dir, 'bin')}`, 'linux'), path.join(dir, 'bin', 'shadowfs'));
    const found = locate('', `/nonexistent:${path.join(dir, 'bin')}`, 'linux');
    assert.strictEqual(found.packageRoot, path.join(dir, 'lib', 'node_modules', 'shadowfs'));
    assert.strictEqual(found.version, '9.8.7');
    assert.strictEqual(found.clientModule, path.join(found.packageRoot, 'dist', 'src', 'client', 'index.js'));
  });

  it('takes the setting over the PATH, and finds a package beside a Windows-style shim', () => {
    const shimDir = path.join(dir, 'win');
    install(path.join(shimDir, 'node_modules', 'shadowfs'));
    fs.writeFileSync(path.join(shimDir, 'shadowfs.cmd'), '@echo off\r\n');
    assert.strictEqual(packageRootOf(path.join(shimDir, 'shadowfs.cmd')), path.join(shimDir, 'node_modules', 'shadowfs'));
    assert.strictEqual(findOnPath(shimDir, 'win32'), path.join(shimDir, 'shadowfs.cmd'));
    assert.strictEqual(locate(path.join(shimDir, 'shadowfs.cmd'), '', 'win32').version, '9.8.7');
  });

  it('says what is missing, with a code', () => {
    const code = (fn: () => unknown): string => {
      try {
        fn();
      } catch (err) {
        assert.ok(err instanceof LocateError);
        return `${err.code}: ${err.message}`;
      }
      return 'no error';
    };
    assert.match(
      code(() => locate('', '/nonexistent', 'linux')),
      /^SHADOWFS_NOT_FOUND: shadowfs is not on the PATH.*shadowfs\.path/,
    );
    assert.match(
      code(() => locate('/nonexistent/shadowfs', '', 'linux')),
      /^SHADOWFS_NOT_FOUND: .*does not exist/,
    );
    fs.writeFileSync(path.join(dir, 'stray'), '');
    assert.match(
      code(() => locate(path.join(dir, 'stray'), '', 'linux')),
      /^SHADOWFS_NOT_FOUND: .*does not belong to a shadowfs installation/,
    );
    const unbuilt = install(path.join(dir, 'unbuilt'), false);
    assert.match(
      code(() => locate(unbuilt, '', 'linux')),
      /^SHADOWFS_NOT_BUILT: .*npm run build/,
    );
  });

  it('starts the daemon with the executable, through cmd.exe for a Windows shim', () => {
    assert.deepStrictEqual(daemonCommand('/usr/bin/shadowfs', 60, 'linux'), {
      command: '/usr/bin/shadowfs',
      args: ['serve', '--foreground', '--no-console', '--idle-timeout', '60'],
    });
    assert.deepStrictEqual(daemonCommand('/usr/bin/shadowfs', 0, 'linux').args, ['serve', '--foreground', '--no-console']);
    const win = daemonCommand('C:\\Program Files\\shadowfs\\shadowfs.cmd', 900, 'win32');
    assert.deepStrictEqual(win.args.slice(0, 3), ['/d', '/s', '/c']);
    assert.strictEqual(win.args[3], '"C:\\Program Files\\shadowfs\\shadowfs.cmd" serve --foreground --no-console --idle-timeout 900');
  });

  it('runs the MCP server and agent terminals with the same executable, quoting names for a Windows shim', () => {
    assert.deepStrictEqual(mcpCommand('/usr/bin/shadowfs', 'greeter', 'claude', 'linux'), {
      command: '/usr/bin/shadowfs',
      args: ['mcp', '--shadow=greeter', '--agent=claude'],
    });
    const greeter = { name: 'greeter', mountPoint: '/run/user/0/shadowfs/mounts/greeter' };
    assert.deepStrictEqual(shellCommand('/usr/bin/shadowfs', greeter, '-my agent', 'linux'), {
      command: '/usr/bin/shadowfs',
      args: ['shell', 'greeter', '--agent=-my agent'],
    });
    // A shadow whose name reads as an option is named by its mount point.
    assert.deepStrictEqual(shellCommand('/usr/bin/shadowfs', { name: '-x', mountPoint: '/m/-x' }, 'a', 'linux').args, [
      'shell',
      '/m/-x',
      '--agent=a',
    ]);
    const win = cliCommand('C:\\shadowfs\\shadowfs.cmd', ['shell', 'greeter', '--agent', 'my "agent"'], 'win32');
    assert.strictEqual(win.args[3], '"C:\\shadowfs\\shadowfs.cmd" shell greeter --agent "my ""agent"""');
    assert.strictEqual(cliCommand('C:\\shadowfs\\shadowfs.exe', ['mcp'], 'win32').command, 'C:\\shadowfs\\shadowfs.exe');
  });
});

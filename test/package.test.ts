// The npm package as a user gets it: `npm pack` of this tree (its prepack step,
// scripts/pack-prebuilds.sh, puts the prebuilt native modules and the run launcher into
// prebuilds/<platform>-<arch>/), installed with `npm install <tarball>` into an empty project
// whose PATH holds node, npm and a few system tools but no compiler and no cmake; then, from
// there, `shadowfs doctor`, the demo, the daemon with a confined run (the prebuilt launcher), and
// the Windows module loaded from the same installed package by a Windows node.exe under wine.
//
// It packs the tree as built (SHADOWFS_PACK_AS_BUILT=1: what the rest of the suite tests). A tree
// without the Windows cross build (a clean clone, whose pass 3 makes it) gets it built by the pack
// step (scripts/build-win.sh: minutes, once; pass 3 then finds it built); the wine prefix, made by
// scripts/wine-node.sh on first use, likewise. Dependencies come from the npm registry, through
// npm's cache where it has them.
import * as assert from 'assert';
import { spawnSync, SpawnSyncReturns } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { FolderGuard, makeProject, repoRoot, tempDir } from './helpers/fixtures';
import { running } from './helpers/hooks';

interface PackedFile {
  path: string;
  size: number;
  mode: number;
}

/** The compilers and build tools a source build would need; none may be on the installed project's PATH. */
const BUILD_TOOLS = ['cc', 'c++', 'gcc', 'g++', 'clang', 'clang++', 'cmake', 'make', 'ninja'];
/** What the project's PATH holds besides node: npm's own needs, and what a FUSE user has. */
const TOOLS = ['npm', 'npx', 'sh', 'fusermount3', 'mount', 'umount'];

/** An environment without npm's per-script variables: an outer `npm test` must not steer the inner npm (its prefix, its config). */
function cleanEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, ...extra };
}

function sha(file: string): string {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

function show(r: SpawnSyncReturns<string>): string {
  return `exit ${r.status}${r.signal ? ` (${r.signal})` : ''}${r.error ? ` ${r.error.message}` : ''}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
}

describe('the npm package (npm pack, installed without a compiler)', function () {
  this.timeout(180_000);
  let packed: PackedFile[] = [];
  let tarball = '';
  let app = '';
  let installed = '';
  let env: NodeJS.ProcessEnv = {};
  let runtime = '';

  /** `npx shadowfs ...` in the installed project, with its PATH. */
  const shadowfs = (...args: string[]): SpawnSyncReturns<string> =>
    spawnSync(path.join(String(env.PATH), 'npx'), ['--no-install', 'shadowfs', ...args], {
      cwd: app,
      env,
      encoding: 'utf8',
      timeout: 150_000,
    });

  before(function () {
    // A clean clone's first pack also cross-builds the Windows module (see the top of this file).
    this.timeout(30 * 60_000);
    const out = tempDir('pack');
    const r = spawnSync('npm', ['pack', '--json', '--pack-destination', out], {
      cwd: repoRoot,
      env: cleanEnv({ SHADOWFS_PACK_AS_BUILT: '1' }),
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    assert.strictEqual(r.status, 0, `npm pack failed: ${show(r)}`);
    const result = JSON.parse(r.stdout) as Array<{ filename: string; files: PackedFile[] }>;
    packed = result[0].files;
    tarball = path.join(out, result[0].filename);
    assert.ok(fs.existsSync(tarball), tarball);
    assert.ok(!fs.existsSync(path.join(repoRoot, 'prebuilds')), 'postpack removes prebuilds/ from the tree again');

    // The project: node, npm and a few tools by symbolic links, nothing else on its PATH.
    const root = tempDir('pkg-install');
    const bin = path.join(root, 'tools');
    app = path.join(root, 'app');
    fs.mkdirSync(bin);
    fs.mkdirSync(app);
    fs.symlinkSync(process.execPath, path.join(bin, 'node'));
    for (const t of TOOLS) {
      const where = spawnSync('sh', ['-c', `command -v ${t}`], { encoding: 'utf8' }).stdout.trim();
      if (where.startsWith('/')) fs.symlinkSync(where, path.join(bin, t));
      else assert.notStrictEqual(t, 'npm', 'npm is not on PATH');
    }
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    runtime = tempDir('pkg-rt');
    fs.chmodSync(runtime, 0o700);
    env = cleanEnv({ PATH: bin, XDG_RUNTIME_DIR: runtime, SHADOWFS_STATE_DIR: path.join(runtime, 'state') });
    delete env.SHADOWFS_NATIVE_MODULE;
    installed = path.join(app, 'node_modules', 'shadowfs');
  });

  after(() => {
    // The daemon `shadowfs mount` started from the installed package.
    let pid = 0;
    try {
      pid = Number(fs.readFileSync(path.join(runtime, 'shadowfs', 'daemon.pid'), 'utf8'));
    } catch {
      return;
    }
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return;
    }
    const deadline = Date.now() + 30_000;
    while (running(pid) && Date.now() < deadline) spawnSync('sleep', ['0.05']);
    if (running(pid)) process.kill(pid, 'SIGKILL');
  });

  it('holds the prebuilt modules for linux-x64 and win32-x64 and the launcher, byte for byte the builds, and no TypeScript or tests', () => {
    const byPath = new Map(packed.map((f) => [f.path, f]));
    const expect: Array<[string, string]> = [
      ['prebuilds/linux-x64/shadowfs.node', 'build/Release/shadowfs.node'],
      ['prebuilds/linux-x64/shadowfs-launch', 'build/Release/shadowfs-launch'],
      ['prebuilds/win32-x64/shadowfs.node', 'build-win/Release/shadowfs.node'],
    ];
    for (const [inPackage, built] of expect) {
      const f = byPath.get(inPackage);
      assert.ok(f, `${inPackage} is not in the tarball`);
      assert.strictEqual(f.size, fs.statSync(path.join(repoRoot, built)).size, `${inPackage} is ${built}`);
    }
    assert.strictEqual(byPath.get('prebuilds/linux-x64/shadowfs-launch')!.mode & 0o111, 0o111, 'the launcher is executable');
    for (const f of ['bin/shadowfs.js', 'dist/src/cli/main.js', 'dist/protocol.schema.json', 'scripts/install.js', 'CMakeLists.txt'])
      assert.ok(byPath.has(f), `${f} is in the tarball`);
    const unwanted = packed.filter(
      (f) => /^(src|test|build|build-win|node_modules|extension)\//.test(f.path) || /(?<!\.d)\.ts$/.test(f.path),
    );
    assert.deepStrictEqual(
      unwanted.map((f) => f.path),
      [],
    );
  });

  it('installs into an empty project whose PATH has no compiler, from the prebuilt binaries', () => {
    for (const t of BUILD_TOOLS) {
      const r = spawnSync(path.join(String(env.PATH), 'sh'), ['-c', `command -v ${t}`], { env, encoding: 'utf8' });
      assert.notStrictEqual(r.status, 0, `${t} is on the project's PATH: ${r.stdout}`);
    }
    const r = spawnSync(
      path.join(String(env.PATH), 'npm'),
      ['install', '--no-audit', '--no-fund', '--prefer-offline', '--foreground-scripts', tarball],
      { cwd: app, env, encoding: 'utf8', timeout: 170_000 },
    );
    assert.strictEqual(r.status, 0, `npm install failed: ${show(r)}`);
    assert.doesNotMatch(r.stderr, /shadowfs: /, 'the install step has nothing to say where a prebuilt binary fits');
    assert.ok(!fs.existsSync(path.join(installed, 'build')), 'nothing was built from source');
    for (const f of ['shadowfs.node', 'shadowfs-launch'])
      assert.strictEqual(sha(path.join(installed, 'prebuilds', 'linux-x64', f)), sha(path.join(repoRoot, 'build', 'Release', f)), f);
    assert.ok(!fs.existsSync(path.join(app, 'node_modules', 'mocha')), 'no development dependency is installed');
    // The loader picks the prebuilt module, and the launcher beside it.
    const which = spawnSync(
      path.join(String(env.PATH), 'node'),
      [
        '-e',
        `const n = require(${JSON.stringify(path.join(installed, 'dist', 'src', 'shadow', 'native.js'))});
         n.nativeModule();
         const l = require(${JSON.stringify(path.join(installed, 'dist', 'src', 'run', 'launcher.js'))});
         console.log(JSON.stringify({ module: n.nativeModuleFile(), launcher: l.launcherPath() }));`,
      ],
      { cwd: app, env, encoding: 'utf8' },
    );
    assert.strictEqual(which.status, 0, show(which));
    assert.deepStrictEqual(JSON.parse(which.stdout), {
      module: path.join(installed, 'prebuilds', 'linux-x64', 'shadowfs.node'),
      launcher: path.join(installed, 'prebuilds', 'linux-x64', 'shadowfs-launch'),
    });
  });

  it('npx shadowfs doctor --json: the native module loads', () => {
    const r = shadowfs('doctor', '--json');
    const out = JSON.parse(r.stdout) as { healthy: boolean; checks: Array<{ name: string; ok: boolean; detail: string }> };
    assert.deepStrictEqual(
      out.checks.find((c) => c.name === 'native-module'),
      { name: 'native-module', required: true, ok: true, detail: 'backends: fuse_ll, fuse_hl' },
      show(r),
    );
    assert.strictEqual(out.healthy, true, show(r));
    assert.strictEqual(r.status, 0, show(r));
  });

  it('npx shadowfs demo: two agents change the bundled example in their layers, the folder stays as it was', () => {
    const r = shadowfs('demo', '--json');
    assert.strictEqual(r.status, 0, show(r));
    const s = JSON.parse(r.stdout) as {
      folder: string;
      folderUnchanged: boolean;
      testsInFolder: number;
      agents: Record<string, { tests: number }>;
    };
    assert.strictEqual(s.folder, fs.realpathSync(path.join(installed, 'examples', 'demo-project')));
    assert.strictEqual(s.folderUnchanged, true);
    assert.strictEqual(s.testsInFolder, 0);
    assert.strictEqual(s.agents.alice.tests, 0);
    assert.notStrictEqual(s.agents.bob.tests, 0, "bob's edit breaks the example's tests, in his layer only");
  });

  it("the package's daemon mounts a folder and confines a run with the prebuilt launcher", async () => {
    const lower = makeProject('pkg-lower');
    const guard = new FolderGuard(lower);
    const m = shadowfs('mount', lower, '--json');
    assert.strictEqual(m.status, 0, show(m));
    const name = (JSON.parse(m.stdout) as { name: string }).name;
    try {
      const r = shadowfs(
        'run',
        name,
        '--agent',
        'a',
        '--json',
        '--',
        'node',
        '-e',
        'require("fs").writeFileSync("made-by-run.txt", "x"); console.log(process.cwd())',
      );
      assert.strictEqual(r.status, 0, show(r));
      const run = JSON.parse(r.stdout) as { exitCode: number; stdout: string; protected: boolean; protections: string[] };
      assert.strictEqual(run.exitCode, 0, r.stdout);
      assert.strictEqual(run.stdout.trim(), fs.realpathSync(lower), 'the run stands at the folder’s own path');
      assert.strictEqual(run.protected, true, r.stdout);
      assert.ok(run.protections.includes('mount'), r.stdout);
      const file = shadowfs('file', 'read', name, 'made-by-run.txt', '--agent', 'a', '--json');
      assert.strictEqual(file.status, 0, show(file));
      assert.strictEqual((JSON.parse(file.stdout) as { content: string }).content, 'x', 'what the run wrote is in its layer');
    } finally {
      const u = shadowfs('unmount', name, '--json');
      assert.strictEqual(u.status, 0, show(u));
    }
    assert.ok(!fs.existsSync(path.join(lower, 'made-by-run.txt')));
    await guard.check();
  });

  it('a Windows node.exe (wine) loads the win32-x64 prebuilt module from the same installed package', () => {
    assert.strictEqual(
      sha(path.join(installed, 'prebuilds', 'win32-x64', 'shadowfs.node')),
      sha(path.join(repoRoot, 'build-win', 'Release', 'shadowfs.node')),
    );
    const wineNode = (...args: string[]): SpawnSyncReturns<string> =>
      spawnSync('bash', [path.join(repoRoot, 'scripts', 'wine-node.sh'), ...args], {
        cwd: repoRoot,
        env: cleanEnv({}),
        encoding: 'utf8',
        timeout: 170_000,
      });
    const native = path.join(installed, 'dist', 'src', 'shadow', 'native.js');
    const r = wineNode(
      '-e',
      `const n = require(${JSON.stringify(native)}); const m = n.nativeModule(); console.log(JSON.stringify({ file: n.nativeModuleFile(), backends: m.backends }));`,
    );
    assert.strictEqual(r.status, 0, show(r));
    const out = JSON.parse(r.stdout) as { file: string; backends: string[] };
    // node.exe sees the Linux path through wine's drive Z:.
    assert.match(out.file, /^Z:\\.*\\node_modules\\shadowfs\\prebuilds\\win32-x64\\shadowfs\.node$/i, r.stdout);
    assert.deepStrictEqual(out.backends, ['winfsp', 'fuse_hl']);
    // And doctor, run the way the installed bin runs, says the same (WinFsp itself is not here).
    const d = wineNode(path.join(installed, 'bin', 'shadowfs.js'), 'doctor', '--json');
    const checks = (JSON.parse(d.stdout) as { checks: Array<{ name: string; ok: boolean; detail: string }> }).checks;
    assert.deepStrictEqual(
      checks.find((c) => c.name === 'native-module'),
      { name: 'native-module', required: true, ok: true, detail: 'backends: winfsp, fuse_hl' },
      show(d),
    );
  });
});

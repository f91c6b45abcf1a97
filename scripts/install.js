#!/usr/bin/env node
// npm's install step for shadowfs (package.json "install"): makes sure a native module is there
// for this system. In order:
//   - a source build of the package's own (build/Release/shadowfs.node; on Windows also
//     build-win/Release) or $SHADOWFS_NATIVE_MODULE: nothing to do;
//   - the prebuilt module for this platform and architecture (prebuilds/<platform>-<arch>/, put
//     there by scripts/pack-prebuilds.sh when the package was packed): checked by loading it;
//   - otherwise a source build with cmake-js, when cmake, a C++ compiler (and on Linux
//     pkg-config and libfuse3-dev) are there; when they are not, it says what is missing.
// It never fails the install on a system with a prebuilt binary: when that binary does not load
// (libfuse3 missing, an older C library) it says why and what to install, and `shadowfs doctor`
// says the same later. `npm install --build-from-source` (or `npm rebuild shadowfs
// --build-from-source`) builds from source even where a prebuilt binary fits; a source build
// that was tried and failed fails the install, with the compiler's output. Plain JavaScript with
// no dependencies: it runs before anything else of the package can.
'use strict';
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const target = `${process.platform}-${process.arch}`;
const say = (line) => process.stderr.write(`shadowfs: ${line}\n`);

const sourceBuilds = [path.join(root, 'build', 'Release', 'shadowfs.node')];
if (process.platform === 'win32') sourceBuilds.unshift(path.join(root, 'build-win', 'Release', 'shadowfs.node'));
const prebuiltDir = path.join(root, 'prebuilds', target);
const prebuilt = path.join(prebuiltDir, 'shadowfs.node');
const fromSource = ['true', 'shadowfs'].includes(String(process.env.npm_config_build_from_source));

/** Loads the module in a child process (a module that crashes on load must not take npm with it); the error, or null. */
function loadError(file) {
  const r = spawnSync(process.execPath, ['-e', 'require(process.argv[1])', file], { encoding: 'utf8', timeout: 60_000 });
  if (r.status === 0) return null;
  const lines = String(r.stderr || r.error || `exit status ${r.status}`)
    .split('\n')
    .filter((l) => /Error|error|cannot|No such/.test(l));
  return lines[0] ? lines[0].trim() : `exit status ${r.status}`;
}

/** What a load error means for the user, with what to install. */
function advice(err) {
  if (/libfuse3\.so/.test(err))
    return 'it needs the FUSE 3 library: install it (Debian/Ubuntu: apt-get install fuse3; Fedora: dnf install fuse3)';
  if (/GLIBC|GLIBCXX|CXXABI/.test(err))
    return 'it was built for newer C and C++ libraries than this system has (GLIBC 2.34 and GLIBCXX 3.4.30: Debian 12, Ubuntu 22.04 or newer); a source build fits this system';
  return 'a source build may (npm rebuild shadowfs --build-from-source; needs cmake, a C++ compiler, pkg-config and libfuse3-dev on Linux)';
}

function onPath(cmd) {
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean);
  const exts = process.platform === 'win32' ? (process.env.PATHEXT || '.EXE;.CMD;.BAT').split(';') : [''];
  return dirs.some((d) => exts.some((e) => fs.existsSync(path.join(d, cmd + e))));
}

/** What a source build needs that this system lacks. */
function missingTools() {
  const missing = [];
  if (!onPath('cmake')) missing.push('cmake');
  // On Windows cmake-js finds Visual Studio's compiler itself.
  if (process.platform !== 'win32' && !['c++', 'g++', 'clang++'].some(onPath)) missing.push('a C++ compiler (g++ or clang++)');
  if (process.platform === 'linux') {
    if (!onPath('pkg-config')) missing.push('pkg-config');
    else if (spawnSync('pkg-config', ['--exists', 'fuse3']).status !== 0) missing.push('the FUSE 3 headers (libfuse3-dev)');
  }
  return missing;
}

function buildFromSource() {
  let cmakeJs;
  try {
    cmakeJs = require.resolve('cmake-js/bin/cmake-js', { paths: [root] });
  } catch {
    say('cmake-js is not installed beside shadowfs (it is a dependency of the package): reinstall shadowfs');
    return false;
  }
  say(`building the native module from source (cmake-js compile in ${root})`);
  const r = spawnSync(process.execPath, [cmakeJs, 'compile', '--log-level', 'warn'], { cwd: root, stdio: 'inherit' });
  return r.status === 0;
}

function main() {
  if (process.env.SHADOWFS_NATIVE_MODULE) return 0; // the user names the module
  if (!fromSource) {
    const built = sourceBuilds.find((f) => fs.existsSync(f));
    if (built) return 0; // a build of this checkout (a git clone, or an earlier source build)
  }
  const hasPrebuilt = fs.existsSync(prebuilt);
  if (hasPrebuilt && !fromSource) {
    // npm keeps the executable bit, but a tarball repacked by other tools may not.
    const launcher = path.join(prebuiltDir, 'shadowfs-launch');
    if (fs.existsSync(launcher)) fs.chmodSync(launcher, 0o755);
    const err = loadError(prebuilt);
    if (!err) return 0;
    say(`the prebuilt native module for ${target} does not load: ${err}`);
    say(advice(err));
    // A source build cannot stand in for a missing libfuse3 (it links the same library).
    if (!/libfuse3\.so/.test(err) && missingTools().length === 0) {
      if (buildFromSource() && !loadError(sourceBuilds[sourceBuilds.length - 1])) return 0;
      say('the source build did not give a module that loads either; shadowfs cannot mount until one of the two does (shadowfs doctor says what is missing)');
    }
    return 0; // never fail the install where a prebuilt binary exists
  }
  const have = fs.existsSync(path.join(root, 'prebuilds'))
    ? fs.readdirSync(path.join(root, 'prebuilds')).join(', ')
    : 'none in this copy';
  const missing = missingTools();
  if (missing.length) {
    if (fromSource) say('--build-from-source was asked for, but this system cannot build the native module');
    else say(`no prebuilt native module for ${target} (prebuilt: ${have}), and none can be built here`);
    say(`missing: ${missing.join(', ')}`);
    say(
      process.platform === 'linux'
        ? 'install them (Debian/Ubuntu: apt-get install cmake g++ pkg-config libfuse3-dev), then run "npm rebuild shadowfs"'
        : 'install them, then run "npm rebuild shadowfs"',
    );
    say("until then shadowfs's client and protocol work, and mounting does not");
    return fromSource ? 1 : 0;
  }
  return buildFromSource() ? 0 : 1;
}

process.exitCode = main();

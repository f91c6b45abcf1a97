#!/usr/bin/env bash
# npm pack / npm publish (package.json "prepack"): puts the prebuilt native binaries into the
# package, so that `npm install shadowfs` needs no compiler on the systems they fit:
#   prebuilds/linux-x64/shadowfs.node      the module, from build/Release (cmake-js; glibc, links
#                                          libfuse3.so.3 as Debian ships it)
#   prebuilds/linux-x64/shadowfs-launch    the run launcher beside it (src/run/launcher.ts)
#   prebuilds/win32-x64/shadowfs.node      the MinGW cross build, from build-win/Release
# src/shadow/native.ts loads prebuilds/<platform>-<arch>/ after a source build of the package's own
# (build/Release, and on Windows build-win/Release); scripts/install.js builds from source
# through cmake-js where no prebuilt binary fits. `postpack` (this script with --clean) removes
# prebuilds/ again: it is made for the tarball only.
#
# `--win32 DIR` does the Windows step alone: DIR/win32-x64/shadowfs.node, built and checked as
# for the package. scripts/build-msi.sh stages the MSI's module with it, so the npm package and
# the MSI carry the same binary from the same step, in the same place (prebuilds\win32-x64\).
#
# What is missing is built: the TypeScript (npm run build:ts), the Linux module and launcher
# (cmake-js compile), the Windows module (scripts/build-win.sh: MinGW, with apt-get when
# missing). What is older than its sources is rebuilt too, so a published package never carries
# stale binaries, except with SHADOWFS_PACK_AS_BUILT=1, which packs the tree as it is built (the
# package test packs the tree the rest of the suite tests; it never rebuilds). Linux only: it
# cross-builds the Windows module.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
say() { printf 'pack-prebuilds: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

if [ "${1:-}" = --clean ]; then
  rm -rf prebuilds
  exit 0
fi
[ "$(uname -s)" = Linux ] || die "packing needs Linux (the Linux module is built here and the Windows one cross-built with MinGW)"

AS_BUILT=${SHADOWFS_PACK_AS_BUILT:-}
# needs_build FILE PATHS...: FILE is missing, or (unless packing as built) older than a file under PATHS.
needs_build() {
  local f=$1
  shift
  [ ! -f "$f" ] && return 0
  [ -n "$AS_BUILT" ] && return 1
  [ -n "$(find "$@" -type f -newer "$f" -print -quit 2>/dev/null)" ]
}
# win32_prebuild DIR: the Windows module (cross-built when missing or stale) as DIR/win32-x64/shadowfs.node.
win32_prebuild() {
  if needs_build build-win/Release/shadowfs.node native CMakeLists.txt cmake; then
    say "cross-building the Windows module (scripts/build-win.sh)"
    bash scripts/build-win.sh >&2
  fi
  mkdir -p "$1/win32-x64"
  install -m 0755 build-win/Release/shadowfs.node "$1/win32-x64/"
  # A Windows DLL starts with "MZ"; an ELF file with 0x7f "ELF": a swapped or broken copy stops here.
  [ "$(head -c 2 "$1/win32-x64/shadowfs.node")" = MZ ] || die "build-win/Release/shadowfs.node is not a Windows DLL"
}
if [ "${1:-}" = --win32 ]; then
  [ -n "${2:-}" ] || die "usage: pack-prebuilds.sh --win32 DIR"
  win32_prebuild "$2"
  say "win32-x64/shadowfs.node $(stat -c %s "$2/win32-x64/shadowfs.node") bytes in $2"
  exit 0
fi

if needs_build dist/src/cli/main.js src bin tsconfig.json || [ ! -f dist/protocol.schema.json ]; then
  say "compiling TypeScript (npm run build:ts)"
  npm run --silent build:ts >&2
fi
if needs_build build/Release/shadowfs.node native CMakeLists.txt || needs_build build/Release/shadowfs-launch native/launcher; then
  say "building the Linux module and launcher (cmake-js compile)"
  node_modules/.bin/cmake-js compile --log-level warn >&2
fi

linux=$(node -p 'process.platform + "-" + process.arch')
rm -rf prebuilds
mkdir -p "prebuilds/$linux"
install -m 0755 build/Release/shadowfs.node build/Release/shadowfs-launch "prebuilds/$linux/"
win32_prebuild prebuilds
for f in "prebuilds/$linux/shadowfs.node" "prebuilds/$linux/shadowfs-launch"; do
  [ "$(head -c 4 "$f" | tail -c 3)" = ELF ] || die "$f is not an ELF file"
done
say "$(cd prebuilds && find . -type f -printf '%P %s bytes\n' | sort | paste -sd ';' | sed 's/;/; /g')"

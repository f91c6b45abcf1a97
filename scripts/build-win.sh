#!/usr/bin/env bash
# npm run build:win: cross-compiles the native module and the C++ unit tests for 64-bit Windows
# with MinGW-w64 (installed with apt-get when missing), into build-win/:
#   build-win/Release/shadowfs.node      loads in a Windows node.exe (and renamed hosts)
#   build-win/unit/shadowfs_unit_tests.exe
# On a Windows machine build with MSVC instead: npm run build:native (see docs/windows.md).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
say() { printf 'build-win: %s\n' "$*" >&2; }
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    say "installing Debian packages needs root or sudo"; exit 1; fi
}
# One cross build at a time: `npm test` starts one in its second lane while
# test/package.test.ts's `npm pack` (prepack) may ask for the same build-win/; the second waits,
# then finds it built.
mkdir -p build-win
exec 9>build-win/.build.lock
if ! flock -n 9; then
  say "waiting for another cross build of this checkout to end"
  flock 9
fi
if ! command -v x86_64-w64-mingw32-g++-posix >/dev/null 2>&1; then
  say "installing MinGW-w64 (g++-mingw-w64-x86-64-posix) with apt-get..."
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    g++-mingw-w64-x86-64-posix binutils-mingw-w64-x86-64 >/dev/null
fi
npx cmake-js build --out build-win --log-level warn \
  --CDCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/mingw-w64-x86_64.cmake" "$@"
ls -l build-win/Release/shadowfs.node build-win/unit/shadowfs_unit_tests.exe >&2

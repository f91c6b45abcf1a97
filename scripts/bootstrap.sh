#!/usr/bin/env bash
# Makes this checkout ready to run: installs missing system packages (Debian/Ubuntu, through
# apt-get), the npm dependencies, and builds the native module and the TypeScript.
# Idempotent and quiet when everything is already there. Used by scripts/demo.sh and
# scripts/test.sh; safe to run by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'bootstrap: %s\n' "$*" >&2; }
# Under scripts/test.sh (SHADOWFS_TIME_BOOTSTRAP=1; not when a later pass runs this script
# again), each step's start and end go to $SHADOWFS_TEST_TIMES, which the end of the test log
# lists (scripts/mocha-all.sh).
step_started=$(date +%s)
stamp() {
  local now
  now=$(date +%s)
  if [ "${SHADOWFS_TIME_BOOTSTRAP:-}" = 1 ] && [ -n "${SHADOWFS_TEST_TIMES:-}" ] && [ -n "${SHADOWFS_TEST_STARTED:-}" ]; then
    echo "$((step_started - SHADOWFS_TEST_STARTED)) $((now - SHADOWFS_TEST_STARTED)) 0 bootstrap: $1" >>"$SHADOWFS_TEST_TIMES"
  fi
  step_started=$now
}

source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
pkg-config --exists fuse3 2>/dev/null || need+=(libfuse3-dev)
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v git >/dev/null 2>&1 || need+=(git)
command -v tar >/dev/null 2>&1 || need+=(tar)
command -v ip >/dev/null 2>&1 || need+=(iproute2)          # loopback in --no-network runs
command -v unshare >/dev/null 2>&1 || need+=(util-linux)   # namespaces, setpriv in tests
apt_install bootstrap "${need[@]}"
stamp "system packages (apt-get: ${need[*]:-none missing})"

if ! command -v node >/dev/null 2>&1; then
  say "Node.js is not installed; shadowfs needs Node.js 20.19 or newer (https://nodejs.org or your distribution's nodejs package)"
  exit 1
fi
if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)'; then
  say "Node.js $(node -v) is too old; shadowfs needs 20.19 or newer"
  exit 1
fi

# A missing /dev/fuse is reported by the commands themselves (error FUSE_UNAVAILABLE); try
# loading the module once, quietly, where that is allowed.
[ -e /dev/fuse ] || { command -v modprobe >/dev/null 2>&1 && modprobe fuse 2>/dev/null || true; }

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm dependencies"
  npm ci --no-audit --no-fund --loglevel=error >&2
  stamp "npm ci"
fi

# The tools are run from node_modules/.bin, not through npx: npm itself warns about every
# unknown key of the user's npm configuration (e.g. a "nodedir" kept there for node-gyp), and a
# first run's output should only say what this script does.
newest_native=$(find native CMakeLists.txt -type f -newer build/Release/shadowfs.node 2>/dev/null | head -1 || true)
if [ ! -f build/Release/shadowfs.node ] || [ -n "$newest_native" ]; then
  say "building the native module"
  node_modules/.bin/cmake-js compile --log-level warn >&2
  stamp "the native module and the C++ unit tests (cmake-js)"
fi
say "compiling TypeScript"
node_modules/.bin/tsc -p tsconfig.json >&2
node scripts/protocol-schema.js
stamp "TypeScript (tsc)"

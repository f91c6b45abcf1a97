#!/usr/bin/env bash
# Runs a Windows program in the project's wine prefix (the one scripts/wine-node.sh sets up),
# quietly: CMake's cross-compiling emulator for ctest, and the C++ tests' runner in npm test.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export WINEPREFIX=${WINEPREFIX:-${SHADOWFS_WINE_DIR:-$ROOT/build/wine}/prefix}
export WINEDEBUG=${WINEDEBUG:--all}
# First use: let wine-node.sh install wine and make the prefix (it does nothing once done).
if [ ! -f "$WINEPREFIX/.shadowfs-win10" ]; then
  bash "$ROOT/scripts/wine-node.sh" -e 0 >/dev/null
fi
# Without address-space randomization, as wine-node.sh runs node.exe (the reason is there).
exec setarch "$(uname -m)" -R wine "$@"

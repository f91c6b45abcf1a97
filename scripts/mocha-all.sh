#!/usr/bin/env bash
# The test part of `npm test`: the C++ unit tests (build/unit/shadowfs_unit_tests, built with
# the native module), then the whole mocha suite on the Linux backend (fuse_ll), then every
# integration test again on the portable FUSE3 backend (fuse_hl, the code Windows runs through
# WinFsp), then the protocol, client, daemon and CLI tests on Windows' own runtime (a Windows
# node.exe under wine, scripts/wine-node.sh, which installs wine on first use; nothing mounts
# there) and the MSI under wine's msiexec, then the VS Code extension in a real VS Code (code-server driven by Chromium; npm run
# test:vscode). All always run; the last line totals them ("N passed, N failed, N skipped"):
# the C++ runner adds its counts to $SHADOWFS_TEST_STATS like each mocha pass does.
# .mocharc.json names no files, so `npx mocha dist/test/ops.test.js` runs just that file.
set -uo pipefail
cd "$(dirname "$0")/.."
SHADOWFS_TEST_STATS="$(mktemp)"
export SHADOWFS_TEST_STATS
trap 'rm -f "$SHADOWFS_TEST_STATS"' EXIT
status=0
# Each pass takes minutes here; one that is still running after 30 (a test left a handle open,
# or something hangs) is stopped and counted as failed, so a hang cannot eat CI's whole budget.
bounded() {
  timeout --kill-after=30 1800 "$@"
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "this pass did not end within 30 minutes (a test left something running); stopped" >&2
  fi
  return $rc
}
unit=build/unit/shadowfs_unit_tests
echo "== C++ unit tests ($unit)"
if [ -x "$unit" ]; then
  bounded "$unit" || status=1
else
  echo "$unit is missing: build it with npm run build:native" >&2
  echo '{"passes":0,"failures":1,"pending":0}' >"$SHADOWFS_TEST_STATS"
  status=1
fi
echo "== pass 1 of 4: backend fuse_ll (all tests)"
SHADOWFS_BACKEND=fuse_ll bounded node_modules/.bin/mocha 'dist/test/**/*.test.js' || status=1
echo "== pass 2 of 4: backend fuse_hl (integration tests)"
SHADOWFS_BACKEND=fuse_hl bounded node_modules/.bin/mocha 'dist/test/*.test.js' || status=1
echo "== pass 3 of 4: Windows under wine: the module and C++ tests cross-built with MinGW, then a Windows node.exe (named pipe, client, daemon, CLI, the module; no WinFsp driver here)"
if bounded bash scripts/build-win.sh; then
  # The C++ runner adds its counts to the stats file; a Windows program names it by drive Z:.
  SHADOWFS_TEST_STATS="Z:${SHADOWFS_TEST_STATS//\//\\}" bounded bash scripts/wine/run.sh build-win/unit/shadowfs_unit_tests.exe || status=1
else
  echo "the Windows cross build failed (npm run build:win)" >&2
  status=1
fi
bounded bash scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json || status=1
echo "== pass 3 (continued): the MSI (npm run build:msi, wixl), its tables against goldens, then installed, run, upgraded and removed by wine's msiexec"
bounded node_modules/.bin/mocha --config test/msi.mocharc.json || status=1
echo "== pass 4 of 4: the VS Code extension: unit tests, then in a real VS Code (code-server + Chromium, scripts/vscode/setup.sh installs them) against a real daemon and mount"
bounded bash scripts/vscode/test.sh || status=1
exit $status

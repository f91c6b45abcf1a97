#!/usr/bin/env bash
# The test part of `npm test`: the C++ unit tests (build/unit/shadowfs_unit_tests, built with
# the native module), then the whole mocha suite on the Linux backend (fuse_ll), then every
# integration test again on the portable FUSE3 backend (fuse_hl, the code Windows runs through
# WinFsp). All three always run; the last line totals them ("N passed, N failed, N skipped"):
# the C++ runner adds its counts to $SHADOWFS_TEST_STATS like each mocha pass does.
# .mocharc.json names no files, so `npx mocha dist/test/ops.test.js` runs just that file.
set -uo pipefail
cd "$(dirname "$0")/.."
SHADOWFS_TEST_STATS="$(mktemp)"
export SHADOWFS_TEST_STATS
trap 'rm -f "$SHADOWFS_TEST_STATS"' EXIT
status=0
unit=build/unit/shadowfs_unit_tests
echo "== C++ unit tests ($unit)"
if [ -x "$unit" ]; then
  "$unit" || status=1
else
  echo "$unit is missing: build it with npm run build:native" >&2
  echo '{"passes":0,"failures":1,"pending":0}' >"$SHADOWFS_TEST_STATS"
  status=1
fi
echo "== pass 1 of 2: backend fuse_ll (all tests)"
SHADOWFS_BACKEND=fuse_ll node_modules/.bin/mocha 'dist/test/**/*.test.js' || status=1
echo "== pass 2 of 2: backend fuse_hl (integration tests)"
SHADOWFS_BACKEND=fuse_hl node_modules/.bin/mocha 'dist/test/*.test.js' || status=1
exit $status

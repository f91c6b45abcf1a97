#!/usr/bin/env bash
# The mocha part of `npm test`: the whole suite on the Linux backend (fuse_ll), then every
# integration test again on the portable FUSE3 backend (fuse_hl, the code Windows runs through
# WinFsp). Both passes always run; the last line totals them ("N passed, N failed, N skipped").
# .mocharc.json names no files, so `npx mocha dist/test/ops.test.js` runs just that file.
set -uo pipefail
cd "$(dirname "$0")/.."
SHADOWFS_TEST_STATS="$(mktemp)"
export SHADOWFS_TEST_STATS
trap 'rm -f "$SHADOWFS_TEST_STATS"' EXIT
status=0
echo "== pass 1 of 2: backend fuse_ll (all tests)"
SHADOWFS_BACKEND=fuse_ll node_modules/.bin/mocha 'dist/test/**/*.test.js' || status=1
echo "== pass 2 of 2: backend fuse_hl (integration tests)"
SHADOWFS_BACKEND=fuse_hl node_modules/.bin/mocha 'dist/test/*.test.js' || status=1
exit $status

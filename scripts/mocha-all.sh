#!/usr/bin/env bash
# The test part of `npm test`: the C++ unit tests (build/unit/shadowfs_unit_tests, built with
# the native module), then the whole mocha suite on the Linux backend (fuse_ll); then the
# integration tests again on the portable FUSE3 backend (fuse_hl, the code Windows runs through
# WinFsp; less the files named below, which would run as in pass 1), and beside it the Windows
# passes (the protocol, client, daemon and CLI tests on Windows' own runtime, a Windows node.exe
# under wine, scripts/wine-node.sh, which installs wine on first use, nothing mounting there; the
# MSI under wine's msiexec) and the VS Code extension in a real VS Code (code-server driven by
# Chromium; npm run test:vscode). All always run; the last line totals them ("N passed, N
# failed, N skipped"):
# the C++ runner adds its counts to $SHADOWFS_TEST_STATS like each mocha pass does.
# Every failure is also written, short, to $SHADOWFS_TEST_FAILURES (test/helpers/reporter.ts,
# test/native/unit/unit_main.cc, tagged with $SHADOWFS_TEST_PASS), and printed again at the end,
# just above the totals: a CI log that keeps only its tail still names what failed in pass 1.
# .mocharc.json names no files, so `npx mocha dist/test/ops.test.js` runs just that file.
set -uo pipefail
cd "$(dirname "$0")/.."
SHADOWFS_TEST_STATS="$(mktemp)"
SHADOWFS_TEST_FAILURES="$(mktemp)"
export SHADOWFS_TEST_STATS SHADOWFS_TEST_FAILURES
trap 'rm -f "$SHADOWFS_TEST_STATS" "$SHADOWFS_TEST_FAILURES"' EXIT
status=0
# Each pass takes minutes here; one that is still running after 30 (a test left a handle open,
# or something hangs) is stopped and counted as failed, so a hang cannot eat CI's whole budget.
# A pass that fails without naming a failing test (stopped, crashed, could not start) is
# written to the recap too.
bounded() {
  local before
  before=$(wc -l <"$SHADOWFS_TEST_FAILURES")
  timeout --kill-after=30 1800 "$@"
  local rc=$?
  local pass=${SHADOWFS_TEST_PASS:-a pass}
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "this pass did not end within 30 minutes (a test left something running); stopped" >&2
    echo "[$pass] did not end within 30 minutes (a test left something running); stopped" >>"$SHADOWFS_TEST_FAILURES"
  elif [ $rc -ne 0 ] && [ "$(wc -l <"$SHADOWFS_TEST_FAILURES")" -eq "$before" ]; then
    echo "[$pass] exited with code $rc without naming a failing test: see its output" >>"$SHADOWFS_TEST_FAILURES"
  fi
  return $rc
}
unit=build/unit/shadowfs_unit_tests
echo "== C++ unit tests ($unit)"
if [ -x "$unit" ]; then
  SHADOWFS_TEST_PASS="C++" bounded "$unit" || status=1
else
  echo "$unit is missing: build it with npm run build:native" >&2
  echo '{"passes":0,"failures":1,"pending":0}' >"$SHADOWFS_TEST_STATS"
  echo "[C++] $unit is missing" >>"$SHADOWFS_TEST_FAILURES"
  status=1
fi
# Pass 1 leaves four files to a lane of their own (below): their subject is a protocol, not
# the mount beneath it, and they spend their time in processes they start (npm, an MCP
# inspector, daemons under fuzzing), so they run beside the rest.
protocol_only=(
  package        # npm pack and install of the package; its one mount is the daemon's usual one
  rpc-fuzz       # malformed RPC messages; the shadow under test is only read through the daemon
  mcp-inspector  # a third-party MCP client's view of the MCP server (test/mcp.test.ts stays in both passes)
  ipc-posix      # peer credentials on Unix sockets
)
# Pass 2 leaves out, besides those, the files that would run exactly as in pass 1 whatever the
# backend: they mount no shadow, or only shadows whose backend they name themselves.
same_in_both=(
  architecture   # reads the sources; mounts nothing
  patch          # patches applied by git; mounts nothing
  powershell     # the generated module's text; mounts nothing
  lsp            # the LSP client on plain folders; mounts nothing
  lsp-latency    # likewise
  roundtrips     # every mount names its backend (fuse_ll's request counts; fuse_hl's caches)
  passthrough    # fuse_ll only, by name
  casefold       # fuse_hl by name, in both passes
)
pass1_ignore=()
for name in "${protocol_only[@]}"; do pass1_ignore+=(--ignore "dist/test/$name.test.js"); done
pass1_lane_files=()
for name in "${protocol_only[@]}"; do pass1_lane_files+=("dist/test/$name.test.js"); done
pass2_ignore=("${pass1_ignore[@]}")
for name in "${same_in_both[@]}"; do pass2_ignore+=(--ignore "dist/test/$name.test.js"); done

# The suite runs in three lanes at once; the machine's two cores are shared by tests that spend
# most of their time waiting (on mounts, language servers, wine, a browser). Each mocha run has
# its own runtime directory, daemons and mounts (test/helpers/hooks.ts), each wine and VS Code
# pass its own prefix and profile, and the test hooks judge only their own mounts.
#   lane 1 (here, printed as it runs): pass 1, less the protocol files;
#   lane 2: pass 2, backend fuse_hl;
#   lane 3: pass 1's protocol files (package.test.ts first: a clean clone's first pack
#           cross-builds the Windows module, which pass 3 then finds built), then passes 3 and 4:
#           Windows under wine (the cross build, its C++ tests, a Windows node.exe, the MSI) and
#           VS Code.
# Lanes 2 and 3 write their output, counts and failures to files of their own; the output is
# printed after lane 1's, the counts and failures are added in at the end.
lane2() {
  echo "== pass 2 of 4 (ran beside pass 1): backend fuse_hl (integration tests, less ${#same_in_both[@]} files that would run as in pass 1 and ${#protocol_only[@]} protocol-only ones: scripts/mocha-all.sh)"
  SHADOWFS_TEST_PASS="pass 2, fuse_hl" SHADOWFS_BACKEND=fuse_hl bounded node_modules/.bin/mocha "${pass2_ignore[@]}" 'dist/test/*.test.js'
}
lane3() {
  local st=0
  echo "== pass 1 (continued, beside the rest of it): backend fuse_ll, the protocol files: ${protocol_only[*]}"
  SHADOWFS_TEST_PASS="pass 1, fuse_ll (protocol files)" SHADOWFS_BACKEND=fuse_ll bounded node_modules/.bin/mocha "${pass1_lane_files[@]}" || st=1
  echo "== pass 3 of 4 (ran beside pass 1): Windows under wine: the module and C++ tests cross-built with MinGW, then a Windows node.exe (named pipe, client, daemon, CLI, the module; no WinFsp driver here)"
  if SHADOWFS_TEST_PASS="pass 3, the Windows cross build" bounded bash scripts/build-win.sh; then
    # The C++ runner adds its counts to the stats file; a Windows program names it by drive Z:.
    SHADOWFS_TEST_PASS="pass 3, C++ under wine" SHADOWFS_TEST_FAILURES="Z:${SHADOWFS_TEST_FAILURES//\//\\}" \
      SHADOWFS_TEST_STATS="Z:${SHADOWFS_TEST_STATS//\//\\}" bounded bash scripts/wine/run.sh build-win/unit/shadowfs_unit_tests.exe || st=1
  else
    echo "the Windows cross build failed (npm run build:win)" >&2
    st=1
  fi
  SHADOWFS_TEST_PASS="pass 3, node.exe under wine" bounded bash scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json || st=1
  echo "== pass 3 (continued): the MSI (npm run build:msi, wixl), its tables against goldens, then installed, run, upgraded and removed by wine's msiexec"
  SHADOWFS_TEST_PASS="pass 3, MSI" bounded node_modules/.bin/mocha --config test/msi.mocharc.json || st=1
  echo "== pass 4 of 4 (ran beside pass 1): the VS Code extension: unit tests, then in a real VS Code (code-server + Chromium, scripts/vscode/setup.sh installs them) against a real daemon and mount"
  SHADOWFS_TEST_PASS="pass 4, VS Code" bounded bash scripts/vscode/test.sh || st=1
  return $st
}
lane_dirs=()
lane_pids=()
# A lane's files: out, stats, failures.
start_lane() {
  local dir
  dir="$(mktemp -d)"
  lane_dirs+=("$dir")
  : >"$dir/stats"
  : >"$dir/failures"
  (SHADOWFS_TEST_STATS="$dir/stats" SHADOWFS_TEST_FAILURES="$dir/failures" "$1") >"$dir/out" 2>&1 &
  lane_pids+=($!)
}
# Interrupted (Ctrl-C, CI's own limit): the lanes in the background are stopped with it.
stop_lanes() {
  for pid in "${lane_pids[@]}"; do pkill -TERM -P "$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null; done
  return 0
}
trap 'stop_lanes; exit 130' INT
trap 'stop_lanes; exit 143' TERM
trap 'rm -rf "$SHADOWFS_TEST_STATS" "$SHADOWFS_TEST_FAILURES" "${lane_dirs[@]}"' EXIT
start_lane lane2
start_lane lane3

echo "== pass 1 of 4: backend fuse_ll (all tests; passes 2, 3 and 4 and pass 1's ${#protocol_only[@]} protocol files run beside it, printed below)"
# Started in the background and waited for, so that a signal to this script runs the trap at
# once (bash runs traps only between foreground commands).
SHADOWFS_TEST_PASS="pass 1, fuse_ll" SHADOWFS_BACKEND=fuse_ll bounded node_modules/.bin/mocha "${pass1_ignore[@]}" 'dist/test/**/*.test.js' &
lane_pids+=($!)
for pid in "${lane_pids[@]}"; do wait "$pid" || status=1; done
lane_pids=()
merge=()
for dir in "${lane_dirs[@]}"; do
  cat "$dir/out"
  cat "$dir/failures" >>"$SHADOWFS_TEST_FAILURES"
  merge+=("$dir/stats")
done
# Every lane's counts into the suite's total, which the line below prints.
node -e '
const fs = require("fs");
const read = (f) => { const t = fs.readFileSync(f, "utf8").trim(); return t ? JSON.parse(t) : { passes: 0, failures: 0, pending: 0 }; };
const t = process.argv.slice(1).map(read).reduce((a, b) => ({ passes: a.passes + b.passes, failures: a.failures + b.failures, pending: a.pending + b.pending }));
fs.writeFileSync(process.argv[1], JSON.stringify(t));
console.log(`${t.passes} passed, ${t.failures} failed, ${t.pending} skipped`);
' "$SHADOWFS_TEST_STATS" "${merge[@]}"
if [ -s "$SHADOWFS_TEST_FAILURES" ]; then
  echo
  echo "== what failed, from every pass above (each in full in its pass)"
  cat "$SHADOWFS_TEST_FAILURES"
  echo
  node -e 'const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(`${t.passes} passed, ${t.failures} failed, ${t.pending} skipped`)' "$SHADOWFS_TEST_STATS"
fi
exit $status

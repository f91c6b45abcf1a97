#!/usr/bin/env bash
# `npm test`: the whole suite, in two lanes that run side by side from the start (a pass is
# mostly waiting on mounts, daemons and child programs, so one alone leaves a core idle):
#   lane 1: the C++ unit tests (build/unit/shadowfs_unit_tests, built with the native module),
#           then the whole mocha suite on the Linux backend (pass 1, fuse_ll), then pass 2's
#           two longest files (see below);
#   lane 2: lint (npm run lint); the Windows passes (the module and C++ tests cross-built with
#           MinGW and run under wine; the protocol, client, daemon and CLI tests on a Windows
#           node.exe under wine, scripts/wine-node.sh, which installs wine on first use, nothing
#           mounting there; the MSI under wine's msiexec); the VS Code extension in a real VS
#           Code (code-server driven by Chromium; npm run test:vscode); then the integration
#           tests again on the portable FUSE3 backend (pass 2, fuse_hl, the code Windows runs
#           through WinFsp; less the files named below, which would run as in pass 1).
# All always run; lane 2's output follows lane 1's, and the last line totals them ("N passed,
# N failed, N skipped"): the C++ runner adds its counts to $SHADOWFS_TEST_STATS like each mocha
# pass does. Every failure is also written, short, to $SHADOWFS_TEST_FAILURES
# (test/helpers/reporter.ts, test/native/unit/unit_main.cc, tagged with $SHADOWFS_TEST_PASS), and
# printed again at the end, just above the totals: a CI log that keeps only its tail still names
# what failed. An interrupt (Ctrl-C) or a TERM stops both lanes.
# .mocharc.json names no files, so `npx mocha dist/test/ops.test.js` runs just that file.
set -uo pipefail
cd "$(dirname "$0")/.."
SHADOWFS_TEST_STATS="$(mktemp)"
SHADOWFS_TEST_FAILURES="$(mktemp)"
export SHADOWFS_TEST_STATS SHADOWFS_TEST_FAILURES
trap 'rm -f "$SHADOWFS_TEST_STATS" "$SHADOWFS_TEST_FAILURES"' EXIT
status=0
# Each "==" line says how far into the run it began (minutes:seconds since scripts/test.sh began,
# or since this script did): where a CI run's time went, from its log alone.
: "${SHADOWFS_TEST_STARTED:=$(date +%s)}"
at() {
  local s=$(($(date +%s) - SHADOWFS_TEST_STARTED))
  printf '%d:%02d' $((s / 60)) $((s % 60))
}
# Each step's start and end (seconds since the start) go to $SHADOWFS_TEST_TIMES, "start end
# status name" a line (scripts/bootstrap.sh writes its steps there too, when scripts/test.sh
# names the file); the end of the log lists them, so that a CI log that keeps only its tail
# still says where the time went.
: "${SHADOWFS_TEST_TIMES:=$(mktemp)}"
export SHADOWFS_TEST_TIMES
took() {
  echo "$(($2 - SHADOWFS_TEST_STARTED)) $(($(date +%s) - SHADOWFS_TEST_STARTED)) $3 $1" >>"$SHADOWFS_TEST_TIMES"
}
# Each pass takes minutes here; one that is still running after 30 (a test left a handle open,
# or something hangs) is stopped and counted as failed, so a hang cannot eat CI's whole budget.
# A pass that fails without naming a failing test (stopped, crashed, could not start) is
# written to the recap too.
# The recap file as this script reads it: a step run under wine is given its Windows name
# (Z:\...) in $SHADOWFS_TEST_FAILURES and the Linux one in $SHADOWFS_TEST_FAILURES_HERE.
bounded() {
  local before started failures=${SHADOWFS_TEST_FAILURES_HERE:-$SHADOWFS_TEST_FAILURES}
  before=$(wc -l <"$failures")
  started=$(date +%s)
  timeout --kill-after=30 1800 "$@"
  local rc=$?
  local pass=${SHADOWFS_TEST_PASS:-a pass}
  took "$pass" "$started" "$rc"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "this pass did not end within 30 minutes (a test left something running); stopped" >&2
    echo "[$pass] did not end within 30 minutes (a test left something running); stopped" >>"$failures"
  elif [ $rc -ne 0 ] && [ "$(wc -l <"$failures")" -eq "$before" ]; then
    echo "[$pass] exited with code $rc without naming a failing test: see its output" >>"$failures"
  fi
  return $rc
}
# Pass 2 leaves out the files that would run exactly as in pass 1, whatever the backend: they
# mount no shadow, or only shadows whose backend they name themselves. Each name with its reason.
same_in_both=(
  architecture   # reads the sources; mounts nothing
  patch          # patches applied by git; mounts nothing
  powershell     # the generated module's text; mounts nothing
  lsp            # the LSP client on plain folders; mounts nothing
  lsp-latency    # likewise
  roundtrips     # every mount names its backend (fuse_ll's request counts; fuse_hl's caches)
  passthrough    # fuse_ll only, by name
  uring          # fuse_ll only, by name; it also turns system-wide switches (enable_uring,
                 # io_uring_disabled) on and off, which a second copy running in the other lane
                 # would race with (pass 1's first test once found the ring refused mid-run)
  casefold       # fuse_hl by name, in both passes
)
# and the front ends whose subject is their protocol, not the mount beneath it (pass 1 runs them
# on a real mount; the backend-facing daemon, lints, run, shell, MCP and file-tool tests stay in
# pass 2):
protocol_only=(
  rpc-fuzz       # malformed RPC messages; the shadow under test is only read through the daemon
  mcp-inspector  # a third-party MCP client's view of the MCP server (test/mcp.test.ts stays)
  package        # npm pack and install of the package; its one mount is the daemon's usual one
  ipc-posix      # peer credentials on Unix sockets
)
# and the front ends and services above the mount, whose subject is the same whatever backend
# serves the mount beneath (fuse_hl mounts driven through the daemon stay covered in pass 2 by
# the mcp, radar, review, lints, escape, audit and mask files):
above_the_mount=(
  daemon         # the CLI's commands, the raw-socket protocol, other users, crash recovery: the daemon's code
  scope          # session.restrict: which requests a restricted connection may make
  activity       # what status reports about runs, sessions and queues
  state-input    # forged state files and checkpoints read by a recovering daemon
  entrypoints    # the package's entry points loaded without a native build
  review-cli     # the review front end on a terminal (test/review.test.ts, on the mount, stays)
  run-control    # time limits and cancels of runs (test/run.test.ts, on the mount, stays)
  run-limits     # cgroup limits of runs
  agent-cli      # third-party agent CLIs in sessions (test/shell.test.ts, on the mount, stays)
  lints-fleet    # many agents' lints batched on the folder; the questions it asks one agent at a
                 # time switch layers on the mount, as test/lints.test.ts (which stays) does
)
pass2_ignore=()
for name in "${same_in_both[@]}" "${protocol_only[@]}" "${above_the_mount[@]}"; do pass2_ignore+=(--ignore "dist/test/$name.test.js"); done
# Pass 2's two longest files run in lane 1, after pass 1, so that the lanes end together: lane 2
# ended four minutes after lane 1 without this (it also installs wine, MinGW and wixl on a new
# machine). The end of the log lists when each part ran.
pass2_in_lane1=(hostile lints)
pass2_lane1_files=()
for name in "${pass2_in_lane1[@]}"; do
  pass2_ignore+=(--ignore "dist/test/$name.test.js")
  pass2_lane1_files+=("dist/test/$name.test.js")
done

# Lane 2's passes share with pass 1 only the two cores, the Windows cross build and the wine
# prefix of scripts/wine-node.sh (their own VS Code profiles, runtime directories and daemons;
# scripts/build-win.sh holds a lock, so test/package.test.ts's `npm pack` waits for a cross build
# under way rather than running a second one; that test also runs a node.exe in the prefix,
# which one wine server serves beside the node.exe pass). Lane 2's output is held in a file and printed after lane 1's; its
# counts and failures go to files of its own and are added in afterwards.
lane1() {
  local st=0
  local unit=build/unit/shadowfs_unit_tests
  echo "== [$(at)] C++ unit tests ($unit)"
  if [ -x "$unit" ]; then
    SHADOWFS_TEST_PASS="C++" bounded "$unit" || st=1
  else
    echo "$unit is missing: build it with npm run build:native" >&2
    echo '{"passes":0,"failures":1,"pending":0}' >"$SHADOWFS_TEST_STATS"
    echo "[C++] $unit is missing" >>"$SHADOWFS_TEST_FAILURES"
    st=1
  fi
  echo "== [$(at)] pass 1 of 4: backend fuse_ll (all tests; lane 2 runs beside it)"
  SHADOWFS_TEST_PASS="pass 1, fuse_ll" SHADOWFS_BACKEND=fuse_ll bounded node_modules/.bin/mocha 'dist/test/**/*.test.js' || st=1
  echo "== [$(at)] pass 2 of 4, its part in lane 1: backend fuse_hl, ${pass2_in_lane1[*]}"
  SHADOWFS_TEST_PASS="pass 2, fuse_hl (lane 1)" SHADOWFS_BACKEND=fuse_hl bounded node_modules/.bin/mocha "${pass2_lane1_files[@]}" || st=1
  return $st
}
lane2() {
  echo "== [$(at)] lint (npm run lint: tsc, eslint, prettier), beside pass 1"
  local st=0
  SHADOWFS_TEST_PASS="lint" bounded npm run --silent lint || st=1
  echo "== [$(at)] pass 3 of 4 (beside pass 1): Windows under wine: the module and C++ tests cross-built with MinGW, then a Windows node.exe (named pipe, client, daemon, CLI, the module; no WinFsp driver here)"
  if SHADOWFS_TEST_PASS="pass 3, the Windows cross build" bounded bash scripts/build-win.sh; then
    # The C++ runner adds its counts to the stats file; a Windows program names it by drive Z:.
    SHADOWFS_TEST_PASS="pass 3, C++ under wine" SHADOWFS_TEST_FAILURES_HERE="$SHADOWFS_TEST_FAILURES" SHADOWFS_TEST_FAILURES="Z:${SHADOWFS_TEST_FAILURES//\//\\}" \
      SHADOWFS_TEST_STATS="Z:${SHADOWFS_TEST_STATS//\//\\}" bounded bash scripts/wine/run.sh build-win/unit/shadowfs_unit_tests.exe || st=1
  else
    echo "the Windows cross build failed (npm run build:win)" >&2
    st=1
  fi
  SHADOWFS_TEST_PASS="pass 3, node.exe under wine" bounded bash scripts/wine-node.sh node_modules/mocha/bin/mocha.js --config test/windows/.mocharc.json || st=1
  echo "== [$(at)] pass 3 (continued): the MSI (npm run build:msi, wixl), its tables against goldens, then installed, run, upgraded and removed by wine's msiexec"
  SHADOWFS_TEST_PASS="pass 3, MSI" bounded node_modules/.bin/mocha --config test/msi.mocharc.json || st=1
  echo "== [$(at)] pass 4 of 4: the VS Code extension: unit tests, then in a real VS Code (code-server + Chromium, scripts/vscode/setup.sh installs them) against a real daemon and mount"
  SHADOWFS_TEST_PASS="pass 4, VS Code" bounded bash scripts/vscode/test.sh || st=1
  echo "== [$(at)] pass 2 of 4: backend fuse_hl (integration tests, less ${#same_in_both[@]} files that would run as in pass 1, ${#protocol_only[@]} protocol-only ones and ${#above_the_mount[@]} of front ends above the mount: scripts/mocha-all.sh; lane 1 runs ${pass2_in_lane1[*]})"
  SHADOWFS_TEST_PASS="pass 2, fuse_hl (lane 2)" SHADOWFS_BACKEND=fuse_hl bounded node_modules/.bin/mocha "${pass2_ignore[@]}" 'dist/test/*.test.js' || st=1
  return $st
}
lane2_out="$(mktemp)"
lane2_stats="$(mktemp)"
lane2_failures="$(mktemp)"
trap 'rm -f "$SHADOWFS_TEST_STATS" "$SHADOWFS_TEST_FAILURES" "$SHADOWFS_TEST_TIMES" "$lane2_out" "$lane2_stats" "$lane2_failures"' EXIT
# Both lanes run in the background, so that an INT or TERM reaches this shell's trap at once
# (bash waits for a foreground command before it runs a trap) and the trap can stop them: each
# pass runs under timeout(1), in a process group of its own, which a Ctrl-C to this script's
# group does not reach; timeout passes the TERM on to its command.
lane1 &
running=($!)
(SHADOWFS_TEST_STATS="$lane2_stats" SHADOWFS_TEST_FAILURES="$lane2_failures" lane2) >"$lane2_out" 2>&1 &
running+=($!)
stop_passes() {
  for pid in "${running[@]}"; do pkill -TERM -P "$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null; done
  return 0
}
trap 'stop_passes; exit 130' INT
trap 'stop_passes; exit 143' TERM
wait "${running[0]}" || status=1
if kill -0 "${running[1]}" 2>/dev/null; then echo "== [$(at)] lane 1 ended; waiting for lane 2 (lint, Windows, VS Code, pass 2)"; fi
wait "${running[1]}" || status=1
# Nothing runs now. Wine's server for scripts/wine-node.sh's prefix (the node.exe pass in lane 2
# and test/package.test.ts in lane 1 share it) ends within seconds of its last program; in some
# runs (3 of 4 fresh-clone runs once, cause not found) it stayed, with two winedevice.exe
# services, for ever. Given 20 s to end (wineserver -w), it is stopped, saying so.
wine_prefix="${SHADOWFS_WINE_DIR:-$PWD/build/wine}/prefix"
if ! WINEPREFIX="$wine_prefix" timeout 20 wineserver -w 2>/dev/null &&
  WINEPREFIX="$wine_prefix" timeout 60 wineserver -k 2>/dev/null; then
  echo "note: wine's server for build/wine/prefix was still running 20 s after every pass had ended; stopped it (wineserver -k)" >>"$lane2_out"
fi
cat "$lane2_out"
cat "$lane2_failures" >>"$SHADOWFS_TEST_FAILURES"
# Their counts into the suite's total, which the line below prints.
node -e '
const fs = require("fs");
const read = (f) => { const t = fs.readFileSync(f, "utf8").trim(); return t ? JSON.parse(t) : { passes: 0, failures: 0, pending: 0 }; };
const [a, b] = [read(process.argv[1]), read(process.argv[2])];
const t = { passes: a.passes + b.passes, failures: a.failures + b.failures, pending: a.pending + b.pending };
fs.writeFileSync(process.argv[1], JSON.stringify(t));
console.log(`${t.passes} passed, ${t.failures} failed, ${t.pending} skipped`);
' "$SHADOWFS_TEST_STATS" "$lane2_stats"
if [ -s "$SHADOWFS_TEST_FAILURES" ]; then
  echo
  echo "== [$(at)] what failed, from every pass above (each in full in its pass)"
  cat "$SHADOWFS_TEST_FAILURES"
  echo
  node -e 'const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(`${t.passes} passed, ${t.failures} failed, ${t.pending} skipped`)' "$SHADOWFS_TEST_STATS"
fi
echo "== [$(at)] where the time went (minutes:seconds since the start; the two lanes overlap)"
sort -n "$SHADOWFS_TEST_TIMES" | while read -r from to rc name; do
  printf '  %3d:%02d-%3d:%02d %3d:%02d  %s%s\n' $((from / 60)) $((from % 60)) $((to / 60)) $((to % 60)) \
    $(((to - from) / 60)) $(((to - from) % 60)) "$name" "$([ "$rc" = 0 ] || echo " (exit $rc)")"
done
echo "== [$(at)] all passes ended"
exit $status

#!/usr/bin/env bash
# Local check of the WinFsp test double (issue 28): WinFsp's own memfs sample, built with MinGW
# from a WinFsp checkout that stays outside this repository, linked with the double instead of
# WinFsp's DLL, runs every scenario under wine. The real sample must pass all of them.
#
#   test/native/winfsp_double/run-memfs-check.sh WINFSP_CHECKOUT [OUT_DIR]
#
# WINFSP_CHECKOUT is a checkout of github.com/winfsp/winfsp (written against commit e7c7ccc,
# 2026 Beta2); this script fetches nothing. The double is taken from build-win/winfsp_double/
# (npm run build:win). OUT_DIR (default /tmp/winfsp-double-memfs) receives the build and the
# JSON reports. Two MSVC-isms of memfs.cpp are bridged, without touching its logic: `sizeof TYPE`
# without parentheses is rewritten in a copy, and __FUNCTION__ string pasting is given a literal.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WINFSP=${1:?usage: run-memfs-check.sh WINFSP_CHECKOUT [OUT_DIR]}
OUT=${2:-/tmp/winfsp-double-memfs}
DOUBLE=$ROOT/build-win/winfsp_double
CXX=x86_64-w64-mingw32-g++-posix
CC=x86_64-w64-mingw32-gcc-posix
[ -f "$WINFSP/tst/memfs/memfs.cpp" ] || { echo "no tst/memfs/memfs.cpp in $WINFSP" >&2; exit 2; }
[ -f "$DOUBLE/bin/winfsp-x64.dll" ] || { echo "build the double first: npm run build:win" >&2; exit 2; }
mkdir -p "$OUT/shim"
echo '#include <versionhelpers.h>' >"$OUT/shim/VersionHelpers.h"
cat >"$OUT/shim/prelude.h" <<'PRELUDE'
#include <windows.h>
#undef _ReadWriteBarrier
#define _ReadWriteBarrier FspShimReadWriteBarrier
#ifdef __cplusplus
extern "C"
#endif
void FspShimReadWriteBarrier(void);
PRELUDE
sed 's/sizeof FSP_FSCTL_VOLUME_PARAMS/sizeof(FSP_FSCTL_VOLUME_PARAMS)/' "$WINFSP/tst/memfs/memfs.cpp" >"$OUT/memfs.cpp"
INC=(-I"$WINFSP/inc" -I"$WINFSP/tst/memfs" -I"$OUT/shim" -include "$OUT/shim/prelude.h")
$CXX -c -O1 -w -fpermissive -D__FUNCTION__='"memfs"' "${INC[@]}" "$OUT/memfs.cpp" -o "$OUT/memfs.o"
$CC -c -O1 -w -municode -include assert.h "${INC[@]}" "$ROOT/test/native/winfsp_double/memfs_harness.c" -o "$OUT/harness.o"
$CXX -municode -o "$OUT/memfs-double.exe" "$OUT/harness.o" "$OUT/memfs.o" "$DOUBLE/lib/libwinfsp-x64.dll.a" \
  -static
cp "$DOUBLE/bin/winfsp-x64.dll" "$OUT/"
status=0
for s in "$ROOT"/test/native/winfsp_double/scenarios/*.txt; do
  name=$(basename "$s" .txt)
  winpath() { printf 'Z:%s' "$1" | tr / '\\'; }
  if bash "$ROOT/scripts/wine/run.sh" "$OUT/memfs-double.exe" "$(winpath "$s")" "$(winpath "$OUT/$name.json")" >"$OUT/$name.log" 2>&1; then
    :
  else
    status=1
  fi
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const s of r.scenarios) {
      console.log(`${s.passed ? "pass" : "FAIL"}  ${process.argv[2]}/${s.name}`);
      if (!s.passed) for (const st of s.steps) if (!st.ok) console.log(`      line ${st.line}: ${st.step}\n        ${st.problems.join("\n        ")}`);
    }
    console.log(`${process.argv[2]}: ${r.passed} passed, ${r.failed} failed`);' "$OUT/$name.json" "$name" || status=1
done
exit $status

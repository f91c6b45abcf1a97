#!/usr/bin/env bash
# Installs the agent CLIs the suite runs for real inside shell sessions, under
# <repo>/.cache/agents/ (not committed), pinned, from the npm registry: Anthropic's Claude Code
# and OpenAI's Codex CLI.
#
# Usage: bash scripts/agents/setup.sh [--print-bin claude|codex]
#   Idempotent: a stamp file makes a second run a no-op and quiet. Progress goes to stderr,
#   prefixed "agents-setup:". With --print-bin, prints that CLI's absolute path on stdout.
#
# Each npm package is a small launcher plus one optional dependency per platform that carries the
# native binary (@anthropic-ai/claude-code-linux-x64, about 240 MB unpacked; @openai/codex's
# linux-x64 build, about 420 MB with its bundled bubblewrap); npm installs only the one for this
# machine. Install scripts are off (--ignore-scripts): Claude Code's postinstall only copies its
# binary over the wrapper's bin/claude.exe stub, so the suite runs the platform package's binary
# directly; Codex's bin/codex.js finds its platform binary by itself.
# Environment: CLAUDE_CODE_VERSION and CODEX_VERSION (defaults below) choose the versions;
# changing either reinstalls.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$repo/.cache/agents"
claude_version="${CLAUDE_CODE_VERSION:-2.1.197}"
codex_version="${CODEX_VERSION:-0.171.0}"
stamp_text="claude-code@$claude_version codex@$codex_version"
stamp="$dir/.stamp"
case "$(uname -m)" in
  x86_64) platform=linux-x64 ;;
  aarch64) platform=linux-arm64 ;;
  *) platform="linux-$(uname -m)" ;;
esac
claude="$dir/node_modules/@anthropic-ai/claude-code-$platform/claude"
codex="$dir/node_modules/@openai/codex/bin/codex.js"
say() { printf 'agents-setup: %s\n' "$*" >&2; }

if [ "$(cat "$stamp" 2>/dev/null)" != "$stamp_text" ] || [ ! -x "$claude" ] || [ ! -f "$codex" ]; then
  say "installing @anthropic-ai/claude-code@$claude_version and @openai/codex@$codex_version into $dir (npm registry, about 200 MB to download)"
  start=$(date +%s)
  rm -rf "$dir"
  mkdir -p "$dir"
  printf '{ "name": "shadowfs-test-agents", "private": true }\n' >"$dir/package.json"
  if ! npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error \
    "@anthropic-ai/claude-code@$claude_version" "@openai/codex@$codex_version" >&2; then
    say "could not install them from the npm registry (is it reachable?)"
    exit 1
  fi
  if ! "$claude" --version >/dev/null 2>&1; then
    say "Claude Code installed, but $claude --version fails: npm did not bring @anthropic-ai/claude-code-$platform for this machine"
    exit 1
  fi
  if ! node "$codex" --version >/dev/null 2>&1; then
    say "Codex installed, but $codex --version fails: npm did not bring its $platform build for this machine"
    exit 1
  fi
  printf '%s' "$stamp_text" >"$stamp"
  say "done in $(($(date +%s) - start)) s: $("$claude" --version), $(node "$codex" --version)"
fi
case "${1:-}" in
  --print-bin)
    case "${2:-}" in
      claude) printf '%s\n' "$claude" ;;
      codex) printf '%s\n' "$codex" ;;
      *)
        say "--print-bin takes claude or codex"
        exit 2
        ;;
    esac
    ;;
  "") ;;
  *)
    say "unknown argument $1"
    exit 2
    ;;
esac

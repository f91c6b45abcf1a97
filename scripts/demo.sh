#!/usr/bin/env bash
# Quick start, command 1: installs what is missing, then runs `shadowfs demo [folder]`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec node bin/shadowfs.js demo "$@"

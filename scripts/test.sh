#!/usr/bin/env bash
# Quick start, command 2: installs what is missing, then runs the whole test suite (lint,
# unit tests, and integration tests through real FUSE mounts).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec npm test --silent

#!/usr/bin/env bash
# npm run bench [-- --quick]: installs what the comparison needs (fuse-overlayfs), builds, runs
# bench/bench.ts as root. Results: bench/results/latest.{md,json,svg}.
# npm run bench -- [--quick] --only responsiveness: only the event-loop section (a few seconds),
# results in bench/results/<time>-responsiveness.{md,json} (--only lints likewise).
# npm run bench -- [--quick] --only=grep [--only=repo50k ...]: only the rows whose name contains
# one of the texts, results in bench/results/<time>-rows.{md,json} (latest.* untouched).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
source scripts/lib/apt.sh
command -v fuse-overlayfs >/dev/null 2>&1 || apt_install bench fuse-overlayfs
exec node dist/bench/bench.js "$@"

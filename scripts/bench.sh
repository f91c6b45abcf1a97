#!/usr/bin/env bash
# npm run bench [-- --quick]: installs what the comparison needs (fuse-overlayfs), builds, runs
# bench/bench.ts as root. Results: bench/results/latest.{md,json,svg}.
# npm run bench -- [--quick] --only responsiveness: only the event-loop section (a few seconds),
# results in bench/results/<time>-responsiveness.{md,json}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
if ! command -v fuse-overlayfs >/dev/null 2>&1; then
  echo "bench: installing fuse-overlayfs with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends fuse-overlayfs >/dev/null
fi
exec node dist/bench/bench.js "$@"

#!/usr/bin/env bash
# npm run stress [-- --seconds S]: installs stress-ng and fio when missing, builds, runs the
# stress suite (test/stress/main.ts) as root.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
missing=()
command -v stress-ng >/dev/null 2>&1 || missing+=(stress-ng)
command -v fio >/dev/null 2>&1 || missing+=(fio)
source scripts/lib/apt.sh
apt_install stress "${missing[@]}"
exec node dist/test/stress/main.js "$@"

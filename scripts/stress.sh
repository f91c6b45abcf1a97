#!/usr/bin/env bash
# npm run stress [-- --seconds S]: installs stress-ng and fio when missing, builds, runs the
# stress suite (test/stress/main.ts) as root.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
missing=()
command -v stress-ng >/dev/null 2>&1 || missing+=(stress-ng)
command -v fio >/dev/null 2>&1 || missing+=(fio)
if ((${#missing[@]})); then
  echo "stress: installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
exec node dist/test/stress/main.js "$@"

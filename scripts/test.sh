#!/usr/bin/env bash
# The whole test suite: typecheck, lint, unit tests, then integration and e2e tests against a real
# control plane (infra/devcluster, built here if missing or stale).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node24.sh
bash scripts/build-devcluster.sh
bash scripts/build-kstatus.sh
bash scripts/python-tools.sh
bash scripts/chromium.sh
bash scripts/promtool.sh
bash scripts/helm.sh >/dev/null
npm run --silent typecheck
npm run --silent lint
npx --no vitest run "$@"

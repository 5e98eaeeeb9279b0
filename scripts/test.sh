#!/usr/bin/env bash
# The whole test suite: typecheck, lint, unit tests, then integration and e2e tests against a real
# control plane (infra/devcluster, built here if missing or stale).
#
# With no arguments the suite runs in two lanes side by side (`vitest run --shard=1/2` and
# `--shard=2/2`, test/setup/lanes.ts), each with a devcluster of its own: lane 1 prints as it
# goes, lane 2's report follows it, then the failed files of both. With arguments (a file, a
# `--project`), one vitest run gets them as they are.
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
if [ $# -gt 0 ]; then
  exec npx --no vitest run "$@"
fi

lane2_log=$(mktemp)
lane1_log=$(mktemp)
KUBEFN_TEST_LANE=2 npx --no vitest run --shard=2/2 >"$lane2_log" 2>&1 &
lane2=$!
trap 'pkill -TERM -P "$lane2" 2>/dev/null || true; kill "$lane2" 2>/dev/null || true; rm -f "$lane1_log" "$lane2_log"' EXIT
status1=0
KUBEFN_TEST_LANE=1 npx --no vitest run --shard=1/2 2>&1 | tee "$lane1_log" || status1=$?
status2=0
wait "$lane2" || status2=$?
echo
echo "════════ lane 2 ════════"
cat "$lane2_log"
echo
echo "lane 1: exit ${status1}; lane 2: exit ${status2}"
grep -h "FAIL" "$lane1_log" "$lane2_log" | sed 's/\x1b\[[0-9;]*m//g' | sort -u || true
[ "$status1" -eq 0 ] && [ "$status2" -eq 0 ]

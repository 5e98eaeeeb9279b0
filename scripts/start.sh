#!/usr/bin/env bash
# npm start: the Node host. Without KUBECONFIG it builds and starts the embedded devcluster.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node24.sh
if [ -z "${KUBECONFIG:-}" ]; then bash scripts/build-devcluster.sh; fi
exec node --import tsx functions/node/main.ts

#!/usr/bin/env bash
# npm start: the Node host. Without KUBECONFIG (and outside a Pod) it builds and starts the embedded devcluster.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node24.sh
# In a Pod (KUBERNETES_SERVICE_HOST) the host uses the Pod's cluster: no devcluster to build.
if [ -z "${KUBECONFIG:-}" ] && [ -z "${KUBERNETES_SERVICE_HOST:-}" ]; then bash scripts/build-devcluster.sh; fi
# Memory, not behaviour (docs/deploying/node.md): V8's young generation capped at 16 MiB a semi-space
# (its default grows to 64 MiB on a large machine, and stays committed under steady probing), its
# old generation at 512 MiB — what Node gives it in a Pod limited to 1 GiB (infra/host), where a
# large machine's default (4 GiB) lets the heap grow to four times what is live before a full
# collection — and glibc held to 2 malloc arenas instead of 8 per core. test/e2e/host.ts starts the
# host the same way.
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
exec node --max-semi-space-size=16 --max-old-space-size=512 --import tsx functions/node/main.ts

#!/usr/bin/env bash
# Prints the path of a helm binary built from its Go module (helm.sh/helm/v3, through the Go module
# proxy and checksum database, like scripts/build-devcluster.sh builds the devcluster), building it
# into .tools/helm/<version>/ first when it is not there. The chart tests and `npm run release` use
# it, so a fresh machine (CI) needs only Go.
set -euo pipefail
HELM_VERSION=v3.22.0
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${root}/.tools/helm/${HELM_VERSION}/helm"
if [ ! -x "$out" ]; then
  if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
  fi
  mkdir -p "$(dirname "$out")"
  # `go install pkg@version` builds in module mode outside any module; GOBIN puts the binary here.
  # The version is stamped the way helm's own Makefile does, so `helm version` reports it.
  GOBIN="$(dirname "$out")" CGO_ENABLED=0 go install \
    -ldflags "-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
    "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >&2
fi
echo "$out"

#!/usr/bin/env bash
# Builds infra/devcluster into infra/devcluster/bin/devcluster. Go caches the build in its usual
# places (GOCACHE, GOMODCACHE), so a rebuild with nothing changed takes seconds.
# The Kubernetes version (from go.mod) is stamped into k8s.io/component-base/version, as the
# upstream release build does, so the API server and `devcluster kubectl version` report it.
set -euo pipefail
cd "$(dirname "$0")/../infra/devcluster"
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
mkdir -p bin
KUBE_VERSION="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"   # e.g. v1.37.2
major="${KUBE_VERSION#v}"; major="${major%%.*}"
minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
ldflags=""
# component-base: what the API server and kubectl report; client-go: the User-Agent of clients.
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
done
# The Gateway API CRDs (standard channel) of this sigs.k8s.io/gateway-api release, from its Go
# module zip (checksummed against the Go checksum database), embedded by gateway.go.
GATEWAY_API_VERSION=v1.6.3
tmpmod="$(mktemp -d)"
gwdir="$(cd "$tmpmod" && go mod download -json "sigs.k8s.io/gateway-api@${GATEWAY_API_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [ -z "$gwdir" ] || [ ! -d "$gwdir/config/crd/standard" ]; then
  echo "build-devcluster: could not fetch sigs.k8s.io/gateway-api@${GATEWAY_API_VERSION}" >&2; exit 1
fi
rm -rf gatewayapi && mkdir -p gatewayapi
cp "$gwdir"/config/crd/standard/*.yaml gatewayapi/ && chmod -R u+w gatewayapi
go build -ldflags "${ldflags}" -o bin/devcluster .

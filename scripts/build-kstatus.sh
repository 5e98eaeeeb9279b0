#!/usr/bin/env bash
# Builds test/kstatus into test/kstatus/bin/kstatus: how Flux (kstatus) and Argo CD (its Lua
# health scripts, run in gopher-lua) judge kubefn's primaries, for test/integration/gitops-health.
# Go caches modules and builds (GOMODCACHE, GOCACHE): with nothing changed this takes about a
# second, so the test runs it every time instead of guessing whether the binary is stale.
set -euo pipefail
cd "$(dirname "$0")/../test/kstatus"
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
mkdir -p bin
go build -o bin/kstatus .

#!/usr/bin/env bash
# Builds infra/devcluster into infra/devcluster/bin/devcluster. Go caches the build in its usual
# places (GOCACHE, GOMODCACHE), so a rebuild with nothing changed takes seconds.
set -euo pipefail
cd "$(dirname "$0")/../infra/devcluster"
mkdir -p bin
go build -o bin/devcluster .

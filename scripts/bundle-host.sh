#!/usr/bin/env bash
# The Node host's image code (infra/host/Containerfile): functions/node/main.ts bundled by esbuild
# into one ESM file at $1 (its source map beside it). npm packages stay external, resolved from the
# node_modules above it. The Containerfile runs this; so does the host-memory bench
# (test/bench/host-memory.ts), to measure the process the image runs.
set -euo pipefail
cd "$(dirname "$0")/.."
exec node_modules/.bin/esbuild functions/node/main.ts --bundle --platform=node --format=esm \
  --packages=external --target=node24 --sourcemap --outfile="$1"

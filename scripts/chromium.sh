#!/usr/bin/env bash
# Debian's chromium, which the fleet page test (test/e2e/fleet-page.test.ts) runs headless.
# Installed once with apt-get (about 50 s on a fresh Debian 12 machine); later runs only find it.
# CHROMIUM names another binary to use instead.
set -euo pipefail
if command -v "${CHROMIUM:-chromium}" >/dev/null; then exit 0; fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "chromium: not found; install Debian's chromium (apt-get install chromium) or set CHROMIUM to a Chromium binary" >&2
  exit 1
fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq -o DPkg::Lock::Timeout=300 chromium >/dev/null
echo "chromium: installed $(chromium --version 2>/dev/null) in $(( $(date +%s) - start ))s"

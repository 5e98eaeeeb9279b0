#!/usr/bin/env bash
# promtool (Prometheus' rule checker and rule unit-tester) from Debian's `prometheus` package, into
# .promtool/bin. Only the one binary is unpacked from the .deb: installing the package would start a
# Prometheus server and pull in its web UI's JavaScript. Quick when the pinned version is present.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.promtool
want=2.42.0
if [ -x "$dir/bin/promtool" ] && "$dir/bin/promtool" --version 2>/dev/null | grep -q "version ${want}+"; then
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "promtool: needs Debian's apt-get and dpkg-deb; elsewhere put promtool ${want} at ${dir}/bin/promtool" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# `apt-get download` needs the package lists; a fresh machine (or container) has none yet.
if ! (cd "$work" && apt-get download -q prometheus >/dev/null 2>&1); then
  apt-get update -qq
  # As root apt warns that the download runs unsandboxed; only errors matter here.
  (cd "$work" && apt-get download -q prometheus 2>&1 >/dev/null | grep -v "unsandboxed" >&2 || true)
  ls "$work"/prometheus_*.deb >/dev/null 2>&1 || { echo "promtool: apt-get download prometheus failed" >&2; exit 1; }
fi
mkdir -p "$dir/bin"
dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work" ./usr/bin/promtool
mv "$work/usr/bin/promtool" "$dir/bin/promtool"
if ! "$dir/bin/promtool" --version 2>&1 | grep -q "version ${want}+"; then
  echo "promtool: Debian's prometheus is not ${want} ($("$dir/bin/promtool" --version 2>&1 | head -1)); update the pin in scripts/promtool.sh" >&2
  exit 1
fi

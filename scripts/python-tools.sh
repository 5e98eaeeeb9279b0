#!/usr/bin/env bash
# Python tools the tests use, in a virtualenv at .tools/venv (PyPI, pinned): cfn-lint validates
# infra/aws/template.yaml; moto's server emulates EventBridge, Scheduler, SQS and Secrets Manager
# for the Lambda tests (test/support/moto.ts). Installed once; later runs only check the pins.
set -euo pipefail
cd "$(dirname "$0")/.."
CFN_LINT_VERSION=1.58.0
MOTO_VERSION=5.2.5
venv=.tools/venv
pinned() {
  [ -x "$venv/bin/cfn-lint" ] && [ "$("$venv/bin/cfn-lint" --version 2>/dev/null)" = "cfn-lint ${CFN_LINT_VERSION}" ] &&
    [ -x "$venv/bin/moto_server" ] && [ "$("$venv/bin/python" -c 'import moto; print(moto.__version__)' 2>/dev/null)" = "${MOTO_VERSION}" ]
}
if ! pinned; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    echo "python-tools: 'python3 -m venv' failed; install Python 3 with venv (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check "cfn-lint==${CFN_LINT_VERSION}" "moto[server]==${MOTO_VERSION}"
fi

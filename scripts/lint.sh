#!/usr/bin/env bash
# The static checks, defined here once (tox's lint env, scripts/test.sh and CI run this file): ruff's
# lint rules and formatting, mypy on the package (settings in pyproject.toml) and on the Action's scripts.
# Runs in the active virtualenv (tox's), else in .venv (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${VIRTUAL_ENV:-}" ]]; then
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
ruff check .
ruff format --check .
mypy
mypy action

#!/usr/bin/env bash
# Static checks: ruff's lint rules and formatting, mypy on the package (settings in pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
ruff check .
ruff format --check .
mypy

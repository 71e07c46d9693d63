#!/usr/bin/env bash
# The test suite: sets up .venv if needed, runs the static checks (scripts/lint.sh), then pytest
# (extra arguments are passed on to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/system-packages.sh
bash scripts/lint.sh
# shellcheck disable=SC1091
. .venv/bin/activate
exec python -m pytest -q "$@"

#!/usr/bin/env bash
# The test suite: sets up .venv if needed, then runs pytest (extra arguments are passed on).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/system-packages.sh
# shellcheck disable=SC1091
. .venv/bin/activate
exec python -m pytest -q "$@"

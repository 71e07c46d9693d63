#!/usr/bin/env bash
# The main job: sets up .venv if needed, then runs the end-to-end demo (scripts/demo.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
exec python scripts/demo.py "$@"

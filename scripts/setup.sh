#!/usr/bin/env bash
# Creates .venv and installs the project with its dev tools; re-runs only when pyproject.toml changed.
# TORCH_SPEC picks the torch build: the default pin takes the CPU wheel on this project's CI
# machines; on a GPU runner set e.g. TORCH_SPEC="torch==2.13.0" with a CUDA index configured.
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python_bin" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=.venv/.gpuperf-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  python -m pip install -q --upgrade pip
  python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
  python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi

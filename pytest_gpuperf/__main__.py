"""``python -m pytest_gpuperf``: the ``gpuperf`` command."""

from __future__ import annotations

import sys

from pytest_gpuperf.cli import main

if __name__ == "__main__":
    sys.exit(main())

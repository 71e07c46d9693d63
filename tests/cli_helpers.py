"""Running ``gpuperf`` in this process, as the CLI tests do."""

from __future__ import annotations

import io

from pytest_gpuperf.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    """``gpuperf *argv``: (exit code, standard output, standard error)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()

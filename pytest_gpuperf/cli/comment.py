"""``gpuperf comment``: the one pull-request comment for the results files of several jobs (a GPU matrix).

Each results file (or a folder holding ``results.json``, as a downloaded CI artifact does) is one column;
``--job NAME=CONCLUSION`` adds a column for a job that left none (GitHub's conclusion: failure,
cancelled, timed_out, ...). report/matrix.py renders them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.report.matrix import Job
from pytest_gpuperf.report.results_json import load_results

RESULTS_FILE = "results.json"  # what a folder given in place of a file holds (the Action's artifacts)
_CONCLUSION = re.compile(r"[a-z_]{1,32}")


def results_path(given: Path) -> Path:
    """``given``, or the ``results.json`` inside it when it is a folder."""
    return given / RESULTS_FILE if given.is_dir() else given


def job_without_results(spec: str) -> Job:
    """``NAME=CONCLUSION`` (``perf (gpu=l4)=cancelled``) as a column; ConfigError naming what is wrong."""
    name, sep, conclusion = spec.rpartition("=")
    if not sep or not name.strip():
        raise ConfigError(f"--job {spec!r}: expected NAME=CONCLUSION, such as 'perf (gpu=l4)=cancelled'")
    if not _CONCLUSION.fullmatch(conclusion):
        known = "failure, cancelled, timed_out, ..."
        raise ConfigError(f"--job {spec!r}: {conclusion!r} is not a job's conclusion ({known})")
    return Job(name.strip(), None, conclusion)


def load_jobs(results: Sequence[Path], without: Sequence[str]) -> list[Job]:
    """A column per results file (named by the path given) and per ``--job``; ResultsError names a bad file."""
    jobs = [Job(str(given), load_results(results_path(given))) for given in results]
    return jobs + [job_without_results(spec) for spec in without]

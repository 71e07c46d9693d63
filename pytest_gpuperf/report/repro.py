"""The command that re-runs one measurement on a developer's machine, as the session that judged it ran it.

``pytest <test id> <how it was judged> --gpuperf-device=<its device> <the session's repro_args>``, run from
the repository's root (test ids are relative to it) at the head commit: against the stored baselines
(``--gpuperf``), or against the same base commit (``--gpuperf-compare-ref=<sha>``) where the session
measured or compared a base. ``repro_args`` are the options the session ran with that are off their
defaults (``plugin.options.repro_args``), so the threshold, statistic, budgets, ``-p`` choices and the
project's own options come along. The failure message, the HTML report and the matrix comment show it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpuperf.model import Measurement, SessionResults
from pytest_gpuperf.modes import plan_for


@dataclass(frozen=True)
class Rerun:
    """How a session's measurements are re-run: against the baselines (``base`` None) or a base commit."""

    base: str | None
    args: tuple[str, ...] = ()

    def command(self, measurement: Measurement) -> str:
        """The shell command for ``measurement`` (every word quoted as a POSIX shell needs)."""
        judged = [f"--gpuperf-compare-ref={self.base}"] if self.base else ["--gpuperf"]
        device = f"--gpuperf-device={measurement.device}"
        return shlex.join(["pytest", measurement.test_id, *judged, device, *self.args])


def rerun_of(session: SessionResults) -> Rerun | None:
    """How ``session``'s measurements re-run; None where it compared with a base that no commit names.

    A session that measured a base (compare-ref), or compared two results files (``gpuperf compare``),
    re-runs against the base's commit, which a CI checkout fetched and a developer can too; the
    ref's name (``origin/main``) only where no commit was recorded, since it moves.
    """
    return rerun(session.mode, session.base_provenance.commit if session.base_provenance else None,
                 session.compare_ref, session.repro_args)  # fmt: skip


def rerun(mode: str, base_commit: str | None, compare_ref: str | None, args: Sequence[str]) -> Rerun | None:
    """``rerun_of`` from its parts, for the plugin, which renders a failure before the session's results exist."""
    plan = plan_for(mode)
    if plan.gates_against_baselines or plan.writes_baselines:  # a hard bound fails an update run: gate it again
        return Rerun(None, tuple(args))
    # compare-ref names its ref; gpuperf compare's "ref" is the base file's name, no revision
    base = base_commit or (compare_ref if plan.interleaved else None)
    return Rerun(base, tuple(args)) if base else None

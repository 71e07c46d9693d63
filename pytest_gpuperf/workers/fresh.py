"""Re-measuring a suspected baseline-mode regression in a fresh process.

A re-measure in the process that suspected it would repeat that process's own offset, so it runs in
a worker at the head's checkout, which stays for later suspicions (holding a CUDA context). Workers
are forked from a zygote (twins.py) started at the first suspicion: a new process costs a fork and
a collection, not another import of torch. The worker times the machine's reference beside the
test, as the session does (``WorkerLaunch.reference``), so the gate can tell a slow machine from slow code.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.measure.runner import sample_precision, stopping_rule
from pytest_gpuperf.measure.stopping import Progress, StoppingRule
from pytest_gpuperf.model import Measurement
from pytest_gpuperf.workers.leftovers import REMEASURE_PREFIX, make_scratch, remove_abandoned
from pytest_gpuperf.workers.remote import RemoteSide, WorkerLaunch
from pytest_gpuperf.workers.twins import Zygote


def session_import_path() -> tuple[Path, ...]:
    """This process's import path, for a worker that must import what this session imported.

    Not the checkout's ``src/`` first (as compare-ref's workers): a project's own sources would come
    ahead of the installed copy the session measured.
    """
    return tuple(Path(p) if p else Path.cwd() for p in sys.path)


class FreshProcessRemeasure:
    """One worker process at the head's checkout that measures a test again on request."""

    def __init__(self, rootdir: Path, device: str, pin_cpu: int | None, worker_args: Sequence[str] = ()) -> None:
        self.rootdir = Path(rootdir)
        self.device = device
        self.pin_cpu = pin_cpu
        self.worker_args = tuple(worker_args)
        self._side: RemoteSide | None = None
        self._files: tuple[str, ...] = ()
        self._zygote: Zygote | None = None  # in its scratch folder, made at the first suspicion
        self._started = 0

    def measure(
        self,
        test_id: str,
        key: str,
        settings: MeasureSettings,
        *,
        new_process: bool = False,
        check_samples: int | None = None,
        peak_memory: bool = True,
    ) -> Measurement:
        """Measure ``key`` of ``test_id`` in the worker; WorkerError says why it could not.

        ``new_process``: a new worker, not sharing the previous reading's offset.
        ``check_samples``: a check of the median only, which stops a long call at that many samples
        (``StoppingRule.check_samples``). ``peak_memory`` False: no call for the peak (Runner's ``finish``).
        """
        if new_process:
            self._stop_worker()
        side = self._worker_for(test_id.split("::", 1)[0])
        try:
            side.wait_ready()
            return self._measure(side, test_id, key, stopping_rule(settings, check_samples), peak_memory)
        except WorkerError:
            self._stop_worker()  # a later suspicion gets a new process, not a half-finished test
            raise

    @staticmethod
    def _measure(side: RemoteSide, test_id: str, key: str, rule: StoppingRule, peak_memory: bool) -> Measurement:
        began = time.perf_counter()  # the time limit counts the worker's warm-up
        # the same test may be measured twice (a baseline's check, --gpuperf-remeasure=2)
        problem = side.open(test_id, key, again=True)
        if problem:
            side.drain()
            raise WorkerError(problem)
        samples: list[float] = []
        rounds = 0
        spent = 0.0
        last_round_s = sample_s = 0.0
        while True:
            now = time.perf_counter()
            progress = Progress(len(samples), rounds, spent, now - began, next_round_s=last_round_s, sample_s=sample_s)
            if rule.check(progress, lambda: sample_precision(samples)) is not None:
                break
            got = side.round(rule.round_s)
            last_round_s = time.perf_counter() - now
            spent += last_round_s
            if not got:
                side.drain()
                raise WorkerError(side.test_note or f"{key} stopped in the fresh process")
            samples.extend(got)
            sample_s = last_round_s / len(got)
            rounds += 1
        measurement = side.finish(peak_memory=peak_memory)
        side.drain()  # the rest of the test; its MEASUREMENTS carry the metrics
        return side.final.get(key, measurement)

    def _worker_for(self, file: str) -> RemoteSide:
        if self._side is not None and file in self._files:
            return self._side
        self._stop_worker()
        self._files = tuple(sorted({*self._files, file}))
        if self._zygote is None:
            remove_abandoned()  # scratch folders of runs killed before they could remove them
            self._zygote = Zygote(make_scratch(REMEASURE_PREFIX))
        scratch = self._zygote.scratch
        self._started += 1
        name = f"remeasure-{self._started}"
        launch = WorkerLaunch(
            cwd=self.rootdir,
            import_roots=session_import_path(),
            files=self._files,
            device=self.device,
            pin_cpu=self.pin_cpu,
            basetemp=scratch / f"{name}-basetemp",
            log_path=scratch / f"{name}.log",
            worker_args=self.worker_args,
            reference=True,
        )
        (channel,) = self._zygote.fork(launch)
        self._side = RemoteSide(channel, "in a fresh process")
        return self._side

    def _stop_worker(self) -> None:
        side, self._side = self._side, None
        if side is not None:
            with contextlib.suppress(Exception):
                side.close()

    def close(self) -> None:
        """Stop the worker and its zygote and remove their scratch folder; never raises."""
        self._stop_worker()
        zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()
            shutil.rmtree(zygote.scratch, ignore_errors=True)

"""CompareRefEngine: the head's side of ``--gpuperf-compare-ref=REF``.

For each measurement the head asks the worker (running REF's code in a
temporary worktree) to run the same test up to the same measurement key, then
warms its own side and alternates measurement rounds, head and base, in ABBA
order so linear drift in machine speed cancels. Only one process measures at
a time, so this is correct on a single GPU. It stops when the CI of the ratio
of medians is within the target precision (after ``min_time`` and at least
MIN_PAIRS round pairs) or when ``max_time`` is spent on the head's side.

The verdict: ratio of medians head/base with a CI that is the union of a
per-sample bootstrap CI and a paired-round Student-t CI (the second sees drift
between rounds that the first cannot); a regression needs the change above the
threshold and the whole CI above 1. A test missing at REF, or one whose
measurement never shows up there, is NEW.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf import stats
from pytest_gpuperf.abtest import protocol
from pytest_gpuperf.abtest.protocol import HANDOVER_S, HeadChannel
from pytest_gpuperf.abtest.worktree import RefWorktree
from pytest_gpuperf.compare import (
    GateSettings,
    compare_to_baseline,
    evidence_string,
    time_verdict,
)
from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.model import (
    BaselineEntry,
    Comparison,
    Environment,
    Measurement,
    MeasurementResult,
    Provenance,
    SampleStats,
    Verdict,
    measurement_key,
)

if TYPE_CHECKING:
    from pytest_gpuperf.config import GpuperfConfig
    from pytest_gpuperf.runner import MeasureSpec, PreparedMeasurement, Runner

MIN_PAIRS = 4  # the paired-round CI needs a few pairs (t with 3 degrees of freedom)
ROUNDS_PER_BUDGET = 12  # a round is max_time / this, clamped below
MIN_ROUND_S = 0.005
MAX_ROUND_S = 0.1
START_TIMEOUT_S = 300.0  # the worker imports torch and collects the tests at REF
RECV_TIMEOUT_S = 300.0  # one round, a warm-up or the rest of a test body at REF


@dataclass
class _BaseSide:
    """What the head learned about one measurement at REF."""

    key: str
    samples: list[float] = field(default_factory=list)
    round_medians: list[float] = field(default_factory=list)
    measurement: Measurement | None = None
    error: str | None = None


@dataclass
class _Pair:
    base: _BaseSide | None
    note: str = ""


class CompareRefEngine:
    """The fixture's engine under --gpuperf-compare-ref: ``measure``/``evaluate`` plus ``start``/``close``."""

    def __init__(
        self,
        ref: str,
        rootdir: Path,
        runner: Runner,
        environment: Environment,
        *,
        node_ids: Sequence[str] = (),
        recv_timeout_s: float = RECV_TIMEOUT_S,
    ) -> None:
        self.ref = ref
        self.rootdir = Path(rootdir)
        self.runner = runner
        self.environment = environment
        self.node_ids = tuple(node_ids)
        self.recv_timeout_s = recv_timeout_s
        self.base_commit: str | None = None
        self._worktree: RefWorktree | None = None
        self._channel: HeadChannel | None = None
        self._started = False
        self._ready = False  # the worker said HELLO
        self._test: str | None = None  # the test the worker runs now
        self._test_done = True
        self._test_note = ""
        self._open_key: str | None = None  # a base measurement waiting for rounds
        self._pairs: dict[str, _Pair] = {}
        self._base_final: dict[str, Measurement] = {}

    @classmethod
    def for_session(
        cls, config: GpuperfConfig, runner: Runner, environment: Environment, node_ids: Sequence[str] = ()
    ) -> CompareRefEngine:
        """The engine for a session; the worktree and worker start on the first real measurement."""
        assert config.compare_ref, "for_session needs config.compare_ref"
        return cls(config.compare_ref, config.rootdir, runner, environment, node_ids=node_ids)

    # -- life cycle -------------------------------------------------------------------------

    def start(self, node_ids: Sequence[str] | None = None) -> None:
        """Create the worktree of REF and start the worker there (once); does not wait for it.

        Call it as early as the session's test ids are known (pytest_collection_finish)
        so the worker imports and collects while the head does its own start-up; the
        first measurement waits for the worker's HELLO. ``node_ids`` limits what the
        worker collects to the files of those tests.
        """
        if self._started:
            return
        self._started = True
        if node_ids is not None:
            self.node_ids = tuple(node_ids)
        worktree = RefWorktree(self.rootdir, self.ref).create()
        self._worktree = worktree
        self.base_commit = worktree.commit
        try:
            self._channel = self._spawn(worktree)
        except BaseException:
            self.close()
            raise

    def _ensure_ready(self) -> None:
        self.start()
        if self._ready:
            return
        try:
            self._require_channel().recv(START_TIMEOUT_S, f"the worker to collect the tests at {self.ref}")
        except BaseException:
            self.close()
            raise
        self._ready = True

    def _spawn(self, worktree: RefWorktree) -> HeadChannel:
        assert worktree.path is not None and worktree.repo_root is not None
        try:
            rel = self.rootdir.resolve().relative_to(worktree.repo_root.resolve())
        except ValueError:
            rel = Path()
        cwd = worktree.path / rel
        files = sorted({nid.split("::", 1)[0] for nid in self.node_ids})
        present = [f for f in files if (cwd / f).exists()]
        args = [
            sys.executable, "-m", "pytest",
            "-p", "pytest_gpuperf.abtest.worker_plugin",
            "-p", "no:cacheprovider",
            "--gpuperf", f"--gpuperf-device={self.runner.options.device}",
            # the same core as the head's rounds (or none): see cpu_pinning.py
            f"--gpuperf-pin-cpu={'off' if self.runner.options.pin_cpu is None else self.runner.options.pin_cpu}",
            "--continue-on-collection-errors", "-q",
            f"--basetemp={worktree.tmp_dir / 'basetemp'}",
            *present,
        ]  # fmt: skip
        parent, child = multiprocessing.Pipe(duplex=True)
        env = dict(os.environ)
        # the head's PYTEST_ADDOPTS carries --gpuperf-compare-ref: the worker must not recurse
        env.pop("PYTEST_ADDOPTS", None)
        env[protocol.ENV_FD] = str(child.fileno())
        paths = [str(worktree.path), str(worktree.path / "src")]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        log_path = worktree.tmp_dir / "worker.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                args, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, pass_fds=(child.fileno(),)
            )
        child.close()
        return HeadChannel(parent, process, log_path)

    def close(self) -> None:
        """Stop the worker (closing the pipe ends it) and remove the worktree; never raises."""
        channel, self._channel = self._channel, None
        if channel is not None:
            if self._test_done and channel.process.poll() is None:
                with contextlib.suppress(WorkerError):
                    channel.send(protocol.QUIT)
            channel.conn.close()
            if not self._test_done:
                # interrupted mid-test: the worker owns nothing that needs a clean exit
                channel.process.terminate()
            try:
                channel.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                channel.process.kill()
                channel.process.wait()
        if self._worktree is not None:
            self._worktree.close()
            self._worktree = None

    # -- measuring --------------------------------------------------------------------------

    def measure(self, spec: MeasureSpec, config: GpuperfConfig) -> Measurement:
        if not config.enabled:
            return self.runner.smoke(spec)
        self._ensure_ready()
        key = measurement_key(spec.test_id, spec.name)
        base, note = self._open_base(spec.test_id, key)
        try:
            prepared = self.runner.prepare(spec)
            if base is None:
                prepared.run_to_completion()
            else:
                note = self._alternate(prepared, base, spec)
        except BaseException:
            self._abandon_open()
            raise
        self._pairs[key] = _Pair(base, note)
        measurement = prepared.finish()
        label = f"compared with {self.ref} ({(self.base_commit or '')[:12]}) in alternating rounds"
        return dataclasses.replace(measurement, notes=(*measurement.notes, label))

    def _open_base(self, test_id: str, key: str) -> tuple[_BaseSide | None, str]:
        """Drive the worker to READY ``key``; (None, why) when REF has no such measurement."""
        channel = self._require_channel()
        if self._test != test_id:
            self._drain()
            channel.send(protocol.RUN, test_id)
            self._test, self._test_done, self._test_note = test_id, False, ""
        while not self._test_done:
            message = channel.recv(self.recv_timeout_s, f"{key} at {self.ref}")
            kind = message[0]
            if kind == protocol.READY and message[1] == key:
                self._open_key = key
                return _BaseSide(key), ""
            self._handle_background(message)
        return None, self._test_note or f"{key} not measured at {self.ref}"

    def _handle_background(self, message: protocol.Message) -> None:
        """Messages the head does not wait for: other measurements, results, the end of the test."""
        channel = self._require_channel()
        kind = message[0]
        if kind == protocol.READY:
            channel.send(protocol.SKIP)  # a measurement the head does not have (or not now)
        elif kind == protocol.MEASUREMENTS:
            for m in message[1]:
                self._base_final[m.key] = m
        elif kind == protocol.FAILED:
            self._test_note = f"measurement {message[1]} failed at {self.ref}: {message[2]}"
        elif kind == protocol.MISSING:
            self._test_done = True
            self._test_note = f"test {message[1]} does not exist at {self.ref}"
        elif kind == protocol.DONE:
            self._test_done = True
            outcome = message[2]
            if outcome.get("outcome") == "failed" and not self._test_note:
                detail = outcome.get("detail", "").strip().splitlines()
                self._test_note = f"the test failed at {self.ref}: {detail[-1] if detail else 'see the worker log'}"
        else:
            raise WorkerError(f"--gpuperf-compare-ref worker: unexpected message {kind!r}")

    def _drain(self) -> None:
        """Let the worker finish the current test, skipping measurements the head never asked for."""
        if self._channel is None:
            return
        self._abandon_open()
        while not self._test_done:
            message = self._channel.recv(self.recv_timeout_s, f"{self._test} to finish at {self.ref}")
            self._handle_background(message)

    def _abandon_open(self) -> None:
        if self._open_key is not None and self._channel is not None:
            self._open_key = None
            with contextlib.suppress(WorkerError):  # already failing; the first error is the one to see
                self._channel.send(protocol.SKIP)

    def _require_channel(self) -> HeadChannel:
        if self._channel is None:
            raise WorkerError("--gpuperf-compare-ref worker is not running")
        return self._channel

    def _alternate(self, prepared: PreparedMeasurement, base: _BaseSide, spec: MeasureSpec) -> str:
        """Alternate rounds (ABBA) until precise enough or out of time; returns a note ('' if fine)."""
        s = spec.settings
        round_s = min(MAX_ROUND_S, max(MIN_ROUND_S, s.max_time_s / ROUNDS_PER_BUDGET))
        pairs = 0
        while True:
            head_first = pairs % 2 == 0
            if head_first:
                prepared.round(round_s)
            if not self._base_round(base, round_s):
                prepared.run_to_completion()
                return base.error or ""
            if not head_first:
                time.sleep(HANDOVER_S)
                prepared.round(round_s)
            pairs += 1
            if prepared.measured_s >= s.max_time_s:
                break
            precise_enough = pairs >= MIN_PAIRS and prepared.measured_s >= s.min_time_s
            if precise_enough and self._ratio_half_width(prepared, base) <= s.target_precision:
                break
        channel = self._require_channel()
        self._open_key = None
        channel.send(protocol.FINISH)
        while True:
            message = channel.recv(self.recv_timeout_s, f"{base.key} to finish at {self.ref}")
            if message[0] == protocol.FINISHED:
                base.measurement = message[1]
                return ""
            self._handle_background(message)

    def _base_round(self, base: _BaseSide, budget_s: float) -> bool:
        channel = self._require_channel()
        time.sleep(HANDOVER_S)
        channel.send(protocol.ROUND, budget_s)
        while True:
            message = channel.recv(self.recv_timeout_s, f"a round of {base.key} at {self.ref}")
            kind = message[0]
            if kind == protocol.SAMPLES:
                samples = [float(x) for x in message[1]]
                base.samples.extend(samples)
                base.round_medians.append(statistics.median(samples))
                return True
            self._handle_background(message)
            if kind in (protocol.FAILED, protocol.DONE):
                self._open_key = None
                base.error = self._test_note or f"{base.key} stopped at {self.ref}"
                if kind == protocol.FAILED:
                    self._drain()
                return False

    @staticmethod
    def _ratio_half_width(prepared: PreparedMeasurement, base: _BaseSide) -> float:
        """Relative half-width of the ratio's CI, cheaply: max of round-level and sample-level."""
        _, low, high = stats.paired_ratio_ci(prepared.round_medians, base.round_medians)
        if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
            return math.inf
        paired = (math.log(high) - math.log(low)) / 2
        sample = math.hypot(stats.relative_precision(prepared.samples), stats.relative_precision(base.samples))
        return max(paired, sample)

    # -- judging ----------------------------------------------------------------------------

    def evaluate(self, measurements: Sequence[Measurement], config: GpuperfConfig) -> list[MeasurementResult]:
        from pytest_gpuperf.engine import gate_settings

        if measurements and self._test == measurements[0].test_id:
            self._drain()
        settings = self.settings_for(gate_settings(config, self.environment), config)
        return [self._result(m, self._pairs.pop(m.key, None), settings) for m in measurements]

    @staticmethod
    def settings_for(settings: GateSettings, config: GpuperfConfig) -> GateSettings:
        """No calibration or floor check (interleaving does their job); the compare-ref threshold unless one was set."""
        threshold = settings.compare_ref_threshold if config.threshold is None else settings.threshold
        return dataclasses.replace(settings, use_calibration=False, threshold=threshold, floor_quantile=None)

    def _result(self, m: Measurement, pair: _Pair | None, settings: GateSettings) -> MeasurementResult:
        base = pair.base if pair is not None else None
        if base is None or not base.samples or base.error:
            why = (pair.note if pair is not None else "") or f"not measured against {self.ref}"
            comparisons = compare_to_baseline(m, None, self.environment, settings)
            return MeasurementResult(m, tuple(_with_note(c, why) for c in comparisons))
        entry = self._base_entry(m, base)
        others = compare_to_baseline(m, entry, self.environment, settings)[1:]  # memory, metrics
        return MeasurementResult(m, (self._time_comparison(m, base, settings), *others), entry)

    def _base_entry(self, m: Measurement, base: _BaseSide) -> BaselineEntry:
        final = self._base_final.get(m.key) or base.measurement
        return BaselineEntry(
            key=m.key,
            stats=SampleStats.from_samples(base.samples),
            samples_ns=tuple(base.samples),
            calls_per_sample=final.calls_per_sample if final else 1,
            device=final.device if final else m.device,
            timer=final.timer if final else m.timer,
            round_medians_ns=tuple(base.round_medians),
            peak_allocated_bytes=final.peak_allocated_bytes if final else None,
            peak_reserved_bytes=final.peak_reserved_bytes if final else None,
            metrics=final.metrics if final else (),
            environment=self.environment,
            provenance=Provenance(commit=self.base_commit, branch=self.ref),
        )

    def _time_comparison(self, m: Measurement, base: _BaseSide, settings: GateSettings) -> Comparison:
        metric = f"time.{settings.metric}"
        current = m.stats.get(settings.metric)
        base_value = SampleStats.from_samples(base.samples).get(settings.metric)
        head_rounds = m.round_medians_ns[-len(base.round_medians) :]
        ratio, boot_low, boot_high = stats.ratio_of_medians_ci(m.samples_ns, base.samples, settings.confidence)
        _, pair_low, pair_high = stats.paired_ratio_ci(head_rounds, base.round_medians, settings.confidence)
        low, high = min(boot_low, pair_low), max(boot_high, pair_high)
        p = stats.mann_whitney_p(m.samples_ns, base.samples)
        change = current / base_value - 1.0
        threshold = settings.threshold
        rounds = f"{len(base.round_medians)} alternating round pairs vs {self.ref}"
        verdict = time_verdict(change, low, high, threshold)
        note = ""
        if m.unstable_reason:
            verdict, note = Verdict.UNSTABLE, f"unstable: {m.unstable_reason}"
        return Comparison(
            m.key, metric, verdict, current,
            baseline=base_value, change=change, ci_low=low, ci_high=high, p_value=p,
            threshold=threshold, evidence=evidence_string(ratio, low, high, settings.confidence, p, rounds),
            baseline_commit=self.base_commit, note=note,
        )  # fmt: skip


def _with_note(c: Comparison, note: str) -> Comparison:
    return dataclasses.replace(c, note=f"{c.note}; {note}" if c.note and c.note != "no baseline" else note)

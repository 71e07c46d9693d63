"""The measuring session: one object that owns the session's state, its engine and its baseline writes.

A registered plugin object, as pytest-xdist's ``DSession``; the engine is built on the first ``gpu_bench``
or when perf tests are collected, and nothing heavy is imported before.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf.config import GpuperfConfig, Settings
from pytest_gpuperf.errors import GpuperfError
from pytest_gpuperf.model import (
    Comparison,
    Environment,
    Kind,
    MeasurementResult,
    Provenance,
    SessionResults,
    Verdict,
)
from pytest_gpuperf.modes import EngineKind
from pytest_gpuperf.plugin.fixture import GpuBench
from pytest_gpuperf.plugin.outcome import fail
from pytest_gpuperf.plugin.parallel import WorkerInfo, measurement_lock, needs_lock, pinned_device
from pytest_gpuperf.report.progress import Progress
from pytest_gpuperf.verdict.rules import MinimumSamples

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.baseline.store import BaselineStore, EntryChange
    from pytest_gpuperf.engines.compare_ref.prestart import EarlyBase
    from pytest_gpuperf.engines.compare_ref.refs import BaseRef, HeadCommit  # noqa: F401  (HeadCommit: a stash key's)
    from pytest_gpuperf.engines.protocol import Engine
    from pytest_gpuperf.measure.host import HostGuard
    from pytest_gpuperf.measure.runner import Runner
    from pytest_gpuperf.verdict.rulesets import RuleSet

STATE_KEY = pytest.StashKey["GpuperfSession"]()
BENCH_KEY = pytest.StashKey[GpuBench]()
EARLY_BASE_KEY = pytest.StashKey["EarlyBase"]()  # compare-ref's base worker, started before the conftests load
BASE_REF_KEY = pytest.StashKey["BaseRef"]()  # compare-ref's ref, resolved to a commit before the conftests load
BASE_IS_HEAD_KEY = pytest.StashKey["HeadCommit"]()  # compare-ref's ref is the head's own commit (refs.HeadCommit)


@dataclass(eq=False)  # a plugin object: pluggy keeps plugins in sets, so it hashes by identity
class GpuperfSession:
    """Per-session state and the session's hooks; ``config.stash[STATE_KEY]`` and a registered plugin."""

    config: GpuperfConfig
    started_at: str
    pytest_config: pytest.Config
    device: torch.device | None = None
    environment: Environment | None = None
    provenance: Provenance = field(default_factory=Provenance)
    store: BaselineStore | None = None
    engine: Engine | None = None
    results: list[MeasurementResult] = field(default_factory=list)
    changes: list[EntryChange] = field(default_factory=list)
    early_base: EarlyBase | None = None  # compare-ref's base worker, started before collection
    progress: Progress = field(default_factory=Progress)  # lines while a suspicion is confirmed
    base_ref: BaseRef | None = None  # compare-ref's revision, resolved to a commit before collection
    worker: WorkerInfo | None = None  # this process is an xdist worker
    lock: Any = None  # a FileLock when xdist workers share the device
    closing: list[tuple[str, bool]] = field(default_factory=list)  # (line, a warning): the session end's reports

    @property
    def base_worker(self) -> bool:
        """This process is compare-ref's base worker (``-p pytest_gpuperf.workers.worker_plugin``)."""
        from pytest_gpuperf.workers import worker_plugin

        return self.pytest_config.pluginmanager.is_registered(worker_plugin)

    def guard(self) -> contextlib.AbstractContextManager[object]:
        return self.lock if self.lock is not None else contextlib.nullcontext()

    def ensure_started(self) -> Engine:
        """Resolve the device, probe the environment, open the store and build the mode's engine, once."""
        if self.engine is not None:
            return self.engine
        from pytest_gpuperf.baseline.provenance import git_provenance
        from pytest_gpuperf.baseline.store import BaselineStore
        from pytest_gpuperf.gpu.device import cuda_device_count, resolve_device
        from pytest_gpuperf.measure.env import probe_environment
        from pytest_gpuperf.measure.host import guard_for
        from pytest_gpuperf.measure.runner import Runner, RunnerOptions
        from pytest_gpuperf.verdict.rulesets import rules_for

        c = self.config
        cuda_count = cuda_device_count()
        self.device = resolve_device(pinned_device(c.device, self.worker, cuda_count))
        if needs_lock(str(self.device), self.worker, cuda_count):
            self.lock = measurement_lock(c.rootdir, str(self.device))
        self.environment = probe_environment(self.device)
        # a worker's readings are judged and reported by the head, which knows the commits: no git for it to ask
        self.provenance = Provenance() if self.base_worker else git_provenance(c.rootdir)
        self.store = BaselineStore(c.baseline_dir)
        plan = c.plan
        guard = guard_for(self.device, plan=plan, pin_cpu=c.pin_cpu, busy_policy=c.busy_policy)
        runner = Runner(RunnerOptions(device=self.device, guard=guard, nvtx=c.nvtx, nsight=c.nsight,
                                      profile_dir=c.profile_dir, reference=plan.takes_reference))  # fmt: skip
        rules = rules_for(plan, guard.rules(plan))  # the mode's rule lists, once for the session
        if self.base_worker:
            from pytest_gpuperf.workers.worker_plugin import worker_engine

            self.engine = worker_engine(self.pytest_config, runner)
        elif plan.engine is EngineKind.COMPARE_REF:
            self.engine = self._compare_ref_engine(runner, rules)
        else:
            self.engine = self._local_engine(runner, guard, rules)
        return self.engine

    def _local_engine(self, runner: Runner, guard: HostGuard, rules: RuleSet) -> Engine:
        from pytest_gpuperf.engines.local import LocalEngine
        from pytest_gpuperf.workers.fresh import FreshProcessRemeasure

        c, device = self.config, str(self.device)
        assert self.store is not None and self.environment is not None

        def fresh() -> FreshProcessRemeasure:
            return FreshProcessRemeasure(c.rootdir, device, guard.pin_cpu, c.worker_args)

        return LocalEngine(runner, self.store, self.environment, guard, rules, fresh, self.progress,
                           traces=c.traces_dir)  # fmt: skip

    def _compare_ref_engine(self, runner: Runner, rules: RuleSet) -> Engine:
        from pytest_gpuperf.engines.compare_ref.engine import CompareRefEngine

        c = self.config
        assert c.compare_ref is not None and self.environment is not None
        return CompareRefEngine(
            c.compare_ref, c.rootdir, runner, self.environment, rules, confirm_pairs=c.confirm_pairs,
            worker_args=c.worker_args, early=self.early_base, resolved=self.base_ref, progress=self.progress,
            traces=c.traces_dir, start_timeout_s=c.worker_start_timeout_s, base_tests=c.base_tests, inifile=c.inifile,
        )  # fmt: skip

    def bench(self, item: pytest.Item, settings: Settings) -> GpuBench:
        """The ``gpu_bench`` of ``item``: measured by this session's engine, judged after the test body."""
        engine = self.ensure_started()
        assert self.device is not None
        bench = GpuBench(item.nodeid, settings, engine, self.device, guard=self.guard, remember=engine.remember)
        item.stash[BENCH_KEY] = bench
        return bench

    def session_results(self) -> SessionResults:
        assert self.environment is not None
        c = self.config
        base_commit = self.engine.base_commit if self.engine is not None else None
        base = Provenance(commit=base_commit, branch=c.compare_ref) if c.compare_ref else None
        return SessionResults(
            results=tuple(self.results), environment=self.environment, provenance=self.provenance, mode=c.mode,
            started_at=self.started_at, compare_ref=c.compare_ref, base_provenance=base, repro_args=c.repro_args,
        )  # fmt: skip

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        """compare-ref's base worker starts its engine now: what it cannot use is a usage error."""
        if not self.base_worker:
            return
        if self.config.compare_ref:
            raise pytest.UsageError("the compare-ref worker cannot itself use --gpuperf-compare-ref")
        try:
            self.ensure_started()
        except GpuperfError as exc:
            raise pytest.UsageError(str(exc)) from None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Start the engine once perf tests are collected, and compare-ref's base worker, to collect while we do."""
        perf_items = [i for i in session.items if "gpu_bench" in getattr(i, "fixturenames", ())]
        if not perf_items:
            return
        try:
            engine = self.ensure_started()
            if self.worker is None:
                engine.start([i.nodeid for i in perf_items])
        except GpuperfError as exc:
            raise pytest.UsageError(str(exc)) from None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        """After a passing test body, judge its measurements; a regression fails the test."""
        result = yield  # re-raises if the test body failed: nothing is judged or written then
        bench = item.stash.get(BENCH_KEY, None)
        if bench is not None and bench.enabled and bench.measurements:
            self.judge(bench)
        return result

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """An xdist worker hands its results to the controller, which reports for all."""
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is None or self.environment is None or not self.results:
            return
        from pytest_gpuperf.report.results_json import dumps_results

        workeroutput["gpuperf_results"] = dumps_results(self.session_results())
        workeroutput["gpuperf_changes"] = [[c.key, str(c.path), c.kind] for c in self.changes]

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook, on its controller: merge what a worker measured
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", None) or {}
        text = output.get("gpuperf_results")
        if not text:
            return
        from pytest_gpuperf.baseline.store import EntryChange
        from pytest_gpuperf.report.results_json import loads_results

        session = loads_results(text, f"<results of xdist worker {output.get('workerid', '?')}>")
        self.results.extend(session.results)
        self.environment = self.environment or session.environment
        self.provenance = session.provenance
        self.changes.extend(EntryChange(k, Path(p), kind) for k, p, kind in output.get("gpuperf_changes", []))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.engine is not None:
            self.engine.close()
        if STATE_KEY in config.stash:
            del config.stash[STATE_KEY]

    def judge(self, bench: GpuBench) -> None:
        __tracebackhide__ = True
        from pytest_gpuperf.report.failure import failure_message
        from pytest_gpuperf.report.repro import rerun
        from pytest_gpuperf.verdict import fails
        from pytest_gpuperf.verdict.judge import absolute_failures

        assert self.engine is not None and self.environment is not None
        try:
            with self.guard():  # a re-measure is a measurement too
                results = self.engine.evaluate(bench.measurements, bench.settings)
        except GpuperfError as exc:
            fail(str(exc))
        self.results.extend(results)
        c = self.config
        again = rerun(c.mode, self.engine.base_commit, c.compare_ref, c.repro_args)

        def message(r: MeasurementResult, only: tuple[Comparison, ...] = ()) -> str:
            repro = again.command(r.measurement) if again is not None else None
            return failure_message(r, str(self.device), only, compare_ref=c.compare_ref, repro=repro)

        if bench.settings.gate.strict and (missing := missing_baselines(self.config)):
            fail(f"{bench.test_id}: nothing is gated: {missing} (--gpuperf-strict)")
        if bench.settings.plan.writes_baselines:
            # A violated hard bound fails an update run too, and nothing of the test is written.
            violated = [message(r, tuple(only)) for r in results if (only := absolute_failures(r))]
            if violated:
                fail("\n\n".join(violated))
            self.update_baselines(results)
            return
        if failures := [message(r) for r in results if fails(r, bench.settings.gate)]:
            fail("\n\n".join(failures))

    def update_baselines(self, results: list[MeasurementResult]) -> None:
        """Write entries for this test's measurements; an entry judged unchanged keeps its old bytes.

        Except one without the machine's reference where this session has one: the gate needs it to tell a slow
        machine from slow code, and a reference belongs with the samples it was measured beside; and one written
        while the runner was busy with no correction for it, which this run replaces unless it was written so too. An
        unchanged entry without a profile gains this run's (the base of a later differential profile). A
        measurement with too few samples for a verdict is not written; the entry it would replace stays.
        """
        __tracebackhide__ = True
        from pytest_gpuperf.baseline import entry_from_measurement

        assert self.store is not None and self.environment is not None
        entries = []
        for r in results:
            old = r.baseline
            if any(c.kind is Kind.TIME and any(n.rule == MinimumSamples.name for n in c.explanation)
                   and c.verdict is Verdict.NOT_GATED for c in r.comparisons):  # fmt: skip
                if old is not None:
                    entries.append(old)
                continue
            m = r.measurement
            # an entry whose reference is not this session's work (none, or an older version of it) gains it
            gains_reference = (
                old is not None and bool(m.reference_ns) and not (m.reference_ns.keys() & old.reference_ns.keys())
            )
            clears_busy = old is not None and bool(old.written_busy) and not m.written_busy
            if old is not None and r.verdict is Verdict.UNCHANGED and not gains_reference and not clears_busy:
                if old.profile is None and m.op_profile is not None:  # an older entry gains its profile
                    old = dataclasses.replace(old, profile=m.op_profile)
                entries.append(old)
                continue
            entries.append(entry_from_measurement(m, self.environment, self.provenance, recorded_at=self.started_at))
        try:
            self.changes.extend(self.store.update(self.environment.device_class, entries))
        except GpuperfError as exc:
            fail(str(exc))


def missing_baselines(config: GpuperfConfig) -> str | None:
    """Why a gating run has no baseline files to judge against (None: it has some, or it does not gate).

    A folder that holds none counts as missing: after a branch switch git leaves the store's ignored lock files."""
    from pytest_gpuperf.baseline.store import BaselineStore

    root = config.baseline_dir
    if not config.plan.gates_against_baselines or (root.is_dir() and BaselineStore(root).holds_files()):
        return None
    what = "holds no baseline file" if root.is_dir() else "is not a folder" if root.exists() else "does not exist"
    return (f"the baselines folder {config.baseline_dir} {what}, so every test is new; record baselines with "
            "--gpuperf-update-baseline, or check --gpuperf-baseline-dir / gpuperf_baseline_dir")  # fmt: skip

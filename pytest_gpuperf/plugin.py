"""The pytest layer: options, ini values, the marker, the fixture and the gate hooks.

Everything heavy (torch, git, the store) is set up lazily on the first
``gpu_bench`` use, so a session without perf tests pays nothing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf import config as cfg
from pytest_gpuperf.errors import ConfigError, GpuperfError
from pytest_gpuperf.fixture import GpuBench
from pytest_gpuperf.model import Comparison, Environment, MeasurementResult, Provenance, SessionResults, Verdict
from pytest_gpuperf.parallel import WorkerInfo, measurement_lock, needs_lock, pinned_device

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.abtest.prestart import EarlyBase
    from pytest_gpuperf.baseline.store import BaselineStore, EntryChange
    from pytest_gpuperf.engine import Engine

MARKER = "gpuperf"


@dataclass
class SessionState:
    """Per-session plugin state, kept in ``config.stash``."""

    config: cfg.GpuperfConfig
    started_at: str
    device: torch.device | None = None
    environment: Environment | None = None
    provenance: Provenance = field(default_factory=Provenance)
    store: BaselineStore | None = None
    engine: Engine | None = None
    results: list[MeasurementResult] = field(default_factory=list)
    changes: list[EntryChange] = field(default_factory=list)
    early_base: EarlyBase | None = None  # compare-ref's base worker, started before collection
    worker: WorkerInfo | None = None
    lock: Any = None  # a FileLock when xdist workers share the device

    def guard(self) -> contextlib.AbstractContextManager[object]:
        return self.lock if self.lock is not None else contextlib.nullcontext()

    def ensure_started(self) -> Engine:
        """Resolve the device, probe the environment, open the store and build the engine, once."""
        if self.engine is not None:
            return self.engine
        import torch

        from pytest_gpuperf.baseline.provenance import git_provenance
        from pytest_gpuperf.baseline.store import BaselineStore
        from pytest_gpuperf.cpu_pinning import resolve_pin_cpu
        from pytest_gpuperf.engine import LocalEngine
        from pytest_gpuperf.env import probe_environment
        from pytest_gpuperf.gpu.device import resolve_device
        from pytest_gpuperf.runner import Runner, RunnerOptions

        c = self.config
        cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        self.device = resolve_device(pinned_device(c.device, self.worker, cuda_count))
        if needs_lock(str(self.device), self.worker, cuda_count):
            self.lock = measurement_lock(c.rootdir, str(self.device))
        self.environment = probe_environment(self.device)
        self.provenance = git_provenance(c.rootdir)
        self.store = BaselineStore(c.baseline_dir)
        pin_cpu = resolve_pin_cpu(c.pin_cpu, mode=c.mode, device_type=self.device.type)
        runner = Runner(
            RunnerOptions(
                device=self.device, nvtx=c.nvtx, nsight=c.nsight, profile_dir=c.profile_dir, pin_cpu=pin_cpu
            )
        )
        if c.compare_ref:
            from pytest_gpuperf.abtest.engine import CompareRefEngine

            self.engine = CompareRefEngine.for_session(c, runner, self.environment, early=self.early_base)
        else:
            self.engine = LocalEngine(runner, self.store, self.environment)
        return self.engine

    def session_results(self) -> SessionResults:
        assert self.environment is not None
        base_commit = getattr(self.engine, "base_commit", None)
        base = Provenance(commit=base_commit, branch=self.config.compare_ref) if self.config.compare_ref else None
        return SessionResults(
            results=tuple(self.results),
            environment=self.environment,
            provenance=self.provenance,
            mode=self.config.mode,
            started_at=self.started_at,
            compare_ref=self.config.compare_ref,
            base_provenance=base,
        )


STATE_KEY = pytest.StashKey[SessionState]()
BENCH_KEY = pytest.StashKey[GpuBench]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuperf", "GPU performance regression testing (pytest-gpuperf)")

    def add(name: str, *, ini: str | None = None, ini_type: str | None = None, **kwargs: Any) -> None:
        dest = name.removeprefix("--").replace("-", "_")
        group.addoption(name, dest=dest, **kwargs)
        if ini:
            parser.addini(ini, help=kwargs.get("help", ""), type=ini_type)  # type: ignore[arg-type]

    add("--gpuperf", action="store_true", default=False,
        help="measure perf tests and gate them against baselines (without it: one smoke call each)")
    add("--gpuperf-update-baseline", action="store_true", default=False,
        help="write baselines for the perf tests that ran and passed (implies --gpuperf)")
    add("--gpuperf-baseline-dir", metavar="DIR", default=None, ini="gpuperf_baseline_dir", ini_type="string",
        help=f"baseline folder, relative to the rootdir (default: {cfg.DEFAULT_BASELINE_DIR})")
    add("--gpuperf-device", metavar="DEVICE", default=None, ini="gpuperf_device", ini_type="string",
        help="auto (CUDA if available), cpu, cuda or cuda:N (default: auto)")
    add("--gpuperf-threshold", metavar="FRACTION", type=float, default=None, ini="gpuperf_threshold",
        ini_type="string", help=f"relative slow-down that fails (default: {cfg.DEFAULT_THRESHOLD} against baselines, "
        f"{cfg.DEFAULT_COMPARE_REF_THRESHOLD} with --gpuperf-compare-ref)")
    add("--gpuperf-memory-threshold", metavar="FRACTION", type=float, default=None,
        ini="gpuperf_memory_threshold", ini_type="string",
        help=f"relative peak-memory growth that fails (default: {cfg.DEFAULT_MEMORY_THRESHOLD})")
    add("--gpuperf-metric", metavar="STAT", default=None, ini="gpuperf_metric", ini_type="string",
        help=f"time statistic to gate: {', '.join(cfg.TIME_METRICS)} (default: {cfg.DEFAULT_METRIC})")
    add("--gpuperf-warmup-time", metavar="SECONDS", type=float, default=None, ini="gpuperf_warmup_time",
        ini_type="string", help=f"warm-up budget per measurement (default: {cfg.DEFAULT_WARMUP_TIME_S})")
    add("--gpuperf-min-time", metavar="SECONDS", type=float, default=None, ini="gpuperf_min_time",
        ini_type="string", help=f"least time measured per measurement (default: {cfg.DEFAULT_MIN_TIME_S})")
    add("--gpuperf-max-time", metavar="SECONDS", type=float, default=None, ini="gpuperf_max_time",
        ini_type="string", help=f"most time measured per measurement (default: {cfg.DEFAULT_MAX_TIME_S})")
    add("--gpuperf-time-limit", metavar="SECONDS", type=float, default=None, ini="gpuperf_time_limit",
        ini_type="string", help="most time one measurement may take, warm-up included; a call still running "
        f"then fails the test (default: {cfg.DEFAULT_TIME_LIMIT_S:g})")
    add("--gpuperf-target-precision", metavar="FRACTION", type=float, default=None,
        ini="gpuperf_target_precision", ini_type="string",
        help=f"stop once the 95%% CI of the median is within this (default: {cfg.DEFAULT_TARGET_PRECISION})")
    add("--gpuperf-remeasure", metavar="N", type=int, default=None, ini="gpuperf_remeasure", ini_type="string",
        help=f"re-measure a suspected regression N times before failing (default: {cfg.DEFAULT_REMEASURES})")
    add("--gpuperf-calibrate", metavar="MODE", default=None, ini="gpuperf_calibrate", ini_type="string",
        help="normalize by a calibration workload measured between rounds: on, off (default: off)")
    add("--gpuperf-compare-ref", metavar="REF", default=None,
        help="compare against git REF in the same run (worktree + worker process, alternating rounds)")
    add("--gpuperf-confirm-pairs", metavar="N", type=int, default=None, ini="gpuperf_confirm_pairs",
        ini_type="string", help="compare-ref: re-measure a suspected regression in N fresh process pairs "
        f"and let their spread decide; 0 = off (default: {cfg.DEFAULT_CONFIRM_PAIRS})")
    add("--gpuperf-pin-cpu", metavar="CPU", default=None, ini="gpuperf_pin_cpu", ini_type="string",
        help="measure on one CPU core: auto (compare-ref on the CPU: both sides on the last core), off, or N")
    add("--gpuperf-strict", action="store_true", default=False,
        help="fail measurements whose baseline is not comparable (other device class)")
    add("--gpuperf-l2-flush", action="store_true", default=False,
        help="flush the GPU L2 cache before each timed call (cold-cache timing)")
    add("--gpuperf-cuda-graph", action="store_true", default=False,
        help="capture each measured call into a CUDA graph and replay it")
    add("--gpuperf-profile", metavar="DIR", default=None,
        help="after timing, capture a short torch.profiler trace per measurement into DIR")
    add("--gpuperf-nsight", action="store_true", default=False,
        help="wrap measured regions in cudaProfilerStart/Stop for nsys --capture-range=cudaProfilerApi")
    add("--gpuperf-no-nvtx", action="store_true", default=False, help="do not emit NVTX ranges")
    add("--gpuperf-json", metavar="PATH", default=None, help="write results JSON")
    add("--gpuperf-markdown", metavar="PATH", default=None, help="write a Markdown PR comment")
    add("--gpuperf-benchmark-json", metavar="PATH", default=None, help="write pytest-benchmark compatible JSON")
    add("--gpuperf-html", metavar="PATH", default=None, help="write a self-contained HTML report")


def _value(config: pytest.Config, dest: str, ini: str | None, default: Any, convert: Any = None) -> Any:
    """Command line beats ini beats default; ini strings are converted with a clear error."""
    value = config.getoption(dest)
    if value is not None:
        return value
    if ini:
        raw = config.getini(ini)
        if raw not in (None, "", []):
            try:
                return convert(raw) if convert else raw
            except ValueError:
                raise pytest.UsageError(f"ini value {ini} = {raw!r} is not valid") from None
    return default


def build_config(config: pytest.Config) -> cfg.GpuperfConfig:
    rootdir = Path(config.rootpath)
    opt = config.getoption
    baseline_dir = Path(_value(config, "gpuperf_baseline_dir", "gpuperf_baseline_dir", cfg.DEFAULT_BASELINE_DIR))

    def path(dest: str) -> Path | None:
        raw = opt(dest)
        return Path(raw).absolute() if raw else None

    measure = cfg.MeasureSettings(
        warmup_time_s=_value(config, "gpuperf_warmup_time", "gpuperf_warmup_time", cfg.DEFAULT_WARMUP_TIME_S, float),
        min_time_s=_value(config, "gpuperf_min_time", "gpuperf_min_time", cfg.DEFAULT_MIN_TIME_S, float),
        max_time_s=_value(config, "gpuperf_max_time", "gpuperf_max_time", cfg.DEFAULT_MAX_TIME_S, float),
        target_precision=_value(config, "gpuperf_target_precision", "gpuperf_target_precision",
                                cfg.DEFAULT_TARGET_PRECISION, float),
        l2_flush=opt("gpuperf_l2_flush"),
        cuda_graph=opt("gpuperf_cuda_graph"),
        time_limit_s=_value(config, "gpuperf_time_limit", "gpuperf_time_limit", cfg.DEFAULT_TIME_LIMIT_S, float),
    )
    update = bool(opt("gpuperf_update_baseline"))
    return cfg.GpuperfConfig(
        enabled=bool(opt("gpuperf")) or update or bool(opt("gpuperf_compare_ref")),
        update_baseline=update,
        baseline_dir=baseline_dir if baseline_dir.is_absolute() else rootdir / baseline_dir,
        rootdir=rootdir,
        device=_value(config, "gpuperf_device", "gpuperf_device", "auto"),
        threshold=_value(config, "gpuperf_threshold", "gpuperf_threshold", None, float),
        memory_threshold=_value(config, "gpuperf_memory_threshold", "gpuperf_memory_threshold",
                                cfg.DEFAULT_MEMORY_THRESHOLD, float),
        metric=_value(config, "gpuperf_metric", "gpuperf_metric", cfg.DEFAULT_METRIC),
        strict=bool(opt("gpuperf_strict")),
        calibrate=_value(config, "gpuperf_calibrate", "gpuperf_calibrate", "off"),
        pin_cpu=str(_value(config, "gpuperf_pin_cpu", "gpuperf_pin_cpu", "auto")),
        remeasures=_value(config, "gpuperf_remeasure", "gpuperf_remeasure", cfg.DEFAULT_REMEASURES, int),
        confirm_pairs=_value(config, "gpuperf_confirm_pairs", "gpuperf_confirm_pairs", cfg.DEFAULT_CONFIRM_PAIRS, int),
        measure=measure,
        compare_ref=opt("gpuperf_compare_ref"),
        json_path=path("gpuperf_json"),
        markdown_path=path("gpuperf_markdown"),
        benchmark_json_path=path("gpuperf_benchmark_json"),
        html_path=path("gpuperf_html"),
        profile_dir=path("gpuperf_profile"),
        nsight=bool(opt("gpuperf_nsight")),
        nvtx=not opt("gpuperf_no_nvtx"),
        plugin_args=_plugin_args(config),
    )


def _plugin_args(config: pytest.Config) -> tuple[str, ...]:
    """``-p`` choices (and --disable-plugin-autoload) of this session, for its worker processes.

    A worker (compare-ref's, or the fresh re-measure's) runs the same tests as the head, so
    it loads the same plugins: one that the head turned off (pytest-randomly reseeding, say)
    must not act on one side only.
    """
    args = [arg for name in config.getoption("plugins", None) or () for arg in ("-p", name)]
    if config.getoption("disable_plugin_autoload", False):
        args.append("--disable-plugin-autoload")
    return tuple(args)


EARLY_BASE_KEY = pytest.StashKey["EarlyBase"]()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """In compare-ref mode, start the base worker now, before conftests and test modules import torch.

    Its start-up (mostly importing torch) then overlaps the head's instead of
    following the head's collection (abtest/prestart.py). Best effort: the engine
    starts it itself later if this did not.
    """
    ns = early_config.known_args_namespace
    ref = getattr(ns, "gpuperf_compare_ref", None)
    if not ref or getattr(ns, "help", False) or getattr(ns, "version", False):
        return
    if getattr(ns, "numprocesses", None) or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # under xdist the workers measure, each with its own engine
    from pytest_gpuperf.abtest.prestart import start_early

    early = start_early(Path(early_config.rootpath), ref)
    if early is not None:
        early_config.stash[EARLY_BASE_KEY] = early
        early_config.add_cleanup(early.close)  # a no-op once the engine has taken it over


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(threshold=None, memory_threshold=None, metric=None, warmup_time=None, min_time=None, "
        "max_time=None, target_precision=None, l2_flush=None, cuda_graph=None, calibrate=None, remeasures=None, "
        "time_limit=None): "
        "per-test options for gpu_bench measurements (pytest-gpuperf)",
    )
    try:
        gp = build_config(config)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    worker = WorkerInfo.from_workerinput(getattr(config, "workerinput", None))
    early = config.stash.get(EARLY_BASE_KEY, None)
    config.stash[STATE_KEY] = SessionState(config=gp, started_at=now, worker=worker, early_base=early)
    if worker is None and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(config.stash[STATE_KEY]), "gpuperf-xdist-controller")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None and state.engine is not None:
        close = getattr(state.engine, "close", None)
        if close is not None:
            close()
    if STATE_KEY in config.stash:
        del config.stash[STATE_KEY]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reject unknown marker keywords at collection, naming the test."""
    for item in items:
        for mark in item.iter_markers(MARKER):
            if mark.args:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.{MARKER} takes keywords only, got positional {mark.args!r}"
                )
            try:
                cfg.MarkerOptions.from_kwargs(mark.kwargs, test_id=item.nodeid)
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from None


def pytest_collection_finish(session: pytest.Session) -> None:
    """In compare-ref mode, start the base worker now, so it imports and collects while we do."""
    state = session.config.stash.get(STATE_KEY, None)
    if state is None or not state.config.compare_ref or state.worker is not None:
        return
    perf_items = [i for i in session.items if "gpu_bench" in getattr(i, "fixturenames", ())]
    if not perf_items:
        return
    try:
        engine = state.ensure_started()
        start = getattr(engine, "start", None)
        if start is not None:
            start([i.nodeid for i in perf_items])
    except GpuperfError as exc:
        raise pytest.UsageError(str(exc)) from None


def _test_config(item: pytest.Item, session_config: cfg.GpuperfConfig) -> cfg.GpuperfConfig:
    merged: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers(MARKER))):  # closest marker wins
        merged.update(mark.kwargs)
    if not merged:
        return session_config
    return cfg.MarkerOptions.from_kwargs(merged, test_id=item.nodeid).apply(session_config, test_id=item.nodeid)


@pytest.fixture
def gpu_bench(request: pytest.FixtureRequest) -> GpuBench:
    """Measure a callable with CUDA-correct timing; gated against baselines under ``--gpuperf``."""
    state = request.config.stash[STATE_KEY]
    item = request.node
    try:
        engine = state.ensure_started()
        test_config = _test_config(item, state.config)
    except GpuperfError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert state.device is not None
    bench = GpuBench(item.nodeid, test_config, engine, state.device, guard=state.guard)
    item.stash[BENCH_KEY] = bench
    return bench


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """After a passing test body, judge its measurements; a regression fails the test."""
    result = yield  # re-raises if the test body failed: nothing is judged or written then
    bench = item.stash.get(BENCH_KEY, None)
    if bench is None or not bench.enabled or not bench.measurements:
        return result
    state = item.config.stash[STATE_KEY]
    _judge(state, bench)
    return result


def _judge(state: SessionState, bench: GpuBench) -> None:
    __tracebackhide__ = True
    from pytest_gpuperf.engine import gate_settings
    from pytest_gpuperf.gate import fails, failure_message

    assert state.engine is not None and state.environment is not None
    try:
        with state.guard():  # a re-measure is a measurement too
            results = state.engine.evaluate(bench.measurements, bench.config)
    except GpuperfError as exc:
        pytest.fail(str(exc), pytrace=False)
    state.results.extend(results)
    if bench.config.update_baseline:
        _update_baselines(state, results)
        return
    settings = gate_settings(bench.config)
    failures = [failure_message(r, str(state.device)) for r in results if fails(r, settings)]
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


def _update_baselines(state: SessionState, results: list[MeasurementResult]) -> None:
    """Write entries for this test's measurements; an entry judged unchanged keeps its old bytes.

    Except one written before the speed probe existed, where this session has a
    probe: without one the gate cannot tell a slow machine from slow code for it
    (speed_probe.py), and the probe must come from the session its samples came from.
    """
    __tracebackhide__ = True
    from pytest_gpuperf.baseline import entry_from_measurement
    from pytest_gpuperf.stats import recorded_noise

    assert state.store is not None and state.environment is not None
    entries = []
    for r in results:
        old = r.baseline
        gains_probe = old is not None and old.speed_probe_ns is None and r.measurement.speed_probe_ns is not None
        if old is not None and r.verdict is Verdict.UNCHANGED and not gains_probe:
            entries.append(old)
            continue
        m = r.measurement
        entries.append(
            entry_from_measurement(
                m,
                state.environment,
                state.provenance,
                noise=recorded_noise(m.round_medians_ns, m.process_medians_ns),
                recorded_at=state.started_at,
            )
        )
    try:
        state.changes.extend(state.store.update(state.environment.device_class, entries))
    except GpuperfError as exc:
        pytest.fail(str(exc), pytrace=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands its results to the controller, which reports for all."""
    config = session.config
    state = config.stash.get(STATE_KEY, None)
    workeroutput = getattr(config, "workeroutput", None)
    if state is None or workeroutput is None or state.environment is None or not state.results:
        return
    from pytest_gpuperf.report.results_json import dumps_results

    workeroutput["gpuperf_results"] = dumps_results(state.session_results())
    workeroutput["gpuperf_changes"] = [[c.key, str(c.path), c.kind] for c in state.changes]


class _XdistController:
    """Registered on the xdist controller only: merges what each worker measured."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", None) or {}
        text = output.get("gpuperf_results")
        if not text:
            return
        from pytest_gpuperf.baseline.store import EntryChange
        from pytest_gpuperf.report.results_json import loads_results

        session = loads_results(text, f"<results of xdist worker {output.get('workerid', '?')}>")
        state = self.state
        state.results.extend(session.results)
        state.environment = state.environment or session.environment
        state.provenance = session.provenance
        state.changes.extend(EntryChange(k, Path(p), kind) for k, p, kind in output.get("gpuperf_changes", []))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.config.enabled or state.environment is None:
        return
    from pytest_gpuperf.report import write_reports
    from pytest_gpuperf.report.terminal import render_summary

    session = state.session_results()
    tw = terminalreporter
    render_summary(session, config.get_terminal_writer())
    _write_notes(tw, session, _session_threshold(state.config))
    _write_top_ops(tw, session)
    for change in state.changes:
        if change.kind != "unchanged":
            tw.write_line(f"gpuperf: baseline {change.kind}: {change.key} ({_relative(change.path, config)})")
    kept = sum(1 for c in state.changes if c.kind == "unchanged")
    if kept:
        tw.write_line(f"gpuperf: {kept} baseline entr{'y' if kept == 1 else 'ies'} unchanged (kept as is)")
    c = state.config
    try:
        written = write_reports(
            session,
            json_path=c.json_path,
            markdown_path=c.markdown_path,
            benchmark_json_path=c.benchmark_json_path,
            html_path=c.html_path,
        )
    except GpuperfError as exc:
        tw.write_line(f"gpuperf: could not write reports: {exc}", red=True)
        return
    for path in written:
        tw.write_line(f"gpuperf: wrote {path}")



def _session_threshold(config: cfg.GpuperfConfig) -> float:
    """The time threshold a reader of the summary table has in mind (markers may set others).

    Taken from the gate's own settings, as the session's engine builds them, so that it
    follows whatever decides the threshold there.
    """
    from pytest_gpuperf.engine import gate_settings

    settings = gate_settings(config)
    if config.compare_ref:
        from pytest_gpuperf.abtest.engine import CompareRefEngine

        settings = CompareRefEngine.settings_for(settings, config)
    return settings.threshold


def _write_notes(tw: Any, session: SessionResults, threshold: float) -> None:
    """What a reader must not miss: not-comparable baselines, environment drift, unconfirmed suspicions.

    Routine notes (no baseline yet, precision short of the target: the table has a column
    for it; a power cap that only trimmed the clocks) stay in the results files. A note
    that several measurements share (unlocked GPU clocks, say) is written once. A time
    the table shows past ``threshold`` yet "unchanged" gets its reason too (a threshold
    raised by noise, a fast end that did not move, a suspicion the fresh pairs did not
    confirm): without it the table reads as the gate ignoring its own threshold.
    """
    loud = {Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.NOT_COMPARABLE, Verdict.UNSTABLE}
    routine = ("smoke run", "precision ", "sw_power_cap", "sw_thermal_slowdown", "rounds pinned to CPU")
    keys_by_note: dict[str, list[str]] = {}
    for r in session.results:
        m = r.measurement
        notes = [c.note for c in r.comparisons if c.note and (c.verdict in loud or _quiet_past(c, threshold))]
        said = " ".join(notes)
        notes += [n for n in m.notes if not n.startswith(routine) and n not in said]
        for note in dict.fromkeys(notes):  # ordered, without repeats
            keys_by_note.setdefault(note, []).append(m.key)
    lines = [
        f"{keys[0]}: {note}" if len(keys) == 1 else f"{len(keys)} measurements ({keys[0]}, ...): {note}"
        for note, keys in keys_by_note.items()
    ]
    if lines:
        tw.write_sep("-", "gpuperf notes")
        for line in lines:
            tw.write_line(line)


def _quiet_past(c: Comparison, threshold: float) -> bool:
    """An unchanged time whose change is past the threshold (a guard of the gate decided)."""
    return (
        c.verdict is Verdict.UNCHANGED and c.metric.startswith("time.")
        and c.change is not None and abs(c.change) > threshold
    )  # fmt: skip


def _write_top_ops(tw: Any, session: SessionResults) -> None:
    """Under --gpuperf-profile: each measurement's top operators and the trace to open."""
    profiled = [r.measurement for r in session.results if r.measurement.profile is not None]
    if not profiled:
        return
    from pytest_gpuperf.profiling.torch_profile import format_top_ops

    tw.write_sep("-", "gpuperf profile: top operators")
    for m in profiled:
        assert m.profile is not None
        tw.write_line(f"{m.key}  (trace: {m.profile.trace_path})")
        for line in format_top_ops(m.profile, n=8):
            tw.write_line(f"  {line}")


def _relative(path: Path, config: pytest.Config) -> str:
    try:
        return str(Path(path).relative_to(config.rootpath))
    except ValueError:
        return str(path)

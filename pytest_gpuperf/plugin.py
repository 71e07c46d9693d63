"""The pytest layer: options, ini values, the marker, the fixture and the gate hooks.

Everything heavy (torch, git, the store) is set up lazily on the first
``gpu_bench`` use, so a session without perf tests pays nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import warnings
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf import benchmark_fixture, conftest_options
from pytest_gpuperf import config as cfg
from pytest_gpuperf.errors import ConfigError, GpuperfError, GpuperfWarning
from pytest_gpuperf.fixture import GpuBench
from pytest_gpuperf.model import (
    Environment,
    Kind,
    MeasurementResult,
    Provenance,
    SessionResults,
    Statistic,
    Verdict,
)
from pytest_gpuperf.outcome import fail
from pytest_gpuperf.parallel import WorkerInfo, measurement_lock, needs_lock, pinned_device
from pytest_gpuperf.report.progress import Progress
from pytest_gpuperf.state_key import STATE_KEY

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.abtest.prestart import EarlyBase
    from pytest_gpuperf.abtest.worktree import BaseRef
    from pytest_gpuperf.baseline.store import BaselineStore, EntryChange
    from pytest_gpuperf.engine import Engine
    from pytest_gpuperf.verdict.rulesets import RuleSet

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
    progress: Progress = field(default_factory=Progress)  # lines while a suspicion is confirmed
    base_ref: BaseRef | None = None  # compare-ref's revision, resolved to a commit before collection
    worker: WorkerInfo | None = None
    lock: Any = None  # a FileLock when xdist workers share the device

    def guard(self) -> contextlib.AbstractContextManager[object]:
        return self.lock if self.lock is not None else contextlib.nullcontext()

    def ensure_started(self) -> Engine:
        """Resolve the device, probe the environment, open the store and build the engine, once."""
        if self.engine is not None:
            return self.engine
        import torch

        from pytest_gpuperf.abtest.fresh import FreshProcessRemeasure
        from pytest_gpuperf.baseline.provenance import git_provenance
        from pytest_gpuperf.baseline.store import BaselineStore
        from pytest_gpuperf.engine import LocalEngine
        from pytest_gpuperf.env import probe_environment
        from pytest_gpuperf.gpu.device import resolve_device
        from pytest_gpuperf.host import guard_for
        from pytest_gpuperf.runner import Runner, RunnerOptions
        from pytest_gpuperf.verdict.rulesets import rules_for

        c = self.config
        cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        self.device = resolve_device(pinned_device(c.device, self.worker, cuda_count))
        if needs_lock(str(self.device), self.worker, cuda_count):
            self.lock = measurement_lock(c.rootdir, str(self.device))
        self.environment = probe_environment(self.device)
        self.provenance = git_provenance(c.rootdir)
        self.store = BaselineStore(c.baseline_dir)
        guard = guard_for(self.device, mode=c.mode, pin_cpu=c.pin_cpu, busy_policy=c.busy_policy)
        runner = Runner(RunnerOptions(device=self.device, guard=guard, nvtx=c.nvtx, nsight=c.nsight,
                                      profile_dir=c.profile_dir))  # fmt: skip

        def rules(mode: str) -> RuleSet:
            return rules_for(mode, guard.rules(mode))

        if c.compare_ref:
            from pytest_gpuperf.abtest.engine import CompareRefEngine

            self.engine = CompareRefEngine.for_session(
                c, runner, self.environment, rules, early=self.early_base, resolved=self.base_ref,
                progress=self.progress, traces=c.traces_dir,
            )
        else:
            device = str(self.device)

            def fresh() -> FreshProcessRemeasure:
                return FreshProcessRemeasure(c.rootdir, device, guard.pin_cpu, c.worker_args, settle=guard.settle)

            self.engine = LocalEngine(runner, self.store, self.environment, guard, rules, fresh, self.progress,
                                      traces=c.traces_dir)  # fmt: skip
        return self.engine

    def session_results(self) -> SessionResults:
        assert self.environment is not None
        base_commit = self.engine.base_commit if self.engine is not None else None
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


BENCH_KEY = pytest.StashKey[GpuBench]()


_INI_OPTIONS: set[str] = set()  # options with an ini twin of the same name (gpuperf_threshold ...)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuperf", "GPU performance regression testing (pytest-gpuperf)")

    def add(name: str, *, ini: str | None = None, ini_type: str | None = None, **kwargs: Any) -> None:
        dest = name.removeprefix("--").replace("-", "_")
        group.addoption(name, dest=dest, **kwargs)
        if ini:
            assert ini == dest, f"{name}: the ini key is the option's dest"
            parser.addini(ini, help=kwargs.get("help", ""), type=ini_type)  # type: ignore[arg-type]
            _INI_OPTIONS.add(ini)

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
        help=f"time statistic to gate: {', '.join(s.value for s in Statistic)} (default: {cfg.DEFAULT_METRIC.value})")
    add("--gpuperf-warmup-time", metavar="SECONDS", type=float, default=None, ini="gpuperf_warmup_time",
        ini_type="string", help=f"warm-up budget per measurement (default: {cfg.DEFAULT_WARMUP_TIME_S})")
    add("--gpuperf-min-time", metavar="SECONDS", type=float, default=None, ini="gpuperf_min_time",
        ini_type="string", help=f"least time measured per measurement (default: {cfg.DEFAULT_MIN_TIME_S})")
    add("--gpuperf-max-time", metavar="SECONDS", type=float, default=None, ini="gpuperf_max_time",
        ini_type="string", help=f"most time measured per measurement (default: {cfg.DEFAULT_MAX_TIME_S})")
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
    add("--gpuperf-time-limit", metavar="SECONDS", type=float, default=None, ini="gpuperf_time_limit",
        ini_type="string", help="most time one measurement may take, warm-up included; a slow call's budget grows "
        f"up to it to reach enough samples, and a call past it is stopped (default: {cfg.DEFAULT_TIME_LIMIT_S:g})")
    add("--gpuperf-strict", action="store_true", default=False,
        help="fail measurements that are not comparable (other device class), unstable or not gated")
    add("--gpuperf-explain", action="store_true", default=False,
        help="print the rules behind every measurement's verdict, not only the failing ones'")
    add("--gpuperf-l2-flush", action="store_true", default=False,
        help="flush the GPU L2 cache before each timed call (cold-cache timing)")
    add("--gpuperf-cuda-graph", action="store_true", default=False,
        help="capture each measured call into a CUDA graph and replay it")
    add("--gpuperf-profile", metavar="DIR", default=None,
        help="after timing, capture a short torch.profiler trace per measurement into DIR")
    add("--gpuperf-no-profile-diff", action="store_true", default=False,
        help="do not profile confirmed time regressions (head against base or the baseline's stored profile) "
        "nor store a profile with each baseline entry; ini: gpuperf_profile_diff = false")
    parser.addini("gpuperf_profile_diff", type="bool", default=True,
                  help="profile confirmed time regressions and store profiles with baselines (default: true)")
    add("--gpuperf-nsight", action="store_true", default=False,
        help="wrap measured regions in cudaProfilerStart/Stop for nsys --capture-range=cudaProfilerApi")
    add("--gpuperf-no-nvtx", action="store_true", default=False, help="do not emit NVTX ranges")
    add("--gpuperf-json", metavar="PATH", default=None, help="write results JSON")
    add("--gpuperf-markdown", metavar="PATH", default=None, help="write a Markdown PR comment")
    add("--gpuperf-benchmark-json", metavar="PATH", default=None, help="write pytest-benchmark compatible JSON")
    add("--gpuperf-html", metavar="PATH", default=None, help="write a self-contained HTML report")
    # -- busy runner (host/cpu/contention.py): what the kernel's contention counters decide
    add("--gpuperf-busy-policy", metavar="POLICY", default=None, ini="gpuperf_busy_policy", ini_type="string",
        help="a CPU change measured while the runner was busy (PSI, steal, run queue): retake (wait for a quiet "
        "window and measure again; unstable if still busy), unstable, or judge (verdict as measured) "
        "(default: retake)")
    add("--gpuperf-history", metavar="URL", default=None, ini="gpuperf_history", ini_type="string",
        help="record the session in a history store: sqlite:///PATH, a file path or postgresql://... "
        "(env GPUPERF_HISTORY beats the ini value; docs/history.md)")


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


def _name_ini_keys(message: str, config: pytest.Config) -> str:
    """``message`` naming the ini key, not the option, for each value that came from the ini file."""
    for name in _INI_OPTIONS:
        option = "--gpuperf-" + name.removeprefix("gpuperf_").replace("_", "-")
        if config.getoption(name) is None and config.getini(name) not in (None, "", []):
            message = message.replace(option, f"{name} (ini)")
    return message


def build_config(config: pytest.Config) -> cfg.GpuperfConfig:
    rootdir = Path(config.rootpath)
    opt = config.getoption
    bench = benchmark_fixture.session_mapping(config)  # --benchmark-* options: defaults for ours
    max_time = bench.max_time or cfg.DEFAULT_MAX_TIME_S
    raw_dir = _value(config, "gpuperf_baseline_dir", "gpuperf_baseline_dir", cfg.DEFAULT_BASELINE_DIR)
    if not str(raw_dir).strip():  # Path("") is the rootdir: every test would be "new" there
        raise pytest.UsageError("--gpuperf-baseline-dir is empty; give a folder (default: baselines)")
    baseline_dir = Path(raw_dir)

    def path(dest: str) -> Path | None:
        raw = opt(dest)
        return Path(raw).absolute() if raw else None

    measure = cfg.MeasureSettings(
        warmup_time_s=_value(config, "gpuperf_warmup_time", "gpuperf_warmup_time", cfg.DEFAULT_WARMUP_TIME_S, float),
        min_time_s=_value(config, "gpuperf_min_time", "gpuperf_min_time", min(cfg.DEFAULT_MIN_TIME_S, max_time),
                          float),
        max_time_s=_value(config, "gpuperf_max_time", "gpuperf_max_time", max_time, float),
        target_precision=_value(config, "gpuperf_target_precision", "gpuperf_target_precision",
                                bench.precision or cfg.DEFAULT_TARGET_PRECISION, float),
        min_samples=max(cfg.DEFAULT_MIN_SAMPLES, bench.min_rounds or 0),
        time_limit_s=_value(config, "gpuperf_time_limit", "gpuperf_time_limit", cfg.DEFAULT_TIME_LIMIT_S, float),
        l2_flush=opt("gpuperf_l2_flush"),
        cuda_graph=opt("gpuperf_cuda_graph"),
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
        explain=bool(opt("gpuperf_explain")),
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
        profile_diff=not opt("gpuperf_no_profile_diff") and _ini_bool(config, "gpuperf_profile_diff"),
        nsight=bool(opt("gpuperf_nsight")),
        nvtx=not opt("gpuperf_no_nvtx"),
        plugin_args=_plugin_args(config),
        busy_policy=_value(config, "gpuperf_busy_policy", "gpuperf_busy_policy", "retake"),  # busy runner
    )


def _ini_bool(config: pytest.Config, name: str) -> bool:
    try:
        return bool(config.getini(name))
    except (ValueError, pytest.UsageError) as exc:  # pytest's own message names the value, not the key
        raise pytest.UsageError(f"{name} (ini) must be true or false: {exc}") from None


def _plugin_args(config: pytest.Config) -> tuple[str, ...]:
    """``-p`` choices, --disable-plugin-autoload, the conftests' own options and --benchmark-disable-gc, for workers.

    A worker (compare-ref's, or the fresh re-measure's) runs the same tests as the head, so
    it loads the same plugins: one that the head turned off (pytest-randomly reseeding, say)
    must not act on one side only.
    """
    args = [arg for name in config.getoption("plugins", None) or () for arg in ("-p", name)]
    if config.getoption("disable_plugin_autoload", False):
        args.append("--disable-plugin-autoload")
    return (*args, *conftest_options.worker_args(config), *benchmark_fixture.worker_args(config))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Under --gpuperf, take the ``benchmark`` fixture over from pytest-benchmark, before it is configured."""
    if any(config.getoption(name) for name in ("gpuperf", "gpuperf_update_baseline", "gpuperf_compare_ref")):
        benchmark_fixture.take_over(config)


EARLY_BASE_KEY = pytest.StashKey["EarlyBase"]()
BASE_REF_KEY = pytest.StashKey["BaseRef"]()


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser) -> Generator[None, None, None]:
    """Before the conftests load, start compare-ref's base worker; after, note the options they added.

    Workers repeat the head's values of those options (conftest_options.py).
    """
    _start_base_early(early_config)
    before = conftest_options.known_options(parser)
    result = yield
    conftest_options.remember_added(early_config, parser, before)
    return result


def _start_base_early(early_config: pytest.Config) -> None:
    """In compare-ref mode, resolve the ref (a usage error if git cannot) and start the base worker
    now, before conftests and test modules import torch.

    Its start-up (mostly importing torch) then overlaps the head's instead of
    following the head's collection (abtest/prestart.py). Best effort: the engine
    starts it itself later if this did not.
    """
    ns = early_config.known_args_namespace
    ref = getattr(ns, "gpuperf_compare_ref", None)
    if ref is None or getattr(ns, "help", False) or getattr(ns, "version", False):
        return
    from pytest_gpuperf.abtest.worktree import resolve_ref

    try:  # once, here: every later use of the ref means this commit
        base = early_config.stash[BASE_REF_KEY] = resolve_ref(Path(early_config.rootpath), ref)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if getattr(ns, "numprocesses", None) or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # under xdist the workers measure, each with its own engine
    from pytest_gpuperf.abtest.prestart import start_early

    early = start_early(Path(early_config.rootpath), base)
    if early is not None:
        early_config.stash[EARLY_BASE_KEY] = early
        early_config.add_cleanup(early.close)  # a no-op once the engine has taken it over


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(threshold=None, memory_threshold=None, metric=None, warmup_time=None, min_time=None, "
        "max_time=None, target_precision=None, time_limit=None, l2_flush=None, cuda_graph=None, calibrate=None, "
        "remeasure=None): "
        "per-test options for gpu_bench measurements (pytest-gpuperf)",
    )
    try:
        gp = build_config(config)
    except ConfigError as exc:
        raise pytest.UsageError(_name_ini_keys(str(exc), config)) from None
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    worker = WorkerInfo.from_workerinput(getattr(config, "workerinput", None))
    early = config.stash.get(EARLY_BASE_KEY, None)
    base_ref = config.stash.get(BASE_REF_KEY, None)
    config.stash[STATE_KEY] = SessionState(
        config=gp, started_at=now, worker=worker, early_base=early, base_ref=base_ref,
        progress=Progress.for_config(config),
    )
    benchmark_fixture.install(config)
    if worker is None and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(config.stash[STATE_KEY]), "gpuperf-xdist-controller")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None and state.engine is not None:
        state.engine.close()
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
            if "remeasures" in mark.kwargs:
                warnings.warn(pytest.PytestDeprecationWarning(
                    f"{item.nodeid}: @pytest.mark.gpuperf(remeasures=...) is now remeasure=..., as the option "
                    "--gpuperf-remeasure; the old spelling still works"), stacklevel=1)  # fmt: skip


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the engine once perf tests are collected: a device that cannot be used is a usage error.

    In compare-ref mode the base worker starts now too, so it imports and collects while we do.
    """
    state = session.config.stash.get(STATE_KEY, None)
    if state is None:
        return
    perf_items = [i for i in session.items if "gpu_bench" in getattr(i, "fixturenames", ())]
    if not perf_items:
        return
    try:
        engine = state.ensure_started()
        if state.config.compare_ref and state.worker is None:
            engine.start([i.nodeid for i in perf_items])
    except GpuperfError as exc:
        raise pytest.UsageError(str(exc)) from None


def _test_settings(item: pytest.Item, session_config: cfg.GpuperfConfig) -> cfg.Settings:
    """The test's Settings: session options, ini values and its markers, resolved once (config.resolve)."""
    merged: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers(MARKER))):  # closest marker wins
        merged.update(mark.kwargs)
    marker = cfg.MarkerOptions.from_kwargs(merged, test_id=item.nodeid) if merged else None
    benchmark = benchmark_fixture.marker_options(item)
    return cfg.resolve(session_config, marker, test_id=item.nodeid, benchmark=benchmark)


@pytest.fixture
def gpu_bench(request: pytest.FixtureRequest) -> GpuBench:
    """Measure a callable with CUDA-correct timing; gated against baselines under ``--gpuperf``."""
    state = request.config.stash[STATE_KEY]
    item = request.node
    try:
        engine = state.ensure_started()
        settings = _test_settings(item, state.config)
    except GpuperfError as exc:
        fail(str(exc))
    assert state.device is not None
    bench = GpuBench(item.nodeid, settings, engine, state.device, guard=state.guard)
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
    from pytest_gpuperf.report.failure import failure_message
    from pytest_gpuperf.verdict import fails
    from pytest_gpuperf.verdict.judge import absolute_failures

    assert state.engine is not None and state.environment is not None
    try:
        with state.guard():  # a re-measure is a measurement too
            results = state.engine.evaluate(bench.measurements, bench.settings)
    except GpuperfError as exc:
        fail(str(exc))
    state.results.extend(results)
    missing = _missing_baselines(state.config)
    if missing and bench.settings.gate.strict:
        fail(f"{bench.test_id}: nothing is gated: {missing} (--gpuperf-strict)")
    if bench.settings.mode == "update":
        # A violated hard bound fails an update run too, and nothing of the test is written.
        violated = [failure_message(r, str(state.device), only) for r in results if (only := absolute_failures(r))]
        if violated:
            fail("\n\n".join(violated))
        _update_baselines(state, results)
        return
    failures = [failure_message(r, str(state.device)) for r in results if fails(r, bench.settings.gate)]
    if failures:
        fail("\n\n".join(failures))


def _missing_baselines(config: cfg.GpuperfConfig) -> str | None:
    """Why a gating run has no baselines folder to judge against (None: it has one, or it does not gate)."""
    if config.mode != "baseline" or config.baseline_dir.is_dir():
        return None
    what = "is not a folder" if config.baseline_dir.exists() else "does not exist"
    return (f"the baselines folder {config.baseline_dir} {what}, so every test is new; record baselines with "
            "--gpuperf-update-baseline, or check --gpuperf-baseline-dir / gpuperf_baseline_dir")  # fmt: skip


def _update_baselines(state: SessionState, results: list[MeasurementResult]) -> None:
    """Write entries for this test's measurements; an entry judged unchanged keeps its old bytes.

    Except one written before the speed probe existed, where this session has a
    probe: without one the gate cannot tell a slow machine from slow code for it,
    and the probe must come from the session its samples came from. An unchanged
    entry without a stored profile keeps its numbers and gains this run's profile
    (the base of a later regression's differential profile). A measurement
    too slow for the samples a verdict needs ("not gated") is not written: it could
    never be judged against, and the entry it would replace stays.
    """
    __tracebackhide__ = True
    from pytest_gpuperf.baseline import entry_from_measurement

    assert state.store is not None and state.environment is not None
    entries = []
    for r in results:
        old = r.baseline
        if any(c.kind is Kind.TIME and c.verdict is Verdict.NOT_GATED for c in r.comparisons):
            if old is not None:
                entries.append(old)
            continue
        gains_probe = old is not None and old.speed_probe_ns is None and r.measurement.speed_probe_ns is not None
        if old is not None and r.verdict is Verdict.UNCHANGED and not gains_probe:
            if old.profile is None and r.measurement.op_profile is not None:  # an older entry gains its profile
                old = dataclasses.replace(old, profile=r.measurement.op_profile)
            entries.append(old)
            continue
        m = r.measurement
        entries.append(
            entry_from_measurement(
                m,
                state.environment,
                state.provenance,
                recorded_at=state.started_at,
            )
        )
    try:
        state.changes.extend(state.store.update(state.environment.device_class, entries))
    except GpuperfError as exc:
        fail(str(exc))


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
    from pytest_gpuperf.report.terminal import render_explanations, render_notes, render_summary, render_top_ops

    session = state.session_results()
    tw = terminalreporter
    render_summary(session, config.get_terminal_writer())
    render_notes(tw, session, cfg.resolve(state.config).gate.threshold)
    missing = _missing_baselines(state.config)
    if missing and session.results:
        tw.write_line(f"gpuperf: nothing gated: {missing}", yellow=True)
    if state.config.explain:
        render_explanations(tw, session)
    render_top_ops(tw, session)
    for change in state.changes:
        if change.kind != "unchanged":
            tw.write_line(f"gpuperf: baseline {change.kind}: {change.key} ({_relative(change.path, config)})")
    kept = sum(1 for c in state.changes if c.kind == "unchanged")
    if kept:
        tw.write_line(f"gpuperf: {kept} baseline entr{'y' if kept == 1 else 'ies'} unchanged (kept as is)")
    c = state.config
    history = None
    if c.html_path is not None and c.mode != "compare-ref":
        from pytest_gpuperf.report.history import history_or_none

        history = history_or_none(c.baseline_dir, metric=c.metric.value)
    targets = {"json": c.json_path, "markdown": c.markdown_path, "benchmark-json": c.benchmark_json_path,
               "html": c.html_path}  # fmt: skip
    reports = write_reports(session, targets, history=history)
    for path in reports.written:
        tw.write_line(f"gpuperf: wrote {path}")
    for failure in reports.failed:  # a warning: the exit code stays the tests'
        message = f"gpuperf: could not write {failure.path}: {failure.reason}"
        tw.write_line(message, yellow=True)
        with contextlib.suppress(GpuperfWarning):  # raised under -W error; the line above said it
            warnings.warn(GpuperfWarning(message), stacklevel=1)
    if state.worker is None:  # under xdist the controller records the merged session, once
        _record_history(tw, config, session)


def _record_history(tw: Any, config: pytest.Config, session: SessionResults) -> None:
    """``--gpuperf-history``: store the session (history/record.py); a store that fails is a warning."""
    from pytest_gpuperf.history.record import history_url, record_session

    url = history_url(config.getoption("gpuperf_history"), config.getini("gpuperf_history"))
    if url is None:
        return
    try:
        tw.write_line(record_session(url, session))
    except GpuperfError as exc:  # the verdicts and exit code stand; the results file can be ingested later
        message = f"gpuperf: the run was not recorded: {exc}"
        tw.write_line(message, yellow=True)
        with contextlib.suppress(GpuperfWarning):
            warnings.warn(GpuperfWarning(message), stacklevel=1)


def _relative(path: Path, config: pytest.Config) -> str:
    try:
        return str(Path(path).relative_to(config.rootpath))
    except ValueError:
        return str(path)


def pytest_report_header(config: pytest.Config) -> str | None:
    """gpuperf's line in the session header: mode, device, baselines or ref (report/header.py).

    Printed before any test runs, so the device is named as requested unless it is
    already probed: the header must not start torch for a session without perf tests.
    """
    state = config.stash.get(STATE_KEY, None)
    if state is None or state.worker is not None:
        return None  # an xdist worker's header is shown to no one
    from pytest_gpuperf.report.header import session_header

    early = state.early_base
    return session_header(
        state.config,
        environment=state.environment,
        device=str(state.device) if state.device is not None else None,
        ref_commit=early.worktree.commit if early is not None else None,
    )

"""The option table: every ``--gpuperf-*`` option once, feeding pytest's parser, the settings and the workers.

Command line beats ini beats default; a value that is not valid is a usage error naming the option,
or the ini key where the value came from there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf import config as cfg
from pytest_gpuperf import modes
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.model import Statistic
from pytest_gpuperf.plugin import benchmark_fixture, conftest_options
from pytest_gpuperf.torch_support import require_torch


@dataclass(frozen=True)
class Option:
    """One row: an option, ``--gpuperf-time-limit`` say, with dest and ini key ``gpuperf_time_limit``."""

    flag: str
    help: str
    convert: Callable[[str], Any] | None = None  # None: a switch (store_true)
    metavar: str | None = None
    ini: bool = False  # has an ini twin named like the dest
    default: Any = None  # when neither the command line nor the ini gives it
    field: str | None = None  # the GpuperfConfig field it sets; "measure.x": MeasureSettings' x
    worker: Callable[[cfg.GpuperfConfig], Any] | None = None  # the resolved value a worker is given
    # A re-run of a measurement repeats it where it is off its default (``repro_args``): False for the mode
    # and the device (a repro command names them itself), the reports, the store's URL and display switches.
    repro: bool = True

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


def _path(raw: str) -> Path | None:
    return Path(raw).absolute() if raw else None


OPTIONS: tuple[Option, ...] = (
    Option("--gpuperf", "measure perf tests and gate them against baselines (without it: one smoke call each)",
           repro=False),
    Option("--gpuperf-update-baseline", "write baselines for the perf tests that ran and passed (implies --gpuperf)",
           field="update_baseline", repro=False),
    Option("--gpuperf-baseline-dir", f"baseline folder, relative to the rootdir (default: {cfg.DEFAULT_BASELINE_DIR})",
           str, "DIR", ini=True, default=cfg.DEFAULT_BASELINE_DIR),
    Option("--gpuperf-device", "auto (CUDA if available), cpu, cuda or cuda:N (default: auto)", str, "DEVICE",
           ini=True, default="auto", field="device", repro=False),
    Option("--gpuperf-threshold", f"relative slow-down that fails (default: {modes.DEFAULT_THRESHOLD} against "
           f"baselines, {modes.DEFAULT_COMPARE_REF_THRESHOLD} with --gpuperf-compare-ref)", float, "FRACTION", ini=True,
           field="threshold"),
    Option("--gpuperf-auto-threshold", "set each test's time threshold to the change it can resolve on this "
           "runner (its minimum detectable change), kept within LOW,HIGH (fractions, e.g. 0.01,0.1); a test's own "
           "threshold beats it (default: off)", cfg.AutoThreshold.parse, "LOW,HIGH", ini=True,
           field="auto_threshold"),
    Option("--gpuperf-memory-threshold", f"relative peak-memory growth that fails (default: "
           f"{cfg.DEFAULT_MEMORY_THRESHOLD})", float, "FRACTION", ini=True, default=cfg.DEFAULT_MEMORY_THRESHOLD,
           field="memory_threshold"),
    Option("--gpuperf-metric", f"time statistic to gate: {', '.join(s.value for s in Statistic)} "
           f"(default: {cfg.DEFAULT_METRIC.value})", str, "STAT", ini=True, default=cfg.DEFAULT_METRIC, field="metric"),
    Option("--gpuperf-warmup-time", f"warm-up budget per measurement (default: {cfg.DEFAULT_WARMUP_TIME_S})", float,
           "SECONDS", ini=True, default=cfg.DEFAULT_WARMUP_TIME_S, field="measure.warmup_time_s",
           worker=lambda c: c.measure.warmup_time_s),
    Option("--gpuperf-min-time", f"least time measured per measurement (default: {cfg.DEFAULT_MIN_TIME_S})", float,
           "SECONDS", ini=True, field="measure.min_time_s", worker=lambda c: c.measure.min_time_s),
    Option("--gpuperf-max-time", f"most time measured per measurement (default: {cfg.DEFAULT_MAX_TIME_S})", float,
           "SECONDS", ini=True, field="measure.max_time_s", worker=lambda c: c.measure.max_time_s),
    Option("--gpuperf-target-precision", "stop once the 95%% CI of the median is within this (default: "
           f"{cfg.DEFAULT_TARGET_PRECISION})", float, "FRACTION", ini=True, field="measure.target_precision",
           worker=lambda c: c.measure.target_precision),
    Option("--gpuperf-remeasure", f"re-measure a suspected regression N times before failing (default: "
           f"{cfg.DEFAULT_REMEASURES})", int, "N", ini=True, default=cfg.DEFAULT_REMEASURES, field="remeasures"),
    Option("--gpuperf-calibrate", "retired, no effect: baseline mode times the machine's reference work beside "
           "every test", str, "MODE", ini=True, default="off", field="calibrate"),
    Option("--gpuperf-compare-ref", "compare against git REF in the same run (worktree + worker process, "
           "alternating rounds)", str, "REF", field="compare_ref", repro=False),
    Option("--gpuperf-base-tests", "compare-ref: the tests the base runs: auto (its own test file where it defines "
           "every selected test of it, else the head's), head (the head's test and conftest files and pytest "
           "configuration, for every test), base (its own; a test it lacks is new) (default: auto)", str, "WHICH",
           ini=True, default=cfg.BaseTests.AUTO.value, field="base_tests"),
    Option("--gpuperf-confirm-pairs", "compare-ref: re-measure a suspected regression in N fresh process pairs and "
           f"let their spread decide; 0 = off (default: {cfg.DEFAULT_CONFIRM_PAIRS})", int, "N", ini=True,
           default=cfg.DEFAULT_CONFIRM_PAIRS, field="confirm_pairs"),
    Option("--gpuperf-worker-start-timeout", "compare-ref: most time the worker at REF may take to start and "
           "collect its tests (a test module that hangs at import); past it the perf tests fail with where it hung "
           f"(default: {cfg.DEFAULT_WORKER_START_TIMEOUT_S:g})", float, "SECONDS", ini=True,
           default=cfg.DEFAULT_WORKER_START_TIMEOUT_S, field="worker_start_timeout_s", repro=False),
    Option("--gpuperf-pin-cpu", "measure on one CPU core: auto (compare-ref on the CPU: both sides on the last "
           "core), off, or N", str, "CPU", ini=True, default="auto", field="pin_cpu"),
    Option("--gpuperf-time-limit", "most time one measurement may take, warm-up included; a slow call's budget "
           "grows up to it to reach enough samples, and a call past it is stopped (default: "
           f"{cfg.DEFAULT_TIME_LIMIT_S:g})", float, "SECONDS", ini=True, default=cfg.DEFAULT_TIME_LIMIT_S,
           field="measure.time_limit_s", worker=lambda c: c.measure.time_limit_s),
    Option("--gpuperf-strict", "fail measurements that are not comparable (other device class), unstable or not "
           "gated", field="strict"),
    Option("--gpuperf-explain", "print the rules behind every measurement's verdict, not only the failing ones'",
           field="explain", repro=False),
    Option("--gpuperf-l2-flush", "flush the GPU L2 cache before each timed call (cold-cache timing)",
           field="measure.l2_flush", worker=lambda c: c.measure.l2_flush),
    Option("--gpuperf-cuda-graph", "capture each measured call into a CUDA graph and replay it",
           field="measure.cuda_graph", worker=lambda c: c.measure.cuda_graph),
    Option("--gpuperf-energy", "measure the GPU's energy per call (NVML) and gate it like a metric",
           field="measure.energy", worker=lambda c: c.measure.energy),
    Option("--gpuperf-profile", "after timing, capture a short torch.profiler trace per measurement into DIR", _path,
           "DIR", field="profile_dir", repro=False),
    Option("--gpuperf-no-profile-diff", "do not profile confirmed time regressions (head against base or the "
           "baseline's stored profile) nor store a profile with each baseline entry; ini: gpuperf_profile_diff = "
           "false", repro=False),
    Option("--gpuperf-nsight", "wrap measured regions in cudaProfilerStart/Stop for nsys --capture-range="
           "cudaProfilerApi", field="nsight", worker=lambda c: c.nsight, repro=False),
    Option("--gpuperf-no-nvtx", "do not emit NVTX ranges", worker=lambda c: not c.nvtx),
    Option("--gpuperf-json", "write results JSON", _path, "PATH", field="json_path", repro=False),
    Option("--gpuperf-markdown", "write a Markdown PR comment", _path, "PATH", field="markdown_path", repro=False),
    Option("--gpuperf-benchmark-json", "write pytest-benchmark compatible JSON", _path, "PATH",
           field="benchmark_json_path", repro=False),
    Option("--gpuperf-html", "write a self-contained HTML report", _path, "PATH", field="html_path", repro=False),
    Option("--gpuperf-busy-policy", "what the CPU host guard does when the kernel's counters say the runner is "
           "busy: retake (wait, bounded, for a quiet window; a change still measured busy is unstable), unstable, "
           "or judge (verdicts as the samples say) (default: retake)", str, "POLICY", ini=True, default="retake",
           field="busy_policy", worker=lambda c: c.busy_policy.value),
    Option("--gpuperf-history", "record the session in a history store: sqlite:///PATH, a file path or "
           "postgresql://... (env GPUPERF_HISTORY beats the ini value; docs/history.md)", str, "URL", ini=True,
           repro=False),  # a store's URL may hold its password: never written into a report
)  # fmt: skip
PROFILE_DIFF_INI = "gpuperf_profile_diff"  # a bool ini, the twin of --gpuperf-no-profile-diff


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuperf", "GPU performance regression testing (pytest-gpuperf)")
    for o in OPTIONS:
        if o.convert is None:
            group.addoption(o.flag, dest=o.dest, action="store_true", default=False, help=o.help)
        else:  # the parser converts the command line; ini strings are converted by ``_resolve``
            group.addoption(o.flag, dest=o.dest, metavar=o.metavar, default=None, help=o.help, type=o.convert)
        if o.ini:
            parser.addini(o.dest, help=o.help, type="string")
    parser.addini(PROFILE_DIFF_INI, type="bool", default=True,
                  help="profile confirmed time regressions, store profiles with baselines (default: true)")  # fmt: skip


def _resolve(config: pytest.Config) -> tuple[dict[str, Any], set[str]]:
    """Each row's value (command line beats ini beats default) and the rows whose value came from the ini."""
    values: dict[str, Any] = {}
    from_ini: set[str] = set()
    for o in OPTIONS:
        value = config.getoption(o.dest)
        if value is None and o.ini and (raw := config.getini(o.dest)) not in (None, "", []):
            try:
                value = o.convert(raw) if o.convert else raw
            except ValueError:
                raise pytest.UsageError(f"ini value {o.dest} = {raw!r} is not valid") from None
            from_ini.add(o.dest)
        values[o.dest] = o.default if value is None else value
    return values, from_ini


def build_config(config: pytest.Config) -> cfg.GpuperfConfig:
    """The session's ``GpuperfConfig``, once; a value that is not valid is a usage error naming where it came from."""
    values, from_ini = _resolve(config)
    try:
        return _build(config, values)
    except ConfigError as exc:
        message = str(exc)
        for o in OPTIONS:
            if o.dest in from_ini:
                message = message.replace(o.flag, f"{o.dest} (ini)")
        raise pytest.UsageError(message) from None


def _build(config: pytest.Config, values: dict[str, Any]) -> cfg.GpuperfConfig:
    rootdir = Path(config.rootpath)
    bench = benchmark_fixture.session_mapping(config)  # --benchmark-* options: defaults for ours
    max_time = bench.max_time or cfg.DEFAULT_MAX_TIME_S
    computed = {"gpuperf_max_time": max_time, "gpuperf_min_time": min(cfg.DEFAULT_MIN_TIME_S, max_time),
                "gpuperf_target_precision": bench.precision or cfg.DEFAULT_TARGET_PRECISION}  # fmt: skip
    session: dict[str, Any] = {}
    measure: dict[str, Any] = {"min_samples": max(cfg.DEFAULT_MIN_SAMPLES, bench.min_rounds or 0)}
    for o in OPTIONS:
        if o.field is None:
            continue
        value = computed.get(o.dest) if values[o.dest] is None else values[o.dest]
        name = o.field.removeprefix("measure.")
        (measure if name != o.field else session)[name] = value if o.convert is not None else bool(value)
    raw_dir = str(values["gpuperf_baseline_dir"])
    if not raw_dir.strip():  # Path("") is the rootdir: every test would be "new" there
        raise ConfigError("--gpuperf-baseline-dir is empty; give a folder (default: baselines)")
    session["pin_cpu"] = str(session["pin_cpu"])
    if session.get("profile_dir") is not None:
        require_torch("--gpuperf-profile (a torch.profiler trace)")
    gp = cfg.GpuperfConfig(
        **session,
        enabled=bool(values["gpuperf"]) or session["update_baseline"] or bool(values["gpuperf_compare_ref"]),
        baseline_dir=rootdir / raw_dir,  # an absolute folder stays itself
        rootdir=rootdir,
        inifile=Path(config.inipath) if config.inipath is not None else None,
        measure=cfg.MeasureSettings(**measure),
        # without torch, a regression's differential profile is by Python function (profiling/capture.py)
        profile_diff=not values["gpuperf_no_profile_diff"] and _ini_bool(config, PROFILE_DIFF_INI),
        nvtx=not values["gpuperf_no_nvtx"],
    )
    plugins = _plugin_args(config)
    return dataclasses.replace(gp, worker_args=(*plugins, *worker_args(gp)), repro_args=(*plugins, *repro_args(values)))


def repro_args(values: dict[str, Any]) -> tuple[str, ...]:
    """The resolved options (``_resolve``'s values) of the rows a re-run repeats, where they are off their default.

    Whether set on the command line or in the ini: a developer's checkout may not have the CI's ini.
    """
    args = []
    for o in OPTIONS:
        value = values.get(o.dest)
        if not o.repro or value is None or _word(value) == _word(o.default):
            continue
        if o.convert is None:
            args.extend([o.flag] if value else [])
        else:
            args.append(f"{o.flag}={_word(value)}")
    return tuple(args)


def _word(value: Any) -> str | None:
    """A value as a command line gives it: an enum's word, a float's shortest repr."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def worker_args(config: cfg.GpuperfConfig) -> tuple[str, ...]:
    """The resolved settings a worker (compare-ref's base, a fresh re-measure) is given on its command line.

    Otherwise a worker would resolve them from its own checkout's ini; given these, both sides
    warm up, flush the L2, replay graphs and time out alike. Per-test marks still apply on each side.
    """
    args = []
    for o in OPTIONS:
        if o.worker is None:
            continue
        value = o.worker(config)
        if o.convert is None:
            args.extend([o.flag] if value else [])
        else:
            args.append(f"{o.flag}={value!r}" if isinstance(value, float) else f"{o.flag}={value}")
    return tuple(args)


def _ini_bool(config: pytest.Config, name: str) -> bool:
    try:
        return bool(config.getini(name))
    except (ValueError, pytest.UsageError) as exc:  # pytest's own message names the value, not the key
        raise pytest.UsageError(f"{name} (ini) must be true or false: {exc}") from None


def _plugin_args(config: pytest.Config) -> tuple[str, ...]:
    """``-p`` choices, --disable-plugin-autoload, the conftests' own options and --benchmark-disable-gc, for workers.

    A worker runs the same tests as the head, so it loads the same plugins: one that the head
    turned off (pytest-randomly reseeding, say) must not act on one side only.
    """
    args = [arg for name in config.getoption("plugins", None) or () for arg in ("-p", name)]
    if config.getoption("disable_plugin_autoload", False):
        args.append("--disable-plugin-autoload")
    return (*args, *conftest_options.worker_args(config), *benchmark_fixture.worker_args(config))

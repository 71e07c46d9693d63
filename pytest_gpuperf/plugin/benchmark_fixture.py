"""pytest-benchmark's ``benchmark`` fixture, measured by pytest-gpuperf through ``gpu_bench``.

Registered as a plugin (``install``) under ``--gpuperf``, where pytest-benchmark's plugin is blocked
before it is configured, and in any session without pytest-benchmark (then each call runs once, as in
smoke mode). Without ``--gpuperf`` an installed pytest-benchmark is left alone, as is pytest-codspeed when
``--codspeed`` turns it on; ``--gpuperf`` with ``--codspeed`` is a usage error naming both.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import json
import os
import sys
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_gpuperf.config import BenchmarkOptions
from pytest_gpuperf.errors import ConfigError, FixtureAlreadyUsed, PytestBenchmarkWarning
from pytest_gpuperf.measure.runner import LazyResults
from pytest_gpuperf.model import BenchmarkInfo, Measurement
from pytest_gpuperf.plugin.benchmark_options import KNOWN_KEYWORDS, MARKER, MarkerChoice, SessionOptions
from pytest_gpuperf.plugin.fixture import GpuBench
from pytest_gpuperf.plugin.outcome import fail, marker_problem

MEASUREMENT = "benchmark"  # the measurement's name: apart from gpu_bench's "default" in the same test
PLUGIN_NAME = "gpuperf-benchmark"
_PYTEST_BENCHMARK = "pytest_benchmark.plugin"
_CODSPEED = "codspeed"  # pytest-codspeed's plugin, by its entry point's name
CODSPEED_ENV = "CODSPEED_ENV"  # set by CodSpeed's runner: pytest-codspeed turns itself on
_UNUSED = "Benchmark fixture was not used at all in this test!"


def _theirs(module: str, name: str, ours: type) -> Any:
    """pytest-benchmark's class ``name`` where it is installed, so tests that catch it keep working; else ``ours``."""
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return ours


BENCHMARK_KEY = pytest.StashKey[SessionOptions]()  # set where pytest-gpuperf provides the fixture
TOOK_OVER_KEY = pytest.StashKey[bool]()  # pytest-benchmark was installed and is blocked under --gpuperf


def benchmark_plugin_names(manager: pytest.PytestPluginManager) -> list[str]:
    """The names pytest-benchmark's plugin is registered under (``benchmark`` from its entry point)."""
    return [name for name, plugin in manager.list_name_plugin()
            if getattr(plugin, "__name__", None) == _PYTEST_BENCHMARK]  # fmt: skip


def codspeed_enabled(config: pytest.Config) -> str | None:
    """How pytest-codspeed is turned on in this session (``--codspeed``, or ``CODSPEED_ENV`` set); None: it is off."""
    if not config.pluginmanager.has_plugin(_CODSPEED):
        return None
    if config.getoption("codspeed", default=False):
        return "--codspeed"
    return f"{CODSPEED_ENV} (set by CodSpeed's runner)" if os.environ.get(CODSPEED_ENV) is not None else None


def take_over(config: pytest.Config) -> None:
    """Block pytest-benchmark's plugin before it is configured; its options stay parsed, for us to read.

    Called before ``pytest_configure``: a plugin blocked while that hook runs would still be configured.
    pytest-codspeed, turned on, would take the fixture back when the session starts and measure every
    ``benchmark`` test itself, gating none: the two are refused together, naming both.
    """
    if (codspeed := codspeed_enabled(config)) is not None:
        raise pytest.UsageError(
            f"pytest-gpuperf (--gpuperf) and pytest-codspeed ({codspeed}) both measure the benchmark fixture: "
            "pytest-codspeed would take it and pytest-gpuperf would gate nothing. Run one of them: pytest --gpuperf "
            "(pytest-gpuperf measures and gates the benchmark tests; add -p no:codspeed where CODSPEED_ENV is set), "
            "or pytest --codspeed without --gpuperf (CodSpeed's measurements, no gate)"
        )
    names = benchmark_plugin_names(config.pluginmanager)
    for name in names:
        config.pluginmanager.set_blocked(name)
    if names:
        config.pluginmanager.set_blocked("pytest-benchmark")  # the name its session object registers under
    config.stash[TOOK_OVER_KEY] = bool(names)


def install(config: pytest.Config) -> None:
    """Register this module as the plugin providing ``benchmark`` unless pytest-benchmark or pytest-codspeed is on."""
    if benchmark_plugin_names(config.pluginmanager):
        return  # pytest-benchmark runs this session, untouched
    if codspeed_enabled(config) is not None:
        return  # pytest-codspeed measures this session (without --gpuperf: take_over refuses the two together)
    config.stash[BENCHMARK_KEY] = SessionOptions.from_config(config)
    config.addinivalue_line(
        "markers",
        f"{MARKER}({', '.join(f'{k}=None' for k in KNOWN_KEYWORDS)}): pytest-benchmark's per-test settings, "
        "mapped by pytest-gpuperf (docs/migration.md)",
    )
    config.pluginmanager.register(sys.modules[__name__], PLUGIN_NAME)


def session_mapping(config: pytest.Config) -> BenchmarkOptions:
    """The session's ``--benchmark-*`` options that have a meaning here, where pytest-gpuperf took the fixture over."""
    if not config.stash.get(TOOK_OVER_KEY, False):
        return BenchmarkOptions()
    return SessionOptions.from_config(config).mapped


def worker_args(config: pytest.Config) -> tuple[str, ...]:
    """The ``--benchmark-*`` options that change how the fixture measures, for a worker to repeat.

    The mapped ones reach workers as resolved settings; the rest are the head's business.
    """
    if not config.stash.get(TOOK_OVER_KEY, False):
        return ()
    return ("--benchmark-disable-gc",) if SessionOptions.from_config(config).disable_gc else ()


def marker_options(item: pytest.Item) -> BenchmarkOptions | None:
    """What the test's ``@pytest.mark.benchmark`` maps onto its Settings (None: none, or pytest-benchmark reads it)."""
    if BENCHMARK_KEY not in item.config.stash or item.get_closest_marker(MARKER) is None:
        return None
    return MarkerChoice.from_item(item).options


@contextlib.contextmanager
def _gc_paused(pause: bool) -> Iterator[None]:
    """The garbage collector off inside (``disable_gc``), back to its state after."""
    was_enabled = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause and was_enabled:
            gc.enable()


@dataclass
class _Pedantic:
    """``benchmark.pedantic``'s arguments, checked as pytest-benchmark checks them, and the block in progress."""

    target: Callable[..., object]
    args: Sequence[Any]
    kwargs: Mapping[str, Any]
    setup: Callable[[], object] | None
    teardown: Callable[..., object] | None
    rounds: int
    iterations: int
    current: tuple[Sequence[Any], Mapping[str, Any]] | None = None  # the arguments of the block in progress

    def __post_init__(self) -> None:
        if not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError("Must have positive int for `iterations`.")
        if not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError("Must have positive int for `rounds`.")
        if self.iterations > 1 and self.setup:
            raise ValueError("Can't use more than 1 `iterations` with a `setup` function.")

    def arguments(self) -> tuple[Sequence[Any], Mapping[str, Any]]:
        """The call's arguments: those given, or what ``setup`` returns (args, kwargs)."""
        if self.setup is not None:
            made = self.setup()
            if made:
                if self.args or self.kwargs:
                    raise TypeError("Can't use `args` or `kwargs` if `setup` returns the arguments.")
                given, named = cast("tuple[Sequence[Any], Mapping[str, Any]]", made)
                return given, named
        return self.args, self.kwargs

    def call_once(self) -> object:
        args, kwargs = self.arguments()
        result = self.target(*args, **kwargs)
        if self.teardown is not None:
            self.teardown(*args, **kwargs)
        return result

    def before_block(self) -> None:
        """Fresh arguments before each block: the last block's teardown, then setup, both outside the timed region."""
        self.finish()
        self.current = self.arguments()

    def call(self) -> object:
        assert self.current is not None, "before_block runs before every block"
        args, kwargs = self.current
        return self.target(*args, **kwargs)

    def finish(self) -> None:
        current, self.current = self.current, None
        if current is not None and self.teardown is not None:
            self.teardown(*current[0], **current[1])


class BenchmarkFixture:
    """What a test written for pytest-benchmark calls: ``benchmark(fn, ...)`` or ``benchmark.pedantic(...)``, once."""

    def __init__(self, node: pytest.Item, bench: GpuBench, *, disabled: bool, choice: MarkerChoice) -> None:
        self.name = node.name
        self.fullname = node.nodeid
        callspec = getattr(node, "callspec", None)
        self.param: str | None = callspec.id if callspec is not None else None
        self.params: dict[str, Any] | None = dict(callspec.params) if callspec is not None else None
        self.group = choice.group
        self.extra_info: dict[str, Any] = {}
        self.disabled = disabled
        self.has_error = False
        self.skipped = False
        self.measurement: Measurement | None = None  # pytest-gpuperf's measurement, once taken
        self._bench = bench
        self._choice = choice
        self._mode: str | None = None

    @property
    def enabled(self) -> bool:
        return not self.disabled

    def __call__(self, function_to_benchmark: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Measure ``function_to_benchmark``; return one more call's result, outside the samples."""
        self._use("benchmark(...)")
        try:
            if self.enabled:
                with _gc_paused(self._choice.disable_gc):
                    self._done(self._bench.measure(function_to_benchmark, args, kwargs, name=MEASUREMENT,
                                                   lazy_results=LazyResults.TIME_AS_WRITTEN))  # fmt: skip
            return function_to_benchmark(*args, **kwargs)
        except Exception:
            self.has_error = True
            raise

    def pedantic(
        self, target: Callable[..., Any], args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None,
        setup: Callable[[], object] | None = None, teardown: Callable[..., object] | None = None, rounds: int = 1,
        warmup_rounds: int = 0, iterations: int = 1,
    ) -> Any:  # fmt: skip
        """Exactly ``rounds`` samples of ``iterations`` calls; ``setup`` before each, outside the timed region.

        ``warmup_rounds`` is checked but not needed: the warm-up runs until block times settle.
        """
        self._use("benchmark.pedantic(...)")
        try:
            plan = _Pedantic(target, args, kwargs or {}, setup, teardown, rounds, iterations)
            if not isinstance(warmup_rounds, int) or warmup_rounds < 0:
                raise ValueError("Must have positive int for `warmup_rounds`.")
            if self.enabled:
                with _gc_paused(self._choice.disable_gc):
                    self._done(self._measure_pedantic(plan))
            return plan.call_once()
        except Exception:
            self.has_error = True
            raise

    def _measure_pedantic(self, plan: _Pedantic) -> Measurement:
        measure = functools.partial(self._bench.measure_rounds, name=MEASUREMENT, rounds=plan.rounds,
                                    calls_per_sample=plan.iterations,
                                    lazy_results=LazyResults.TIME_AS_WRITTEN)  # fmt: skip
        if plan.setup is None and plan.teardown is None:
            args, kwargs = plan.args, plan.kwargs
            return measure(lambda: plan.target(*args, **kwargs))
        try:
            return measure(plan.call, before_block=plan.before_block)
        finally:
            plan.finish()

    def _use(self, mode: str) -> None:
        if self._mode:
            self.has_error = True
            error = _theirs("pytest_benchmark.fixture", "FixtureAlreadyUsed", FixtureAlreadyUsed)
            raise error(f"Fixture can only be used once. Previously it was used in {self._mode} mode.")
        self._mode = mode

    def _done(self, measurement: Measurement) -> None:
        for note in self._choice.notes:
            self._bench.note(note, measurement=measurement.name)
        self.measurement = measurement

    def info(self) -> BenchmarkInfo:
        """Its names, group, params and extra_info as the JSON takes them: values JSON cannot hold as their repr."""
        params, extra = _json_safe(self.params or {}), _json_safe(self.extra_info)
        return BenchmarkInfo(self.name, self.fullname, self.group, self.param, params, extra)

    def _cleanup(self, node: pytest.Item) -> None:
        """At teardown: pytest-benchmark's warning for a fixture never used (unless the test was skipped)."""
        if not self._mode and not self.skipped:
            warning = _theirs("pytest_benchmark.logger", "PytestBenchmarkWarning", PytestBenchmarkWarning)
            node.warn(warning(_UNUSED))


@pytest.fixture
def benchmark(gpu_bench: GpuBench, request: pytest.FixtureRequest) -> Generator[BenchmarkFixture, None, None]:
    """pytest-benchmark's ``benchmark``, measured by pytest-gpuperf under ``--gpuperf`` (docs/migration.md)."""
    options = request.config.stash[BENCHMARK_KEY]
    item = request.node
    assert isinstance(item, pytest.Item)
    try:
        choice = MarkerChoice.from_item(item)
    except ConfigError as exc:
        fail(str(exc))

    disabled = options.disabled or not gpu_bench.enabled
    fixture = BenchmarkFixture(item, gpu_bench, disabled=disabled, choice=choice)
    yield fixture
    fixture._cleanup(item)


def _uses_benchmark(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return "benchmark" in names or "gpu_bench" in names


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Bad ``@pytest.mark.benchmark`` keywords fail their test alone, named, as a bad ``gpuperf`` marker does;
    apply --benchmark-only and --benchmark-skip."""
    options = config.stash[BENCHMARK_KEY]
    for item in items:
        try:
            MarkerChoice.from_item(item)
        except ConfigError as exc:
            marker_problem(item, str(exc))
        if _uses_benchmark(item):
            if options.skip:
                item.add_marker(pytest.mark.skip(reason="Skipping benchmark (--benchmark-skip active)."))
        elif options.only:
            item.add_marker(pytest.mark.skip(reason="Skipping non-benchmark (--benchmark-only active)."))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    fixture = getattr(item, "funcargs", {}).get("benchmark")
    if isinstance(fixture, BenchmarkFixture):
        fixture.skipped = report.outcome == "skipped"
    return report


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Who measures the ``benchmark`` fixture, and the ``--benchmark-*`` options ignored or overridden here.

    Notes, not warnings: under ``filterwarnings = error`` a warning issued while pytest configures
    ends the session with an INTERNALERROR before a test runs.
    """
    lines = [f"gpuperf: {note}" for note in config.stash[BENCHMARK_KEY].notes()]
    if config.stash.get(TOOK_OVER_KEY, False):
        lines.insert(0, "gpuperf: the benchmark fixture measures through pytest-gpuperf "
                        "(pytest-benchmark's plugin is off)")  # fmt: skip
    return lines


def json_path(config: pytest.Config) -> Path | None:
    """``--benchmark-json``, where pytest-gpuperf provides the fixture: written by the reports' registry."""
    options = config.stash.get(BENCHMARK_KEY, None)
    return options.json_path if options is not None else None


@pytest.hookimpl(wrapper=True, trylast=True)  # innermost: done before pytest-gpuperf judges and records the test
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """After the test body, the fixture's names and extra_info (set during the test) go onto its measurement."""
    result = yield
    fixture = getattr(item, "funcargs", {}).get("benchmark")
    if isinstance(fixture, BenchmarkFixture) and fixture.measurement is not None:
        fixture._bench.describe(fixture.info(), measurement=MEASUREMENT)
    return result


def _json_safe(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as JSON holds them: other objects (a dtype, a device) and NaN or infinities as their repr."""
    loaded: dict[str, Any] = json.loads(json.dumps(values, default=repr), parse_constant=str)
    return loaded

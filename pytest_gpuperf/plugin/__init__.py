"""The pytest layer: options (options.py), the marker, the fixture and the hooks that start a session.

The session object (session.py) sets up everything heavy (torch, git, the store) on the first
``gpu_bench`` use, so a session without perf tests pays nothing.

May import: every room; nothing imports the pytest layer except pytest itself (the ``pytest11`` entry point).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf import config as cfg
from pytest_gpuperf.errors import ConfigError, GpuperfError, GpuperfWarning
from pytest_gpuperf.model import SessionResults
from pytest_gpuperf.plugin import benchmark_fixture, conftest_options, options
from pytest_gpuperf.plugin.fixture import GpuBench
from pytest_gpuperf.plugin.outcome import fail, fail_on_marker_problem, marker_problem
from pytest_gpuperf.plugin.parallel import WorkerInfo
from pytest_gpuperf.plugin.session import (
    BASE_IS_HEAD_KEY,
    BASE_REF_KEY,
    EARLY_BASE_KEY,
    STATE_KEY,
    GpuperfSession,
    missing_baselines,
)
from pytest_gpuperf.report.progress import Progress
from pytest_gpuperf.report.text import plain

if TYPE_CHECKING:
    from pytest_gpuperf.history.record import StoreAddress

MARKER = "gpuperf"


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Under --gpuperf, take the ``benchmark`` fixture over from pytest-benchmark, before it is configured."""
    if any(config.getoption(name) for name in ("gpuperf", "gpuperf_update_baseline", "gpuperf_compare_ref")):
        benchmark_fixture.take_over(config)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser) -> Generator[None, None, None]:
    """Before the conftests load, start compare-ref's base worker; after, note the options they added for workers."""
    _start_base_early(early_config)
    before = conftest_options.known_options(parser)
    result = yield
    conftest_options.remember_added(early_config, parser, before)
    return result


def _start_base_early(early_config: pytest.Config) -> None:
    """In compare-ref mode, resolve the ref (a usage error if git cannot) and start the base worker now.

    Its start-up (mostly importing torch) then overlaps the head's instead of following the head's
    collection (engines/compare_ref/prestart.py). Best effort: the engine starts it itself later if this did not.
    """
    ns = early_config.known_args_namespace
    ref = getattr(ns, "gpuperf_compare_ref", None)
    if ref is None or getattr(ns, "help", False) or getattr(ns, "version", False):
        return
    from pytest_gpuperf.engines.compare_ref.refs import head_commit, nothing_to_compare, resolve_ref

    try:  # once, here: every later use of the ref means this commit
        base = early_config.stash[BASE_REF_KEY] = resolve_ref(Path(early_config.rootpath), ref)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    head = head_commit(base)
    if head is not None and not head.changes:  # the code compared with itself: nothing would be gated
        raise pytest.UsageError(nothing_to_compare(base, head))
    if head is not None:
        early_config.stash[BASE_IS_HEAD_KEY] = head  # said in the header
    if getattr(ns, "numprocesses", None) or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # under xdist the workers measure, each with its own engine
    from pytest_gpuperf.engines.compare_ref.prestart import start_early

    early = start_early(Path(early_config.rootpath), base)
    if early is not None:
        early_config.stash[EARLY_BASE_KEY] = early
        early_config.add_cleanup(early.close)  # a no-op once the engine has taken it over


def pytest_configure(config: pytest.Config) -> None:
    keywords = ", ".join(f"{f.name}=None" for f in dataclasses.fields(cfg.MarkerOptions))
    config.addinivalue_line("markers", f"{MARKER}({keywords}): per-test options for gpu_bench measurements "
                            "(pytest-gpuperf)")  # fmt: skip
    gp = options.build_config(config)
    if gp.enabled:
        _check_history_address(config)
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    worker = WorkerInfo.from_workerinput(getattr(config, "workerinput", None))
    session = config.stash[STATE_KEY] = GpuperfSession(
        config=gp, started_at=now, pytest_config=config, worker=worker, progress=Progress.for_config(config),
        early_base=config.stash.get(EARLY_BASE_KEY, None), base_ref=config.stash.get(BASE_REF_KEY, None),
    )  # fmt: skip
    benchmark_fixture.install(config)
    config.pluginmanager.register(session, "gpuperf-session")


def _check_history_address(config: pytest.Config) -> None:
    """A history address that is not a store's is a usage error now, naming its setting, not a run lost at the end."""
    from pytest_gpuperf.errors import StoreAddressError
    from pytest_gpuperf.history.record import check_address

    address = _history_address(config)
    if address is None:
        return
    try:
        check_address(address)
    except StoreAddressError as exc:
        raise pytest.UsageError(str(exc)) from None


def _history_address(config: pytest.Config) -> StoreAddress | None:
    from pytest_gpuperf.history.record import history_address

    return history_address(config.getoption("gpuperf_history"), config.getini("gpuperf_history"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every test's marker at collection; a test whose marker is wrong fails alone, at its setup.

    The others of its file and session still run: one typo in a marker does not hold the suite back.
    """
    session_config = config.stash[STATE_KEY].config
    for item in items:
        if next(item.iter_markers(MARKER), None) is None:
            continue
        try:
            _check_marker(item, session_config)
        except ConfigError as exc:
            marker_problem(item, str(exc))


def _check_marker(item: pytest.Item, session_config: cfg.GpuperfConfig) -> None:
    """ConfigError naming the test and keyword for what the test's markers get wrong, alone or together."""
    for mark in item.iter_markers(MARKER):
        if mark.args:
            raise ConfigError(f"@pytest.mark.{MARKER} takes keywords only, got positional {mark.args!r}",
                              test_id=item.nodeid)  # fmt: skip
        cfg.MarkerOptions.from_kwargs(mark.kwargs, test_id=item.nodeid)
        if "remeasures" in mark.kwargs:
            warnings.warn(pytest.PytestDeprecationWarning(
                f"{item.nodeid}: @pytest.mark.gpuperf(remeasures=...) is now remeasure=..., as the option "
                "--gpuperf-remeasure; the old spelling still works"), stacklevel=1)  # fmt: skip
    _test_settings(item, session_config)  # keywords that contradict each other or the session (min_time > max_time)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test whose marker is wrong (found at collection) errors here, before any of its fixtures."""
    fail_on_marker_problem(item)


def _test_settings(item: pytest.Item, session_config: cfg.GpuperfConfig) -> cfg.Settings:
    """The test's Settings: session options, ini values and its markers, resolved once (config.resolve)."""
    merged: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers(MARKER))):  # closest marker wins
        merged.update(mark.kwargs)
    marker = cfg.MarkerOptions.from_kwargs(merged, test_id=item.nodeid) if merged else None
    return cfg.resolve(session_config, marker, test_id=item.nodeid, benchmark=benchmark_fixture.marker_options(item))


@pytest.fixture
def gpu_bench(request: pytest.FixtureRequest) -> GpuBench:
    """Measure a callable with CUDA-correct timing; gated against baselines under ``--gpuperf``."""
    session = request.config.stash[STATE_KEY]
    try:
        return session.bench(request.node, _test_settings(request.node, session.config))
    except GpuperfError as exc:
        fail(str(exc))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the reports and record the history once every result is in (the xdist controller's, once).

    Here, not in the terminal summary, so that a session without a terminal (``-p no:terminal``) writes
    them too; the summary only shows what was done (``GpuperfSession.closing``).
    """
    config = session.config
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.config.enabled or state.environment is None or state.worker is not None:
        return
    from pytest_gpuperf.report import write_reports

    results = state.session_results()
    c = state.config
    history = None
    if c.html_path is not None and c.plan.charts_baseline_history:
        from pytest_gpuperf.history.baselines_view import history_or_none

        history = history_or_none(c.baseline_dir, metric=c.metric.value)
    theirs = benchmark_fixture.json_path(config)  # --benchmark-json: the same report, where pytest-benchmark puts it
    own = c.benchmark_json_path or theirs
    targets = [{"json": c.json_path, "markdown": c.markdown_path, "benchmark-json": own, "html": c.html_path}]
    if theirs is not None and c.benchmark_json_path not in (None, theirs):
        targets.append({"benchmark-json": theirs})
    for reports in (write_reports(results, t, history=history) for t in targets):
        state.closing.extend((f"gpuperf: wrote {path}", False) for path in reports.written)
        for failure in reports.failed:  # a warning: the exit code stays the tests'
            _warn(state.closing, f"gpuperf: could not write {failure.path}: {failure.reason}")
    _record_history(state.closing, config, results, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


def _record_history(
    closing: list[tuple[str, bool]], config: pytest.Config, session: SessionResults, *, interrupted: bool
) -> None:
    """``--gpuperf-history``: store the session (history/record.py); a store that fails is a warning."""
    from pytest_gpuperf.history.record import record_session

    address = _history_address(config)
    if address is None:
        return
    try:
        closing.append((record_session(address, session, interrupted=interrupted), False))
    except GpuperfError as exc:  # the verdicts and exit code stand; the results file can be ingested later
        _warn(closing, f"gpuperf: the run was not recorded: {exc}")


def _warn(closing: list[tuple[str, bool]], message: str) -> None:
    """A yellow line and a GpuperfWarning: a report or record that failed never fails the run."""
    closing.append((message, True))
    with contextlib.suppress(GpuperfWarning):  # raised under -W error; the line says it
        warnings.warn(GpuperfWarning(message), stacklevel=1)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Show the session's results, and the files written and the run recorded at its end (only shown here)."""
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.config.enabled or state.environment is None:
        return
    from pytest_gpuperf.report.notes import wrapped
    from pytest_gpuperf.report.terminal import (
        change_lines,
        render_explanations,
        render_notes,
        render_resolution,
        render_summary,
        render_top_ops,
        render_unjudged,
    )

    session = state.session_results()
    tw = terminalreporter
    render_summary(session, config.get_terminal_writer())
    render_notes(tw, session, cfg.resolve(state.config).gate.threshold)
    render_resolution(tw, session)
    if session.results and (missing := missing_baselines(state.config)):
        for line in wrapped(f"nothing gated: {missing}"):
            tw.write_line(line, yellow=True)
    if state.config.explain:
        render_explanations(tw, session)
    render_top_ops(tw, session)
    for line in change_lines(state.changes, lambda path: _relative(path, config)):
        tw.write_line(plain(line))
    for line, warning in state.closing:
        tw.write_line(line, yellow=warning)
    render_unjudged(tw, session)  # last: what the run could not judge is the line a reader sees


def _relative(path: Path, config: pytest.Config) -> str:
    try:
        return str(Path(path).relative_to(config.rootpath))
    except ValueError:
        return str(path)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """gpuperf's header line (report/header.py): the device as requested unless probed, not to start torch."""
    state = config.stash.get(STATE_KEY, None)
    if state is None or state.worker is not None:
        return None  # an xdist worker's header is shown to no one
    from pytest_gpuperf.report.header import retired_settings, session_header, threshold_lines

    early = state.early_base
    head = config.stash.get(BASE_IS_HEAD_KEY, None)
    header = session_header(
        state.config,
        environment=state.environment,
        device=str(state.device) if state.device is not None else None,
        ref_commit=early.worktree.commit if early is not None else None,
        ref_note=head.describe() if head is not None else None,
    )
    lines = [*([header] if header else []), *threshold_lines(state.config), *retired_settings(state.config)]
    return lines or None

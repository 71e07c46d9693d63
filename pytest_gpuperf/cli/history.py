"""``gpuperf history``: the performance history's commands (docs/history.md).

- ``ingest``: store results files (and the baselines' git history) in a history store;
- ``changes``: the change points of every series, for a terminal, a PR comment or a job;
- ``dashboard``: a static site of every series and its change points;
- ``baselines``: each baseline's versions over the git history (``history/baselines_view.py``).

The answers come from the history package (``history/service.py``, the new-regression rule in
``history/alerts.py``, shared with the Action); this module parses options and prints.
Registered by ``cli.py`` (``add_parser``); errors are GpuperfError, which ``cli.main`` turns
into its exit code for invalid input (3). ``gpuperf history`` with no subcommand, or with the
baselines view's options only, is the baselines view, as it was before the group existed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pytest_gpuperf.model import Statistic

if TYPE_CHECKING:
    from pytest_gpuperf.history.store import HistoryStore, SeriesFilter

EXIT_OK = 0
EXIT_NEW_REGRESSION = 1  # ``changes``: a regression change point among the newest --recent runs
EXIT_USAGE = 2
EXIT_INVALID_INPUT = 3  # as cli.py: a file refused, a store that cannot be used
DEFAULT_RECENT = 3
DEFAULT_BASELINES = "baselines"
SUBCOMMANDS = ("ingest", "changes", "dashboard", "baselines")

Handler = Callable[[argparse.Namespace, TextIO, TextIO], int]


def normalise_argv(argv: Sequence[str]) -> list[str]:
    """``gpuperf history [--baselines DIR ...]`` (the view before the group existed) as ``history baselines``."""
    args = list(argv)
    if args[:1] == ["history"] and (len(args) == 1 or (args[1] not in SUBCOMMANDS and args[1] not in ("-h", "--help"))):
        args.insert(1, "baselines")
    return args


def add_parser(commands: Any, *, fraction: Callable[[str], float]) -> None:
    """The ``history`` command group, on ``cli.py``'s subparsers (``fraction`` parses its fractions)."""
    history = commands.add_parser(
        "history",
        help="the performance history: ingest runs, find change points, build a dashboard, baseline trends",
        description="Record and read the performance history (docs/history.md). The store is a SQLite file "
        "(sqlite:///PATH or a plain path) or a PostgreSQL database (postgresql://...); --history defaults to "
        "the environment variable GPUPERF_HISTORY, so a password need not appear on a command line.",
    )
    group = history.add_subparsers(dest="history_command", metavar="SUBCOMMAND", required=True)

    ingest = group.add_parser(
        "ingest",
        help="store results files (pytest --gpuperf-json) and the baselines' git history",
        description="Store each results file as one run. Every file is read first; a file that cannot be "
        "read (corrupt, an unknown format version) or whose run the store refuses is refused and nothing of it "
        "is stored, while every other file is stored, and the exit code is 3. A run already in the store is not "
        "stored again.",
    )
    _store_option(ingest)
    ingest.add_argument("files", type=Path, nargs="*", metavar="FILE", help="results files to store")
    ingest.add_argument("--baselines", type=Path, default=None, metavar="DIR",
                        help="also store every version of the baselines in DIR (from git), as updates")  # fmt: skip
    ingest.add_argument("--rev", default="HEAD", help="with --baselines: the history up to REV (default HEAD)")
    ingest.add_argument("--runner", default=None, metavar="NAME",
                        help="the runner's name for files that do not carry one (default: GPUPERF_RUNNER, "
                             "else this host's name)")  # fmt: skip

    changes = group.add_parser(
        "changes",
        help="the change points of every series (last good and first bad commit, change, significance)",
        description="Find the points where each series' level changed. Exits 1 when a regression's first "
        "bad run is among the newest --recent runs of its series (for a nightly job).",
    )
    _store_option(changes)
    _series_options(changes)
    changes.add_argument("--format", choices=("table", "markdown", "json"), default="table",
                         help="table (default), markdown (a PR comment or issue) or json")  # fmt: skip
    changes.add_argument("--since", default=None, metavar="DATE|COMMIT",
                         help="only change points whose first bad commit is at or after DATE (ISO 8601) "
                              "or the commit date of COMMIT")  # fmt: skip
    changes.add_argument("--recent", type=_positive, default=DEFAULT_RECENT, metavar="N",
                         help=f"exit 1 for a regression within the newest N runs of its series "
                              f"(default {DEFAULT_RECENT})")  # fmt: skip
    changes.add_argument("-o", "--output", type=Path, default=None, metavar="PATH",
                         help="write to PATH instead of standard output")  # fmt: skip

    dashboard = group.add_parser(
        "dashboard",
        help="write a static site of every series and its change points (works offline)",
        description="Build the dashboard (docs/dashboard.md) into DIR: an index of the series and a page each.",
    )
    _store_option(dashboard)
    _series_options(dashboard)
    dashboard.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write the site into")
    dashboard.add_argument("--title", default=None, help="the site's title")

    baselines = group.add_parser(
        "baselines",
        help="show how each baseline changed over the git history, marking step changes",
        description="Walk the commits that touched the baselines folder, oldest first, and show each "
        "measurement's trend, with the change points the history's detector finds in it (docs/change-points.md).",
    )
    baselines.add_argument("--baselines", type=Path, default=Path(DEFAULT_BASELINES), metavar="DIR",
                           help=f"baselines folder inside a git work tree (default {DEFAULT_BASELINES})")  # fmt: skip
    baselines.add_argument("-k", "--match", default=None, metavar="TEXT",
                           help="only measurements whose key contains TEXT")  # fmt: skip
    baselines.add_argument("--metric", default="p50", metavar="STAT", choices=[s.value for s in Statistic],
                           help="statistic to follow (default p50)")  # fmt: skip
    baselines.add_argument("--threshold", type=fraction, default=0.10, metavar="FRACTION",
                           help="smallest relative change shown as a step (default 0.10)")  # fmt: skip
    baselines.add_argument("--persist", type=int, default=1, metavar="N",
                           help="versions after the first at a new level a change must last (default 1)")  # fmt: skip
    baselines.add_argument("--rev", default="HEAD", help="history up to this revision (default HEAD)")
    baselines.add_argument("--plot", type=Path, default=None, metavar="PATH", help="also write a PNG plot")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", default=None, metavar="URL",
                        help="the store: sqlite:///PATH, a file path or postgresql://user@host/db "
                             "(default: the environment variable GPUPERF_HISTORY)")  # fmt: skip


def _series_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-k", "--match", default=None, metavar="TEXT", help="only tests whose node id contains TEXT")
    parser.add_argument("--device-class", default=None, metavar="CLASS", help="only this device class")
    parser.add_argument("--branch", default=None, help="only this branch")
    parser.add_argument("--statistic", default=None, metavar="STAT",
                        help="only this statistic (time.p50, memory.peak_allocated, metric.NAME; a prefix "
                             "ending in '.' such as 'memory.' takes a family)")  # fmt: skip


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """Run the ``history`` subcommand ``args`` asks for; returns the exit code."""
    handlers: dict[str, Handler] = {
        "ingest": _cmd_ingest,
        "changes": _cmd_changes,
        "dashboard": _cmd_dashboard,
        "baselines": _cmd_baselines,
    }
    return handlers[args.history_command](args, stdout, stderr)


def _open(args: argparse.Namespace, stderr: TextIO, *, create: bool = False) -> HistoryStore | None:
    """The store of ``--history`` or GPUPERF_HISTORY; only ``ingest`` creates one (``create``).

    None, the error written, where there is no address or it is not a store's: a usage error.
    """
    from pytest_gpuperf.errors import StoreAddressError
    from pytest_gpuperf.history.record import history_address
    from pytest_gpuperf.history.store import open_store

    address = history_address(args.history, None, option_name="--history")
    if address is None:
        stderr.write(f"gpuperf history {args.history_command}: error: no store: give --history URL or set "
                     "GPUPERF_HISTORY\n")  # fmt: skip
        return None
    try:
        return open_store(address.text, create=create, setting=address.setting)
    except StoreAddressError as exc:
        stderr.write(f"gpuperf history {args.history_command}: error: {exc}\n")
        return None


def _cmd_ingest(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pytest_gpuperf.history.ingest import ingest_files, runs_from_baselines

    if not args.files and args.baselines is None:
        stderr.write("gpuperf history ingest: error: give results files, --baselines DIR, or both\n")
        return EXIT_USAGE
    # The baselines' history is read before the store is touched: a folder without git is refused whole.
    baseline_runs = runs_from_baselines(args.baselines, rev=args.rev) if args.baselines is not None else []
    store = _open(args, stderr, create=True)
    if store is None:
        return EXIT_USAGE
    with store:
        outcome = ingest_files(store, args.files, runner=args.runner)
        new_updates = sum(store.record(run) for run in baseline_runs)
    for path in outcome.stored:
        stdout.write(f"stored {path}\n")
    for path in outcome.already:
        stdout.write(f"already stored {path}\n")
    if args.baselines is not None:
        stdout.write(f"stored {new_updates} of {len(baseline_runs)} baseline versions from {args.baselines} "
                     f"({len(baseline_runs) - new_updates} already stored)\n")  # fmt: skip
    for _, reason in outcome.refused:
        stderr.write(f"gpuperf history ingest: refused {reason}\n")
    stdout.write(f"{len(outcome.stored)} stored, {len(outcome.already)} already stored, "
                 f"{len(outcome.refused)} refused; {store.url}\n")  # fmt: skip
    return EXIT_INVALID_INPUT if outcome.refused else EXIT_OK


def _where(args: argparse.Namespace) -> SeriesFilter:
    from pytest_gpuperf.history.store import SeriesFilter

    return SeriesFilter(test=args.match, device_class=args.device_class, branch=args.branch, statistic=args.statistic)


def _cmd_changes(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    store = _open(args, stderr)  # first: an unusable store is an error before anything else is done
    if store is None:
        return EXIT_USAGE
    from pytest_gpuperf.history.alerts import ChangeRow, is_new_regression
    from pytest_gpuperf.history.render import render_changes
    from pytest_gpuperf.history.service import find_changes

    with store:
        found = find_changes(store, _where(args), since=args.since)
    text = render_changes(found.changes, args.format, found.too_short)
    if args.format == "json" and found.too_short.measurements:
        stderr.write(f"gpuperf history changes: {found.too_short.line()}")
    if args.output is not None:
        from pytest_gpuperf.files import write_atomic

        write_atomic(args.output, text)
    else:
        stdout.write(text)
    fresh = [row for row in map(ChangeRow.of, found.changes) if is_new_regression(row, args.recent)]
    for row in fresh:
        stderr.write(f"gpuperf history changes: new regression {row.label}: first bad {row.first_bad[:12]} "
                     f"({row.runs_after} run(s) ago)\n")  # fmt: skip
    return EXIT_NEW_REGRESSION if fresh else EXIT_OK


def _cmd_dashboard(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    store = _open(args, stderr)
    if store is None:
        return EXIT_USAGE
    from pytest_gpuperf.history.service import find_all_changes, profile_diffs

    with store:
        series = store.load_series(_where(args))
        diffs = profile_diffs(store, series)
    from pytest_gpuperf.history.dashboard import build_site

    changes = find_all_changes(series)
    options = {"title": args.title} if args.title else {}
    index = build_site(series, changes, args.out, profile_diffs=diffs, **options)
    stdout.write(f"dashboard of {len(series)} series, {len(changes)} change points written to {index}\n")
    return EXIT_OK


def _cmd_baselines(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pytest_gpuperf.history.baselines_view import baseline_history, trends
    from pytest_gpuperf.report.history import plot_history, render_history

    if args.persist < 0:
        stderr.write("gpuperf history: error: --persist must be >= 0\n")
        return EXIT_USAGE
    history = trends(
        baseline_history(
            args.baselines,
            metric=args.metric,
            threshold=args.threshold,
            persist=args.persist,
            match=args.match,
            rev=args.rev,
        )
    )
    stdout.write(render_history(history, metric=args.metric))
    if args.plot is not None:
        stdout.write(f"plot written to {plot_history(history, args.plot, metric=args.metric)}\n")
    # Unreadable old versions are listed, not fatal: one bad commit must not end all history.
    return EXIT_OK

"""``gpuperf``: compare results files, render reports and a matrix's comment, the history, a runner's stability,
validate baselines.

Exit codes (docs/cli.md): 0 ok; 1 ``compare`` found a regression; 2 usage error; 3 invalid input (a results
or baseline file unreadable or failing its schema, a folder without git history, an unusable history store);
130 interrupted (Ctrl-C or SIGTERM: the command's clean-up runs, then one line says so).

May import: every room below the pytest layer (engines, history, workers, report, measure, verdict, baseline and
the leaves); never the pytest layer (``plugin``).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TextIO

from pytest_gpuperf import __version__
from pytest_gpuperf.cli import history as cli_history
from pytest_gpuperf.cli.history import DEFAULT_BASELINES
from pytest_gpuperf.config import BaseTests, BusyPolicy
from pytest_gpuperf.errors import ConfigError, GpuperfError, NoChanges
from pytest_gpuperf.files import write_atomic
from pytest_gpuperf.model import SessionResults, Statistic
from pytest_gpuperf.modes import plan_for

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_INVALID_INPUT = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.05, got {text!r}") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"expected a fraction >= 0 such as 0.05 (5%), got {text!r}")
    return value


def _finite_non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0 such as 3, got {text!r}")
    return value


def _gate_options(parser: argparse.ArgumentParser) -> None:
    gate = parser.add_argument_group("gate settings (as in pytest --gpuperf)")
    gate.add_argument("--threshold", type=_fraction, default=None, metavar="FRACTION",
                      help="smallest relative time change that counts (default 0.10)")  # fmt: skip
    gate.add_argument("--memory-threshold", type=_fraction, default=None, metavar="FRACTION",
                      help="smallest relative peak-memory change that counts (default 0.05)")  # fmt: skip
    gate.add_argument("--metric", default=None, metavar="STAT", choices=[s.value for s in Statistic],
                      help="time statistic compared (default p50)")  # fmt: skip
    gate.add_argument("--noise-multiplier", type=_finite_non_negative, default=None, metavar="K",
                      help="standard deviations of run-to-run noise a change must exceed (default 3)")  # fmt: skip


def stability_targets(parser: argparse.ArgumentParser) -> None:
    """``--slowdown``, ``--false-alarms``, ``--caught``: the targets (gpuperf stability, detection_trace.py)."""
    from pytest_gpuperf.verdict import stability

    parser.add_argument("--slowdown", type=_fraction, default=stability.DEFAULT_SLOWDOWN, metavar="FRACTION",
                        help=f"the slowdown the gate must catch (default {stability.DEFAULT_SLOWDOWN})")  # fmt: skip
    parser.add_argument("--false-alarms", type=_fraction, default=stability.DEFAULT_FALSE_ALARMS, metavar="FRACTION",
                        help="the false-alarm rate allowed on unchanged code"
                             f" (default {stability.DEFAULT_FALSE_ALARMS})")  # fmt: skip
    parser.add_argument("--caught", type=_fraction, default=stability.DEFAULT_CAUGHT, metavar="FRACTION",
                        help=f"the share of such slowdowns to catch (default {stability.DEFAULT_CAUGHT})")  # fmt: skip


def _output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, metavar="PATH", help="write to PATH instead of standard output")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuperf",
        description="Reports and baseline tools of pytest-gpuperf (docs/cli.md).",
        epilog="exit codes: 0 ok, 1 regressions found (compare, history changes), 2 usage error, 3 invalid input "
        "files or an unusable history store",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    compare = commands.add_parser(
        "compare",
        help="compare two results files (head against base) with the gate's rules",
        description="Judge every measurement of HEAD against the same measurement in BASE, as the gate "
        "judges a run against its baseline. Exits 1 when a regression is found.",
    )
    compare.add_argument("base", type=Path, metavar="BASE.json", help="results file of the reference run")
    compare.add_argument("head", type=Path, metavar="HEAD.json", help="results file of the run under test")
    compare.add_argument("--format", choices=("table", "markdown", "json"), default="table",
                         help="table (default), markdown (a PR comment) or json (a results file)")  # fmt: skip
    _output_option(compare)
    _gate_options(compare)
    compare.add_argument("--strict", action="store_true",
                         help="as --gpuperf-strict: not comparable, unstable, not gated fail too")  # fmt: skip
    compare.add_argument("--busy-policy", choices=[p.value for p in BusyPolicy], default=BusyPolicy.RETAKE.value,
                         help="the sessions' gpuperf_busy_policy (default retake): judge leaves a change measured "
                         "on a busy CPU runner to its samples, as such a session did")  # fmt: skip

    report = commands.add_parser(
        "report",
        help="render a results file as a table, Markdown, HTML or pytest-benchmark JSON",
        description="Render a results file written by pytest --gpuperf-json.",
    )
    report.add_argument("results", type=Path, metavar="RESULTS.json")
    report.add_argument("--format", choices=("table", "markdown", "html", "benchmark-json"), default="table",
                        help="table (default), markdown, html (self-contained page) or benchmark-json")  # fmt: skip
    _output_option(report)
    _comment_parser(commands)

    cli_history.add_parser(commands, fraction=_fraction)

    stability = commands.add_parser(
        "stability",
        help="is this runner steady enough for baseline mode? the spread of unchanged code between sessions",
        description="Read the results files of several baseline-mode gating sessions of the same, unchanged "
        "code (pytest --gpuperf --gpuperf-json=run-N.json, ideally hours apart on the runner in question) and "
        "print the spread of each measurement's time change against its baseline, with the smallest slowdown "
        "a gate on a baseline can catch on that runner (docs/cli.md).",
    )
    stability.add_argument("results", type=Path, nargs="+", metavar="RESULTS.json")
    stability_targets(stability)

    validate = commands.add_parser(
        "validate",
        help="schema-check every file of a baselines folder",
        description="Check every baseline file against the baseline schema and its location. Exits 3 "
        "and lists every problem when a file is invalid.",
    )
    validate.add_argument("baselines", type=Path, nargs="?", default=Path(DEFAULT_BASELINES), metavar="DIR",
                          help=f"baselines folder (default {DEFAULT_BASELINES})")  # fmt: skip
    _bisect_parser(commands)
    return parser


def _comment_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pytest_gpuperf.report.matrix import COMMENT_LIMIT

    comment = commands.add_parser(
        "comment",
        help="one pull-request comment for the results files of several jobs (a GPU matrix)",
        description="Render one Markdown comment from the results files of several jobs, one per device or "
        "matrix entry: a row per test, a column per device class, regressions first, each with the command "
        "that reproduces it and why it got slower; within GitHub's comment limit (docs/cli.md).",
    )
    comment.add_argument("results", type=Path, nargs="+", metavar="RESULTS",
                         help="a results file (pytest --gpuperf-json), or a folder holding results.json")  # fmt: skip
    comment.add_argument("--job", action="append", default=[], metavar="NAME=CONCLUSION",
                         help="a job that left no results and how it ended (failure, cancelled, timed_out, ...): "
                         "its column says so; repeat for each")  # fmt: skip
    comment.add_argument("--link", default=None, metavar="URL",
                         help="where the full reports are (the run's artifacts), linked if it is cut")  # fmt: skip
    comment.add_argument("--limit", type=int, default=COMMENT_LIMIT, metavar="N",
                         help=f"most UTF-16 code units it may take (default {COMMENT_LIMIT:,}, GitHub's)")  # fmt: skip
    _output_option(comment)


def _bisect_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bisect = commands.add_parser(
        "bisect",
        usage="gpuperf bisect [options] GOOD BAD -- [PYTEST_ARGS ...]",
        help="find the first commit between GOOD and BAD where the selected tests got slower",
        description="Measure commits between GOOD and BAD, each against GOOD in one compare-ref run "
        "(pytest --gpuperf-compare-ref=GOOD PYTEST_ARGS in a temporary worktree), and name the first "
        "one that regressed. Exit codes: 0 found, 1 BAD is not slower (or cannot be measured), "
        "2 usage, 3 bad input (an unknown ref), 4 skipped commits leave a range (docs/cli.md).",
    )
    bisect.add_argument("good", metavar="GOOD", help="a commit where the tests were fast")
    bisect.add_argument("bad", metavar="BAD", help="a later commit where they are slow")
    bisect.add_argument("--json", type=Path, default=None, metavar="FILE", dest="json_path",
                        help="also write the steps and the result as JSON")  # fmt: skip
    bisect.add_argument("--log-dir", type=Path, default=None, metavar="DIR",
                        help="keep each step's pytest output as DIR/<commit>.log")  # fmt: skip
    bisect.add_argument("--step-timeout", type=float, default=None, metavar="SECONDS",
                        help="skip a commit whose run takes longer (default: no limit)")  # fmt: skip
    bisect.add_argument("--base-tests", choices=("auto", "head", "base"), default="auto",
                        help="the tests each commit and GOOD run: auto (your checkout's test file where one lacks "
                        "it or a selected test of it), head (yours everywhere), base (each commit's own) "
                        "(default: auto)")  # fmt: skip


def _emit_report(name: str, session: SessionResults, output: Path | None, stdout: TextIO) -> None:
    """Render ``name`` through the reports' registry (report.REPORTS) to ``output`` or standard output."""
    from pytest_gpuperf.report import render

    text = render(name, session, path=output)
    if output is None:
        stdout.write(text)
    else:
        write_atomic(output, text)


def _cmd_compare(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pytest_gpuperf.cli.compare import compare_files
    from pytest_gpuperf.config import GateSettings
    from pytest_gpuperf.verdict.judge import failing

    overrides = {
        "threshold": args.threshold,
        "memory_threshold": args.memory_threshold,
        "statistic": Statistic(args.metric) if args.metric is not None else None,
        "noise_multiplier": args.noise_multiplier,
    }
    try:
        settings = GateSettings(**{k: v for k, v in overrides.items() if v is not None})
    except (ConfigError, ValueError, KeyError) as exc:  # a bad option value is a usage error, whatever finds it
        stderr.write(f"gpuperf compare: error: {exc.args[0]}\n")
        return EXIT_USAGE
    outcome = compare_files(args.base, args.head, settings, busy_policy=BusyPolicy(args.busy_policy))
    _emit_report(args.format, outcome.session, args.output, stdout)
    for key in outcome.removed:
        stderr.write(f"gpuperf compare: {key} is in {args.base} but not in {args.head}\n")
    failed = any(failing(r.comparisons, strict=args.strict) for r in outcome.session.results)
    return EXIT_REGRESSION if failed else EXIT_OK


def _cmd_report(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pytest_gpuperf.report.results_json import load_results

    _emit_report(args.format, load_results(args.results), args.output, stdout)
    return EXIT_OK


def _cmd_comment(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pytest_gpuperf.cli.comment import load_jobs
    from pytest_gpuperf.report.matrix import render_matrix

    if args.limit < 4096:
        stderr.write(f"gpuperf comment: error: --limit {args.limit} leaves no room for a table (4096 at least)\n")
        return EXIT_USAGE
    try:
        jobs = load_jobs(args.results, args.job)
    except ConfigError as exc:
        stderr.write(f"gpuperf comment: error: {exc}\n")
        return EXIT_USAGE
    text = render_matrix(jobs, link=args.link, limit=args.limit)
    if args.output is None:
        stdout.write(text)
    else:
        write_atomic(args.output, text)
    return EXIT_OK


def _cmd_stability(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pytest_gpuperf.report.results_json import load_results
    from pytest_gpuperf.verdict.stability import assess, render

    sessions = []
    for path in args.results:
        session = load_results(path)
        if not plan_for(session.mode).gates_against_baselines:  # compare-ref measures its base in the same session
            stderr.write(f"gpuperf stability: skipped {path}: a session in {session.mode} mode, not baseline mode\n")
            continue
        sessions.append(session)
    try:
        text = render(assess(sessions), args.slowdown, args.false_alarms, args.caught)
    except NoChanges:
        stderr.write("gpuperf stability: no time change against a baseline in the files given: they must come from"
                     " pytest --gpuperf --gpuperf-json=FILE runs against baselines\n")  # fmt: skip
        return EXIT_INVALID_INPUT
    except ValueError as exc:  # rates outside (0, 1), a slowdown of 0
        stderr.write(f"gpuperf stability: error: {exc}\n")
        return EXIT_USAGE
    stdout.write(text)
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pytest_gpuperf.baseline import BaselineStore

    if not args.baselines.is_dir():
        stderr.write(f"gpuperf validate: {args.baselines} is not a directory\n")
        return EXIT_INVALID_INPUT
    store = BaselineStore(args.baselines)
    errors = store.validate_tree()
    if errors:
        stderr.writelines(f"{error}\n" for error in errors)
        stderr.write(f"gpuperf validate: {len(errors)} invalid file(s) under {args.baselines}\n")
        return EXIT_INVALID_INPUT
    entries = list(store.iter_entries())
    files = {path for _, path, _ in entries}
    count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
    stdout.write(f"{args.baselines}: {len(files)} file(s), {count}, all valid\n")
    return EXIT_OK


def _cmd_bisect(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pytest_gpuperf.cli import bisect

    if args.step_timeout is not None and args.step_timeout <= 0:
        stderr.write("gpuperf bisect: error: --step-timeout must be > 0\n")
        return EXIT_USAGE
    try:
        bisect.check_pytest_args(args.pytest_args)
    except ConfigError as exc:
        stderr.write(f"gpuperf bisect: error: {exc}\n")
        return EXIT_USAGE
    request = bisect.Request(args.good, args.bad, tuple(args.pytest_args), args.json_path, args.log_dir,
                             args.step_timeout, BaseTests(args.base_tests))  # fmt: skip

    def out(text: str) -> None:
        stdout.write(text)
        stdout.flush()

    return bisect.run(request, out).status.exit_code


_COMMANDS = {
    "compare": _cmd_compare,
    "report": _cmd_report,
    "comment": _cmd_comment,
    "history": cli_history.run,
    "stability": _cmd_stability,
    "validate": _cmd_validate,
    "bisect": _cmd_bisect,
}


def _pytest_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """``bisect``'s own arguments and what follows its first ``--``, kept whole (argparse drops a second ``--``)."""
    if argv[:1] != ["bisect"] or "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run ``gpuperf`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    argv, pytest_args = _pytest_args(list(sys.argv[1:] if argv is None else argv))
    try:
        args = build_parser().parse_args(cli_history.normalise_argv(argv))
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    args.pytest_args = pytest_args  # bisect's, after its first --
    try:
        with _sigterm_interrupts():
            return _COMMANDS[args.command](args, out, err)
    except (GpuperfError, OSError) as exc:
        err.write(f"gpuperf {args.command}: {exc}\n")
        return EXIT_INVALID_INPUT
    except KeyboardInterrupt as exc:  # the clean-up (worktrees, step processes) ran in the finally blocks
        err.write(f"gpuperf {args.command}: interrupted ({str(exc) or 'Ctrl-C'})\n")
        return EXIT_INTERRUPTED


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM as Ctrl-C while a command runs, so its clean-up runs and it ends with one line, not a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

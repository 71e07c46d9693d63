"""CompareRefEngine: the head's side of ``--gpuperf-compare-ref=REF``.

For each measurement the worker (REF's code in a temporary worktree) runs the same test up to the
same key, and both alternate short rounds (alternate.py); one process measures at a time, so this
is correct on a single GPU. A change the first pair suspects is confirmed in fresh pairs (confirm.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.baseline.record import entry_from_measurement
from pytest_gpuperf.config import BaseTests, GateSettings, MeasureSettings, Settings
from pytest_gpuperf.engines.compare_ref.alternate import alternate
from pytest_gpuperf.engines.compare_ref.confirm import ConfirmationPool, describe
from pytest_gpuperf.engines.compare_ref.generated import IMPORT_ROOTS
from pytest_gpuperf.engines.compare_ref.head_tests import HeadTests, head_configuration, place_head_tests
from pytest_gpuperf.engines.compare_ref.headtree import head_checkout
from pytest_gpuperf.engines.compare_ref.prestart import BASE_WORKER, EarlyBase, checkout_dir
from pytest_gpuperf.engines.compare_ref.refs import BaseRef
from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree
from pytest_gpuperf.engines.results import regressed, with_profile_diff
from pytest_gpuperf.errors import BaseStartError, WorkerError
from pytest_gpuperf.measure.profiled import ProfiledSide, profile_here
from pytest_gpuperf.model import (
    BaselineEntry,
    Comparison,
    Environment,
    Measurement,
    MeasurementResult,
    Note,
    Provenance,
    Verdict,
    measurement_key,
)
from pytest_gpuperf.report.progress import Progress
from pytest_gpuperf.report.text import plain
from pytest_gpuperf.verdict import Reference, judge
from pytest_gpuperf.verdict import evidence as ev
from pytest_gpuperf.verdict.case import Evidence
from pytest_gpuperf.verdict.confirmation import (
    by_pairs,
    confirmed,
    confirming_gate,
    judge_pairs,
    pairs_note,
    suspicion,
    time_of,
    unconfirmed_verdict,
    unusable_note,
)
from pytest_gpuperf.verdict.rules import resolved_against
from pytest_gpuperf.verdict.rulesets import RuleSet
from pytest_gpuperf.workers.protocol import handover_pause_s
from pytest_gpuperf.workers.remote import RECV_TIMEOUT_S, START_TIMEOUT_S, RemoteSide, WorkerLaunch
from pytest_gpuperf.workers.twins import Zygote

if TYPE_CHECKING:
    from pytest_gpuperf.measure.runner import MeasureSpec, PreparedMeasurement, Runner


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
    settings: MeasureSettings | None = None  # how it was measured: a confirmation measures alike
    spec: MeasureSpec | None = None  # the head's side, profiled if the pair regressed
    unmeasurable: bool = False  # the base has the test but could not measure it: not gated, not new


class CompareRefEngine:
    """The engine under --gpuperf-compare-ref: head and base measured in alternating rounds (``engine.Engine``)."""

    base_commit: str | None = None  # the ref's commit, once its worktree exists (``start``)

    def __init__(
        self,
        ref: str,
        rootdir: Path,
        runner: Runner,
        environment: Environment,
        rules: RuleSet,
        *,
        node_ids: Sequence[str] = (),
        recv_timeout_s: float = RECV_TIMEOUT_S,
        confirm_pairs: int = 0,
        worker_args: Sequence[str] = (),
        early: EarlyBase | None = None,
        progress: Progress | None = None,
        resolved: BaseRef | None = None,
        traces: Path | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        base_tests: BaseTests = BaseTests.AUTO,
        inifile: Path | None = None,
    ) -> None:
        self.ref = ref
        self.base_tests = base_tests  # which version of the tests the base runs (head_tests.py)
        self.inifile = inifile  # the head's pytest configuration file: the base's too under base_tests=head
        self.start_timeout_s = start_timeout_s  # the base worker's start and collection
        self.traces = traces  # where a regression's Chrome traces go (GpuperfConfig.traces_dir)
        self._resolved = resolved  # the ref's commit, resolved at the session's start
        self.rootdir = Path(rootdir)
        self.runner = runner
        self.environment = environment
        self.rules = rules  # the mode's rule lists, built once by the session
        self.node_ids = tuple(node_ids)
        self.worker_args = tuple(worker_args)
        self.recv_timeout_s = recv_timeout_s
        self.confirm_pairs = confirm_pairs
        self._worktree: RefWorktree | None = None
        self._base: RemoteSide | None = None
        self._zygote: Zygote | None = None  # forks the base worker and every confirmation worker
        self._started = False
        self._pairs: dict[str, _Pair] = {}
        self._confirmation: ConfirmationPool | None = None
        self._head_checkout: Path | None = None  # the confirming head workers' checkout (headtree.py)
        self._early = early  # a worktree and base process started before collection (prestart.py)
        self._head_tests = HeadTests()  # the head's test files the base runs (head_tests.py), placed in start()
        self._base_args: tuple[str, ...] = ()  # the base's own command-line options (the head's -c under head)
        self.progress = progress or Progress()

    # -- life cycle -------------------------------------------------------------------------

    def remember(self, key: str, remeasure: Callable[[], Measurement]) -> None:
        """A suspicion is confirmed in fresh process pairs that run the test at both commits, never by taking
        a recorded measurement again here."""

    def start(self, node_ids: Sequence[str] | None = None) -> None:
        """Create the worktree of REF and fork the base worker there (once); does not wait for its collection.

        Called once the test ids are known, so the worker collects (only ``node_ids``' files) while
        the head goes on. A worktree and zygote started early (prestart.py) are adopted; the fork
        waits for a zygote still importing torch, as the first measurement would.
        """
        if self._started:
            return
        self._started = True
        if node_ids is not None:
            self.node_ids = tuple(node_ids)
        early, self._early = self._early, None
        if early is not None and (early.ref, early.rootdir) != (self.ref, self.rootdir):
            early.close()
            early = None
        try:
            if early is not None:
                self._worktree, self._zygote = early.hand_over()
            else:
                self._worktree = RefWorktree(self.rootdir, self._resolved or self.ref).create()
                self._zygote = Zygote(self._worktree.tmp_dir)
            self._place_head_tests()
            (channel,) = self._zygote.fork(self._launch_at_ref(BASE_WORKER))
            self._base = RemoteSide(channel, f"at {self.ref}", self.recv_timeout_s)
        except BaseException:
            self.close()
            raise
        assert self._worktree is not None
        self.base_commit = self._worktree.commit
        if self.confirm_pairs > 0:
            self._confirmation = ConfirmationPool(
                self.confirm_pairs,
                lambda j: dataclasses.replace(self._launch_at_head_checkout(f"confirm-head-{j + 1}"), time_only=True),
                lambda j: dataclasses.replace(self._launch_at_ref(f"confirm-base-{j + 1}"), time_only=True),
                self.ref,
                self._zygote,
                self.progress,
            )

    def _place_head_tests(self) -> None:
        """The head's test files into the base's worktree, as ``base_tests`` asks, before its workers collect."""
        worktree = self._worktree
        assert worktree is not None and worktree.path is not None and worktree.repo_root is not None
        target = checkout_dir(self.rootdir, worktree.repo_root, worktree.path)
        try:
            self._head_tests = place_head_tests(self.rootdir, target, self.node_ids, self.base_tests)
            if self.base_tests is BaseTests.HEAD and self.inifile is not None:
                self._base_args = head_configuration(
                    self.inifile, worktree.repo_root, worktree.path, target, self._head_tests
                )
        except OSError as exc:
            raise WorkerError(
                f"could not copy the head's tests into the worktree of {plain(self.ref)}: {exc}"
            ) from None

    def _files(self) -> tuple[str, ...]:
        return tuple(sorted({nid.split("::", 1)[0] for nid in self.node_ids}))

    def _launch_at_ref(self, name: str) -> WorkerLaunch:
        assert self._worktree is not None and self._worktree.path is not None
        launch = self._launch(name, self._worktree.path)
        return dataclasses.replace(launch, worker_args=(*launch.worker_args, *self._base_args))

    def _launch_at_head_checkout(self, name: str) -> WorkerLaunch:
        """A head worker run from a checkout shaped like the base's worktree (headtree.py), made once."""
        worktree = self._worktree
        assert worktree is not None and worktree.repo_root is not None
        if self._head_checkout is None:
            self._head_checkout = head_checkout(worktree.repo_root, worktree.tmp_dir)
        return self._launch(name, self._head_checkout)

    def _launch(self, name: str, checkout: Path) -> WorkerLaunch:
        """A worker in ``checkout`` that imports its code first; its files live next to the worktree."""
        worktree = self._worktree
        assert worktree is not None and worktree.repo_root is not None
        scratch = worktree.tmp_dir
        return WorkerLaunch(
            cwd=checkout_dir(self.rootdir, worktree.repo_root, checkout),
            import_roots=tuple(checkout / folder for folder in IMPORT_ROOTS),
            files=self._files(),
            device=str(self.runner.options.device),
            pin_cpu=self.runner.guard.pin_cpu,
            basetemp=scratch / f"{name}-basetemp",
            log_path=scratch / f"{name}.log",
            worker_args=self.worker_args,
        )

    def _ensure_ready(self) -> RemoteSide:
        """The base worker, once it has collected; BaseStartError if it ended first (no test can be compared)."""
        self.start()
        base = self._base
        if base is None:
            raise WorkerError("--gpuperf-compare-ref worker is not running")
        try:
            base.wait_ready(self.start_timeout_s)
        except WorkerError as exc:
            self.close()
            raise BaseStartError(self._start_failure(exc)) from None
        except BaseException:
            self.close()
            raise
        return base

    def _start_failure(self, exc: WorkerError) -> str:
        commit = (self.base_commit or "")[:12]
        copied = self._head_tests.copied
        head_files = (
            f" It ran the head's {', '.join(copied[:3])}{' and more' if len(copied) > 3 else ''} on the base's code "
            f"(--gpuperf-base-tests={self.base_tests}; base runs the base's own tests)."
            if copied else ""
        )  # fmt: skip
        return (
            f"--gpuperf-compare-ref={plain(self.ref)}: the base worker at {commit} could not start, so no test can be "
            f"compared with {plain(self.ref)}. Its checkout must import as the head's does; a file the head has only "
            "because a build or an install wrote it is missing there unless it is a small git-ignored file in one "
            f"of the head's packages (those are copied in; compiled extensions are not).{head_files} The end of its "
            f"log:\n{exc}"
        )

    def close(self) -> None:
        """Stop the workers and remove the worktree; never raises."""
        if self._early is not None:
            self._early.close()
            self._early = None
        if self._confirmation is not None:
            self._confirmation.close()
            self._confirmation = None
        base, self._base = self._base, None
        if base is not None:
            base.close()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        if self._worktree is not None:
            self._worktree.close()  # the head's checkout lies in its scratch folder: removed with it
            self._worktree = None
            self._head_checkout = None

    # -- measuring --------------------------------------------------------------------------

    def measure(self, spec: MeasureSpec, settings: Settings) -> Measurement:
        if not settings.enabled:
            return self.runner.smoke(spec)
        remote = self._ensure_ready()
        key = measurement_key(spec.test_id, spec.name)
        why_not = remote.open(spec.test_id, key)
        base = None if why_not else _BaseSide(key)
        note = why_not or ""
        try:
            prepared = self.runner.prepare(spec)
            if base is None:
                prepared.run_to_completion()
            else:
                note = self._alternate(prepared, base, remote, spec, settings.gate)
        except BaseException:
            remote.abandon()
            raise
        head_file = self._head_tests.note_for(spec.test_id)  # the base ran the head's test file: said either way
        if note and head_file:
            note = f"{note} ({head_file})"
        self._pairs[key] = _Pair(base, note, spec.settings, spec, unmeasurable=remote.unmeasurable)
        measurement = prepared.finish()
        if note:  # not compared: the comparison's note says why, no note claims a comparison
            return measurement
        label = f"compared with {self.ref} ({(self.base_commit or '')[:12]}) in alternating rounds"
        label += f"; {head_file}" if head_file else ""
        return dataclasses.replace(measurement, notes=(*measurement.notes, Note(label)))

    @staticmethod
    def _alternate(
        prepared: PreparedMeasurement, base: _BaseSide, remote: RemoteSide, spec: MeasureSpec, gate: GateSettings
    ) -> str:
        """Alternate rounds with the worker until the ratio is resolved against the threshold (the screen's boundary
        when fresh pairs follow: ``rules.resolved_against``); returns a note ('' if fine)."""
        pause_s = handover_pause_s()

        def head_round(budget_s: float) -> list[float]:
            prepared.round(budget_s)
            time.sleep(pause_s)  # this process's OpenMP threads stop spinning before the base measures
            return prepared.last_corrected  # both sides alternate on their times less run-queue wait

        def base_round(budget_s: float) -> list[float] | None:
            samples = remote.round(budget_s)
            base.samples.extend(samples or ())
            return samples

        # an automatic threshold is known once the rounds are: they resolve against its low bound, the strictest
        threshold = gate.auto_threshold.low if gate.auto_threshold is not None else gate.threshold
        resolved = resolved_against(threshold, confirming=gate.confirm_pairs > 0)
        rounds = alternate(head_round, base_round, spec.settings, spent_s=prepared.elapsed_s(), resolved=resolved)
        if not rounds.complete:
            base.error = remote.test_note or f"{base.key} stopped at the base"
            prepared.run_to_completion()
            return base.error
        base.round_medians = rounds.base_rounds
        base.measurement = remote.finish()
        return ""

    # -- judging ----------------------------------------------------------------------------

    def evaluate(self, measurements: Sequence[Measurement], settings: Settings) -> list[MeasurementResult]:
        base = self._base
        if base is not None and measurements and base.test == measurements[0].test_id:
            base.drain()
        results = []
        for m in measurements:
            pair = self._pairs.pop(m.key, None)
            result = self._result(m, pair, settings.gate)
            if settings.profile_diff and pair is not None and pair.spec is not None and regressed(result):
                result = self._profile_diff(result, pair.spec)
            results.append(result)
        return results

    def _profile_diff(self, result: MeasurementResult, spec: MeasureSpec) -> MeasurementResult:
        """The head's call profiled here, the base's in the base worker (after its test), diffed."""
        label = f"ref {self.ref} ({(self.base_commit or '')[:12]})"
        key = result.measurement.key
        return with_profile_diff(result, lambda calls: profile_here(self.runner, spec, self.traces, "head", calls),
                                 lambda calls: self._base_profile(key, label, calls), base_label=label)  # fmt: skip

    def _base_profile(self, key: str, label: str, calls: int) -> ProfiledSide:
        """The base's side, profiled over ``calls`` calls in the base worker."""
        from pytest_gpuperf.profiling.torch_profile import trace_file

        if self._base is None:
            return ProfiledSide(None, problem=f"{label} has no worker to profile in")
        trace = trace_file(self.traces, key, "base") if self.traces is not None else None
        try:
            table, where = self._base.profile(key, trace, calls)
        except WorkerError as exc:
            return ProfiledSide(None, problem=f"{label} could not be profiled ({str(exc).splitlines()[0]})")
        return ProfiledSide(table, where or None) if table is not None else ProfiledSide(None, problem=where)

    def _result(self, m: Measurement, pair: _Pair | None, gate: GateSettings) -> MeasurementResult:
        base = pair.base if pair is not None else None
        if base is None or not base.samples or base.error:
            why = (pair.note if pair is not None else "") or f"not measured against {self.ref}"
            if pair is not None and pair.unmeasurable:
                return judge(m, Reference(base_ref=self.ref, unmeasured=why), gate, self.rules, self.environment)
            result = judge(m, Reference(base_ref=self.ref), gate, self.rules, self.environment)
            return dataclasses.replace(result, comparisons=tuple(_with_note(c, why) for c in result.comparisons))
        entry = self._base_entry(m, base)
        reference = Reference(entry=entry, time_evidence=self._paired(m, base, gate), base_ref=self.ref)
        result = judge(m, reference, gate, self.rules, self.environment)
        suspected = suspicion(time_of(result))
        if suspected is not None and self._confirmation is not None and pair is not None:
            result = self._confirmed(result, suspected, reference, pair, gate)
        return result

    def _confirmed(
        self, result: MeasurementResult, suspected: Verdict, reference: Reference, pair: _Pair, gate: GateSettings
    ) -> MeasurementResult:
        """The verdict of fresh process pairs on a change that the first pair suspected (verdict/confirmation.py)."""
        assert self._confirmation is not None
        m = result.measurement
        first = time_of(result)
        gate = confirming_gate(gate, suspected, first)
        confirmation = self._confirmation.confirm(
            m.test_id, m.key, pair.settings or MeasureSettings(), gate.threshold, gate.confidence, suspected
        )
        ratios = confirmation.ratios
        if not confirmation.usable():
            problems = "; ".join(confirmation.problems) or "no pair measured"
            note = unusable_note(suspected, len(ratios), problems)
            return confirmed(result, note, unconfirmed_verdict(first))
        detail = describe(ratios, 1.0 + (first.change or 0.0))
        if confirmation.problems:
            detail += f"; {len(confirmation.problems)} pair(s) could not measure: {confirmation.problems[0]}"
        judged = judge_pairs(
            m, reference, gate, self.rules, self.environment, ratios, suspected, detail, confirmation.errors
        )
        note = pairs_note(suspected, judged.verdict, len(ratios), confidence=gate.confidence)
        return by_pairs(result, judged, confirmation.head_ns(), note)

    def _paired(self, m: Measurement, base: _BaseSide, gate: GateSettings) -> Evidence:
        """The rounds' paired evidence: on the times less run-queue wait that the sides alternated on, with the
        wall clock's own beside it where a side waited for a CPU (verdict/evidence.py)."""
        n = len(base.round_medians)
        judged = ev.paired_rounds(m.judged_round_medians_ns[-n:], base.round_medians, gate, self.ref)
        final = self._final(m, base)
        walls = final.round_medians_ns[-n:] if final is not None else ()
        if final is None or len(walls) != n or not (m.corrected.contended or final.corrected.contended):
            return judged
        wall = ev.paired_rounds(m.round_medians_ns[-n:], walls, gate, self.ref)
        return ev.with_correction(judged, wall, m.corrected, final.corrected)

    def _final(self, m: Measurement, base: _BaseSide) -> Measurement | None:
        """The base worker's own measurement of ``m``'s key (its wall-clock samples), if it sent one."""
        return (self._base.final.get(m.key) if self._base is not None else None) or base.measurement

    def _base_entry(self, m: Measurement, base: _BaseSide) -> BaselineEntry:
        """The base's side as the entry a store would keep of it (baseline/record.py), every sample kept."""
        final = self._final(m, base)
        measured = dataclasses.replace(
            final or dataclasses.replace(m, metrics=(), peak_allocated_bytes=None, peak_reserved_bytes=None,
                                         device_state=None),  # the head's own: nothing of it is the base's
            samples_ns=tuple(base.samples), round_medians_ns=tuple(base.round_medians),
        ) if final is None or not final.samples_ns else final  # fmt: skip
        provenance = Provenance(commit=self.base_commit, branch=self.ref)
        return entry_from_measurement(measured, self.environment, provenance, recorded_at=None,
                                      max_samples=max(1, len(base.samples)))  # fmt: skip


def _with_note(c: Comparison, why: str) -> Comparison:
    """A comparison with no base side, saying why the base did not measure it."""
    keep = c.note and c.verdict is not Verdict.NEW
    return dataclasses.replace(c, note=f"{c.note}; {why}" if keep else why)

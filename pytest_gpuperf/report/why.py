"""Why a regression got slower, in words every report shares; strings are raw, each renderer makes them inert."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from pytest_gpuperf.model import MeasuredChange, OpChange, OpStat, ProfileDiff, WhyRow
from pytest_gpuperf.profiling.explain import leading
from pytest_gpuperf.profiling.torch_profile import launch_base
from pytest_gpuperf.report.units import format_change, format_time

TOP_LINES = 3  # cause rows in the failure message and the terminal, before the rest row
PERFETTO = "https://ui.perfetto.dev"
SHORT_NAME = 80
PARTNER_NAME = 60  # the replaced op's name in a headline, after the cause's
_SIDE_TEXT = {
    "host": "the slowdown is host-side (launch overhead, Python)",
    "device": "the slowdown is on the device (kernel time)",
}


_QUALIFIER = re.compile(r"\b(?:[A-Za-z_]\w*::)+")


def short_name(name: str, limit: int = SHORT_NAME) -> str:
    """A readable op name: return type, parameter list and nested template arguments dropped.

    ``void at::native::kernel<4, at::native::CUDAFunctor_add<float> >(int, ...)`` becomes
    ``at::native::kernel<4, at::native::CUDAFunctor_add<…> >``: the first level of template
    arguments names the kernel, deeper ones rarely do. What is still too long is cut in the middle.
    """
    # Hand-written: demangled C++ names nest brackets, which no regular expression matches.
    short = name.strip().removeprefix("void ").replace("(anonymous namespace)::", "")
    out: list[str] = []
    depth = parens = 0  # template depth; open parentheses of a parameter list being skipped
    for ch in short:
        if parens or (ch == "(" and depth == 0):
            parens += {"(": 1, ")": -1}.get(ch, 0)
            continue
        if ch == "<":
            depth += 1
            if depth == 2:
                out.append("<…")
        elif ch == ">":
            depth -= 1
            if depth == 1:
                out.append(">")
                continue
        if depth < 2:
            out.append(ch)
    short = "".join(out).strip()
    if len(short) > limit and "<" in short:  # namespaces inside the template arguments go first
        head, _, args = short.partition("<")
        short = f"{head}<{_QUALIFIER.sub('', args)}"
    if len(short) <= limit:
        return short
    keep = (limit - 1) // 2
    return f"{short[:keep]}…{short[-(limit - 1 - keep) :]}"


def calls_text(stat: OpStat | None) -> str:
    return "0" if stat is None else f"{stat.calls:g}"


def signed_time(ns: float) -> str:
    """``412_000`` -> ``'+412.0 us'``, ``-3000`` -> ``'-3.000 us'``."""
    return ("+" if ns >= 0 else "") + format_time(ns)


def time_basis(diff: ProfileDiff) -> str:
    """What the rows compare: ``'device time per call'`` (kernels), ``'time per call by Python function'`` (a
    profile by function), else ``'CPU time per call'`` (operators)."""
    if diff.basis == "device":
        return "device time per call"
    return "time per call by Python function" if diff.head.profiler == "python" else "CPU time per call"


def heading(diff: ProfileDiff) -> str:
    """``profile vs baseline abc1234, CPU time per call`` (or the head's alone, when there is no base)."""
    against = f"vs {diff.base_label}" if diff.base is not None else "of the head alone"
    return f"profile {against}, {time_basis(diff)}"


def _calls(stat: OpStat | None) -> str:
    text = calls_text(stat)
    return f"{text} call" if text == "1" else f"{text} calls"


def head_cells(change: OpChange) -> list[str]:
    """Without a base, a table row's cells after the op and its kind: the head's time per call and calls."""
    return [format_time(change.head_ns), calls_text(change.head)]


def head_line(change: OpChange, *, on_device: bool) -> str:
    """Without a base, one row as a sentence: ``180.0 us aten::addmm (2 calls)``."""
    kind = f"{change.kind}, " if on_device else ""
    return f"{format_time(change.head_ns)} {short_name(change.name)} ({kind}{_calls(change.head)})"


def slower_side(diff: ProfileDiff) -> Literal["host", "device"] | None:
    """Which side of a CUDA call grew more, host (CPU: launches, Python) or device (kernels); None off CUDA."""
    host, device = diff.host_delta_ns, diff.device_delta_ns
    if host is None or device is None:
        return None
    if host > 0 and host > abs(device):
        return "host"
    if device > 0 and device >= abs(host):
        return "device"
    return None


def _part(label: str, delta: float, before: float | None) -> str:
    share = format_change(delta / before) if before else "-"
    return f"{label} {share} ({signed_time(delta)})"


def split_text(diff: ProfileDiff) -> str | None:
    """``device +0.3% (+500.0 ns), host +82.0% (+41.00 us): the slowdown is host-side (...)``; None off CUDA."""
    host, device = diff.host_delta_ns, diff.device_delta_ns
    if host is None or device is None or diff.base is None:
        return None
    text = f"{_part('device', device, diff.base.device_ns)}, {_part('host', host, diff.base.host_ns)}"
    side = slower_side(diff)
    return f"{text}: {_SIDE_TEXT[side]}" if side else text


def sentence(text: str) -> str:
    """``text`` with a capital first letter and a full stop, for prose reports."""
    return f"{text[:1].upper()}{text[1:]}." if text else ""


def headline(diff: ProfileDiff, name: Callable[[str], str] = str) -> str | None:
    """The diff in a few words, for a collapsed section's title: ``host-side, +41.00 us`` or the leading cause,
    with the op it replaced: ``+2.185 ms aten::bmm (added, 4 calls), replacing aten::_scaled_dot_product_…``.

    ``name`` renders an op's (shortened) name, as code in a page.
    """
    if slower_side(diff) == "host" and diff.host_delta_ns is not None:
        return f"host-side, {signed_time(diff.host_delta_ns)}"
    if diff.base is None:
        return None
    if diff.finding == "disagrees":
        return "the profile disagrees with the measurement"
    top = next((i for i, r in enumerate(diff.rows) if r.role == "cause"), None)
    if top is None:
        return "nothing stands out"
    row = diff.rows[top]
    words = f"{signed_time(row.delta_ns)} {name(short_name(row.name))} ({reading_text(row, alone=True)})"
    after = diff.rows[top + 1] if top + 1 < len(diff.rows) else None
    if after is not None and after.role == "replaced":
        words += f", replacing {name(short_name(after.name, PARTNER_NAME))} ({signed_time(after.delta_ns)})"
    return words


def trace_viewer(diff: ProfileDiff) -> str:
    """What opens the diff's traces: Perfetto for torch.profiler's, ``python -m pstats`` for Python's statistics."""
    return "python -m pstats, or snakeviz" if diff.head.profiler == "python" else PERFETTO


def traces_text(diff: ProfileDiff) -> str | None:
    """``traces: head X, base Y (open in https://ui.perfetto.dev)``; None when none was written."""
    sides = [f"{label} {path}" for label, path in (("head", diff.head_trace), ("base", diff.base_trace)) if path]
    return f"traces: {', '.join(sides)} (open in {trace_viewer(diff)})" if sides else None


def interval_text(low: float | None, high: float | None) -> str:
    """``[+1.200 us, +3.400 us]``; ``[no interval]`` where the profile kept no per-call samples."""
    if low is None or high is None:
        return "[no interval]"
    return f"[{signed_time(low)}, {signed_time(high)}]"


def change_text(change: MeasuredChange) -> str:
    """``+257.0 us [+240.0 us, +270.0 us]``."""
    return f"{signed_time(change.delta_ns)} {interval_text(change.low_ns, change.high_ns)}"


def _count(calls: float | None) -> str:
    return "?" if calls is None else f"{calls:g}"


def _count_calls(calls: float | None) -> str:
    text = _count(calls)
    return f"{text} call" if text == "1" else f"{text} calls"


def reading_text(row: WhyRow, *, alone: bool = False) -> str:
    """What a row says, in words: ``added, 1 call``, ``calls 20 -> 21``, ``slower per call``, ``within the noise``;
    ``alone``: the row is quoted without its neighbours (a headline), so nothing refers to the row above."""
    if row.role == "rest":
        return "the measured change less the rows above"
    words = {
        "appeared": f"added, {_count_calls(row.head_calls)}",
        "disappeared": f"removed, was {_count_calls(row.base_calls)}",
        "grew": f"from under the base's cut, now {_count_calls(row.head_calls)}",
        "shrank": f"now under the head's cut, was {_count_calls(row.base_calls)}",
        "unchanged": "unchanged",
        "calls": f"calls {_count(row.base_calls)} -> {_count(row.head_calls)}",
        "slower": "slower per call",
        "faster": "faster per call",
    }[row.reading]
    if alone:
        return words
    if row.role == "replaced" and row.other_half and launch_base(row.other_half) == launch_base(row.name):
        words += ", the same kernel launched with the row above's new configuration"
    elif row.role == "replaced":
        words += ", replaced by the row above"
    elif row.role == "offset":
        words += ", an offset (in the rest)"
    elif row.role == "noise":
        words += ", within the profile's noise"
    return words


def row_line(row: WhyRow, *, on_device: bool) -> str:
    """One row as a sentence: ``+210.3 us [+202.1 us, +218.4 us] aten::mm (calls 20 -> 21)``."""
    kind = f"{row.kind}, " if on_device and row.kind != "rest" else ""
    name = row_name(row)
    return f"{signed_time(row.delta_ns)} {interval_text(row.low_ns, row.high_ns)} {name} ({kind}{reading_text(row)})"


def finding_text(diff: ProfileDiff) -> str | None:
    """The explanation's finding in a sentence, where it is not a table of causes; None where it is."""
    if diff.finding == "disagrees" and diff.profile_change is not None and diff.measured is not None:
        return (f"the profile's own total changed by {change_text(diff.profile_change)} per call, the measurement by "
                f"{change_text(diff.measured)}: apart beyond both intervals, the profile cannot say why "
                "(a profiler artefact, or a busy host while profiling)")  # fmt: skip
    if diff.finding == "spread":
        return ("nothing stands out: no operator's change is resolved beyond the profile's noise; the change is "
                "spread over many, the largest below with their intervals")  # fmt: skip
    if diff.finding == "partial":
        return "the causes shown account for less than half of the change; the rest is spread over many operators"
    if diff.finding == "no-intervals":
        return ("the stored profile has no per-call samples (written before they were kept): time changes have "
                "no interval, none is a cause; --gpuperf-update-baseline writes the baseline with them")  # fmt: skip
    return None


def shown_rows(diff: ProfileDiff, top: int = TOP_LINES, *, most: int | None = None) -> list[WhyRow]:
    """The rows a short report shows: the leading causes (``top`` of them, each with the op it replaced, no more
    than ``most`` rows with the rest), the rest row for them (``explain.leading``: the rows shown add up to the
    measured change), and where nothing is resolved the ``top`` largest rows inside the rest."""
    picked = leading(diff.rows, top, most=most)
    if any(r.role == "cause" for r in picked):
        return picked
    inside = [r for r in diff.rows if r.role in ("offset", "noise")]
    return picked + inside[:top]


def table_rows(diff: ProfileDiff, most: int) -> list[WhyRow]:
    """At most ``most`` rows of a table that cannot list them all: as many leading causes (with the ops they
    replaced) as fit with their rest row, then the largest rows inside the rest."""
    picked = leading(diff.rows, most=most)
    inside = [r for r in diff.rows if r.role in ("offset", "noise")]
    return picked + inside[: max(0, most - len(picked))]


WHY_COLUMNS = ("op", "kind", "change per call", "interval", "base", "head", "calls", "reading")


def why_cells(row: WhyRow) -> list[str]:
    """A table row's cells after the op and its kind (``WHY_COLUMNS``): change, interval, base, head, calls, reading."""
    if row.role == "rest":
        return [signed_time(row.delta_ns), interval_text(row.low_ns, row.high_ns), "", "", "", reading_text(row)]
    calls = f"{_count(row.base_calls)} → {_count(row.head_calls)}"
    return [signed_time(row.delta_ns), interval_text(row.low_ns, row.high_ns), _side_time(row.base_ns, row.base_calls),
            _side_time(row.head_ns, row.head_calls), calls, reading_text(row)]  # fmt: skip


def _side_time(ns: float, calls: float | None) -> str:
    """A side's time per call: ``-`` where the op is absent, ``?`` where it is under that side's cut."""
    return "?" if calls is None else "-" if calls == 0 else format_time(ns)


def row_name(row: WhyRow, limit: int = SHORT_NAME) -> str:
    return "rest" if row.role == "rest" else short_name(row.name, limit)


def explained_heading(diff: ProfileDiff) -> str:
    """``measured +257.0 us [+240.0 us, +270.0 us] per call, 20 profiled calls a side``."""
    calls = f"{diff.head.profiled_calls} profiled calls a side"
    return f"measured {change_text(diff.measured)} per call, {calls}" if diff.measured else calls


def why_lines(diff: ProfileDiff, indent: str = "  ", top: int = TOP_LINES) -> list[str]:
    """The short block of the failure message and the terminal: heading, finding, rows, host/device split, traces."""
    if diff.base is None:
        rows = [head_line(c, on_device=diff.head.on_device) for c in diff.changes[:top]]
        more = len(diff.changes) - top
    else:
        found = finding_text(diff)
        picked = [] if diff.finding == "disagrees" else shown_rows(diff, top)
        rows = [explained_heading(diff), *([found] if found else [])]
        rows += [row_line(r, on_device=diff.head.on_device) for r in picked]
        more = len(diff.rows) - len(picked)
    if more > 0:
        rows.append(f"... {more} more in the reports")
    rows += [text for text in (split_text(diff), diff.note, traces_text(diff)) if text]
    return [f"why ({heading(diff)}):", *(f"{indent}{line}" for line in rows)]

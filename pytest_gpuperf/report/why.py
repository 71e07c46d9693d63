"""Why a regression got slower, in words every report shares; strings are raw, each renderer makes them inert."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from pytest_gpuperf.model import OpChange, OpStat, ProfileDiff
from pytest_gpuperf.profiling.diff import NEGLIGIBLE_SHARE
from pytest_gpuperf.report.units import format_change, format_time

TOP_LINES = 3  # rows in the failure message and the terminal: the culprit is almost always first
PERFETTO = "https://ui.perfetto.dev"
SHORT_NAME = 80
UNCHANGED_OPS = f"no operator or kernel changed by more than {NEGLIGIBLE_SHARE:.1%} of the call"
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
    """What the rows are ranked by: ``'device time per call'`` on CUDA, else ``'CPU time per call'``."""
    return "device time per call" if diff.head.on_device else "CPU time per call"


def heading(diff: ProfileDiff) -> str:
    """``profile vs baseline abc1234, CPU time per call`` (or the head's alone, when there is no base)."""
    against = f"vs {diff.base_label}" if diff.base is not None else "of the head alone"
    return f"profile {against}, {time_basis(diff)}"


def _calls(stat: OpStat | None) -> str:
    text = calls_text(stat)
    return f"{text} call" if text == "1" else f"{text} calls"


def relative_change(change: OpChange) -> float | None:
    """Head over base time, minus one; None where the op is on one side only or took no time before."""
    if change.status != "changed" or change.base_ns <= 0:
        return None
    return change.head_ns / change.base_ns - 1


def change_cell(change: OpChange) -> str:
    """The change of one row: ``+412.0 us (appeared)``, ``+40.00 us (+25.0%)``; the head's time without a base."""
    if change.status == "changed":
        return f"{signed_time(change.delta_ns)} ({format_change(relative_change(change))})"
    if change.status == "grew":
        return f"{signed_time(change.delta_ns)} (from {_under(change.absent_below_ns)})"
    if change.status == "shrank":
        return f"{signed_time(change.delta_ns)} (to {_under(change.absent_below_ns)})"
    return f"{signed_time(change.delta_ns)} ({change.status})"


def _side_calls(change: OpChange, stat: OpStat | None) -> str:
    """A side's calls per measured call; ``?`` for an op under that side's cut (its count is unknown)."""
    return "?" if stat is None and not change.counts_known else calls_text(stat)


def time_cells(change: OpChange) -> tuple[str, str]:
    """The base's and the head's time per call: ``-`` where the op is absent, ``< 5.000 us`` under a cut."""

    absent = f"< {format_time(change.absent_below_ns)}" if change.absent_below_ns > 0 else "-"
    base = format_time(change.base_ns) if change.base is not None else absent
    head = format_time(change.head_ns) if change.head is not None else absent
    return base, head


def calls_cell(change: OpChange) -> str:
    """Calls per measured call, base -> head: ``1 -> 2``, ``0 -> 1`` (appeared), ``? -> 1`` (grew)."""
    return f"{_side_calls(change, change.base)} → {_side_calls(change, change.head)}"


def row_cells(change: OpChange, *, has_base: bool) -> list[str]:
    """A table row's cells after the op and its kind: base, head, change, calls; without a base, time and calls."""
    if not has_base:
        return [format_time(change.head_ns), calls_text(change.head)]
    return [*time_cells(change), change_cell(change), calls_cell(change)]


def _under(cut_ns: float) -> str:
    return f"under {format_time(cut_ns)}"


def change_line(change: OpChange, *, on_device: bool, has_base: bool = True) -> str:
    """One row as a sentence: ``+412.0 us aten::gelu (appeared, 1 call)``."""
    kind = f"{change.kind}, " if on_device else ""
    name = short_name(change.name)
    if not has_base:
        return f"{format_time(change.head_ns)} {name} ({kind}{_calls(change.head)})"
    if change.status == "appeared":
        detail = f"appeared, {_calls(change.head)}"
    elif change.status == "disappeared":
        detail = f"disappeared, was {_calls(change.base)}"
    elif change.status == "grew":
        detail = f"was {_under(change.absent_below_ns)}, now {_calls(change.head)}"
    elif change.status == "shrank":
        detail = f"now {_under(change.absent_below_ns)}, was {_calls(change.base)}"
    else:
        detail = format_change(relative_change(change))
        if change.calls_changed:
            detail += f", calls {calls_text(change.base)} -> {calls_text(change.head)}"
    return f"{signed_time(change.delta_ns)} {name} ({kind}{detail})"


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
    """The diff in a few words, for a collapsed section's title: ``host-side, +41.00 us`` or the top row.

    ``name`` renders the top op's (shortened) name, as code in a page.
    """
    if slower_side(diff) == "host" and diff.host_delta_ns is not None:
        return f"host-side, {signed_time(diff.host_delta_ns)}"
    if diff.base is None or not diff.changes:
        return None
    top = diff.changes[0]
    return f"{signed_time(top.delta_ns)} {name(short_name(top.name))} ({top.status})"


def traces_text(diff: ProfileDiff) -> str | None:
    """``traces: head X, base Y (open in https://ui.perfetto.dev)``; None when none was written."""
    sides = [f"{label} {path}" for label, path in (("head", diff.head_trace), ("base", diff.base_trace)) if path]
    return f"traces: {', '.join(sides)} (open in {PERFETTO})" if sides else None


def why_lines(diff: ProfileDiff, indent: str = "  ", top: int = TOP_LINES) -> list[str]:
    """The short block of the failure message and the terminal: heading, top rows, host/device split, traces."""
    has_base = diff.base is not None
    rows = [change_line(c, on_device=diff.head.on_device, has_base=has_base) for c in diff.changes[:top]]
    if not rows and has_base:
        rows = [UNCHANGED_OPS]
    if len(diff.changes) > top:
        rows.append(f"... {len(diff.changes) - top} more in the reports")
    rows += [text for text in (split_text(diff), diff.note, traces_text(diff)) if text]
    return [f"why ({heading(diff)}):", *(f"{indent}{line}" for line in rows)]

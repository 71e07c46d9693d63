"""Plausibility rules: values the baseline schema allows but no measurement produces.

Such an entry could switch the gate off for its test (a noise of 1e9 passes every change, a median of
1e300 makes every run an improvement), so every read and write refuses it as a corrupt file is. Stored
floats carry 6 significant digits, so comparisons of two stored values allow ROUNDING.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.baseline import schema
from pytest_gpuperf.baseline.record import MAX_NOISE
from pytest_gpuperf.config import DEFAULT_MIN_SAMPLES
from pytest_gpuperf.errors import BaselineError

MAX_TIME_NS = 86_400e9  # one day: no single timed call of a test takes longer
ROUNDING = 2e-5  # two values rounded to 6 significant digits each differ by up to ~1e-5 of themselves
# The order statistics of every sample: min <= p50 <= p90 <= p99 <= max.
ORDERED_STATS = ("min_ns", "median_ns", "p90_ns", "p99_ns", "max_ns")
TIME_STATS = ("median_ns", "min_ns", "mean_ns", "p90_ns", "p99_ns", "max_ns")
READ_HINT = "fix or delete the entry, then record it again (an update run does not overwrite a refused file)"
WRITE_HINT = "not written; record it again (on a quieter machine, or measuring longer)"


@dataclass(frozen=True)
class Fault:
    """What a rule found: the path of the field inside the entry, and why it cannot be."""

    parts: tuple[str | int, ...]
    message: str


@dataclass(frozen=True)
class Rule:
    """One plausibility check over a current-version entry, named after the fault it finds."""

    name: str
    find: Callable[[Mapping[str, Any]], Fault | None]


def _le(a: float, b: float) -> bool:
    """``a <= b`` up to the rounding of two stored values."""
    return a <= b + ROUNDING * max(abs(a), abs(b))


def _noise(entry: Mapping[str, Any]) -> Fault | None:
    noise = entry["noise"]
    if noise is None or 0.0 <= float(noise) <= MAX_NOISE:
        return None
    return Fault(
        ("noise",),
        f"noise {float(noise):g} is not from 0 to {MAX_NOISE:g}: as the spread of log medians between runs"
        " that is more than e-fold (2.7x), and a noise floor that wide lets slowdowns of several times pass",
    )


def _positive_times(entry: Mapping[str, Any]) -> Fault | None:
    stats = entry["stats"]
    for name in TIME_STATS:
        if not float(stats[name]) > 0:
            return Fault(("stats", name), f"{name} {float(stats[name]):g} is not a time: a timed call takes > 0 ns")
    for field in ("samples_ns", "round_medians_ns"):
        for i, value in enumerate(entry[field]):
            if not float(value) > 0:
                return Fault((field, i), f"{field}[{i}] is {float(value):g}, not a time: a timed call takes > 0 ns")
    for field in ("calibration_ns", "speed_probe_ns"):
        value = entry.get(field)  # speed_probe_ns is optional in the schema
        if value is not None and not float(value) > 0:
            return Fault((field,), f"{field} {float(value):g} is not a time: a timed workload takes > 0 ns")
    return None


def _within_a_day(entry: Mapping[str, Any]) -> Fault | None:
    stats = entry["stats"]
    for name in TIME_STATS:
        if float(stats[name]) > MAX_TIME_NS:
            return Fault(
                ("stats", name), f"{name} {float(stats[name]):g} ns is more than a day ({MAX_TIME_NS:g} ns) per call"
            )
    return None


def _ordered(entry: Mapping[str, Any]) -> Fault | None:
    stats = {name: float(value) for name, value in entry["stats"].items()}
    for lower, upper in itertools.pairwise(ORDERED_STATS):
        if not _le(stats[lower], stats[upper]):
            return Fault(
                ("stats", upper),
                f"{upper} {stats[upper]:g} is below {lower} {stats[lower]:g};"
                f" statistics of one sample set satisfy {' <= '.join(ORDERED_STATS)}",
            )
    if not (_le(stats["min_ns"], stats["mean_ns"]) and _le(stats["mean_ns"], stats["max_ns"])):
        return Fault(
            ("stats", "mean_ns"),
            f"mean_ns {stats['mean_ns']:g} is outside [min_ns, max_ns] = [{stats['min_ns']:g}, {stats['max_ns']:g}]",
        )
    return None


def _spreads(entry: Mapping[str, Any]) -> Fault | None:
    stats = {name: float(value) for name, value in entry["stats"].items()}
    span = stats["max_ns"] - stats["min_ns"]
    # Neither can exceed the range: an IQR lies inside it, and a sample stdev is at most
    # range * sqrt(n / (2 (n - 1))) <= range for n >= 2 (and 0 for one sample).
    for name in ("iqr_ns", "stdev_ns"):
        if not stats[name] <= span + ROUNDING * stats["max_ns"]:
            return Fault(
                ("stats", name), f"{name} {stats[name]:g} is wider than the samples' range max_ns - min_ns = {span:g}"
            )
    return None


def _enough_samples(entry: Mapping[str, Any]) -> Fault | None:
    count = entry["stats"]["count"]
    if count >= DEFAULT_MIN_SAMPLES:
        return None
    return Fault(
        ("stats", "count"),
        f"count {count} is below {DEFAULT_MIN_SAMPLES}, the fewest samples for which the distribution-free"
        f" 95% CI of the median exists, so no verdict can rest on it (measure longer: --gpuperf-max-time)",
    )


def _samples_match_stats(entry: Mapping[str, Any]) -> Fault | None:
    stats = entry["stats"]
    samples = [float(x) for x in entry["samples_ns"]]
    count = int(stats["count"])
    if not samples:
        return Fault(("samples_ns",), "no samples: the entry holds a subset of its measurement's samples")
    if len(samples) > count:
        return Fault(
            ("samples_ns",),
            f"{len(samples)} samples, but stats.count is {count}; the entry keeps a subset of the samples",
        )
    low, high = float(stats["min_ns"]), float(stats["max_ns"])
    for i, value in enumerate(samples):
        if not (_le(low, value) and _le(value, high)):
            return Fault(
                ("samples_ns", i), f"sample {value:g} is outside the stats' [min_ns, max_ns] = [{low:g}, {high:g}]"
            )
    if len(samples) == count:  # every sample kept: their median is the stats' median
        median = statistics.median(samples)
        if not (_le(median, float(stats["median_ns"])) and _le(float(stats["median_ns"]), median)):
            return Fault(
                ("stats", "median_ns"),
                f"median_ns {float(stats['median_ns']):g} differs from the median {median:g} of all"
                f" {count} samples in samples_ns",
            )
    return None


def _profile_device(entry: Mapping[str, Any]) -> Fault | None:
    profile = entry.get("profile")  # optional: entries written before profiles were stored
    if profile is None:
        return None
    on_cuda = profile["device_type"] == "cuda"
    if on_cuda and profile["device_ns"] is None:
        return Fault(("profile", "device_ns"), "a CUDA profile without device time: its kernels took none")
    if not on_cuda and profile["device_ns"] is not None:
        return Fault(("profile", "device_ns"), "a CPU profile with device time: no kernel runs on the CPU")
    for i, op in enumerate(profile["ops"]):
        if not on_cuda and (op["kind"] == "kernel" or float(op["device_ns"]) > 0):
            return Fault(("profile", "ops", i), f"{op['name']!r} has device time in a CPU profile")
    return None


def _profile_rows(entry: Mapping[str, Any]) -> Fault | None:
    profile = entry.get("profile")
    if profile is None:
        return None
    if float(profile["host_ns"]) > MAX_TIME_NS:
        return Fault(("profile", "host_ns"), f"host_ns {float(profile['host_ns']):g} is more than a day per call")
    seen: set[tuple[str, str]] = set()
    for i, op in enumerate(profile["ops"]):
        key = (op["kind"], op["name"])
        if key in seen:
            return Fault(("profile", "ops", i), f"{op['kind']} {op['name']!r} is listed twice; one row each")
        seen.add(key)
        for field in ("host_ns", "device_ns"):
            if float(op[field]) > MAX_TIME_NS:
                return Fault(("profile", "ops", i, field), f"{field} {float(op[field]):g} is more than a day per call")
    return None


def _correction(entry: Mapping[str, Any]) -> Fault | None:
    correction = entry.get("correction")  # optional: only entries written under contention have one
    if correction is None:
        return None
    top = float(entry["stats"]["max_ns"])
    for i, value in enumerate(correction["samples_ns"]):
        if not float(value) > 0 or not _le(float(value), top):
            return Fault(("correction", "samples_ns", i), f"corrected sample {float(value):g} is outside (0, max_ns ="
                         f" {top:g}]: taking a wait out of a time leaves a time no longer than it")  # fmt: skip
    if float(correction["uncertainty"]) > MAX_NOISE:
        return Fault(("correction", "uncertainty"), f"uncertainty {float(correction['uncertainty']):g} is more than"
                     f" {MAX_NOISE:g}: a correction that uncertain is none")  # fmt: skip
    return None


RULES: Sequence[Rule] = (
    Rule("noise out of range", _noise),
    Rule("a time not positive", _positive_times),
    Rule("a time beyond a day", _within_a_day),
    Rule("statistics out of order", _ordered),
    Rule("a spread wider than the range", _spreads),
    Rule("too few samples for a verdict", _enough_samples),
    Rule("samples at odds with the statistics", _samples_match_stats),
    Rule("a profile at odds with its device", _profile_device),
    Rule("a profile row out of place", _profile_rows),
    Rule("a correction at odds with the samples", _correction),
)


def find_fault(entry: Mapping[str, Any]) -> tuple[Rule, Fault] | None:
    """The first rule a schema-valid, current-version entry breaks, and what it found."""
    for rule in RULES:
        fault = rule.find(entry)
        if fault is not None:
            return rule, fault
    return None


def check_entry(entry: Mapping[str, Any], path: Path, key: str, *, writing: bool = False) -> None:
    """Raise BaselineError naming ``path`` and ``$.entries[key]...`` if ``entry`` breaks a rule
    (``writing``: it is about to be written, which changes the hint)."""
    found = find_fault(entry)
    if found is not None:
        rule, fault = found
        raise BaselineError(
            path,
            f"implausible entry ({rule.name}): {fault.message}; {WRITE_HINT if writing else READ_HINT}",
            json_path=schema.json_path(("entries", key, *fault.parts)),
        )

"""Results in pytest-benchmark's JSON format (as ``pytest --benchmark-json`` writes it), for its ``compare``.

A gpuperf sample (the mean per call over ``calls_per_sample`` calls) maps one to one to a pytest-benchmark
round of ``iterations`` calls. Quartiles use linear interpolation, as every gpuperf statistic does.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from pytest_gpuperf.model import DEFAULT_MEASUREMENT, MeasurementResult, SessionResults
from pytest_gpuperf.report.rows import split_key

# The pytest-benchmark data format this file claims to be.
FORMAT_VERSION = "4.0.0"
_NS_PER_S = 1e9


def benchmark_stats(samples_s: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` block for per-call times in seconds."""
    data = [float(s) for s in samples_s]
    if not data:
        raise ValueError("no samples")
    q1, q3 = (float(q) for q in np.percentile(data, [25, 75]))
    iqr = q3 - q1
    mean = statistics.fmean(data)
    stddev = statistics.stdev(data) if len(data) > 1 else 0.0
    inside = [d for d in data if q1 - 1.5 * iqr <= d <= q3 + 1.5 * iqr]
    iqr_outliers = len(data) - len(inside)
    stddev_outliers = sum(1 for d in data if not mean - stddev <= d <= mean + stddev)
    total = sum(data)
    return {
        "min": min(data),
        "max": max(data),
        "mean": mean,
        "stddev": stddev,
        "rounds": len(data),
        "median": statistics.median(data),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": min(inside),
        "hd15iqr": max(inside),
        "ops": len(data) / total if total else 0.0,
        "total": total,
        "data": data,
    }


def _names(test_id: str, name: str) -> tuple[str, str, str | None]:
    """(name, fullname, param) in pytest-benchmark's sense; extra measurements get a suffix."""
    _, test_name = split_key(test_id)
    suffix = "" if name == DEFAULT_MEASUREMENT else f"::{name}"
    param = test_name[test_name.index("[") + 1 : -1] if test_name.endswith("]") and "[" in test_name else None
    return test_name + suffix, test_id + suffix, param


def _extra_info(result: MeasurementResult) -> dict[str, Any]:
    m = result.measurement
    info: dict[str, Any] = {
        "gpuperf_verdict": result.verdict.value,
        "device": m.device,
        "timer": m.timer,
        "precision": m.precision,
        "outcome": result.outcome,
    }
    optional = {
        "peak_allocated_bytes": m.peak_allocated_bytes,
        "peak_reserved_bytes": m.peak_reserved_bytes,
        "unstable_reason": m.unstable_reason,
    }
    info.update({k: v for k, v in optional.items() if v is not None})
    info.update(m.rates)
    info.update({f"metric.{metric.name}": metric.value for metric in m.metrics})
    info["comparisons"] = [
        {"metric": c.metric, "verdict": c.verdict.value, "change": c.change, "baseline": c.baseline}
        for c in result.comparisons
    ]
    return info


def benchmark_entry(result: MeasurementResult, taken: Collection[str] = ()) -> dict[str, Any]:
    """One ``benchmarks[]`` entry; ``taken``: full names other entries have, which the fixture's cannot take."""
    m = result.measurement
    name, fullname, param = _names(m.test_id, m.name)
    stats = benchmark_stats([s / _NS_PER_S for s in m.samples_ns])
    stats["iterations"] = m.calls_per_sample
    bench = m.benchmark
    if bench is not None and bench.fullname not in taken:
        name, fullname = bench.name, bench.fullname
    return {
        "group": bench.group if bench else None,
        "name": name,
        "fullname": fullname,
        # The argument names behind a parametrize id are recorded by the ``benchmark`` fixture only; an
        # empty dict (not None) keeps pytest-benchmark 4's CSV export working.
        "params": dict(bench.params) if bench else {},
        "param": bench.param if bench else param,
        "extra_info": {**_extra_info(result), **(bench.extra_info if bench else {})},
        "options": {
            "timer": m.timer,
            "warmup": m.warmup_calls > 0,
            "calls_per_sample": m.calls_per_sample,
            "device": m.device,
        },
        "stats": stats,
    }


def benchmark_document(session: SessionResults) -> dict[str, Any]:
    """The whole pytest-benchmark document for ``session``.

    The ``benchmark`` fixture's entry takes the test's name unless another measurement of the test has it.
    """
    taken = {_names(r.measurement.test_id, r.measurement.name)[1] for r in session.results
             if r.measurement.benchmark is None}  # fmt: skip
    env, prov = session.environment, session.provenance
    machine_info = {
        "node": env.extra.get("hostname", ""),
        "processor": env.cpu_model,
        "machine": env.extra.get("machine", ""),
        "python_compiler": "",
        "python_implementation": env.extra.get("python_implementation", "CPython"),
        "python_implementation_version": env.python,
        "python_version": env.python,
        "python_build": [],
        "release": "",
        "system": env.platform or "",
        "cpu": {"brand_raw": env.cpu_model},
        "gpuperf": {
            "device_class": env.device_class,
            "device_name": env.device_name,
            "device_type": env.device_type,
            "torch": env.torch,
            "cuda": env.cuda,
            "driver": env.driver,
        },
    }
    commit_info = {
        "id": prov.commit or "unversioned",
        "time": prov.commit_date,
        "author_time": prov.commit_date,
        "dirty": bool(prov.dirty),
        "project": env.extra.get("project", ""),
        "branch": prov.branch or "(unknown)",
    }
    return {
        "machine_info": machine_info,
        "commit_info": commit_info,
        "benchmarks": [benchmark_entry(r, taken) for r in session.results],
        "datetime": session.started_at,
        "version": FORMAT_VERSION,
    }


def render_benchmark_json(session: SessionResults) -> str:
    """``session`` as a pytest-benchmark JSON file (indent 4, as it writes its own)."""
    return json.dumps(benchmark_document(session), indent=4, allow_nan=False) + "\n"

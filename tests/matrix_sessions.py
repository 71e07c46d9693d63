"""Hand-built sessions of one suite on several devices, for the matrix comment's tests (report/matrix.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from test_report_helpers import BASE, ENV, HEAD, baseline, measurement, time_cmp
from test_report_profile_helpers import cpu_extra_op_diff, cuda_host_side_diff, cuda_kernel_swap_diff

from pytest_gpuperf.model import Environment, MeasurementResult, SessionResults, Verdict
from pytest_gpuperf.modes import Mode

DEVICES = {
    "h100": ("cuda-nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3"),
    "a100": ("cuda-nvidia-a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB"),
    "l4": ("cuda-nvidia-l4", "NVIDIA L4"),
    "mi300x": ("cuda-amd-instinct-mi300x", "AMD Instinct MI300X"),
}
DIFFS = (cuda_kernel_swap_diff(), cuda_host_side_diff(), cpu_extra_op_diff())


def perf_id(i: int) -> str:
    return f"tests/perf/test_ops_{i // 20:02d}.py::test_kernel[bf16-{1024 + i}-causal]"


def environment(device: str, **changes: object) -> Environment:
    device_class, name = DEVICES[device]
    return dataclasses.replace(ENV, device_class=device_class, device_name=name, **changes)  # type: ignore[arg-type]


def _result(i: int, verdict: Verdict, env: Environment, reference: Environment) -> MeasurementResult:
    slower = {Verdict.REGRESSION: 1.25, Verdict.IMPROVEMENT: 0.8, Verdict.UNSTABLE: 1.12}.get(verdict, 1.002)
    m = measurement(perf_id(i), "default", 200_000.0 * slower)
    base = dataclasses.replace(baseline(m, 200_000.0), environment=reference)
    extra: dict[str, object] = {"threshold": 0.05}
    if verdict is Verdict.REGRESSION:
        extra["evidence"] = "CI of ratio [1.22, 1.28] excludes 1"
    timing = time_cmp(m, base, verdict, **extra)
    diff = DIFFS[i % len(DIFFS)] if verdict is Verdict.REGRESSION else None
    return MeasurementResult(measurement=m, baseline=base, comparisons=(timing,), profile_diff=diff)


def suite(
    device: str,
    *,
    regressed: Collection[int] = (),
    unstable: Collection[int] = (),
    improved: Collection[int] = (),
    tests: int = 200,
    reference: Environment | None = None,
    mode: Mode = Mode.COMPARE_REF,
    env: Environment | None = None,
) -> SessionResults:
    """``tests`` measurements on ``device``: the listed ones regressed, unstable or improved, the rest unchanged.

    ``reference``: the environment each one's reference was taken in (default: the session's own).
    """
    here = env or environment(device)

    def verdict(i: int) -> Verdict:
        if i in regressed:
            return Verdict.REGRESSION
        if i in unstable:
            return Verdict.UNSTABLE
        return Verdict.IMPROVEMENT if i in improved else Verdict.UNCHANGED

    results = tuple(_result(i, verdict(i), here, reference or here) for i in range(tests))
    ref = "origin/main" if mode is Mode.COMPARE_REF else None
    return SessionResults(
        results=results, environment=here, provenance=HEAD, mode=mode, started_at="2026-01-02T03:05:00+00:00",
        compare_ref=ref, base_provenance=BASE if ref else None, repro_args=("--gpuperf-threshold=0.05",),
    )  # fmt: skip

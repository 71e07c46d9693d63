"""Hand-built SessionResults for the report tests (real model objects, fixed numbers).

Other report test modules import :func:`make_session`; the tests here check
that the fixture covers what those tests rely on, so a change to it is noticed.
"""

from __future__ import annotations

import dataclasses

from pytest_gpuperf.model import (
    ENERGY_METRIC,
    BaselineEntry,
    Comparison,
    DeviceState,
    DeviceSummary,
    EnergySource,
    Environment,
    Kind,
    Measurement,
    MeasurementResult,
    Metric,
    Note,
    ProfileSummary,
    Provenance,
    SampleStats,
    SessionResults,
    Throughput,
    Verdict,
)

ENV = Environment(
    device_class="nvidia-h100-80gb-hbm3",
    device_type="cuda",
    device_name="NVIDIA H100 80GB HBM3",
    cpu_model="AMD EPYC 9654",
    python="3.11.7",
    torch="2.13.0",
    cuda="12.8",
    driver="570.86.15",
    gpu_uuid="GPU-1234",
    platform="Linux-6.8-x86_64",
    extra={"clocks": "locked"},
)
HEAD = Provenance(commit="a" * 40, branch="feature", dirty=False, commit_date="2026-01-02T03:04:05+00:00")
BASE = Provenance(commit="b" * 40, branch="main", dirty=False, commit_date="2026-01-01T00:00:00+00:00")


def samples(center: float, n: int = 12, spread: float = 0.01) -> tuple[float, ...]:
    """Deterministic samples around ``center`` (a fixed zig-zag, no randomness)."""
    return tuple(center * (1 + spread * ((i * 7) % 5 - 2) / 2) for i in range(n))


def measurement(test_id: str, name: str, center: float, **extra: object) -> Measurement:
    values = samples(center)
    return Measurement(
        test_id=test_id,
        name=name,
        samples_ns=values,
        calls_per_sample=extra.pop("calls_per_sample", 10),  # type: ignore[arg-type]
        device="cuda:0",
        timer="cuda_event",
        round_medians_ns=(center * 0.995, center, center * 1.004),
        precision=extra.pop("precision", 0.012),  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


def baseline(m: Measurement, center: float, noise: float = 0.02) -> BaselineEntry:
    values = samples(center)
    return BaselineEntry(
        key=m.key,
        stats=SampleStats.from_samples(values),
        samples_ns=values,
        calls_per_sample=m.calls_per_sample,
        device=m.device,
        timer=m.timer,
        round_medians_ns=(center,),
        noise=noise,
        environment=ENV,
        provenance=BASE,
        recorded_at="2026-01-01T00:00:00+00:00",
    )


def time_cmp(m: Measurement, base: BaselineEntry | None, verdict: Verdict, **extra: object) -> Comparison:
    now = m.stats.median_ns
    before = base.stats.median_ns if base is not None else None
    change = now / before - 1 if before else None
    return Comparison(
        key=m.key,
        metric="time.p50",
        verdict=verdict,
        current=now,
        baseline=before,
        change=change,
        baseline_commit=BASE.commit if base is not None else None,
        **extra,  # type: ignore[arg-type]
    )


def make_session() -> SessionResults:
    """Eight measurements, one per verdict, with memory, metrics and a profile."""
    reg = measurement(
        "tests/perf/test_matmul.py::test_matmul[fp16-4096]",
        "default",
        1_250_000.0,
        peak_allocated_bytes=3 * 2**30,
        peak_reserved_bytes=4 * 2**30,
        throughput=Throughput(flops=2 * 4096**3),
        profile=ProfileSummary(
            trace_path="gpuperf-profiles/test_matmul.json",
            top_ops=(("aten::mm", 1_100_000.0, 0.88), ("ampere_fp16_gemm|x", 100_000.0, 0.08)),
            activities=("cpu", "cuda"),
        ),
    )
    reg_base = baseline(reg, 1_000_000.0)
    reg_result = MeasurementResult(
        measurement=reg,
        baseline=reg_base,
        comparisons=(
            time_cmp(
                reg,
                reg_base,
                Verdict.REGRESSION,
                ci_low=1.22,
                ci_high=1.28,
                p_value=0.001,
                threshold=0.05,
                evidence="CI of ratio [1.22, 1.28] excludes 1",
            ),
            Comparison(
                key=reg.key,
                metric="memory.peak_allocated",
                verdict=Verdict.REGRESSION,
                current=3 * 2**30,
                baseline=2 * 2**30,
                unit="B",
                change=0.5,
                threshold=0.05,
                evidence="+1 GiB",
            ),
        ),
    )
    imp = measurement("tests/perf/test_conv.py::test_conv", "forward", 80_000.0)
    imp_base = baseline(imp, 100_000.0)
    imp_result = MeasurementResult(
        measurement=imp,
        baseline=imp_base,
        comparisons=(
            time_cmp(imp, imp_base, Verdict.IMPROVEMENT, ci_low=0.78, ci_high=0.82, evidence="CI [0.78, 0.82]"),
        ),
    )
    same = measurement(
        "tests/perf/test_conv.py::test_conv",
        "backward",
        450.0,
        metrics=(Metric(name="speedup", value=1.9, unit="x", tolerance=0.1),),
    )
    same_base = baseline(same, 449.0)
    same_result = MeasurementResult(
        measurement=same,
        baseline=same_base,
        comparisons=(
            time_cmp(same, same_base, Verdict.UNCHANGED, evidence="within noise"),
            Comparison(
                key=same.key,
                metric="metric.speedup",
                verdict=Verdict.UNCHANGED,
                current=1.9,
                baseline=1.95,
                unit="x",
                change=1.9 / 1.95 - 1,
            ),
        ),
    )
    new = measurement("tests/perf/test_attn.py::test_flash", "default", 2_500_000_000.0)
    new_result = MeasurementResult(measurement=new)
    other = measurement("tests/perf/test_attn.py::test_sdpa", "default", 5_000.0)
    other_result = MeasurementResult(
        measurement=other,
        comparisons=(
            Comparison(
                key=other.key,
                metric="time.p50",
                verdict=Verdict.NOT_COMPARABLE,
                current=other.stats.median_ns,
                note="baseline recorded on device class nvidia-a100",
            ),
        ),
    )
    shaky = measurement(
        "tests/perf/test_attn.py::test_sdpa",
        "decode",
        7_000.0,
        unstable_reason="GPU clock throttled (thermal)",
        notes=(Note("clocks dropped 12%"),),
        precision=0.2,
    )
    shaky_base = baseline(shaky, 7_000.0)
    shaky_result = MeasurementResult(
        measurement=shaky,
        baseline=shaky_base,
        comparisons=(time_cmp(shaky, shaky_base, Verdict.UNSTABLE, evidence="precision 20% > 5%"),),
    )
    slow = measurement("tests/perf/test_train.py::test_step", "train_step", 2_200_000_000.0)
    slow = dataclasses.replace(slow, samples_ns=slow.samples_ns[:3], round_medians_ns=slow.samples_ns[:3])
    slow_base = baseline(slow, 2_150_000_000.0)
    slow_result = MeasurementResult(
        measurement=slow,
        baseline=slow_base,
        comparisons=(
            time_cmp(
                slow,
                slow_base,
                Verdict.NOT_GATED,
                note="not gated: this run has 3 sample(s), fewer than the 6 a verdict needs",
            ),
        ),
    )
    near = measurement("tests/perf/test_norm.py::test_layernorm", "default", 102_200.0)
    near_base = baseline(near, 100_000.0)
    near_result = MeasurementResult(
        measurement=near,
        baseline=near_base,
        comparisons=(
            time_cmp(
                near,
                near_base,
                Verdict.NOT_RESOLVED,
                ci_low=1.006,
                ci_high=1.038,
                threshold=0.02,
                note="+2.2% [+0.6%, +3.8%]: not resolved against the threshold 2.0%: the interval reaches both "
                "sides of it (--gpuperf-strict makes this fail)",
            ),
        ),
    )
    return SessionResults(
        results=(
            new_result,
            same_result,
            imp_result,
            reg_result,
            other_result,
            shaky_result,
            slow_result,
            near_result,
        ),
        environment=ENV,
        provenance=HEAD,
        mode="compare-ref",
        started_at="2026-01-02T03:05:00+00:00",
        compare_ref="origin/main",
        base_provenance=BASE,
    )


def timed(test_id: str, center: float, name: str = "default") -> Measurement:
    # 40 samples with a fixed +-2% zig-zag: enough for a tight bootstrap CI, no randomness.
    values = tuple(center * (1 + 0.02 * ((i * 7) % 9 - 4) / 4) for i in range(40))
    return Measurement(
        test_id=test_id,
        name=name,
        samples_ns=values,
        calls_per_sample=5,
        device="cuda:0",
        timer="cuda_event",
        round_medians_ns=(center * 0.998, center, center * 1.002),
        precision=0.005,
    )


def plain_session(measurements: list[Measurement], prov: Provenance, started: str) -> SessionResults:
    return SessionResults(
        results=tuple(MeasurementResult(m) for m in measurements),
        environment=ENV,
        provenance=prov,
        mode="baseline",
        started_at=started,
    )


def device_session(source: EnergySource = EnergySource.COUNTER) -> SessionResults:
    """One GPU measurement with the device's state beside its samples and its energy per call, against a baseline."""
    m = timed("tests/perf/test_mm.py::test_energy", 1_000_000.0)
    n = len(m.samples_ns)
    state = DeviceState(
        sm_clock_mhz=tuple(1980.0 - 15 * (i % 4) for i in range(n)), mem_clock_mhz=(2619.0,) * n,
        power_w=tuple(600.0 + i for i in range(n)), temperature_c=(61.0,) * n, reasons=(4,) * n, readings=n // 2,
        reading_ns=30_000.0, summary=DeviceSummary(1957.0, 2619.0, 619.0, 61.0), energy_source=source,
    )  # fmt: skip
    m = dataclasses.replace(m, metrics=(Metric(ENERGY_METRIC, 0.62, unit="J", better="lower"),), device_state=state)
    before = Metric(ENERGY_METRIC, 0.6, unit="J", better="lower")
    base = dataclasses.replace(baseline(m, 1_000_000.0), metrics=(before,), device_state=state.summary)
    energy = Comparison(key=m.key, metric=f"metric.{ENERGY_METRIC}", verdict=Verdict.UNCHANGED, current=0.62,
                        baseline=0.6, unit="J", change=0.62 / 0.6 - 1, threshold=0.1, kind=Kind.METRIC)  # fmt: skip
    result = MeasurementResult(m, (time_cmp(m, base, Verdict.UNCHANGED), energy), base)
    return SessionResults(results=(result,), environment=ENV, provenance=HEAD, mode="baseline",
                          started_at="2026-01-02T00:00:00+00:00")  # fmt: skip


BASE_SESSION = plain_session(
    [
        timed("tests/t.py::test_slower", 1_000_000.0),
        timed("tests/t.py::test_same", 50_000.0),
        timed("tests/t.py::test_faster", 50_000.0),
        timed("tests/t.py::test_gone", 10_000.0),
    ],
    BASE,
    "2026-01-01T00:00:00+00:00",
)
HEAD_SESSION = plain_session(
    [
        timed("tests/t.py::test_slower", 1_500_000.0),
        timed("tests/t.py::test_same", 50_100.0),
        timed("tests/t.py::test_faster", 25_000.0),
        timed("tests/t.py::test_added", 10_000.0),
    ],
    HEAD,
    "2026-01-02T00:00:00+00:00",
)


def test_fixture_covers_every_verdict() -> None:
    session = make_session()
    assert {r.verdict for r in session.results} == set(Verdict)


def test_fixture_regression_is_a_real_change() -> None:
    reg = next(r for r in make_session().results if r.verdict is Verdict.REGRESSION)
    timing = reg.comparisons[0]
    assert timing.change is not None
    assert timing.change > 0.2
    assert reg.measurement.profile is not None

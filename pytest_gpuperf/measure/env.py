"""Best-effort environment probes. A probe that fails leaves its field empty; it never fails a run."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.model import Environment, device_class
from pytest_gpuperf.torch_support import have_torch

if TYPE_CHECKING:
    import torch


slug = device_class.slug


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """/proc/cpuinfo's fields, keys lower-cased, each one's first value (ARM's ``Hardware`` comes last)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep:
                    fields.setdefault(key.strip().lower(), value.strip())
    except OSError:
        pass
    return fields


def cpu_model() -> str:
    """The CPU's marketing name, from /proc/cpuinfo where there is one."""
    info = _cpuinfo()
    return info.get("model name") or info.get("hardware") or platform.processor() or platform.machine() or "unknown-cpu"


def _cpu_flags() -> set[str]:
    info = _cpuinfo()
    return set((info.get("flags") or info.get("features") or "").split())  # x86 "flags", ARM "Features"


@functools.lru_cache(maxsize=1)
def cpu_isa() -> str:
    """The kernels torch's CPU backend dispatches to here: ``AVX512+avx512_bf16+avx512_fp16``.

    Without torch, the kernels it would choose (``expected_capability``): a suite that installs torch
    later keeps its device class.
    """
    if have_torch():
        import torch

        capability = str(torch.backends.cpu.get_cpu_capability())
    else:
        capability = expected_capability()
    flags = _cpu_flags()
    return "+".join([capability, *(f for f in device_class.NATIVE_LOW_PRECISION if f in flags)])


# The key baselines are filed under: runners of one class compare with each other only.
device_class_for = device_class.class_for


def cpu_kernels() -> str:
    """The kernel tag of this CPU's class: ``avx512-bf16-fp16`` (device_class.kernel_tag of ``cpu_isa()``)."""
    return device_class.kernel_tag_of_isa(cpu_isa())


_ENV_CAPABILITY = {"default": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512", "sve256": "SVE256"}


def expected_cpu_kernels() -> str:
    """``cpu_kernels()`` without importing torch (for the session header), as aten's DispatchStub chooses."""
    if "torch" in sys.modules:
        return cpu_kernels()
    return device_class.kernel_tag(expected_capability(), _cpu_flags())


def expected_capability() -> str:
    """The CPU capability aten's DispatchStub picks here (``ATEN_CPU_CAPABILITY``, else the CPU's flags)."""
    flags = _cpu_flags()
    capability = _ENV_CAPABILITY.get(os.environ.get("ATEN_CPU_CAPABILITY", "").lower())
    if capability is not None:
        return capability
    if {"avx512vl", "avx512bw", "avx512dq", "fma"} <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "DEFAULT"


# The wheels a CUDA (or ROCm) build of torch loads its BLAS and its Triton from, newest naming first.
CUBLAS_DISTRIBUTIONS = ("nvidia-cublas", "nvidia-cublas-cu12", "nvidia-cublas-cu11")
TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "triton-rocm")
GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def distribution_version(names: Iterable[str]) -> str | None:
    """The version of the first of ``names`` installed (its metadata only: nothing is imported), else None."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def format_cudnn_version(version: int) -> str:
    """torch.backends.cudnn.version()'s integer as cuDNN spells it: 90100 -> 9.1.0, 8907 -> 8.9.7.

    cuDNN 9 counts major * 10000 + minor * 100 + patch; cuDNN 8 and older major * 1000 + minor * 100 + patch.
    """
    major, rest = divmod(version, 10000 if version >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def cpu_governor(path: Path = GOVERNOR) -> str | None:
    """The frequency governor of the first CPU (``performance``, ``powersave``...), where the kernel exposes it."""
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _gpu_libraries() -> dict[str, str]:
    """cuDNN (as torch loaded it), cuBLAS (its wheel) and ROCm's HIP, where known: they move a GPU's timings."""
    import torch

    found: dict[str, str] = {}
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:  # a build without cuDNN, or one whose library cannot load: leave the key out
        cudnn = None
    if cudnn:
        found["cudnn"] = format_cudnn_version(int(cudnn))
    if (cublas := distribution_version(CUBLAS_DISTRIBUTIONS)) is not None:
        found["cublas"] = cublas
    if hip := getattr(torch.version, "hip", None):
        found["hip"] = str(hip)
    return found


def probe_environment(device: torch.device) -> Environment:
    """Describe the machine and the device the session measures on (without torch: its keys are left out)."""
    cpu = cpu_model()
    extra: dict[str, str] = {"cpu_count": str(os.cpu_count() or 0)}
    device_name, cuda, driver, gpu_uuid, torch_version = cpu, None, None, None, None
    if device.type == "cuda":
        import torch

        from pytest_gpuperf.gpu.nvml import probe_device

        index = device.index if device.index is not None else torch.cuda.current_device()
        device_name = torch.cuda.get_device_name(index)
        nvml = probe_device(index)
        extra.update({k: v for k, v in nvml.items() if k not in {"name", "uuid", "driver"}})
        capability = torch.cuda.get_device_capability(index)
        extra["compute_capability"] = f"{capability[0]}.{capability[1]}"
        extra.update(_gpu_libraries())
        cuda, driver, gpu_uuid = torch.version.cuda, nvml.get("driver"), nvml.get("uuid")
    else:
        if have_torch():
            import torch

            extra["torch_threads"] = str(torch.get_num_threads())
        extra["cpu_isa"] = cpu_isa()
        if (governor := cpu_governor()) is not None:
            extra["cpu_governor"] = governor
    if (triton := distribution_version(TRITON_DISTRIBUTIONS)) is not None:
        extra["triton"] = triton
    if have_torch():
        import torch

        torch_version = getattr(torch, "__version__", None)
    kind = "cuda" if device.type == "cuda" else "cpu"
    return Environment(
        device_class=device_class_for(kind, device_name, cpu_kernels() if kind == "cpu" else None),
        device_type=kind,
        device_name=device_name,
        cpu_model=cpu,
        python=platform.python_version(),
        torch=torch_version,
        cuda=cuda,
        driver=driver,
        gpu_uuid=gpu_uuid,
        platform=sys.platform,
        extra=extra,
    )


@dataclass(frozen=True)
class EnvFact:
    """One thing an environment records that can move a figure while the device class stays the same."""

    label: str  # as reports name it: "driver", "cuDNN", "power limit"
    read: Callable[[Environment], str | None]
    unit: str = ""


def _field(name: str) -> Callable[[Environment], str | None]:
    return lambda env: getattr(env, name)


def _extra(key: str) -> Callable[[Environment], str | None]:
    return lambda env: env.extra.get(key)


# What ``environment_changes`` compares, in the order reports list it: the software stack from the driver
# up, then the GPU's settings (NVML: applications and maximum clocks, whether an administrator locked
# them, the power limit; never the current clock or temperature, which move with the load), then the
# host (the CPU, its governor, torch's kernels and threads on it).
DRIFT_FACTS: tuple[EnvFact, ...] = (
    EnvFact("driver", _field("driver")),
    EnvFact("CUDA runtime", _field("cuda")),
    EnvFact("HIP", _extra("hip")),
    EnvFact("torch", _field("torch")),
    EnvFact("cuDNN", _extra("cudnn")),
    EnvFact("cuBLAS", _extra("cublas")),
    EnvFact("triton", _extra("triton")),
    EnvFact("Python", _field("python")),
    EnvFact("SM applications clock", _extra("sm_app_clock_mhz"), " MHz"),
    EnvFact("memory applications clock", _extra("mem_app_clock_mhz"), " MHz"),
    EnvFact("SM max clock", _extra("sm_max_clock_mhz"), " MHz"),
    EnvFact("clocks locked", _extra("clocks_locked")),
    EnvFact("power limit", _extra("power_limit_w"), " W"),
    EnvFact("CPU", _field("cpu_model")),
    EnvFact("CPU governor", _extra("cpu_governor")),
    EnvFact("CPU kernels", _extra("cpu_isa")),
    EnvFact("torch threads", _extra("torch_threads")),
)


@dataclass(frozen=True)
class EnvChange:
    """One fact of ``DRIFT_FACTS`` that differs between two environments."""

    label: str
    before: str
    after: str
    unit: str = ""

    def __str__(self) -> str:
        return f"{self.label} {self.before}{self.unit} -> {self.after}{self.unit}"


def environment_changes(before: Environment, after: Environment) -> tuple[EnvChange, ...]:
    """The facts of ``DRIFT_FACTS`` both environments recorded and that differ, in that order.

    A fact one side did not record (an entry written before it was probed, NVML unavailable on one
    runner) is no change anyone can state, so it is left out.
    """
    changes = []
    for fact in DRIFT_FACTS:
        old, new = fact.read(before), fact.read(after)
        if old is not None and new is not None and old != new:
            changes.append(EnvChange(fact.label, old, new, fact.unit))
    return tuple(changes)


def describe_drift(baseline: Environment | None, current: Environment) -> str | None:
    """A note when the baseline was taken on the same device class in another environment (``DRIFT_FACTS``)."""
    if baseline is None or baseline.device_class != current.device_class:
        return None
    changed = environment_changes(baseline, current)
    if not changed:
        return None
    return "environment changed since the baseline: " + ", ".join(map(str, changed))

"""Best-effort environment probes. A probe that fails leaves its field empty; it never fails a run."""

from __future__ import annotations

import functools
import os
import platform
import sys
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
        cuda, driver, gpu_uuid = torch.version.cuda, nvml.get("driver"), nvml.get("uuid")
    else:
        if have_torch():
            import torch

            extra["torch_threads"] = str(torch.get_num_threads())
        extra["cpu_isa"] = cpu_isa()
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


# Fields whose change can move timings while the device class stays the same.
_DRIFT_FIELDS = ("torch", "cuda", "driver", "python")


def describe_drift(baseline: Environment | None, current: Environment) -> str | None:
    """A note when the baseline was taken on the same device class with other software versions."""
    if baseline is None or baseline.device_class != current.device_class:
        return None
    changed = [
        f"{name} {getattr(baseline, name)} -> {getattr(current, name)}"
        for name in _DRIFT_FIELDS
        if getattr(baseline, name) != getattr(current, name) and getattr(baseline, name) is not None
    ]
    before, now = baseline.extra.get("cpu_isa"), current.extra.get("cpu_isa")
    if before and now and before != now:  # entries written before it was recorded have none
        changed.append(f"CPU kernels {before} -> {now}")
    if not changed:
        return None
    return "environment changed since the baseline: " + ", ".join(changed)

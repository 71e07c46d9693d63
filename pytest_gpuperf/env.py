"""Best-effort environment probes. A probe that fails leaves its field empty; it never fails a run."""

from __future__ import annotations

import functools
import os
import platform
import re
import sys
from typing import TYPE_CHECKING

from pytest_gpuperf.model import Environment

if TYPE_CHECKING:
    import torch


def slug(text: str) -> str:
    """Lower-case, dash-separated, filesystem-safe: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return cleaned or "unknown"


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """/proc/cpuinfo's fields, keys lower-cased, the first CPU's value of each (empty where there is none).

    The whole file is read: on ARM, ``Hardware`` follows the last CPU's block.
    """
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


# CPU features that give torch's low-precision kernels a native path: a bfloat16 autocast step
# runs several times faster with them, on a CPU whose model name reads the same.
_NATIVE_LOW_PRECISION = ("avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16", "amx_int8")


@functools.lru_cache(maxsize=1)
def cpu_isa() -> str:
    """The kernels torch's CPU backend dispatches to here: its capability, plus native low-precision features.

    ``AVX512+avx512_bf16+avx512_fp16``; a VM's masked model name ("AMD EPYC") does not tell them apart.
    """
    import torch

    capability = str(torch.backends.cpu.get_cpu_capability())
    flags = set(_cpuinfo().get("flags", "").split())
    return "+".join([capability, *(f for f in _NATIVE_LOW_PRECISION if f in flags)])


def device_class_for(device_type: str, device_name: str) -> str:
    """The key baselines are filed under: runners of one class compare with each other only."""
    return f"{device_type}-{slug(device_name)}"


def probe_environment(device: torch.device) -> Environment:
    """Describe the machine and the device the session measures on."""
    import torch

    cpu = cpu_model()
    extra: dict[str, str] = {"cpu_count": str(os.cpu_count() or 0)}
    device_name, cuda, driver, gpu_uuid = cpu, None, None, None
    if device.type == "cuda":
        from pytest_gpuperf.gpu.nvml import probe_device

        index = device.index if device.index is not None else torch.cuda.current_device()
        device_name = torch.cuda.get_device_name(index)
        nvml = probe_device(index)
        extra.update({k: v for k, v in nvml.items() if k not in {"name", "uuid", "driver"}})
        capability = torch.cuda.get_device_capability(index)
        extra["compute_capability"] = f"{capability[0]}.{capability[1]}"
        cuda, driver, gpu_uuid = torch.version.cuda, nvml.get("driver"), nvml.get("uuid")
    else:
        extra["torch_threads"] = str(torch.get_num_threads())
        extra["cpu_isa"] = cpu_isa()
    kind = "cuda" if device.type == "cuda" else "cpu"
    return Environment(
        device_class=device_class_for(kind, device_name),
        device_type=kind,
        device_name=device_name,
        cpu_model=cpu,
        python=platform.python_version(),
        torch=getattr(torch, "__version__", None),
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

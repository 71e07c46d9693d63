"""Device classes: the key that decides which baselines a run compares with.

A GPU's class is its model (``cuda-nvidia-h100-80gb-hbm3``). A CPU's timings depend
on the kernels torch picks from its capability and native low-precision features,
which a VM's masked model name hides; so a CPU class is the model name and the
kernels joined by ``--``, as ``cpu-amd-epyc--avx512-bf16``. Older CPU classes
without a kernel part are never comparable with one that has it.
"""

from __future__ import annotations

import re

KERNEL_SEPARATOR = "--"

# CPU features (x86 and ARM spellings) that give torch a native low-precision path, and their tags.
NATIVE_LOW_PRECISION = {
    "avx512_bf16": "bf16",
    "avx512_fp16": "fp16",
    "amx_bf16": "amxbf16",
    "amx_fp16": "amxfp16",
    "amx_int8": "amxint8",
    "bf16": "bf16",  # ARMv8.6 BFloat16
    "i8mm": "i8mm",
}


def slug(text: str) -> str:
    """Lower-case, dash-separated, filesystem-safe: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return cleaned or "unknown"


def kernel_tag(capability: str, flags: set[str] | frozenset[str]) -> str:
    """``AVX512`` with ``{avx512_bf16, avx512_fp16}`` -> ``avx512-bf16-fp16`` (features in a fixed order)."""
    natives = dict.fromkeys(tag for flag, tag in NATIVE_LOW_PRECISION.items() if flag in flags)
    return "-".join([slug(capability), *natives])


def kernel_tag_of_isa(cpu_isa: str) -> str:
    """The tag of an environment's recorded ``cpu_isa`` (``AVX512+avx512_bf16`` -> ``avx512-bf16``)."""
    capability, *features = cpu_isa.split("+")
    return kernel_tag(capability, set(features))


def class_for(device_type: str, device_name: str, kernels: str | None = None) -> str:
    """The class of a device; a CPU's includes its kernel tag where it is known."""
    base = f"{device_type}-{slug(device_name)}"
    if device_type != "cpu" or not kernels:
        return base
    return f"{base}{KERNEL_SEPARATOR}{kernels}"


def split(device_class: str) -> tuple[str, str | None]:
    """(the device part, the kernel tag or None): ``cpu-amd-epyc--avx2`` -> ``("cpu-amd-epyc", "avx2")``."""
    base, sep, kernels = device_class.partition(KERNEL_SEPARATOR)
    return (base, kernels) if sep else (device_class, None)


def is_cpu(device_class: str) -> bool:
    return device_class.startswith("cpu-")


def why_not_comparable(there: str, here: str) -> str:
    """What makes a baseline of class ``there`` no reference for a run of class ``here``."""
    there_base, there_kernels = split(there)
    here_base, here_kernels = split(here)
    if not (is_cpu(there) and is_cpu(here)):
        return f"baseline recorded on device class {there}, this run is {here}"
    if there_base != here_base:
        return f"baseline recorded on another CPU ({there}), this run is {here}"
    if there_kernels is None:
        return (
            f"baseline recorded on device class {there} before CPU kernels were part of it, so which kernels "
            f"ran there is unknown; this run's torch dispatches to {here_kernels}"
        )
    return (
        f"other CPU kernels: the baseline ran torch's {there_kernels} kernels ({there}), "
        f"this run {here_kernels} ({here})"
    )

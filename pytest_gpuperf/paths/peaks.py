"""Peak throughput of a device: a datasheet table, or a calibration measured on the spot.

Table values are dense boost-clock peaks from the datasheet each row names (A10G: the A10's
figures with AWS's 600 GB/s; RTX 4090: tensor rates with fp32 accumulate, as PyTorch uses).
``fp32`` is the non-tensor-core rate. Devices not listed (every CPU) are calibrated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from pytest_gpuperf.paths._torch import elapsed_ns


@dataclass(frozen=True)
class DevicePeaks:
    """Peak rates of one device: TFLOP/s per dtype and memory GB/s."""

    name: str
    tflops: dict[str, float]  # "bf16", "fp16", "tf32", "fp32" (and "fp64" where known)
    memory_gbps: float
    source: str  # "datasheet: ..." or "calibrated: ..."

    def peak_tflops(self, dtype: torch.dtype | str) -> float:
        key = dtype_key(dtype)
        try:
            return self.tflops[key]
        except KeyError:
            raise KeyError(f"{self.name}: no {key} peak known (have {sorted(self.tflops)})") from None


_DTYPE_KEYS = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float64: "fp64"}


def dtype_key(dtype: torch.dtype | str) -> str:
    """``torch.bfloat16`` -> ``"bf16"``; strings pass through."""
    if isinstance(dtype, str):
        return dtype
    try:
        return _DTYPE_KEYS[dtype]
    except KeyError:
        raise KeyError(f"no peak table column for {dtype}; use one of {sorted(_DTYPE_KEYS.values())}") from None


def _peaks(
    name: str, bf16: float | None, fp16: float, tf32: float | None, fp32: float, gbps: float, source: str
) -> DevicePeaks:
    rates = {"bf16": bf16, "fp16": fp16, "tf32": tf32, "fp32": fp32}
    tflops = {key: rate for key, rate in rates.items() if rate is not None}
    return DevicePeaks(name, tflops, gbps, f"datasheet: {source}")


# (pattern on the device name, peaks): the first match wins, so more specific names come first.
PEAK_TABLE: tuple[tuple[re.Pattern[str], DevicePeaks], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), peaks)
    for pattern, peaks in [
        # GH200 (Grace Hopper) is another memory system: left to calibration, not matched as H200.
        (r"(?<!G)H200 NVL", _peaks("H200 NVL", 835, 835, 418, 60, 4800, "NVIDIA H200 datasheet, NVL")),
        (r"(?<!G)H200", _peaks("H200 SXM", 989, 989, 494, 67, 4800, "NVIDIA H200 datasheet, SXM")),
        (r"H100 NVL", _peaks("H100 NVL", 835, 835, 418, 60, 3900, "NVIDIA H100 datasheet, NVL")),
        (r"H100.*PCIe", _peaks("H100 PCIe", 756, 756, 378, 51, 2000, "NVIDIA H100 datasheet, PCIe")),
        (r"H100", _peaks("H100 SXM", 989, 989, 494, 67, 3350, "NVIDIA H100 datasheet, SXM5")),
        (r"A100.*80GB.*PCIe", _peaks("A100 80GB PCIe", 312, 312, 156, 19.5, 1935, "NVIDIA A100 datasheet")),
        (r"A100.*80GB", _peaks("A100 80GB SXM", 312, 312, 156, 19.5, 2039, "NVIDIA A100 datasheet")),
        (r"A100.*PCIE", _peaks("A100 40GB PCIe", 312, 312, 156, 19.5, 1555, "NVIDIA A100 datasheet")),
        (r"A100", _peaks("A100 40GB SXM", 312, 312, 156, 19.5, 1555, "NVIDIA A100 datasheet")),
        (r"L40S", _peaks("L40S", 362, 362, 183, 91.6, 864, "NVIDIA L40S datasheet")),
        (r"L40\b", _peaks("L40", 181, 181, 90.5, 90.5, 864, "NVIDIA L40 datasheet")),
        (r"\bL4\b", _peaks("L4", 121, 121, 60, 30.3, 300, "NVIDIA L4 datasheet")),
        (r"A10G", _peaks("A10G", 125, 125, 62.5, 31.2, 600, "NVIDIA A10 datasheet + AWS G5 (approximate)")),
        (r"\bA10\b", _peaks("A10", 125, 125, 62.5, 31.2, 600, "NVIDIA A10 datasheet")),
        (r"RTX 4090", _peaks("RTX 4090", 165.2, 165.2, 82.6, 82.6, 1008, "NVIDIA Ada architecture whitepaper")),
        (r"V100S", _peaks("V100S PCIe", None, 130, None, 16.4, 1134, "NVIDIA V100S datasheet")),
        (r"V100.*PCIE", _peaks("V100 PCIe", None, 112, None, 14, 900, "NVIDIA V100 datasheet, PCIe")),
        (r"V100", _peaks("V100 SXM2", None, 125, None, 15.7, 900, "NVIDIA V100 datasheet, SXM2")),
        (r"\bT4\b", _peaks("T4", None, 65, None, 8.1, 320, "NVIDIA T4 datasheet")),
    ]
)


def lookup(device_name: str) -> DevicePeaks | None:
    """The table's peaks for a device name (``torch.cuda.get_device_name`` or NVML), or None."""
    return next((peaks for pattern, peaks in PEAK_TABLE if pattern.search(device_name)), None)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return f"{device.type} ({torch.get_num_threads()} threads)"


def _best_seconds(fn: Callable[[], object], device: torch.device, reps: int) -> float:
    """The fastest of ``reps`` timed calls: a peak wants the least disturbed run."""
    fn()  # warm-up (allocator, kernel selection)
    return min((elapsed_ns(fn, device) for _ in range(reps)), default=float("inf")) / 1e9


_CALIBRATED: dict[tuple[str, str], DevicePeaks] = {}


def calibrate(
    device: torch.device,
    dtype: torch.dtype = torch.float32,
    *,
    matmul_n: int | None = None,
    copy_bytes: int | None = None,
    reps: int = 3,
) -> DevicePeaks:
    """Measure the attainable peak on ``device``: an ``n x n`` matmul and a copy (moving ``2 * copy_bytes``).

    With the default sizes (saturating the device kind quickly) the result is cached per (device, dtype).
    """
    key = (str(device), dtype_key(dtype))
    if key in _CALIBRATED and matmul_n is None and copy_bytes is None:
        return _CALIBRATED[key]
    gpu = device.type == "cuda"
    n = matmul_n or (8192 if gpu else 1024)
    nbytes = copy_bytes or ((1 << 30) if gpu else (64 << 20))
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    matmul_s = _best_seconds(lambda: torch.mm(a, b), device, reps)
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src), device, reps)
    peaks = DevicePeaks(
        name=device_name(device),
        tflops={key[1]: 2 * n**3 / matmul_s / 1e12},
        memory_gbps=2 * src.numel() * 4 / copy_s / 1e9,
        source=f"calibrated: {n}x{n} {key[1]} matmul and a {nbytes >> 20} MiB copy, best of {reps}",
    )
    if matmul_n is None and copy_bytes is None:
        _CALIBRATED[key] = peaks
    return peaks


def device_peaks(device: torch.device, dtype: torch.dtype | str = torch.float32) -> DevicePeaks:
    """The table's peaks for ``device`` where it is listed (and has ``dtype``), else a calibration."""
    key = dtype_key(dtype)
    if device.type == "cuda":
        found = lookup(device_name(device))
        if found is not None and key in found.tflops:
            return found
    torch_dtype = next((d for d, k in _DTYPE_KEYS.items() if k == key), None)
    if torch_dtype is None:
        raise KeyError(
            f"no {key} peak for {device_name(device)}: not in the table, and only "
            f"{sorted(_DTYPE_KEYS.values())} can be calibrated"
        )
    return calibrate(device, torch_dtype)

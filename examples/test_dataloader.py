"""DataLoader throughput: worker processes against the main process, pinned memory on CUDA."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.utils.data import DataLoader, Dataset
from workloads import Sizes, planted

from pytest_gpuperf.paths import Bench


class SyntheticImages(Dataset[tuple[torch.Tensor, int]]):
    """uint8 images decoded and augmented on the fly: CPU work per sample, as in real input pipelines."""

    def __init__(self, n: int, image: int, work: int) -> None:
        self.n, self.image, self.work = n, image, work

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        raw = torch.randint(0, 256, (3, self.image + 8, self.image + 8), dtype=torch.uint8, generator=g)
        x = raw.float()
        out = x
        for _ in range(self.work):  # crop, flip, normalize: repeated to stand for a JPEG decode
            top, left = (int(v) for v in torch.randint(0, 8, (2,), generator=g))
            crop = x[:, top : top + self.image, left : left + self.image].flip(-1)
            out = (crop / 255.0 - 0.45) / 0.225
        return out, i % 10


def consume(loader: DataLoader[tuple[torch.Tensor, int]], device: torch.device) -> Callable[[], None]:
    def epoch() -> None:
        for images, _ in loader:
            images.to(device, non_blocking=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return epoch


# Batches from worker processes arrive when the workers finish them, so how many sit in the
# main process at once (the peak memory) depends on scheduling; gate it loosely.
@pytest.mark.gpuperf(memory_threshold=1.0)
def test_loader_workers(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    work = 16 if planted("slow_loader") else 4
    data = SyntheticImages(sizes.loader_samples, 64 if device.type == "cpu" else 224, work)
    pin = device.type == "cuda"
    serial = DataLoader(data, batch_size=sizes.loader_batch, num_workers=0, pin_memory=pin)
    parallel = DataLoader(
        data,
        batch_size=sizes.loader_batch,
        num_workers=sizes.loader_workers,
        pin_memory=pin,
        persistent_workers=True,
        prefetch_factor=4,
    )
    main = gpu_bench.measure(consume(serial, device), name="dataloader.main_process", items=len(data))
    workers = gpu_bench.measure(consume(parallel, device), name="dataloader.workers", items=len(data))
    gpu_bench.metric(
        "worker_speedup",
        main.stats.median_ns / workers.stats.median_ns,
        unit="x",
        measurement=workers.name,
        # Recorded, not gated: the speedup of worker processes is a figure of the host's CPU
        # scheduling, and on the 16-core H100 host it moved 19.6% between two unchanged runs.
        # The two times are gated (noise-aware) instead.
        tolerance=None,
        description=f"{sizes.loader_workers} workers against loading in the main process, pin_memory={pin}",
    )

"""A conv-heavy CNN training step: the workload the seed tutorial profiles (conv2d ~70% of time)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from workloads import Sizes, SmallResNet, train_step

from pytest_gpuperf.paths import Bench


def test_resnet_training_step(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    model = SmallResNet(sizes.cnn_widths).to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(sizes.cnn_batch, 3, sizes.cnn_image, sizes.cnn_image, device=device)
    labels = torch.randint(0, 10, (sizes.cnn_batch,), device=device)
    step = train_step(model, optimizer, lambda out: F.cross_entropy(out, labels), images)

    m = gpu_bench.measure(step, name="cnn.train_step", items=sizes.cnn_batch)
    assert m.samples_ns, "the training step was not measured"


def test_resnet_inference_channels_last(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    """channels_last lets cuDNN pick NHWC kernels (tensor cores); the speedup is gated."""
    model = SmallResNet(sizes.cnn_widths).to(device).eval()
    images = torch.randn(sizes.cnn_batch, 3, sizes.cnn_image, sizes.cnn_image, device=device)
    fast = SmallResNet(sizes.cnn_widths).to(device).eval().to(memory_format=torch.channels_last)
    fast.load_state_dict(model.state_dict())
    images_cl = images.contiguous(memory_format=torch.channels_last)

    with torch.inference_mode():
        nchw = gpu_bench.measure(model, (images,), name="cnn.nchw", items=sizes.cnn_batch)
        nhwc = gpu_bench.measure(fast, (images_cl,), name="cnn.channels_last", items=sizes.cnn_batch)
        torch.testing.assert_close(fast(images_cl), model(images), rtol=1e-3, atol=1e-3)
    gpu_bench.metric(
        "speedup",
        nchw.stats.median_ns / nhwc.stats.median_ns,
        unit="x",
        measurement=nhwc.name,
        tolerance=sizes.ratio_tolerance,
        description="NCHW median / channels_last median",
    )

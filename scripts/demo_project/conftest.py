"""Perf-suite settings a team on shared CPU runners would keep in its conftest."""

from __future__ import annotations

import torch

# On a shared CPU runner, OpenMP threads fighting other processes for cores make
# timings depend on the scheduler more than on the code; one thread per process
# keeps the measured work the same from run to run. GPU runners are unaffected:
# the timed work runs on the device.
if not torch.cuda.is_available():
    torch.set_num_threads(1)

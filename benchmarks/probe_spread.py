"""The speed probe's own spread on this host: its readings across fresh processes, and slowest over fastest.

    python benchmarks/probe_spread.py --processes 8 --readings 4

Each process imports torch, then takes ``--readings`` probes (measure/host/cpu/speed_probe.py)
back to back, as a session does between tests. The table shows every reading and
the spread the slow-machine rule would judge a later reading against (docs/statistics.md).
Run it on a quiet host to see the spread the rule must not call a slow machine.
It is a benchmark, not a test: CI does not run it.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from collections.abc import Sequence

CHILD = """
import json, torch
from pytest_gpuperf.measure.host.cpu.speed_probe import measure_speed_probe
print(json.dumps([measure_speed_probe(torch.device("cpu")) for _ in range({n})]))
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--readings", type=int, default=4)
    args = parser.parse_args(argv)
    from pytest_gpuperf.measure.host.cpu.speed_probe import probe_spread

    every: list[float] = []
    for i in range(args.processes):
        out = subprocess.run([sys.executable, "-c", CHILD.format(n=args.readings)], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
        readings = [float(r) for r in json.loads(out) if r is not None]
        every += readings
        print(f"process {i + 1}: " + "  ".join(f"{r / 1000:.2f} us" for r in readings), flush=True)
    import torch

    print(f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{len(every)} readings in {args.processes} processes")  # fmt: skip
    spread = probe_spread(every)
    first = probe_spread(every[:: args.readings])
    print(f"spread (slowest / fastest): x{spread:.3f}" if spread else "spread: fewer than two readings")
    if first:
        print(f"spread of each process's first reading: x{first:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Seconds until a wave of confirmation pairs is ready: workers started one by one, or forked from a zygote.

    python benchmarks/pair_start.py --pairs 3 --rounds 10

Writes the detection benchmark's suite to a temporary folder and, alternating, starts
``--pairs`` pairs of compare-ref workers in it the way a confirmation's first wave does:
each worker from a zygote of its own (every one imports torch, as a started process); forked
from a zygote started with the wave (``twins.Zygote``: one import for the wave); or forked
from a zygote that had imported torch before (a session's: started before collection by
``engines/compare_ref/prestart.py``). ``--preload`` compares instead a warm zygote that preloaded the
pytest plugins (``twins.preload_plugins``) with one that did not. It times the wave from the first
start to the last worker's HELLO (tests collected), then stops the workers.
A benchmark, not a test: CI does not run it. Results: docs/detection.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import detection  # the suite

from pytest_gpuperf.workers.protocol import HeadChannel
from pytest_gpuperf.workers.remote import RemoteSide, WorkerLaunch
from pytest_gpuperf.workers.twins import ENV_NO_PRELOAD, Zygote


def _launch(root: Path, name: str) -> WorkerLaunch:
    return WorkerLaunch(
        cwd=root, import_roots=(root,), files=("gp/test_gp.py",), device="cpu", pin_cpu=None,
        basetemp=root / "scratch" / f"basetemp-{name}", log_path=root / "scratch" / f"{name}.log", time_only=True,
    )  # fmt: skip


def one_by_one(root: Path, pairs: int) -> list[HeadChannel]:
    names = [f"{side}-{j}" for j in range(pairs) for side in ("head", "base")]
    zygotes = [_zygote(root) for _ in names]  # all importing at once: a fork waits for its zygote's import
    return [zygote.fork(_launch(root, name))[0] for zygote, name in zip(zygotes, names, strict=True)]


def fork_wave(zygote: Zygote, root: Path, pairs: int) -> list[HeadChannel]:
    return [c for j in range(pairs) for c in zygote.fork(_launch(root, f"head-{j}"), _launch(root, f"base-{j}"))]


def new_zygote(root: Path, pairs: int) -> list[HeadChannel]:
    return fork_wave(_zygote(root), root, pairs)


def warm_zygote(root: Path, pairs: int) -> list[HeadChannel]:
    return fork_wave(_WARM[root], root, pairs)


def warm_unloaded(root: Path, pairs: int) -> list[HeadChannel]:
    return fork_wave(_WARM[root], root, pairs)


_WARM: dict[Path, Zygote] = {}
_STARTED: list[Zygote] = []


def _zygote(root: Path) -> Zygote:
    _STARTED.append(Zygote(root / "scratch"))
    _STARTED[-1].start()
    return _STARTED[-1]


def time_wave(start: Callable[[Path, int], list[HeadChannel]], root: Path, pairs: int) -> float:
    if start in (warm_zygote, warm_unloaded):  # started and done importing before the clock starts
        if start is warm_unloaded:
            os.environ[ENV_NO_PRELOAD] = "1"
        try:
            _WARM[root] = _zygote(root)
            RemoteSide(_WARM[root].fork(_launch(root, "probe"))[0], "bench").close()
        finally:
            os.environ.pop(ENV_NO_PRELOAD, None)
    began = time.perf_counter()
    sides = [RemoteSide(channel, "bench") for channel in start(root, pairs)]
    for side in sides:
        side.wait_ready()
    ready = time.perf_counter() - began
    for side in sides:
        side.request_stop()
    for side in sides:
        side.wait_stopped()
    while _STARTED:
        _STARTED.pop().close()
    return ready


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--preload", action="store_true", help="only a warm zygote, with and without preloading")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gpuperf-pair-start-"))
    detection.write_suite(root, 0)
    ways = {"one by one": one_by_one, "new zygote": new_zygote, "warm zygote": warm_zygote}
    if args.preload:
        ways = {"warm zygote, plugins preloaded": warm_zygote, "warm zygote, none preloaded": warm_unloaded}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for i in range(args.rounds):
        for name in list(ways) if i % 2 == 0 else list(reversed(ways)):  # each way early and late alike
            seconds[name].append(time_wave(ways[name], root, args.pairs))
            print(f"round {i + 1} {name}: {seconds[name][-1]:.2f}s", flush=True)
    for name, values in seconds.items():
        print(
            f"{name}: {args.pairs} pairs ready in {statistics.median(values):.2f}s by the median "
            f"({min(values):.2f}-{max(values):.2f}, {len(values)} waves)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

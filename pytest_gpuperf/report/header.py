"""The line that opens a measuring session: its mode, its device, and what it compares with.

``session_header`` gathers the values without importing torch, so a session whose perf tests
never start the device still says what it would compare with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from pytest_gpuperf.config import GpuperfConfig, Mode
from pytest_gpuperf.model import Environment
from pytest_gpuperf.report.text import plain

UNKNOWN_CLASS = "<device class>"  # the baselines' sub-folder, named once the device is probed
COMMIT_DIGITS = 12


def render_header(
    mode: Mode,
    *,
    device: str,
    device_name: str | None = None,
    sm_clock_mhz: int | None = None,
    clocks_locked: bool = False,
    baseline_folder: str | None = None,
    ref: str | None = None,
    ref_commit: str | None = None,
    ref_note: str | None = None,
) -> str | None:
    """``gpuperf: baseline mode on cuda:0 (NVIDIA H100 80GB HBM3, sm clocks 1980 MHz) against baselines/...``.

    ``ref_note``: what the compare-ref commit is beyond its hash (the head's own commit, say).

    ``device``: resolved (``cuda:0``) or, before it is probed (``device_name`` None), as requested
    (``auto``). A smoke session (nothing compared) has no header: None.
    """
    if mode is Mode.SMOKE:
        return None
    where = f"{mode} mode on {_device(device, device_name, sm_clock_mhz, clocks_locked)}"
    if mode is Mode.COMPARE_REF:
        if not ref:
            raise ValueError("a compare-ref header needs the ref")
        facts = [ref_commit[:COMMIT_DIGITS]] if ref_commit else []
        facts += [ref_note] if ref_note else []
        commit = f" ({', '.join(facts)})" if facts else ""
        return f"gpuperf: {where} against {plain(ref)}{commit}"
    if baseline_folder is None:
        raise ValueError(f"a {mode} mode header needs the baseline folder")
    verb = "writing" if mode is Mode.UPDATE else "against"
    return f"gpuperf: {where} {verb} {baseline_folder}"


def _device(device: str, name: str | None, sm_clock_mhz: int | None, locked: bool) -> str:
    if name is None:
        return f"device {device} (probed at the first measurement)"
    facts = [name]
    if sm_clock_mhz is not None:
        facts.append(f"sm clocks {sm_clock_mhz} MHz{' locked' if locked else ''}")
    return f"{device} ({', '.join(facts)})"


def sm_clock(extra: Mapping[str, str]) -> tuple[int | None, bool]:
    """The SM clock the GPU runs kernels at, from NVML's probe, and whether it is locked.

    The applications clock, not the current one: an idle GPU reads its lowest clock.
    """
    raw = extra.get("sm_app_clock_mhz")
    try:
        mhz = int(raw) if raw is not None else None
    except ValueError:
        mhz = None
    return mhz, extra.get("clocks_locked") == "yes"


def session_header(
    config: GpuperfConfig,
    *,
    environment: Environment | None = None,
    device: str | None = None,
    ref_commit: str | None = None,
    ref_note: str | None = None,
) -> str | None:
    """The header for a session from what is known now; nothing here starts torch.

    Before the device is probed (``environment``, ``device``), a ``cpu`` request is named from
    /proc/cpuinfo, any other as given. Without ``ref_commit`` the ref is looked up in git, best effort.
    """
    if config.mode is Mode.SMOKE:
        return None
    name, device_class = None, None
    if environment is not None:
        name, device_class = environment.device_name, environment.device_class
    elif config.device == "cpu":
        from pytest_gpuperf.measure.env import cpu_model, device_class_for, expected_cpu_kernels

        name = cpu_model()
        device_class = device_class_for("cpu", name, expected_cpu_kernels())
    mhz, locked = sm_clock(environment.extra) if environment is not None else (None, False)
    folder = config.baseline_dir
    if folder.is_relative_to(config.rootdir):
        folder = folder.relative_to(config.rootdir)
    commit = ref_commit
    if config.compare_ref and commit is None:
        commit = _resolve(config.rootdir, config.compare_ref)
    return render_header(
        config.mode,
        device=device or config.device,
        device_name=name,
        sm_clock_mhz=mhz,
        clocks_locked=locked,
        baseline_folder=(folder / (device_class or UNKNOWN_CLASS)).as_posix(),
        ref=config.compare_ref,
        ref_commit=commit,
        ref_note=ref_note,
    )


def threshold_lines(config: GpuperfConfig) -> list[str]:
    """Under ``--gpuperf-auto-threshold``, the line that says each test's time threshold is what it resolves."""
    auto = config.auto_threshold
    if auto is None or config.mode is Mode.SMOKE:
        return []
    from pytest_gpuperf.verdict.detectable import POWER

    return [f"gpuperf: time thresholds auto: each test's is the change it can resolve here ({POWER:.0%} of the "
            f"time), within {auto.low:.1%} to {auto.high:.1%}; a test's own threshold beats it"]  # fmt: skip


def retired_settings(config: GpuperfConfig) -> list[str]:
    """A header line per retired setting the session still sets: accepted, and said to do nothing."""
    if config.calibrate == "off":
        return []
    return ["gpuperf: --gpuperf-calibrate / gpuperf_calibrate is retired and has no effect: baseline mode times the "
            "machine's reference work beside every test (docs/statistics.md)"]  # fmt: skip


def _resolve(rootdir: Path, ref: str) -> str | None:
    """The commit ``ref`` names, or None: the compare-ref engine reports a bad ref itself."""
    import git

    with contextlib.suppress(Exception), git.Repo(rootdir, search_parent_directories=True) as repo:
        return str(repo.git.rev_parse("--verify", "--end-of-options", f"{ref}^{{commit}}"))
    return None

"""pytest-benchmark's options and marker under ``--gpuperf``: what each one means here (docs/migration.md).

Honoured, mapped onto pytest-gpuperf's own settings, or ignored with a note that names them and says why.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.config import BenchmarkOptions
from pytest_gpuperf.errors import ConfigError

MARKER = "benchmark"

# Options honoured or mapped: not warned about.
_USED_OPTIONS = (
    "--benchmark-only", "--benchmark-skip", "--benchmark-disable", "--benchmark-enable", "--benchmark-json",
    "--benchmark-max-time", "--benchmark-min-rounds", "--benchmark-precision", "--benchmark-disable-gc",
)  # fmt: skip

_BASELINES = "pytest-gpuperf's baselines replace it (--gpuperf-update-baseline, then --gpuperf)"
_WARMUP = "pytest-gpuperf always warms up until block times settle"
# Why a marker keyword is ignored under --gpuperf; the option of the same name is ignored for the same reason.
_IGNORED_KEYWORDS = {
    "min_time": "blocks of calls are sized for the device's clock",
    "timer": "a custom timer cannot be CUDA-correct; pytest-gpuperf times with CUDA events on a GPU",
    "warmup": _WARMUP,
    "warmup_iterations": "the warm-up is time-based (--gpuperf-warmup-time)",
    "confidence": "the precision target is for the 95% confidence interval of the median",
    "calibration_precision": "blocks of calls are sized for the device's clock",
    "cprofile": "use --gpuperf-profile=DIR for a profile of each measurement",
}
# Why an option is ignored under --gpuperf; an option not listed gets the generic reason.
_IGNORED_OPTIONS = {
    **{f"--benchmark-{name.replace('_', '-')}": reason for name, reason in _IGNORED_KEYWORDS.items()},
    "--benchmark-warmup": f"{_WARMUP} (--gpuperf-warmup-time)",
    "--benchmark-save": _BASELINES,
    "--benchmark-autosave": _BASELINES,
    "--benchmark-save-data": _BASELINES,
    "--benchmark-storage": _BASELINES,
    "--benchmark-compare": _BASELINES,
    "--benchmark-compare-fail": "the gate fails a significant slow-down past --gpuperf-threshold instead",
}
_IGNORED_DEFAULT = "pytest-gpuperf's own reports replace pytest-benchmark's (--gpuperf-json, --gpuperf-html)"

_MAPPED_KEYWORDS = ("max_time", "min_rounds", "precision")
_FIXTURE_KEYWORDS = ("group", "disable_gc")
KNOWN_KEYWORDS = (*_MAPPED_KEYWORDS, *_FIXTURE_KEYWORDS, *_IGNORED_KEYWORDS)


def given_options(config: pytest.Config) -> tuple[str, ...]:
    """The ``--benchmark-*`` options given (command line, PYTEST_ADDOPTS, ini addopts), in order, even as defaults."""
    args = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *config.getini("addopts"),
            *config.invocation_params.args]  # fmt: skip
    return _benchmark_names(args)


def _benchmark_names(args: Sequence[object]) -> tuple[str, ...]:
    names = (str(arg).split("=", 1)[0] for arg in args)
    return tuple(dict.fromkeys(name for name in names if name.startswith("--benchmark-")))


# Said when a project's settings disable benchmarks and --gpuperf measures them anyway.
DISABLE_OVERRIDDEN = (
    "--benchmark-disable (from the ini file's addopts or PYTEST_ADDOPTS) is overridden under --gpuperf: "
    "the benchmarks are measured (give it on the command line to call each once and measure nothing)"
)


@dataclass(frozen=True)
class SessionOptions:
    """The session's ``--benchmark-*`` options as pytest-gpuperf reads them under ``--gpuperf``."""

    given: tuple[str, ...] = ()
    only: bool = False
    skip: bool = False
    disabled: bool = False
    disable_gc: bool = False
    json_path: Path | None = None
    mapped: BenchmarkOptions = field(default_factory=BenchmarkOptions)
    disable_overridden: bool = False  # --benchmark-disable came from the project's settings (DISABLE_OVERRIDDEN)

    @classmethod
    def from_config(cls, config: pytest.Config) -> SessionOptions:
        """Read the options (present while pytest-benchmark is installed); a usage error as pytest-benchmark's."""
        given = given_options(config)

        def option(dest: str, default: Any = None) -> Any:
            return config.getoption(dest, default) if f"--{dest.replace('_', '-')}" in given else default

        only = bool(option("benchmark_only", False))
        disabled = bool(option("benchmark_disable", False)) and not option("benchmark_enable", False)
        # A project that disables benchmarks in its addopts keeps plain `pytest` fast; asking for
        # --gpuperf is asking for measurements, so only the command line's own --benchmark-disable stands.
        overridden = disabled and "--benchmark-disable" not in _benchmark_names(config.invocation_params.args)
        disabled = disabled and not overridden
        if only and disabled:
            raise pytest.UsageError("Can't have both --benchmark-only and --benchmark-disable options.")
        max_time = option("benchmark_max_time")
        json_path = option("benchmark_json")
        return cls(
            given=given,
            only=only,
            skip=bool(option("benchmark_skip", False)) and not only,  # as pytest-benchmark: --only wins
            disabled=disabled,
            disable_overridden=overridden,
            disable_gc=bool(option("benchmark_disable_gc", False)),
            json_path=Path(json_path).absolute() if json_path else None,
            mapped=BenchmarkOptions(
                max_time=None if max_time is None else float(max_time),
                min_rounds=option("benchmark_min_rounds"),
                precision=option("benchmark_precision"),
            ),
        )

    def notes(self) -> list[str]:
        """What the session header says about the ``--benchmark-*`` options: ignored and overridden ones."""
        ignored = [
            f"{name} is ignored under --gpuperf: {_IGNORED_OPTIONS.get(name, _IGNORED_DEFAULT)}"
            for name in self.given
            if name not in _USED_OPTIONS
        ]
        return [*ignored, *([DISABLE_OVERRIDDEN] if self.disable_overridden else [])]


@dataclass(frozen=True)
class MarkerChoice:
    """A test's ``@pytest.mark.benchmark(...)`` as pytest-gpuperf uses it."""

    options: BenchmarkOptions = field(default_factory=BenchmarkOptions)
    group: str | None = None
    disable_gc: bool = False
    notes: tuple[str, ...] = ()

    @classmethod
    def from_item(cls, item: pytest.Item) -> MarkerChoice:
        """The closest ``benchmark`` marker of ``item`` (as pytest-benchmark reads it); ConfigError naming the test."""
        mark = item.get_closest_marker(MARKER)
        if mark is None:
            return cls()
        if mark.args:
            raise ConfigError(f"@pytest.mark.{MARKER} takes keywords only, got positional {mark.args!r}",
                              test_id=item.nodeid)  # fmt: skip
        return cls.from_kwargs(mark.kwargs, test_id=item.nodeid)

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any], *, test_id: str) -> MarkerChoice:
        unknown = sorted(set(kwargs) - set(KNOWN_KEYWORDS))
        if unknown:
            raise ConfigError(
                f"unknown @pytest.mark.{MARKER} keyword(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(KNOWN_KEYWORDS))}",
                test_id=test_id,
            )
        _check_positive(kwargs, "max_time", test_id)
        _check_positive(kwargs, "precision", test_id)
        rounds = kwargs.get("min_rounds")
        if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1):
            raise ConfigError(f"@pytest.mark.{MARKER}(min_rounds=...) must be a positive integer, got {rounds!r}",
                              test_id=test_id)  # fmt: skip
        group = kwargs.get("group")
        return cls(
            options=BenchmarkOptions(
                max_time=kwargs.get("max_time"), min_rounds=rounds, precision=kwargs.get("precision")
            ),
            group=None if group is None else str(group),
            disable_gc=bool(kwargs.get("disable_gc", False)),
            notes=tuple(_ignored_note(name, kwargs[name]) for name in _IGNORED_KEYWORDS if _ignored(name, kwargs)),
        )


def _ignored(name: str, kwargs: Mapping[str, Any]) -> bool:
    """A keyword given with a value that asks for something pytest-gpuperf does not do (warmup=True it does)."""
    return name in kwargs and not (name == "warmup" and kwargs[name])


def _ignored_note(name: str, value: object) -> str:
    return f"@pytest.mark.{MARKER}({name}={value!r}) ignored: {_IGNORED_KEYWORDS[name]}"


def _check_positive(kwargs: Mapping[str, Any], name: str, test_id: str) -> None:
    value = kwargs.get(name)
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0
    ):
        raise ConfigError(f"@pytest.mark.{MARKER}({name}=...) must be a positive number, got {value!r}",
                          test_id=test_id)  # fmt: skip

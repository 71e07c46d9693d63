"""The command-line options a project's own conftest.py adds, repeated in the workers this session starts.

Suites parametrize on such options (``--device=cuda``): a worker collecting without them sees other
test ids, or measures another device. The options are those the initial conftests add to the parser;
the head's values that differ from their defaults are repeated as ``--name=value``.

pytest has no public API listing an option's origin or its argparse action, hence the reads of
``Parser._opt2dest`` and ``OptionGroup.options``; where a pytest version lacks them, workers get none.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

ADDED_KEY = pytest.StashKey[tuple[tuple[str, ...], ...]]()  # option strings per option, conftest-added


def known_options(parser: pytest.Parser) -> frozenset[str]:
    return frozenset(getattr(parser, "_opt2dest", {}))


def remember_added(config: pytest.Config, parser: pytest.Parser, before: frozenset[str]) -> None:
    """Record the options added since ``before`` (by the initial conftests)."""
    added = known_options(parser) - before
    config.stash[ADDED_KEY] = tuple(tuple(arg.names()) for arg in _arguments(parser) if set(arg.names()) & added)


def worker_args(config: pytest.Config) -> tuple[str, ...]:
    """The head's values of the conftest options it changed from their defaults, as worker arguments."""
    added: tuple[tuple[str, ...], ...] = config.stash.get(ADDED_KEY, ())
    wanted = set(added)
    args: list[str] = []
    for argument in _arguments(getattr(config, "_parser", None)):
        names = tuple(argument.names())
        if names in wanted:
            args += _as_args(names, argument.attrs(), type(getattr(argument, "_action", None)).__name__, config)
    return tuple(args)


def _arguments(parser: object) -> Iterator[Any]:
    """The parser's options, read from pytest's private option groups: none where a version lacks them."""
    for group in getattr(parser, "_groups", ()):
        yield from getattr(group, "options", ())


def _as_args(names: tuple[str, ...], attrs: dict[str, Any], action: str, config: pytest.Config) -> list[str]:
    dest = attrs.get("dest")
    value = config.getoption(dest, None) if dest else None
    default = attrs.get("default")
    if not dest or value == default:
        return []
    name = next((n for n in names if n.startswith("--")), names[0])
    if "Count" in action:
        return [name] * (int(value or 0) - int(default or 0))
    if attrs.get("nargs") == 0:  # store_true, store_false, store_const
        return [name]
    if "Append" in action:
        return [f"{name}={v}" for v in list(value or ())[len(default or ()) :]]
    if isinstance(value, list):  # nargs="+" / "*" / N
        return [name, *(str(v) for v in value)]
    return [f"{name}={value}"]

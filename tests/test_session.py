"""The session object: chosen once per session, registered as a plugin, its mode an enum."""

from __future__ import annotations

import pytest

from pytest_gpuperf.config import GpuperfConfig, Mode
from pytest_gpuperf.engines.protocol import Engine
from pytest_gpuperf.plugin.session import STATE_KEY, GpuperfSession


@pytest.mark.parametrize(
    ("args", "mode"),
    [((), Mode.SMOKE), (("--gpuperf",), Mode.BASELINE), (("--gpuperf-update-baseline",), Mode.UPDATE)],
)
def test_the_session_is_registered_as_a_plugin_with_its_mode_chosen_once(
    pytester: pytest.Pytester, args: tuple[str, ...], mode: Mode
) -> None:
    config = pytester.parseconfigure(*args)
    session = config.stash[STATE_KEY]
    assert isinstance(session, GpuperfSession)
    assert config.pluginmanager.get_plugin("gpuperf-session") is session
    assert session.config.mode is mode


def test_the_mode_is_an_enum_that_reads_as_its_word() -> None:
    mode = GpuperfConfig(enabled=True, compare_ref="main").mode
    assert mode is Mode.COMPARE_REF
    assert f"{mode} mode" == "compare-ref mode" and mode == "compare-ref"  # results files keep the word


def test_the_engine_protocol_holds_what_the_fixture_and_the_session_call_and_every_engine_has_it() -> None:
    from pytest_gpuperf.engines.compare_ref.engine import CompareRefEngine
    from pytest_gpuperf.engines.local import LocalEngine
    from pytest_gpuperf.workers.worker import WorkerEngine

    members = {name for name in vars(Engine) if not name.startswith("_")}
    assert members == {"start", "base_commit", "remember", "measure", "evaluate", "close"}
    for engine in (LocalEngine, CompareRefEngine, WorkerEngine):
        assert members <= set(vars(engine)), engine.__name__


def test_the_session_holds_its_engine_only_through_the_protocol() -> None:
    """No field of the session names an engine class: what it calls, it calls on ``Engine``."""
    import dataclasses

    engines = ("LocalEngine", "CompareRefEngine", "WorkerEngine")
    named = {f.name: str(f.type) for f in dataclasses.fields(GpuperfSession) if any(e in str(f.type) for e in engines)}
    assert named == {}


def test_the_session_plugin_is_hashable_so_tests_under_a_nested_conftest_run(pytester: pytest.Pytester) -> None:
    """pluggy keeps plugins in sets when it narrows the hooks to a test's conftests."""
    pytester.mkpydir("sub").joinpath("conftest.py").write_text("VALUE = 1\n")
    pytester.mkpydir("other").joinpath("test_plain.py").write_text("def test_a():\n    assert True\n")
    pytester.path.joinpath("sub", "test_b.py").write_text("def test_b():\n    assert True\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)

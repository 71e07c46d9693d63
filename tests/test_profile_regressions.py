"""Baseline mode: a confirmed regression is profiled and diffed against the profile stored with its entry.

Real pytest runs of the plugin on planted regressions (profile_plants.py): an update
run stores each entry's profile, a run with every regression planted must put the
responsible operator at the top of each diff, and passing tests get none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from profile_plants import DUMP_CONFTEST, MODELS, autocast_is_faster

# Re-measures off: the planted changes are several times the threshold, and the
# confirmation's fresh processes are tested elsewhere.
# the planted regressions are judged as measured on a busy machine too (gpuperf_busy_policy)
GATE = ("--gpuperf-threshold=0.25", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.4", "--gpuperf-remeasure=0",
        "-p", "no:cacheprovider", "--gpuperf-busy-policy=judge")  # fmt: skip
DYNAMO = ("Torch-Compiled Region", "TorchDynamo")


def without_speed_probes(root: Path, drop: tuple[str, ...] = ()) -> None:
    """Take the speed probe out of the written entries (and drop the ``drop`` entries' profiles).

    A shared machine's slow phases are the speed probe's concern (tests/test_fresh_remeasure.py);
    here, with no re-measure waiting for the machine, they would only turn a planted regression
    into "not judged".
    """
    (path,) = (root / "baselines").rglob("*.json")
    document = json.loads(path.read_text())
    for key, entry in document["entries"].items():
        del entry["speed_probe_ns"]
        if key in drop:
            del entry["profile"]
    path.write_text(json.dumps(document))


def diffs(root: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((root / "diffs.json").read_text())
    return result


def test_planted_regressions_put_the_responsible_operator_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_models=MODELS)
    pytester.makeconftest(DUMP_CONFTEST)
    pytester.runpytest_subprocess("--gpuperf-update-baseline", *GATE).assert_outcomes(passed=5)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    assert all(e["profile"]["ops"] for e in json.loads(path.read_text())["entries"].values())
    # test_custom: an entry written before profiles were stored, so the head's profile alone, and a note
    without_speed_probes(pytester.path, drop=("test_models.py::test_custom::default",))

    amp = autocast_is_faster()  # where bf16 autocast is no faster, turning it off is no slowdown
    monkeypatch.setenv("PLANT", "extra,break,custom" + (",amp" if amp else ""))
    result = pytester.runpytest_subprocess("--gpuperf", *GATE)
    result.assert_outcomes(passed=1 if amp else 2, failed=4 if amp else 3)
    found = diffs(pytester.path)

    forward = found["test_forward"]["diff"]
    assert forward["rows"][0] == ["aten::mm", "appeared", True]  # the extra y @ y.T and its @ y
    assert forward["why"][0] == ["aten::mm", "appeared", "cause"]  # against the stored profile's samples
    assert forward["label"] == "baseline" and forward["has_base"]
    compiled = found["test_compiled"]["diff"]["rows"]
    assert compiled[0][0].startswith(DYNAMO), compiled  # the compiled region split in parts
    assert any(name.startswith("Torch-Compiled Region") and status == "appeared" for name, status, _ in compiled)
    custom = found["test_custom"]["diff"]
    assert not custom["has_base"] and "no stored profile" in custom["note"]
    assert custom["rows"][0][0] == "demo::blur"
    if amp:
        assert found["test_amp"]["diff"]["rows"][0][:2] == ["aten::mm", "changed"]  # float32 now

    assert found["test_steady"]["diff"] is None  # passing tests are never profiled
    trace = Path(forward["head_trace"])
    assert trace.parent == pytester.path / ".gpuperf" / "profiles"
    assert "traceEvents" in json.loads(trace.read_text())
    assert forward["base_trace"] is None  # a baseline keeps the table, not a trace
    assert "host_time" not in found["test_forward"]["metrics"]  # the host's own time: CUDA only


def test_the_option_turns_the_profiles_off(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_models=MODELS)
    pytester.makeconftest(DUMP_CONFTEST)
    pytester.makeini("[pytest]\ngpuperf_profile_diff = false\n")
    pytester.runpytest_subprocess("--gpuperf-update-baseline", "-k", "custom", *GATE).assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    assert "profile" not in json.loads(path.read_text())["entries"]["test_models.py::test_custom::default"]
    without_speed_probes(pytester.path)
    monkeypatch.setenv("PLANT", "custom")
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-no-profile-diff", "-k", "custom", *GATE)
    result.assert_outcomes(failed=1)
    assert diffs(pytester.path)["test_custom"]["diff"] is None
    assert not (pytester.path / ".gpuperf").exists()

"""The compact profile a baseline entry keeps: written and read back, optional, checked like the rest."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_baseline_plausible import CLASS, ENV, KEY, TEST_ID, measurement

from pytest_gpuperf.baseline import codec
from pytest_gpuperf.baseline.record import entry_from_measurement
from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.errors import BaselineError
from pytest_gpuperf.model import OpProfile, OpStat, Provenance

PROFILE = OpProfile(
    device_type="cuda", profiled_calls=5, host_ns=41_000.0, device_ns=230_000.0, torch="2.5.1",
    ops=(OpStat("aten::mm", "operator", 1.0, 9_000.0, 200_000.0),
         OpStat("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "kernel", 1.0, 0.0, 200_000.0),
         OpStat("aten::copy_", "operator", 2.0, 3_000.0, 30_000.0)),
)  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> BaselineStore:
    return BaselineStore(tmp_path / "baselines", lock_timeout_s=20)


def test_a_profile_is_written_with_its_entry_and_read_back(store: BaselineStore) -> None:
    m = replace(measurement(), op_profile=PROFILE)
    store.update(CLASS, [entry_from_measurement(m, ENV, Provenance(), noise=0.01, recorded_at=None)])
    loaded = BaselineStore(store.root).load(CLASS, TEST_ID, "default")
    assert loaded is not None and loaded.profile == PROFILE
    on_disk = json.loads(store.file_for(CLASS, TEST_ID).read_text())["entries"][KEY]["profile"]
    assert on_disk["ops"][2] == {"name": "aten::copy_", "kind": "operator", "calls": 2.0, "host_ns": 3000.0,
                                 "device_ns": 30000.0}  # fmt: skip


def test_an_entry_without_a_profile_stays_valid_and_has_no_profile_key(store: BaselineStore) -> None:
    store.update(CLASS, [entry_from_measurement(measurement(), ENV, Provenance(), noise=0.01, recorded_at=None)])
    path = store.file_for(CLASS, TEST_ID)
    assert "profile" not in json.loads(path.read_text())["entries"][KEY]
    loaded = BaselineStore(store.root).load(CLASS, TEST_ID, "default")
    assert loaded is not None and loaded.profile is None


@pytest.mark.parametrize(
    ("edit", "json_path"),
    [
        (lambda p: p["ops"][0].__setitem__("kind", "gpu"), ".profile.ops[0].kind"),
        (lambda p: p["ops"][1].__setitem__("calls", 0), ".profile.ops[1].calls"),
        (lambda p: p.__setitem__("profiled_calls", 0), ".profile.profiled_calls"),
        (lambda p: p.__setitem__("device_ns", None), ".profile.device_ns"),  # a CUDA profile: plausible.py
    ],
    ids=["kind", "calls-0", "profiled-0", "cuda-without-device-time"],
)
def test_a_bad_profile_is_refused_naming_the_file_and_the_path(
    store: BaselineStore, edit: Callable[[dict[str, Any]], object], json_path: str
) -> None:
    m = replace(measurement(), op_profile=PROFILE)
    store.update(CLASS, [entry_from_measurement(m, ENV, Provenance(), noise=0.01, recorded_at=None)])
    path = store.file_for(CLASS, TEST_ID)
    document = json.loads(path.read_text())
    edit(document["entries"][KEY]["profile"])
    path.write_text(json.dumps(document))
    with pytest.raises(BaselineError) as info:
        BaselineStore(store.root).load(CLASS, TEST_ID, "default")
    assert str(path) in str(info.value)
    assert f'$.entries["{KEY}"]{json_path}' in str(info.value)


def test_the_canonical_text_of_an_entry_with_a_profile_is_stable() -> None:
    m = replace(measurement(), op_profile=PROFILE)
    entry = entry_from_measurement(m, ENV, Provenance(), noise=0.01, recorded_at=None)
    once = codec.entry_to_json(entry)
    again = codec.entry_to_json(codec.decode_entry(once, KEY))
    assert once == again


def test_a_profiles_per_call_samples_are_kept_for_the_next_diffs_intervals(store: BaselineStore) -> None:
    sampled = replace(PROFILE, host_samples_ns=(40_000.0, 42_000.0), device_samples_ns=(229_000.0, 231_000.0),
                      ops=(replace(PROFILE.ops[0], host_samples_ns=(8_000.0, 10_000.0),
                                   device_samples_ns=(199_000.0, 201_000.0)), *PROFILE.ops[1:]))  # fmt: skip
    m = replace(measurement(), op_profile=sampled)
    store.update(CLASS, [entry_from_measurement(m, ENV, Provenance(), noise=0.01, recorded_at=None)])
    loaded = BaselineStore(store.root).load(CLASS, TEST_ID, "default")
    assert loaded is not None and loaded.profile == sampled
    on_disk = json.loads(store.file_for(CLASS, TEST_ID).read_text())["entries"][KEY]["profile"]
    assert on_disk["ops"][0]["host_samples_ns"] == [8000.0, 10000.0]
    assert "host_samples_ns" not in on_disk["ops"][2]  # an op without samples is written as before

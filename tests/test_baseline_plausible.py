"""Schema-valid but impossible baseline values are refused like a corrupt file (issue 21, "Bad input").

Each rule is driven through the real store on real files: a good entry is recorded,
one value in the file is replaced by hand, and reading, validating and updating
must all refuse it, naming the file and the JSON path, and leave the file as it is.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run

from pytest_gpuperf.baseline import codec, plausible
from pytest_gpuperf.baseline.record import entry_from_measurement
from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.cli import EXIT_INVALID_INPUT, EXIT_OK
from pytest_gpuperf.config import DEFAULT_MIN_SAMPLES
from pytest_gpuperf.errors import BaselineError
from pytest_gpuperf.model import BaselineEntry, Environment, Measurement, Provenance
from pytest_gpuperf.report.results_json import load_results

CLASS = "cpu-test"
TEST_ID = "tests/test_x.py::test_a"
KEY = f"{TEST_ID}::default"
ENV = Environment(CLASS, "cpu", "cpu", "EPYC", "3.11.7", torch="2.3.0")

Entry = dict[str, Any]


def measurement(n: int = 40, test_id: str = TEST_ID, name: str = "default") -> Measurement:
    samples = tuple(1000.0 * (1 + 0.01 * ((i * 7) % n)) for i in range(n))  # 1000..1390 ns, unsorted
    return Measurement(
        test_id=test_id,
        name=name,
        samples_ns=samples,
        calls_per_sample=4,
        device="cpu",
        timer="perf_counter",
        round_medians_ns=(1190.0, 1200.0, 1210.0),
        calibration_ns=5000.0,
        speed_probe_ns=20000.0,
    )


def entry(n: int = 40, **changes: Any) -> BaselineEntry:
    recorded = entry_from_measurement(measurement(n), ENV, Provenance(commit="c" * 40), noise=0.02, recorded_at=None)
    return replace(recorded, **changes)


@pytest.fixture
def store(tmp_path: Path) -> BaselineStore:
    return BaselineStore(tmp_path / "baselines", lock_timeout_s=20)


def plant(store: BaselineStore, edit: Callable[[Entry], None]) -> Path:
    """Record a good entry, then change it in the file as a hand edit or a bad merge would."""
    store.update(CLASS, [entry()])
    path = store.file_for(CLASS, TEST_ID)
    document = json.loads(path.read_text())
    edit(document["entries"][KEY])
    path.write_text(json.dumps(document, indent=2))
    return path


def set_stat(name: str, value: float) -> Callable[[Entry], None]:
    return lambda e: e["stats"].__setitem__(name, value)


def set_field(name: str, value: object) -> Callable[[Entry], None]:
    return lambda e: e.__setitem__(name, value)


def set_item(name: str, index: int, value: float) -> Callable[[Entry], None]:
    return lambda e: e[name].__setitem__(index, value)


P = f'$.entries["{KEY}"]'


def op(name: str, kind: str = "operator") -> Entry:
    return {"name": name, "kind": kind, "calls": 1.0, "host_ns": 100.0, "device_ns": 0.0}


def profile(device_ns: float | None = None, ops: list[Entry] | None = None) -> Entry:
    return {"device_type": "cpu", "profiled_calls": 5, "host_ns": 1000.0, "device_ns": device_ns,
            "ops": ops or [op("aten::mm")], "torch": "2.3.0"}  # fmt: skip


# (edit, JSON path of the fault, words of the message): one case or more per rule
IMPLAUSIBLE = [
    pytest.param(set_field("noise", 1e9), f"{P}.noise", "noise out of range", id="noise-1e9"),
    pytest.param(set_field("noise", 1.5), f"{P}.noise", "noise 1.5 is not from 0 to 1", id="noise-1.5"),
    pytest.param(set_stat("median_ns", 0.0), f"{P}.stats.median_ns", "a time not positive", id="median-0"),
    pytest.param(set_stat("min_ns", 0.0), f"{P}.stats.min_ns", "a time not positive", id="min-0"),
    pytest.param(set_item("samples_ns", 3, 0.0), f"{P}.samples_ns[3]", "a time not positive", id="sample-0"),
    pytest.param(set_item("round_medians_ns", 1, 0.0), f"{P}.round_medians_ns[1]", "not positive", id="round-0"),
    pytest.param(set_field("calibration_ns", 0.0), f"{P}.calibration_ns", "not positive", id="calibration-0"),
    pytest.param(set_field("speed_probe_ns", 0.0), f"{P}.speed_probe_ns", "not positive", id="probe-0"),
    pytest.param(set_stat("median_ns", 1e300), f"{P}.stats.median_ns", "a time beyond a day", id="median-1e300"),
    pytest.param(set_stat("p99_ns", 9e13), f"{P}.stats.p99_ns", "more than a day", id="p99-beyond-a-day"),
    pytest.param(set_stat("p90_ns", 1050.0), f"{P}.stats.p90_ns", "statistics out of order", id="p90-below-median"),
    pytest.param(set_stat("max_ns", 1300.0), f"{P}.stats.max_ns", "max_ns 1300 is below p99_ns", id="max-below-p99"),
    pytest.param(set_stat("min_ns", 1250.0), f"{P}.stats.median_ns", "below min_ns", id="min-above-median"),
    pytest.param(set_stat("mean_ns", 5000.0), f"{P}.stats.mean_ns", "outside [min_ns, max_ns]", id="mean-above-max"),
    pytest.param(set_stat("iqr_ns", 1e6), f"{P}.stats.iqr_ns", "a spread wider than the range", id="iqr-huge"),
    pytest.param(set_stat("stdev_ns", 1e6), f"{P}.stats.stdev_ns", "wider than the samples' range", id="stdev-huge"),
    pytest.param(
        set_stat("count", DEFAULT_MIN_SAMPLES - 1), f"{P}.stats.count", "too few samples for a verdict", id="count-5"
    ),
    pytest.param(set_stat("count", 1), f"{P}.stats.count", "count 1 is below 6", id="count-1"),
    pytest.param(set_stat("count", 20), f"{P}.samples_ns", "40 samples, but stats.count is 20", id="more-than-count"),
    pytest.param(set_item("samples_ns", 0, 1e7), f"{P}.samples_ns[0]", "outside the stats'", id="sample-above-max"),
    pytest.param(
        lambda e: e.__setitem__("samples_ns", [5e6] * len(e["samples_ns"])),
        f"{P}.samples_ns[0]",
        "samples at odds with the statistics",
        id="samples-of-another-measurement",
    ),
    pytest.param(set_stat("median_ns", 1250.0), f"{P}.stats.median_ns", "differs from the median", id="median-moved"),
    pytest.param(
        set_field("profile", profile(device_ns=5.0)),
        f"{P}.profile.device_ns",
        "a profile at odds with its device",
        id="cpu-profile-with-device-time",
    ),
    pytest.param(
        set_field("profile", profile(ops=[op("sgemm", kind="kernel")])),
        f"{P}.profile.ops[0]",
        "has device time in a CPU profile",
        id="kernel-in-cpu-profile",
    ),
    pytest.param(
        set_field("profile", profile(ops=[op("aten::mm"), op("aten::mm")])),
        f"{P}.profile.ops[1]",
        "a profile row out of place",
        id="op-listed-twice",
    ),
    pytest.param(
        set_field("correction", {"samples_ns": [1e7], "wait_share": 0.4, "uncertainty": 0.01, "source": "schedstat"}),
        f"{P}.correction.samples_ns[0]",
        "a correction at odds with the samples",
        id="corrected-above-the-slowest-sample",
    ),
    pytest.param(
        set_field("correction", {"samples_ns": [1000.0], "wait_share": 0.4, "uncertainty": 3.0, "source": "schedstat"}),
        f"{P}.correction.uncertainty",
        "a correction that uncertain is none",
        id="correction-uncertainty-3",
    ),
]


@pytest.mark.parametrize(("edit", "json_path", "words"), IMPLAUSIBLE)
def test_each_rule_is_refused_on_read_validate_and_update_naming_file_and_path(
    store: BaselineStore, edit: Callable[[Entry], None], json_path: str, words: str
) -> None:
    path = plant(store, edit)
    content = path.read_bytes()
    fresh = BaselineStore(store.root, lock_timeout_s=20)
    with pytest.raises(BaselineError) as info:
        fresh.load(CLASS, TEST_ID, "default")
    error = info.value
    assert error.path == path and error.json_path == json_path
    assert str(path) in str(error) and json_path in str(error) and words in str(error)
    assert plausible.READ_HINT in str(error)
    (listed,) = fresh.validate_tree()
    assert str(listed) == str(error)
    # the store that wrote the good entry has it cached, yet sees the file changed and refuses too
    for writer in (store, fresh):
        with pytest.raises(BaselineError, match=re.escape(words)) as info:
            writer.update(CLASS, [entry()])
        assert info.value.path == path
    assert path.read_bytes() == content  # nothing is lost: a refused file is never replaced


def test_an_entry_beside_the_one_edited_is_what_an_update_adds_and_it_is_still_refused(store: BaselineStore) -> None:
    path = plant(store, set_field("noise", 1e9))
    content = path.read_bytes()
    other = entry_from_measurement(
        measurement(test_id="tests/test_x.py::test_b"), ENV, Provenance(), noise=0.01, recorded_at=None
    )
    with pytest.raises(BaselineError, match="noise out of range"):
        store.update(CLASS, [other])
    assert path.read_bytes() == content


@pytest.mark.parametrize(
    ("changes", "json_path", "words"),
    [
        ({"noise": 3.0}, f"{P}.noise", "noise out of range"),
        ({"calibration_ns": 0.0}, f"{P}.calibration_ns", "a time not positive"),
        ({"round_medians_ns": (1200.0, 0.0)}, f"{P}.round_medians_ns[1]", "a time not positive"),
        ({"samples_ns": (1.0, 2.0)}, f"{P}.samples_ns[0]", "samples at odds with the statistics"),
    ],
)
def test_an_implausible_entry_is_refused_before_it_is_written(
    store: BaselineStore, changes: dict[str, Any], json_path: str, words: str
) -> None:
    path = store.file_for(CLASS, TEST_ID)
    with pytest.raises(BaselineError, match=words) as info:
        store.update(CLASS, [entry(**changes)])
    assert info.value.path == path and info.value.json_path == json_path
    assert plausible.WRITE_HINT in str(info.value)
    assert not path.exists()
    store.update(CLASS, [entry()])
    content = path.read_bytes()
    with pytest.raises(BaselineError, match=words):
        store.update(CLASS, [entry(**changes)])
    assert path.read_bytes() == content  # the good entry stays


def test_a_measurement_of_too_few_samples_cannot_become_a_baseline(store: BaselineStore) -> None:
    path = store.file_for(CLASS, TEST_ID)
    with pytest.raises(BaselineError, match=rf"count {DEFAULT_MIN_SAMPLES - 1} is below {DEFAULT_MIN_SAMPLES}") as info:
        store.update(CLASS, [entry(n=DEFAULT_MIN_SAMPLES - 1)])
    assert info.value.json_path == f"{P}.stats.count" and str(path) in str(info.value)
    store.update(CLASS, [entry(n=DEFAULT_MIN_SAMPLES)])
    assert store.load(CLASS, TEST_ID, "default") is not None


def test_a_version_1_file_is_checked_after_its_migration(store: BaselineStore) -> None:
    good = codec.entry_to_json(entry())
    old_entry = {
        "stats": {**good["stats"], "median_ns": 1e300},
        "samples": good["samples_ns"],
        "calls_per_sample": 4,
        "device": "cpu",
        "timer": "perf_counter",
        "noise": 0.02,
        "calibration_ns": None,
        "peak_allocated_bytes": None,
        "peak_reserved_bytes": None,
        "metrics": {},
        "commit": None,
        "recorded_at": None,
    }
    document = {"schema_version": 1, "device_class": CLASS, "module": "tests/test_x.py", "environment": None,
                "entries": {KEY: old_entry}}  # fmt: skip
    path = store.file_for(CLASS, TEST_ID)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document))
    with pytest.raises(BaselineError, match="a time beyond a day") as info:
        store.load(CLASS, TEST_ID, "default")
    assert info.value.path == path and info.value.json_path == f"{P}.stats.median_ns"


# -- the rules themselves --------------------------------------------------------------


def good_json() -> Entry:
    return codec.entry_to_json(entry())


def test_a_recorded_entry_breaks_no_rule() -> None:
    assert plausible.find_fault(good_json()) is None
    assert plausible.find_fault({**good_json(), "noise": None}) is None
    assert plausible.find_fault({**good_json(), "noise": 1.0}) is None  # the limit itself is allowed


@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        # values the schema refuses first; the rules refuse them on their own as well
        (set_field("noise", -0.1), "noise out of range"),
        (set_stat("min_ns", -5.0), "a time not positive"),
        (set_field("samples_ns", []), "samples at odds with the statistics"),
    ],
    ids=["noise-negative", "min-negative", "no-samples"],
)
def test_rules_that_the_schema_also_enforces(edit: Callable[[Entry], None], rule: str) -> None:
    data = good_json()
    edit(data)
    found = plausible.find_fault(data)
    assert found is not None and found[0].name == rule


def test_every_rule_has_a_case_above() -> None:
    # the end-to-end cases name each rule by its name in the message
    cases = " ".join(str(p.values[2]) for p in IMPLAUSIBLE)
    named = {rule.name for rule in plausible.RULES if rule.name in cases}
    assert named == {rule.name for rule in plausible.RULES}


def test_rounding_to_six_digits_never_breaks_the_order(tmp_path: Path) -> None:
    # Statistics that are equal, or ordered by less than the rounding, stay valid after a trip
    # through a file whatever the scale: constant samples, two-valued samples, near ties.
    rng = random.Random(21)
    for i in range(300):
        scale = 10 ** rng.uniform(0, 12)
        base = [scale * (1 + rng.choice([0.0, 1e-7, 3e-6, 1e-3]) * rng.random()) for _ in range(rng.randint(6, 300))]
        m = replace(measurement(), samples_ns=tuple(base), round_medians_ns=(base[0],))
        e = entry_from_measurement(m, ENV, Provenance(), noise=rng.random(), recorded_at=None)
        data = codec.entry_to_json(e)
        assert plausible.find_fault(data) is None, (i, data["stats"])


# -- gpuperf validate --------------------------------------------------------------


def test_validate_reports_an_implausible_entry_as_an_invalid_file(store: BaselineStore) -> None:
    store.update(CLASS, [entry()])
    code, out, _ = run("validate", str(store.root))
    assert code == EXIT_OK and "1 file(s), 1 entry, all valid" in out
    path = plant(store, set_stat("median_ns", 1e300))
    code, _, err = run("validate", str(store.root))
    assert code == EXIT_INVALID_INPUT
    assert str(path) in err and f"{P}.stats.median_ns" in err and "1 invalid file(s)" in err


# -- end to end: a planted absurd baseline fails the test, naming the file --------------

from perf_project import SHORT as FAST  # noqa: E402

SIMPLE = """
import torch

A = torch.randn(32, 32)

def test_mm(gpu_bench):
    gpu_bench(torch.mm, A, A)
"""


@pytest.mark.parametrize(("field", "value"), [("noise", 1e9), ("median_ns", 1e300)], ids=["noise-1e9", "median-1e300"])
def test_a_planted_absurd_baseline_fails_the_test_and_names_the_file(
    pytester: pytest.Pytester, field: str, value: float
) -> None:
    pytester.makepyfile(test_simple=SIMPLE)
    # the device class this machine's runs file under, from a run without baselines
    pytester.runpytest_subprocess("--gpuperf", "--gpuperf-json=first.json", *FAST).assert_outcomes(passed=1)
    device_class = load_results(pytester.path / "first.json").environment.device_class
    # a good entry, written by the store (what this machine measures does not matter here)
    recorded = entry_from_measurement(
        measurement(test_id="test_simple.py::test_mm"),
        replace(ENV, device_class=device_class),
        Provenance(),
        noise=0.02,
        recorded_at=None,
    )
    store = BaselineStore(pytester.path / "baselines")
    store.update(device_class, [recorded])
    path = store.file_for(device_class, "test_simple.py::test_mm")
    document = json.loads(path.read_text())
    (data,) = document["entries"].values()
    (data["stats"] if field in data["stats"] else data)[field] = value
    path.write_text(json.dumps(document, indent=2))
    content = path.read_bytes()

    for args in (["--gpuperf"], ["--gpuperf", "--gpuperf-update-baseline"]):
        result = pytester.runpytest_subprocess(*args, *FAST)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([f"*baseline file *{path.name} at *test_simple.py::test_mm::default*{field}*"])
        assert "INTERNALERROR" not in result.stdout.str() and "Traceback" not in result.stdout.str()
        assert path.read_bytes() == content  # the update run does not overwrite it either

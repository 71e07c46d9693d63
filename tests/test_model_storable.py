"""What every history store keeps alike (model/storable.py), and a metric's declaration checked against it."""

from __future__ import annotations

import pytest

from pytest_gpuperf.model import Metric, metric_problems
from pytest_gpuperf.model.storable import METRIC_NAME_MAX_CHARS, UNIT_MAX_CHARS, first_unstorable, unstorable


def test_text_a_backend_cannot_store_is_named() -> None:
    assert unstorable("tests/t.py::test_x[fp16]") is None
    assert unstorable("a\x00b") == "holds a NUL character, which PostgreSQL cannot store"
    assert unstorable("a\ud800") == "is not valid Unicode text (a lone surrogate at character 1)"
    assert unstorable("u" * 64, limit=64) is None
    assert unstorable("u" * 65, limit=64) == "is 65 characters long; a history store keeps at most 64"


def test_the_first_unstorable_text_of_json_is_found_by_path_in_keys_and_values() -> None:
    assert first_unstorable({"a": [1, "ok", {"b": None}]}) is None
    assert first_unstorable({"a": [1, "x\x00"]}) == ("$.a[1]", "holds a NUL character, which PostgreSQL cannot store")
    where, reason = first_unstorable({"ok": {"k\x00": 1}}) or ("", "")
    assert where == '$.ok["k\\u0000"]' and reason.startswith("its key holds a NUL")


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"tolerance": "0.1"}, "tolerance='0.1' is not a number"),
        ({"minimum": "0.5"}, "minimum='0.5' is not a number"),
        ({"maximum": True}, "maximum=True is not a number"),
        ({"absolute_tolerance": [0]}, "absolute_tolerance=[0] is not a number"),
        ({"value": "0.9"}, "value='0.9' is not a number"),
        ({"value": float("nan")}, "value=nan is not a finite number"),
        ({"name": "m" * (METRIC_NAME_MAX_CHARS + 1)},
         f"name is {METRIC_NAME_MAX_CHARS + 1} characters long; a history store keeps at most 193"),
        ({"unit": "u" * (UNIT_MAX_CHARS + 1)}, "unit is 65 characters long; a history store keeps at most 64"),
        ({"unit": "m\x00s"}, "unit holds a NUL character"),
        ({"name": ""}, "name='' is not a non-empty string"),
        ({"better": "up"}, "better='up' is neither 'higher' nor 'lower'"),
    ],
)  # fmt: skip
def test_a_metric_declared_wrong_is_named_by_its_argument(changes: dict[str, object], problem: str) -> None:
    fine = Metric("acc", 0.9, unit="%", tolerance=0.1, minimum=0.5)
    assert metric_problems(fine) == []
    assert metric_problems(Metric("m" * METRIC_NAME_MAX_CHARS, 1.0, unit="u" * UNIT_MAX_CHARS)) == []
    problems = metric_problems(Metric(**{**vars(fine), **changes}))  # type: ignore[arg-type]
    assert len(problems) == 1 and problems[0].startswith(problem), problems

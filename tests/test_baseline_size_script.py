"""benchmarks/baseline_size.py: the earlier layout it compares with and how it counts a diff's lines."""

from __future__ import annotations

import ast
import json

from benchmark_scripts import benchmark_script
from test_baseline_codec import document, make_entry

from pytest_gpuperf.baseline import codec


def test_the_earlier_layout_is_one_value_a_line_of_the_same_document() -> None:
    text = codec.dump_document(document(make_entry()))
    with benchmark_script("baseline_size") as script:
        earlier = script.earlier_layout(text)
    assert json.loads(earlier) == json.loads(text)
    assert len(earlier.splitlines()) > 10 * len(text.splitlines())


def test_a_diff_counts_removed_and_added_lines_only() -> None:
    with benchmark_script("baseline_size") as script:
        assert script.changed_lines("a\nb\nc\n", "a\nB\nc\nd\n") == 3
        assert script.changed_lines("a\n", "a\n") == 0


def test_the_suite_has_seven_perf_tests_at_the_width_given() -> None:
    with benchmark_script("baseline_size") as script:
        source = script.SUITE.replace("WIDTH_VALUE", "64")
    tree = ast.parse(source)
    tests = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]
    assert len(tests) == 7 and all(t.args.args[0].arg == "gpu_bench" for t in tests)

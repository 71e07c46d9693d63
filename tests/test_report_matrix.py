"""The matrix comment (report/matrix.py), rendered by cmark-gfm as GitHub renders comments.

The rendered page is parsed as XML: a section that did not close, or a table that fell apart, fails
the parse or the checks. Sessions are hand-built (tests/matrix_sessions.py); the comment of real runs
and recorded CUDA payloads is tested in tests/test_cli_comment.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import xml.etree.ElementTree as ET

import pytest
from matrix_sessions import DEVICES, environment, perf_id, suite
from test_report_text import hostile_session

from pytest_gpuperf.modes import Mode
from pytest_gpuperf.report.matrix import COMMENT_LIMIT, MARKER, Job, render_matrix, utf16_units

LINK = "https://github.com/o/r/actions/runs/1"


def github_html(text: str) -> ET.Element:
    cmarkgfm = pytest.importorskip("cmarkgfm")  # in the dev extras
    from cmarkgfm.cmark import Options

    page = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    return ET.fromstring(f"<page>{page}</page>")


def _text(element: ET.Element | None) -> str:
    assert element is not None
    return "".join(element.itertext()).strip()


def _rows(table: ET.Element) -> list[list[str]]:
    return [[_text(cell) for cell in row] for row in table.iter("tr")]


def regression_sections(page: ET.Element) -> list[ET.Element]:
    return [d for d in page.iter("details") if _text(d.find("summary")).startswith("🔴")]


def four_devices(**h100: object) -> list[Job]:
    """200 tests on 4 GPUs: regressions on A100 only (12), on every device (2), unstable ones on L4."""
    everywhere = {3, 150}
    return [
        Job("perf (gpu=h100)", suite("h100", regressed=everywhere, **h100)),  # type: ignore[arg-type]
        Job("perf (gpu=a100)", suite("a100", regressed={*everywhere, *range(40, 52)}, improved={7})),
        Job("perf (gpu=l4)", suite("l4", regressed=everywhere, unstable={60, 61})),
        Job("perf (gpu=mi300x)", suite("mi300x", regressed=everywhere)),
    ]


def test_200_tests_on_4_devices_fit_githubs_limit_as_valid_markdown() -> None:
    text = render_matrix(four_devices(), link=LINK)
    assert utf16_units(text) <= COMMENT_LIMIT
    page = github_html(text)
    tables = list(page.iter("table"))
    table = tables[0]
    rows = _rows(table)
    assert rows[0] == ["test", *(f"{DEVICES[d][0]}" for d in ("mi300x", "a100", "h100", "l4"))]  # by class
    assert all(len(row) == 5 for row in rows)  # no row cut, no cell broken out by a pipe
    # regressions first, then the unstable ones (could not be judged), then the rest
    assert [r[0] for r in rows[1:4]] == ["test_ops_00.py::test_kernel[bf16-1027-causal]",
                                         "test_ops_02.py::test_kernel[bf16-1064-causal]",
                                         "test_ops_02.py::test_kernel[bf16-1065-causal]"]  # fmt: skip
    assert rows[1][1:] == ["🔴 +25.0%"] * 4
    assert rows[2][1:] == ["⚪ +0.2%", "🔴 +25.0%", "⚪ +0.2%", "⚪ +0.2%"]  # A100 alone
    assert rows[14][0] == "test_ops_07.py::test_kernel[bf16-1174-causal]" and rows[15][1:] != ["🔴 +25.0%"] * 4
    unstable = next(r for r in rows if r[0] == "test_ops_03.py::test_kernel[bf16-1084-causal]")
    assert unstable[1:] == ["⚪ +0.2%", "⚪ +0.2%", "⚪ +0.2%", "🟠 unstable (+12.0%)"]
    # every regression folded with its evidence, the command that reproduces it and why it got slower
    sections = regression_sections(page)
    assert len(sections) == 2 * 4 + 12 and "Shortened" not in text
    for section in sections:
        (command,) = [_text(p) for p in section.iter("pre") if p.attrib.get("lang") == "sh"]
        assert command.startswith("pytest 'tests/perf/test_ops_") and "--gpuperf-compare-ref=" in command
        assert "--gpuperf-threshold=0.05" in command
        assert list(section.iter("table")) and "Profile vs" in _text(section)


def test_a_smaller_limit_drops_whole_rows_least_severe_first_and_links_the_full_report() -> None:
    jobs = four_devices()
    whole = render_matrix(jobs, link=LINK, limit=10**7)
    assert "Shortened" not in whole
    short = render_matrix(jobs, link=LINK, limit=20_000)
    assert utf16_units(short) <= 20_000
    page = github_html(short)
    rows = _rows(next(page.iter("table")))
    whole_rows = _rows(next(github_html(whole).iter("table")))
    assert 3 < len(rows) < len(whole_rows) and rows == whole_rows[: len(rows)]  # a prefix: whole rows, in order
    note = short.rsplit("---", 1)[1]
    assert f"left out; see [the full report]({LINK})." in note and "limit of 20,000" in note
    assert re.search(rf"{len(whole_rows) - len(rows)} test rows", note)
    assert len(regression_sections(page)) >= 1


def test_profiles_give_way_before_commands_and_unjudged_rows_but_after_unchanged_rows() -> None:
    text = render_matrix(four_devices(), link=LINK, limit=30_000)
    page = github_html(text)
    sections = regression_sections(page)
    assert len(sections) == 20 and all(list(s.iter("pre")) for s in sections)  # every regression, its command
    assert any("Why it got slower: in the full report." in _text(s) for s in sections)
    rows = _rows(next(page.iter("table")))
    assert [row[-1] for row in rows[15:17]] == ["🟠 unstable (+12.0%)"] * 2  # after the 14 regressed tests
    assert len(rows) < 1 + 200  # unchanged rows only fill the room no profile fits in
    note = text.rsplit("---", 1)[1]
    assert re.search(r"\d+ test rows, \d+ regressions' differential profiles, the environments table left out", note)


def test_columns_keep_their_order_whatever_order_the_jobs_come_in() -> None:
    jobs = [*four_devices(), Job("perf (gpu=b200)", None, "cancelled")]
    texts = {render_matrix(list(order), link=LINK) for order in itertools.permutations(jobs[:3] + jobs[4:])}
    assert len(texts) == 1


def test_a_failed_or_cancelled_job_keeps_its_column() -> None:
    jobs = [Job("perf (gpu=h100)", suite("h100", regressed={1}, tests=5)), Job("perf (gpu=l4)", None, "cancelled"),
            Job("perf (gpu=a100)", None, "failure")]  # fmt: skip
    page = github_html(render_matrix(jobs, link=LINK))
    rows = _rows(next(page.iter("table")))
    assert rows[0] == ["test", DEVICES["h100"][0], "perf (gpu=a100) ❌ job failed", "perf (gpu=l4) 🚫 job cancelled"]
    assert all(row[2:] == ["❌", "🚫"] for row in rows[1:])
    summary = _text(page.find("p"))
    assert summary == "🔴 1 regression on 1 of 3 devices against origin/main · 2 jobs without results"


def test_two_jobs_on_one_device_class_are_told_apart_by_their_names() -> None:
    jobs = [Job("perf (py=3.11)", suite("h100", tests=2)), Job("perf (py=3.12)", suite("h100", tests=2))]
    header = _rows(next(github_html(render_matrix(jobs)).iter("table")))[0]
    assert header == ["test", f"{DEVICES['h100'][0]} (perf (py=3.11))", f"{DEVICES['h100'][0]} (perf (py=3.12))"]


def test_a_driver_and_torch_change_since_the_baseline_is_named_the_likelier_cause() -> None:
    old = environment("a100", driver="550.54.15", torch="2.12.0")
    every = suite("a100", regressed=range(6), tests=6, reference=old, mode=Mode.BASELINE)
    some = suite("h100", regressed={0}, tests=6, reference=environment("h100", driver="550.54.15"), mode=Mode.BASELINE)
    text = render_matrix([Job("a100", every), Job("h100", some)], link=LINK)
    items = [_text(li) for li in github_html(text).iter("li") if li.find("ul") is None]
    a100 = DEVICES["a100"][0]
    assert "environment changed since the baseline: driver 550.54.15 -> 570.86.15, torch 2.12.0 -> 2.13.0" in items
    assert (
        "⚠️ all 6 measurements judged got slower, each against the baseline taken in another environment: the "
        "environment is the likelier cause than the code"
    ) in items
    assert sum("likelier cause" in item for item in items) == 1  # the H100's one regression is the code's
    assert f"`{a100}`: 6 regressions" in text
    assert "pytest 'tests/perf/test_ops_00.py::test_kernel[bf16-1024-causal]' --gpuperf --gpuperf-device=cuda:0" in text


def test_tests_that_read_alike_without_their_folders_keep_them() -> None:
    session = suite("h100", tests=2)
    first, second = session.results
    moved = dataclasses.replace(second.measurement, test_id=first.measurement.test_id.replace("perf/", "perf/cuda/"))
    session = dataclasses.replace(session, results=(first, dataclasses.replace(second, measurement=moved)))
    rows = _rows(next(github_html(render_matrix([Job("h100", session)])).iter("table")))
    assert [row[0] for row in rows[1:]] == sorted([first.measurement.test_id, moved.test_id])


def test_the_environments_are_side_by_side() -> None:
    h100 = environment("h100", extra={"cudnn": "9.1.0", "power_limit_w": "700"})
    jobs = [Job("h100", suite("h100", tests=1, env=h100)), Job("a100", suite("a100", tests=1))]
    page = github_html(render_matrix(jobs))
    env = next(d for d in page.iter("details") if _text(d.find("summary")) == "Environments")
    rows = _rows(next(env.iter("table")))
    assert rows[1] == ["device", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]
    assert ["cuDNN", "–", "9.1.0"] in rows and ["power limit", "–", "700 W"] in rows


def test_strings_from_the_tests_are_inert() -> None:
    session = dataclasses.replace(hostile_session(), mode=Mode.BASELINE)
    text = render_matrix([Job("@octocat <b>x</b> [y](https://e.vil)", session), Job("#12 job", None, "<i>odd</i>")])
    page_text = ET.tostring(github_html(text), encoding="unicode")
    assert not re.search(r"<(a|img|b|i|script)\b", page_text), page_text
    assert re.findall(r"(?<![\w`])@(?!\u200d)\w+", re.sub(r"<code>.*?</code>", "", page_text, flags=re.S)) == []
    assert "#12" not in re.sub(r"<code>.*?</code>", "", page_text, flags=re.S)
    rows = _rows(next(github_html(text).iter("table")))
    assert {len(row) for row in rows} == {3}


def test_the_marker_is_the_first_line() -> None:
    assert render_matrix([Job("h100", suite("h100", tests=1))]).split("\n", 1)[0] == MARKER
    assert render_matrix([Job("h100", suite("h100", tests=1))], marker="<!-- k -->").startswith("<!-- k -->\n")
    assert perf_id(0) == "tests/perf/test_ops_00.py::test_kernel[bf16-1024-causal]"

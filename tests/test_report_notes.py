"""report/notes.py: how a note too long for its line is shortened, and how a long line is wrapped."""

from __future__ import annotations

from pytest_gpuperf.report.notes import LINE_LIMIT, cut, wrapped

NOT_COMPARABLE = (
    "not comparable: baseline recorded on device class cuda-nvidia-a100-sxm4-80gb, this run is "
    "cpu-intel-r-xeon-r-processor--avx512-bf16-fp16-amxbf16-amxint8; record baselines on this device class with "
    "--gpuperf-update-baseline; --gpuperf-strict makes this fail"
)
BUSY = (
    "not gated: the baseline was written while the runner was busy (CPU pressure 99% of the time, steal 0.0%, 6 "
    "runnable tasks on 2 CPUs) and keeps no correction for it, so it can hide a regression; write it again with "
    "--gpuperf-update-baseline"
)


def test_a_short_note_is_kept_whole() -> None:
    assert cut("threshold raised by run-to-run noise", 40) == "threshold raised by run-to-run noise"


def test_a_note_keeps_its_start_and_its_last_clause_whole() -> None:
    """What was found (which device class) and what to do, the evidence between giving way at words."""
    shortened = cut(NOT_COMPARABLE, 128)
    assert shortened == ("not comparable: baseline recorded on device class cuda-nvidia-a100-sxm4-80gb, this run is … "
                         "--gpuperf-strict makes this fail")  # fmt: skip
    assert cut(BUSY, 116).endswith(" … write it again with --gpuperf-update-baseline")
    assert all(len(cut(text, n)) <= n for text in (NOT_COMPARABLE, BUSY) for n in range(40, 200, 7))


def test_leading_clauses_that_fit_are_kept_whole() -> None:
    text = "first finding; second finding; " + "evidence " * 30 + "; do this"
    assert cut(text, 60) == "first finding; second finding … do this"


def test_a_note_without_clauses_keeps_its_start_and_end_at_words() -> None:
    text = " ".join(f"word{i}" for i in range(60))
    shortened = cut(text, 80)
    head, tail = shortened.split(" … ")
    assert len(shortened) <= 80 and text.startswith(head) and text.endswith(tail)
    assert len(head) > len(tail)  # the start says what was found


def test_a_long_closing_line_is_wrapped_under_the_limit_at_words() -> None:
    folder = "/very/long" * 10
    text = f"nothing gated: the baselines folder {folder} does not exist, so every test is new; record one"
    lines = wrapped(text)
    assert len(lines) == 2 and all(len(line) <= LINE_LIMIT for line in lines)
    assert lines[0].startswith("gpuperf: nothing gated") and lines[1].startswith(" " * len("gpuperf: "))
    assert " ".join(line.strip() for line in lines) == f"gpuperf: {text}"

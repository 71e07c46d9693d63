"""The baseline store on real files: layout, merge, validation, locking, killed writers."""

from __future__ import annotations

import difflib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf.baseline import codec, migrate
from pytest_gpuperf.baseline.atomic import is_temp_file, lock_path
from pytest_gpuperf.baseline.store import GITIGNORE, BaselineStore, EntryChange
from pytest_gpuperf.errors import BaselineError
from pytest_gpuperf.model import BaselineEntry, Environment, Metric, OpProfile, OpStat, Provenance, SampleStats

CLASS = "cuda-nvidia-a100-sxm4-80gb"
OTHER_CLASS = "cuda-nvidia-h100-80gb-hbm3"
MODULE = "tests/perf/test_kernels.py"


def env(device_class: str = CLASS) -> Environment:
    return Environment(device_class, "cuda", "NVIDIA", "EPYC", "3.11.7", torch="2.3.0")


def entry(test: str = "test_a", name: str = "default", median: float = 1000.0, **changes: object) -> BaselineEntry:
    samples = tuple(median * (1 + 0.01 * i) for i in range(-5, 6))
    base = BaselineEntry(
        key=f"{MODULE}::{test}::{name}",
        stats=SampleStats.from_samples(samples),
        samples_ns=samples,
        calls_per_sample=8,
        device="cuda:0",
        timer="cuda_event",
        round_medians_ns=(median, median * 1.001),
        noise=0.01,
        metrics=(Metric("speedup", 1.5, unit="x"),),
        environment=env(),
        provenance=Provenance(commit="c" * 40, branch="main", dirty=False, commit_date="2024-01-01T00:00:00+00:00"),
        recorded_at="2024-01-02T00:00:00+00:00",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def stored(e: BaselineEntry) -> BaselineEntry:
    """``e`` as it reads back from a file (numbers rounded)."""
    return codec.entry_from_json(codec.entry_to_json(e), path="x", key=e.key)


def node_id(e: BaselineEntry) -> str:
    return e.key.rsplit("::", 1)[0]


@pytest.fixture
def store(tmp_path: Path) -> BaselineStore:
    return BaselineStore(tmp_path / "baselines", lock_timeout_s=20)


# -- layout, load, update -------------------------------------------------------------


def test_layout_one_file_per_class_and_module(store: BaselineStore) -> None:
    path = store.file_for(CLASS, f"{MODULE}::TestX::test_y[a-b]")
    assert path == store.root / CLASS / "tests__perf__test_kernels.py.json"
    assert store.file_for(CLASS, f"{MODULE}::other") == path
    assert store.file_for(OTHER_CLASS, f"{MODULE}::other").parent.name == OTHER_CLASS


def test_update_then_load_round_trips(store: BaselineStore) -> None:
    a, b = entry("test_a"), entry("test_b", name="fwd")
    changes = store.update(CLASS, [a, b])
    path = store.file_for(CLASS, node_id(a))
    assert changes == [EntryChange(a.key, path, "added"), EntryChange(b.key, path, "added")]
    fresh = BaselineStore(store.root)
    assert fresh.load(CLASS, node_id(a), "default") == stored(a)
    assert fresh.load(CLASS, node_id(b), "fwd") == stored(b)
    assert fresh.load(CLASS, node_id(b), "default") is None
    assert fresh.load(OTHER_CLASS, node_id(a), "default") is None
    assert fresh.load(CLASS, "tests/none.py::t", "default") is None
    document = json.loads(path.read_text())
    assert document["schema_version"] == migrate.CURRENT_VERSION
    assert document["device_class"] == CLASS and document["module"] == MODULE


def test_writing_the_same_entries_twice_changes_no_byte(store: BaselineStore) -> None:
    entries = [entry("test_a"), entry("test_b")]
    store.update(CLASS, entries)
    path = store.file_for(CLASS, node_id(entries[0]))
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    changes = store.update(CLASS, entries)
    assert [c.kind for c in changes] == ["unchanged", "unchanged"]
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime  # not even rewritten
    # a store that loaded the entries writes them back identically (the plugin keeps unchanged ones)
    reloaded = BaselineStore(store.root)
    kept = [reloaded.load(CLASS, node_id(e), "default") for e in entries]
    assert [c.kind for c in reloaded.update(CLASS, [k for k in kept if k])] == ["unchanged", "unchanged"]
    assert path.read_bytes() == before


def entry_block(text: str, key: str) -> str:
    """The exact lines of one entry in a file's text."""
    lines = text.splitlines(keepends=True)
    start = lines.index(f'    "{key}": {{\n')
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip(",\n") == "    }")
    return "".join(lines[start : end + 1]).rstrip(",\n")


def test_update_merges_and_leaves_other_entries_byte_identical(store: BaselineStore) -> None:
    a, b, c = entry("test_a"), entry("test_b"), entry("test_c")
    store.update(CLASS, [a, b, c])
    path = store.file_for(CLASS, node_id(a))
    before = path.read_text()
    changes = store.update(CLASS, [entry("test_b", median=2000.0), entry("test_d")])
    assert [(ch.key, ch.kind) for ch in changes] == [(b.key, "changed"), (entry("test_d").key, "added")]
    after = path.read_text()
    assert entry_block(after, a.key) == entry_block(before, a.key)
    assert entry_block(after, c.key) == entry_block(before, c.key)
    assert entry_block(after, b.key) != entry_block(before, b.key)
    loaded = BaselineStore(store.root)
    assert loaded.load(CLASS, node_id(b), "default").stats.median_ns == 2000.0  # type: ignore[union-attr]
    assert loaded.load(CLASS, node_id(a), "default") == stored(a)
    assert loaded.load(CLASS, node_id(c), "default") == stored(c)
    assert loaded.load(CLASS, "tests/perf/test_kernels.py::test_d", "default") == stored(entry("test_d"))


PROFILE = OpProfile(
    device_type="cpu", profiled_calls=10, host_ns=5000.0, torch="2.13.0",
    ops=tuple(OpStat(f"aten::op{i}", "operator", 1.0, 100.0 + i,
                     host_samples_ns=tuple(100.0 + i + j for j in range(10))) for i in range(30)),
    host_samples_ns=tuple(5000.0 + j for j in range(10)),
)  # fmt: skip


def refreshed(e: BaselineEntry, factor: float) -> BaselineEntry:
    """``e`` measured again: every sample, statistic, profile time and the provenance moved."""
    samples = tuple(x * factor for x in e.samples_ns)
    profile = e.profile and replace(e.profile, host_ns=e.profile.host_ns * factor, ops=tuple(
        replace(op, host_ns=op.host_ns * factor, host_samples_ns=tuple(x * factor for x in op.host_samples_ns))
        for op in e.profile.ops))  # fmt: skip
    return replace(e, samples_ns=samples, stats=SampleStats.from_samples(samples), noise=0.02, profile=profile,
                   round_medians_ns=tuple(x * factor for x in e.round_medians_ns), recorded_at="2024-02-01T00:00:00",
                   provenance=replace(e.provenance, commit="d" * 40))  # fmt: skip


def test_a_refreshed_entry_is_a_diff_of_a_few_lines(store: BaselineStore) -> None:
    many = tuple(1000.0 * (1 + 0.001 * i) for i in range(100))
    a, b = (entry(test, samples_ns=many, stats=SampleStats.from_samples(many), profile=PROFILE)
            for test in ("test_a", "test_b"))  # fmt: skip
    store.update(CLASS, [a, b])
    path = store.file_for(CLASS, node_id(a))
    before = path.read_text().splitlines()
    store.update(CLASS, [refreshed(a, 1.2)])
    after = path.read_text().splitlines()
    diff = difflib.unified_diff(before, after, n=0)
    changed = [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    moved = ["noise", "profile", "provenance", "recorded_at", "round_medians_ns", "samples_ns", "stats"]
    assert sorted(line[1:].split(":")[0].strip().strip('"') for line in changed) == sorted(moved * 2)
    assert len(before) == len(after) < 60  # 100 samples and a profile of 30 rows, in two entries


def test_a_file_in_the_earlier_layout_reads_and_takes_this_one_at_its_first_change(store: BaselineStore) -> None:
    """Files written one number per line (before one line per field) read as they are; an update that changes no
    entry leaves their bytes; the first that changes one writes the whole file in this layout."""
    a, b = entry("test_a"), entry("test_b")
    store.update(CLASS, [a, b])
    path = store.file_for(CLASS, node_id(a))
    earlier = json.dumps(json.loads(path.read_text()), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    path.write_text(earlier)
    fresh = BaselineStore(store.root)
    assert fresh.load(CLASS, node_id(a), "default") == stored(a) and fresh.validate_tree() == []
    assert [c.kind for c in fresh.update(CLASS, [a, b])] == ["unchanged", "unchanged"]
    assert path.read_text() == earlier
    fresh.update(CLASS, [entry("test_b", median=2000.0)])
    now = path.read_text()
    assert now == codec.dump_document(json.loads(now)) and len(now.splitlines()) < len(earlier.splitlines())
    assert BaselineStore(store.root).load(CLASS, node_id(a), "default") == stored(a)


def test_update_groups_entries_by_module(store: BaselineStore) -> None:
    here = entry("test_a")
    there = replace(entry("test_a"), key="tests/test_other.py::test_a::default")
    changes = store.update(CLASS, [here, there])
    assert {c.path.name for c in changes} == {"tests__perf__test_kernels.py.json", "tests__test_other.py.json"}
    assert BaselineStore(store.root).load(CLASS, "tests/test_other.py::test_a", "default") == stored(there)


def test_update_rejects_entries_of_another_class_and_duplicates(store: BaselineStore) -> None:
    with pytest.raises(ValueError, match=f"measured on device class '{OTHER_CLASS}'"):
        store.update(CLASS, [entry(environment=env(OTHER_CLASS))])
    with pytest.raises(ValueError, match="twice in one update"):
        store.update(CLASS, [entry(), entry()])
    assert not store.root.exists()


def test_update_refuses_values_json_cannot_hold(store: BaselineStore) -> None:
    bad = entry(calibration_ns=float("nan"))
    with pytest.raises(BaselineError) as info:
        store.update(CLASS, [bad])
    assert info.value.json_path == f'$.entries["{bad.key}"].calibration_ns'


def test_update_validates_before_writing(store: BaselineStore) -> None:
    store.update(CLASS, [entry("test_a")])
    path = store.file_for(CLASS, node_id(entry()))
    before = path.read_bytes()
    bad = entry("test_b", calls_per_sample=0)
    with pytest.raises(BaselineError) as info:
        store.update(CLASS, [bad])
    assert info.value.path == path
    assert info.value.json_path == f'$.entries["{bad.key}"].calls_per_sample'
    assert path.read_bytes() == before


def test_cache_is_per_instance_and_refreshed_by_writes(store: BaselineStore) -> None:
    store.update(CLASS, [entry(median=1000.0)])
    reader = BaselineStore(store.root)
    assert reader.load(CLASS, node_id(entry()), "default").stats.median_ns == 1000.0  # type: ignore[union-attr]
    store.update(CLASS, [entry(median=3000.0)])
    # reader parsed the file once and keeps that view; the writer sees its own write
    assert reader.load(CLASS, node_id(entry()), "default").stats.median_ns == 1000.0  # type: ignore[union-attr]
    assert store.load(CLASS, node_id(entry()), "default").stats.median_ns == 3000.0  # type: ignore[union-attr]
    reader.update(CLASS, [entry("test_z")])  # an update re-reads under the lock and merges
    assert reader.load(CLASS, node_id(entry()), "default").stats.median_ns == 3000.0  # type: ignore[union-attr]


def test_load_other_classes(store: BaselineStore) -> None:
    store.update(CLASS, [entry()])
    store.update(OTHER_CLASS, [entry(environment=env(OTHER_CLASS), median=500.0)])
    store.update("cpu-x86_64", [entry("test_other", environment=env("cpu-x86_64"))])
    found = store.load_other_classes(node_id(entry()), "default")
    assert sorted(e.environment.device_class for e in found if e.environment) == [CLASS, OTHER_CLASS]
    (only,) = store.load_other_classes(node_id(entry()), "default", exclude=CLASS)
    assert only.stats.median_ns == 500.0
    assert store.load_other_classes("tests/none.py::t", "default") == []


def test_iter_entries_walks_the_tree(store: BaselineStore) -> None:
    store.update(OTHER_CLASS, [entry("test_b", environment=env(OTHER_CLASS))])
    store.update(CLASS, [entry("test_b"), entry("test_a")])
    listed = [(cls, path.name, e.key) for cls, path, e in store.iter_entries()]
    name = "tests__perf__test_kernels.py.json"
    assert listed == [
        (CLASS, name, entry("test_a").key),
        (CLASS, name, entry("test_b").key),
        (OTHER_CLASS, name, entry("test_b").key),
    ]


# -- files that are wrong -----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty"),
        (b'{"schema_version": 2, "device_cla', "not valid JSON"),
        (b"\xff\xfe\x00binary", "not UTF-8"),
        (b'{"schema_version": 99}', "newer pytest-gpuperf"),
        (b"<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> theirs\n", "merge conflict"),
    ],
)
def test_corrupt_file_is_never_replaced(store: BaselineStore, content: bytes, words: str) -> None:
    path = store.file_for(CLASS, node_id(entry()))
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(BaselineError, match=words) as info:
        store.update(CLASS, [entry()])
    assert info.value.path == path
    assert path.read_bytes() == content
    with pytest.raises(BaselineError, match=words):
        store.load(CLASS, node_id(entry()), "default")
    (error,) = store.validate_tree()
    assert error.path == path and words in str(error)


def test_validate_tree_lists_every_bad_file(store: BaselineStore) -> None:
    store.update(CLASS, [entry()])
    store.update(OTHER_CLASS, [entry(environment=env(OTHER_CLASS))])
    assert store.validate_tree() == []
    good = store.file_for(CLASS, node_id(entry()))
    moved = store.root / "cpu" / good.name
    moved.parent.mkdir()
    moved.write_bytes(good.read_bytes())
    renamed = good.with_name("tests__test_renamed.py.json")
    renamed.write_bytes(good.read_bytes())
    stray = store.root / "loose.json"
    stray.write_text("{}")
    broken = store.file_for(OTHER_CLASS, node_id(entry()))
    data = json.loads(broken.read_text())
    data["entries"][entry().key]["stats"]["median_ns"] = "slow"
    broken.write_text(json.dumps(data))
    (store.root / CLASS / "notes.txt").write_text("not a baseline")
    errors = {e.path: e for e in store.validate_tree()}
    assert set(errors) == {moved, renamed, stray, broken}
    assert errors[moved].json_path == "$.device_class" and repr(CLASS) in str(errors[moved])
    assert errors[renamed].json_path == "$.module"
    assert errors[broken].json_path == f'$.entries["{entry().key}"].stats.median_ns'
    assert "device-class folder" in str(errors[stray])


def test_old_version_is_read_and_upgraded_only_by_an_update(store: BaselineStore) -> None:
    key = entry().key
    old = {
        "schema_version": 1,
        "device_class": CLASS,
        "module": MODULE,
        "environment": None,
        "entries": {
            key: {
                "stats": json.loads(json.dumps(codec.entry_to_json(entry())["stats"])),
                "samples": [950.0, 1050.0],
                "calls_per_sample": 1,
                "device": "cuda:0",
                "timer": "cuda_event",
                "noise": None,
                "calibration_ns": None,
                "peak_allocated_bytes": None,
                "peak_reserved_bytes": None,
                "metrics": {},
                "commit": None,
                "recorded_at": None,
            }
        },
    }
    path = store.file_for(CLASS, node_id(entry()))
    path.parent.mkdir(parents=True)
    text = json.dumps(old, indent=1)
    path.write_text(text)
    loaded = store.load(CLASS, node_id(entry()), "default")
    assert loaded is not None and loaded.samples_ns == (950.0, 1050.0) and loaded.environment is None
    assert store.validate_tree() == []
    assert path.read_text() == text  # reading never rewrites
    store.update(CLASS, [entry("test_new")])
    upgraded = json.loads(path.read_text())
    assert upgraded["schema_version"] == migrate.CURRENT_VERSION
    assert upgraded["entries"][key]["samples_ns"] == [950.0, 1050.0]


# -- interrupted and concurrent writers -------------------------------------------


def test_ctrl_c_during_write_leaves_the_old_file_and_no_temp(
    store: BaselineStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.update(CLASS, [entry()])
    path = store.file_for(CLASS, node_id(entry()))
    before = path.read_bytes()

    def interrupted(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.update(CLASS, [entry(median=9.0)])
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if is_temp_file(p)]


WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    from pytest_gpuperf.baseline.codec import entry_from_json
    from pytest_gpuperf.baseline.store import BaselineStore

    root, device_class, entries_file, stall = sys.argv[1:5]
    entries = [entry_from_json(d, path=entries_file, key=k) for k, d in json.load(open(entries_file)).items()]

    def stalled(*args):
        print("STALLED", flush=True)
        time.sleep(120)

    if stall != "none":
        setattr(os, stall, stalled)  # hold the writer at that step until it is killed
    store = BaselineStore(root)
    n = 0
    while True:
        store.update(device_class, entries)
        n += 1
        print("WROTE", n, flush=True)
        if stall != "loop":
            time.sleep(120)
    """
)


def start_writer(
    tmp_path: Path, store: BaselineStore, entries: list[BaselineEntry], stall: str
) -> subprocess.Popen[str]:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    entries_file = tmp_path / "entries.json"
    entries_file.write_text(json.dumps({e.key: codec.entry_to_json(e) for e in entries}))
    return subprocess.Popen(
        [sys.executable, str(script), str(store.root), CLASS, str(entries_file), stall],
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_for(proc: subprocess.Popen[str], word: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(word):
            return
    pytest.fail(f"the writer exited ({proc.wait()}) before printing {word}")


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stdout:
        proc.stdout.close()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("stall", ["replace", "fsync"])
def test_sigkill_mid_write_leaves_the_file_intact(tmp_path: Path, store: BaselineStore, stall: str) -> None:
    original = [entry("test_keep"), entry("test_a")]
    store.update(CLASS, original)
    path = store.file_for(CLASS, node_id(entry()))
    before = path.read_bytes()
    huge = [entry(f"test_{i}", median=float(i + 1)) for i in range(300)]
    proc = start_writer(tmp_path, store, huge, stall)
    try:
        wait_for(proc, "STALLED")  # the temporary file is written (replace) or being written (fsync)
        temps = [p for p in path.parent.iterdir() if is_temp_file(p)]
        assert len(temps) == 1 and temps[0].stat().st_size > len(before)
    finally:
        kill(proc)
    assert path.read_bytes() == before
    reader = BaselineStore(store.root, lock_timeout_s=20)
    assert reader.validate_tree() == []  # the stray temporary file is not a baseline
    assert [e.key for _, _, e in reader.iter_entries()] == sorted(e.key for e in original)
    # the killed writer's lock died with it; a later update works and clears its debris
    changes = reader.update(CLASS, [entry("test_after")])
    assert [c.kind for c in changes] == ["added"]
    assert not [p for p in path.parent.iterdir() if is_temp_file(p)]
    assert len(list(BaselineStore(store.root).iter_entries())) == 3


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_of_a_busy_writer_at_any_moment_leaves_a_complete_file(tmp_path: Path, store: BaselineStore) -> None:
    entries = [entry(f"test_{i}") for i in range(200)]
    store.update(CLASS, entries[:1])
    proc = start_writer(tmp_path, store, entries, "loop")  # rewrites the file as fast as it can
    try:
        for _ in range(3):
            wait_for(proc, "WROTE")
    finally:
        kill(proc)  # wherever it was: in the lock, the temp file, the rename or between updates
    reader = BaselineStore(store.root, lock_timeout_s=20)
    assert reader.validate_tree() == []
    assert len(list(reader.iter_entries())) == 200
    reader.update(CLASS, [entry("test_after")])
    assert len(list(BaselineStore(store.root).iter_entries())) == 201


def concurrent_writer(root: str, worker: int, rounds: int) -> None:
    """One process of the concurrency test: its own keys, a shared key, two modules."""
    store = BaselineStore(Path(root), lock_timeout_s=60)
    for r in range(rounds):
        mine = entry(f"test_w{worker}_r{r}", median=float(worker * 100 + r + 1))
        other_module = replace(mine, key=f"tests/test_shared.py::test_w{worker}_r{r}::default")
        shared = entry("test_shared", median=float(worker + 1))
        store.update(CLASS, [mine, other_module, shared])


def test_concurrent_processes_lose_no_entries(store: BaselineStore) -> None:
    workers, rounds = 4, 6
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=concurrent_writer, args=(str(store.root), w, rounds)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * workers
    keys = [e.key for _, _, e in BaselineStore(store.root).iter_entries()]
    expected_own = {entry(f"test_w{w}_r{r}").key for w in range(workers) for r in range(rounds)}
    expected_other = {f"tests/test_shared.py::test_w{w}_r{r}::default" for w in range(workers) for r in range(rounds)}
    assert len(keys) == len(set(keys))
    assert set(keys) == expected_own | expected_other | {entry("test_shared").key}
    assert store.validate_tree() == []
    leftovers = [p.name for p in (store.root / CLASS).iterdir() if p.name.startswith(".")]
    assert all(name.endswith(".lock") for name in leftovers)


def test_lock_timeout_names_the_lock(store: BaselineStore) -> None:
    import filelock

    path = store.file_for(CLASS, node_id(entry()))
    path.parent.mkdir(parents=True)
    impatient = BaselineStore(store.root, lock_timeout_s=0.05)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire();"
            " print('HELD', flush=True); time.sleep(120)",
            str(lock_path(path)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(holder, "HELD")
        with pytest.raises(BaselineError, match=r"held \.tests__perf__test_kernels\.py\.json\.lock") as info:
            impatient.update(CLASS, [entry()])
        assert info.value.path == path
    finally:
        kill(holder)
    with filelock.FileLock(lock_path(path), timeout=5):  # the holder's death released it
        assert not path.exists()


def test_gitignore_keeps_locks_and_temps_out_of_git(store: BaselineStore) -> None:
    store.update(CLASS, [entry()])
    ignore = (store.root / ".gitignore").read_text()
    assert ".*.lock" in ignore and ".*.tmp" in ignore
    (store.root / ".gitignore").write_text("# team's own\n*.bak")
    store.update(CLASS, [entry("test_b")])
    assert (store.root / ".gitignore").read_text() == "# team's own\n*.bak\n" + GITIGNORE  # their lines kept


def test_a_gitignore_left_empty_by_a_full_disk_is_completed_at_the_next_update(store: BaselineStore) -> None:
    store.root.mkdir(parents=True)
    (store.root / ".gitignore").write_text("")
    store.update(CLASS, [entry()])
    assert (store.root / ".gitignore").read_text() == GITIGNORE
    before = (store.root / ".gitignore").stat().st_mtime_ns
    store.update(CLASS, [entry("test_b")])
    assert (store.root / ".gitignore").stat().st_mtime_ns == before  # complete: not written again


def test_the_gitignore_is_replaced_whole_or_not_at_all(store: BaselineStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf.baseline import atomic
    from pytest_gpuperf.errors import WriteError

    real = atomic.write_atomic

    def full_disk(path: Path, data: bytes) -> Path:
        if path.name == ".gitignore":
            raise WriteError(path, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(atomic, "write_atomic", full_disk)
    store.root.mkdir(parents=True)
    (store.root / ".gitignore").write_text("build/\n")
    store.update(CLASS, [entry()])  # the entries are written; the .gitignore is a nicety
    assert (store.root / ".gitignore").read_text() == "build/\n"
    assert store.file_for(CLASS, node_id(entry())).exists()


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda entries, key: entries[key].update(calls_per_sample=True), ".calls_per_sample"),
        (lambda entries, key: entries[key]["stats"].update(count=1.5), ".stats.count"),
        (lambda entries, key: entries.update({key.replace("test_b", "test_new"): {}}), ""),
    ],
)
def test_file_changed_by_another_process_is_validated_again(store: BaselineStore, edit: object, where: str) -> None:
    a, b = entry("test_a"), entry("test_b", calls_per_sample=1)  # True == 1 in Python, not in the schema
    store.update(CLASS, [a, b])  # this store now holds a parse of the file
    path = store.file_for(CLASS, node_id(a))
    data = json.loads(path.read_text())
    edit(data["entries"], b.key)  # type: ignore[operator]
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError) as info:
        store.update(CLASS, [entry("test_c")])
    bad_key = b.key if where else b.key.replace("test_b", "test_new")
    assert info.value.json_path == f'$.entries["{bad_key}"]{where}'


@pytest.mark.parametrize("key", [f"{MODULE}::default", f"{MODULE}::test_a::", f"{MODULE}::::default"])
def test_update_refuses_keys_that_are_not_measurement_keys(store: BaselineStore, key: str) -> None:
    with pytest.raises(BaselineError, match="does not belong") as info:
        store.update(CLASS, [entry(key=key)])
    assert info.value.json_path == f'$.entries["{key}"]'
    assert not store.file_for(CLASS, MODULE).exists()


def test_update_where_the_folder_cannot_be_made_names_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "baselines"
    blocker.write_text("a file where the folder should be")
    store = BaselineStore(blocker)
    with pytest.raises(BaselineError, match="cannot update it") as info:
        store.update(CLASS, [entry()])
    assert info.value.path == store.file_for(CLASS, MODULE)


# -- links and devices where a baseline file belongs; files too large to be one -------------------


def test_a_dangling_link_where_a_baseline_file_belongs_is_refused_and_nothing_is_written_outside(
    tmp_path: Path,
) -> None:
    store = BaselineStore(tmp_path / "baselines")
    path = store.file_for(CLASS, MODULE)
    path.parent.mkdir(parents=True)
    outside = tmp_path / "outside" / "planted.json"
    outside.parent.mkdir()
    path.symlink_to(outside)  # as a clone checks out a committed link
    with pytest.raises(BaselineError, match=r"is a symbolic link \(to '.*planted\.json'\)") as info:
        store.update(CLASS, [entry()])
    assert info.value.path == path
    assert not outside.exists()
    with pytest.raises(BaselineError, match="is a symbolic link"):
        store.load(CLASS, node_id(entry()), "default")
    assert [e.path for e in store.validate_tree()] == [path]


def test_a_link_to_a_device_is_refused_not_read_as_no_baseline(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "baselines")
    store.update(CLASS, [entry()])
    path = store.file_for(CLASS, MODULE)
    path.unlink()
    path.symlink_to("/dev/zero")
    with pytest.raises(BaselineError, match=r"is a symbolic link \(to '/dev/zero'\)"):
        store.load(CLASS, node_id(entry()), "default")
    with pytest.raises(BaselineError, match="is a symbolic link"):
        store.load_other_classes(node_id(entry()), "default")


def test_a_linked_device_class_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = BaselineStore(tmp_path / "elsewhere")
    elsewhere.update(CLASS, [entry()])
    store = BaselineStore(tmp_path / "baselines")
    store.root.mkdir()
    (store.root / CLASS).symlink_to(elsewhere.root / CLASS)
    with pytest.raises(BaselineError, match="is a symbolic link") as info:
        store.load(CLASS, node_id(entry()), "default")
    assert info.value.path == store.root / CLASS
    with pytest.raises(BaselineError, match="is a symbolic link"):
        store.update(CLASS, [entry(median=2000.0)])
    assert elsewhere.load(CLASS, node_id(entry()), "default") == stored(entry())  # untouched


def test_a_fifo_where_a_baseline_file_belongs_is_refused_by_name(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "baselines")
    path = store.file_for(CLASS, MODULE)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.raises(BaselineError, match="is a device or FIFO, not a baseline file"):
        store.load(CLASS, node_id(entry()), "default")


def test_a_baseline_file_larger_than_the_cap_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    from pytest_gpuperf.files import MAX_JSON_BYTES

    store = BaselineStore(tmp_path / "baselines")
    path = store.file_for(CLASS, MODULE)
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        f.truncate(MAX_JSON_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(BaselineError, match=r"cannot be read: larger than 64 MiB, the most a baseline file may hold"):
        store.load(CLASS, node_id(entry()), "default")
    assert [e.path for e in store.validate_tree()] == [path]


def test_a_session_whose_baseline_is_a_link_to_a_device_fails_naming_it_not_new(pytester: pytest.Pytester) -> None:
    from perf_project import SHORT, make_project

    make_project(pytester)
    pytester.runpytest_subprocess("--gpuperf-update-baseline", *SHORT).assert_outcomes(passed=2)
    [path] = (pytester.path / "baselines").glob("*/*.json")
    path.unlink()
    path.symlink_to("/dev/zero")
    result = pytester.runpytest_subprocess("--gpuperf", *SHORT, "--gpuperf-threshold=5")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*baseline file *{path.name}: is a symbolic link (to '/dev/zero')*"])
    result.stdout.no_fnmatch_line("*1 new*")

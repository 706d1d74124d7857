"""The HNSW index file of a large vector scope over its life (adapters/local/ann_keeper.py, ann_index.py): built in
the background, saved, loaded at the next start and caught up with the rows, rebuilt when unusable, and what a
start or a query waits for meanwhile. The lane's answers are tested in test_ann_lane.py, whose helpers these use.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ctxstore.adapters.local import ann_feeder, ann_keeper
from ctxstore.adapters.local.ann_feeder import AnnFeeder
from ctxstore.adapters.local.ann_index import FORMAT, SUFFIX, AnnIndex, Index, scope_file
from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from tests.unit.test_ann_lane import (
    DB,
    KEY,
    ORG,
    Vectors,
    _ann_keys,
    _docs,
    _fill,
    _flt,
    _open,
    scored_rows,  # noqa: F401  (a fixture)
)
from tests.unit.test_vector_cache import real  # noqa: F401  (a fixture)


def _saved(tmp_path: Path, rows: Vectors) -> Path:
    """A data dir whose scope holds `rows`, its index built by a query and saved by a clean close: the file."""
    index = _open(tmp_path)
    _fill(index, _docs(rows))
    index.vector_search(ORG, _flt(), rows[0], limit=10)
    index.close()
    return scope_file(tmp_path / "search.db.ann", KEY)


def _built_in_background(tmp_path: Path, rows: Vectors) -> SqliteSearchIndex:
    """An index as `serve` runs it (builds and feeding in background threads), its scope's index built."""
    index = SqliteSearchIndex(tmp_path / "search.db", ann_min_rows=1000)
    index.ensure_database(ORG, DB)
    _fill(index, _docs(rows))
    index.vector_search(ORG, _flt(), rows[0], limit=10)
    assert index._ann.wait(timeout=120)
    return index


def _feeder(index: SqliteSearchIndex) -> AnnFeeder:
    assert index._ann.feeder is not None
    return index._ann.feeder


def test_stale_missing_or_corrupt_index_file_is_caught_up_or_rebuilt(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    rows, queries = real
    path = _saved(tmp_path, rows[:3000])
    saved = AnnIndex.load(path, rows.shape[1])
    assert saved is not None and len(saved) == 3000

    # Writes the file never saw (another process without the index, or a crash before the save).
    plain = SqliteSearchIndex(tmp_path / "search.db")
    _fill(plain, _docs(rows[3000:], first=3000))
    for i in range(100):
        plain.delete_item(ORG, DB, f"c{i % 2}", "knowledge", f"i{i}")
    plain.close()

    def check(index: SqliteSearchIndex) -> None:
        alive = {int(r) for (r,) in index._db.conn.execute("SELECT id FROM chunks")}
        assert _ann_keys(index) == alive
        for i in (0, 50, 3100, 3500):
            top = index.vector_search(ORG, _flt(), rows[i], limit=5)[0].chunk_id
            assert (top == f"k{i}") == (i >= 100), (i, top)

    stale = _open(tmp_path)
    try:
        stale.vector_search(ORG, _flt(), queries[0], limit=10)
        check(stale)  # caught up: the new rows in, the deleted ones out
    finally:
        stale.close()

    path.write_bytes(b"not an index" * 100)
    broken = _open(tmp_path)
    try:
        broken.vector_search(ORG, _flt(), queries[0], limit=10)
        check(broken)  # rebuilt from the rows
    finally:
        broken.close()
    rebuilt = AnnIndex.load(path, rows.shape[1])
    assert rebuilt is not None and len(rebuilt) == len(rows) - 100  # and saved again

    path.unlink()
    missing = _open(tmp_path)
    try:
        missing.vector_search(ORG, _flt(), queries[0], limit=10)
        check(missing)
    finally:
        missing.close()


def test_index_builds_in_the_background_while_the_lane_answers(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    rows, queries = real
    index = SqliteSearchIndex(tmp_path / "search.db", ann_min_rows=1000)
    try:
        index.ensure_database(ORG, DB)
        _fill(index, _docs(rows))
        first = index.vector_search(ORG, _flt(), queries[0], limit=10)  # answered by the scan meanwhile
        assert len(first) == 10
        assert index._ann.wait(timeout=120)
        _fill(index, _docs(rows[:50], first=len(rows)))  # writes after the build reach the index too, fed after
        deadline = time.monotonic() + 30
        while len(_ann_keys(index)) < len(rows) + 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_ann_keys(index)) == len(rows) + 50
    finally:
        index.close()
    assert scope_file(tmp_path / "search.db.ann", KEY).exists()


def test_a_scope_reloaded_after_another_writer_keeps_its_index_caught_up(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    rows, _ = real
    index = _open(tmp_path)
    other = SqliteSearchIndex(tmp_path / "search.db")  # another process's writes: this cache misses them
    try:
        _fill(index, _docs(rows[:3000]))
        index.vector_search(ORG, _flt(), rows[0], limit=5)
        ann = index._vectors[KEY].ann
        _fill(other, _docs(rows[3000:], first=3000))
        other.delete_item(ORG, DB, "c0", "knowledge", "i0")
        index.upsert(ORG, _docs(rows[:1], first=9000))  # this writer's own write after the missed ones
        assert index.vector_search(ORG, _flt(), rows[3500], limit=5)[0].chunk_id == "k3500"
        assert index._vectors[KEY].ann is ann  # the same index, caught up by rowids rather than rebuilt
        alive = {int(r) for (r,) in index._db.conn.execute("SELECT id FROM chunks")}
        assert _ann_keys(index) == alive
    finally:
        other.close()
        index.close()


def test_a_saved_index_is_loaded_before_the_warm_up_ends_and_a_first_query_waits_for_it(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    scored_rows: list[int],  # noqa: F811
) -> None:
    """A restart with the index on disk: the warm-up ends with the index installed, and a query sent before the
    load ends waits for it (a few seconds at most) instead of answering by a scan or the shortlist."""
    rows, queries = real
    _saved(tmp_path, rows)
    warmed = SqliteSearchIndex(tmp_path / "search.db", ann_min_rows=1000)  # the background mode serve uses
    try:
        assert warmed.warm_vectors() == 1
        assert warmed._vectors[KEY].ann is not None
    finally:
        warmed.close()
    cold = SqliteSearchIndex(tmp_path / "search.db", ann_min_rows=1000)
    try:
        scored_rows.clear()
        assert len(cold.vector_search(ORG, _flt(), queries[1], limit=10)) == 10
        assert cold._vectors[KEY].ann is not None
        assert scored_rows == [2 * 10 + 8]  # the index's candidates only: the query waited for the load
    finally:
        cold.close()


def test_a_small_catch_up_leaves_the_file_for_the_clean_stop_and_a_large_one_saves_it(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Writing the file holds the index's lock (~1 s at 1M rows, searches wait): after a start whose feeding caught
    up a few rows the file stays as it was until a clean stop; past SAVE_AFTER_CHANGES rows it is written at once.
    The start does not wait for those rows: they are past the file's last key, so the feeder adds them after."""
    rows, _ = real
    path = _saved(tmp_path, rows[:2000])

    def written_after(added: range, threshold: int) -> bool:
        monkeypatch.setattr(ann_feeder, "SAVE_AFTER_CHANGES", threshold)
        plain = SqliteSearchIndex(tmp_path / "search.db")  # writes the saved file never saw
        _fill(plain, _docs(rows[added.start : added.stop], first=added.start))
        plain.close()
        before = path.stat().st_mtime_ns
        restarted = SqliteSearchIndex(tmp_path / "search.db", ann_min_rows=1000)
        try:
            restarted._ann.stop()  # no feeding thread: what follows is the start's own work, then one feed
            restarted.warm_vectors()
            assert restarted._ann.wait(timeout=60)
            assert len(_ann_keys(restarted)) < added.stop  # the rows written since the save were not waited for
            _feeder(restarted)._stop.clear()
            _feeder(restarted).feed()
            assert len(_ann_keys(restarted)) == added.stop
            return path.stat().st_mtime_ns != before
        finally:
            restarted._snapshot_keeper.stop()
            restarted._db.close()  # a stop without the clean close's save, as after kill -9

    assert not written_after(range(2000, 2200), threshold=1000)
    assert written_after(range(2200, 3400), threshold=1000)
    assert not list(path.parent.glob("*.tmp"))


def test_two_saves_of_one_scope_at_once_leave_one_whole_file_and_no_temporary_ones(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two saves of one scope (a catch-up's and a stop's) once shared a temporary name: one renamed the file the
    other was still writing, and the second rename failed. A temporary file a crash left is removed at start."""
    rows, _ = real
    path = tmp_path / "ann" / f"scope.{FORMAT}{SUFFIX}"
    ids = np.arange(1, len(rows) + 1, dtype=np.int64)
    first = AnnIndex.build(rows.shape[1], ids, lambda block: rows[block])
    second = AnnIndex.build(rows.shape[1], ids[:2000], lambda block: rows[:2000][block])
    errors: list[BaseException] = []

    def save(ann: AnnIndex) -> None:
        try:
            for _ in range(5):
                ann.save(path)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(ann,)) for ann in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    loaded = AnnIndex.load(path, rows.shape[1])
    assert loaded is not None and len(loaded) in (len(rows), 2000)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    (path.parent / "scope.0123.tmp").write_bytes(b"cut short by a crash")
    ann_keeper.AnnKeeper(path.parent, threading.Lock(), min_rows=1000, in_background=True)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_query_does_not_wait_for_a_build_that_replaces_an_unreadable_file(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a load from a saved file is waited for: when the file turns out unreadable, the build from the rows
    that replaces it (minutes at 1M) runs in the background while queries answer by the scan or the shortlist."""
    rows, queries = real
    _saved(tmp_path, rows).write_bytes(b"not an index" * 100)
    release = threading.Event()
    inner = AnnIndex.build

    def held_build(*args: object, **kwargs: object) -> AnnIndex:
        release.wait(30)
        return inner(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(AnnIndex, "build", held_build)
    reopened = SqliteSearchIndex(tmp_path / "search.db", ann_min_rows=1000)
    try:
        started = time.monotonic()
        assert len(reopened.vector_search(ORG, _flt(), queries[1], limit=10)) == 10
        assert time.monotonic() - started < 5  # not the 10 s a load may be waited for
        assert reopened._vectors[KEY].ann is None  # answered while the build is held
    finally:
        release.set()
        reopened._ann.wait(timeout=60)
        reopened.close()


def test_an_index_of_an_older_format_is_removed_at_start_and_the_scope_rebuilt(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    """Files saved before the lane coded vectors itself (usearch's own cast, connectivity 16, no format in the
    name) would answer worse than a rebuild: they are removed at start; one of another graph under the current
    name is not loaded but rebuilt from the rows."""
    rows, _ = real
    index = _open(tmp_path)
    _fill(index, _docs(rows[:2000]))
    index.close()
    ann_dir = tmp_path / "search.db.ann"
    ann_dir.mkdir()
    older = Index(ndim=rows.shape[1], metric="ip", dtype="i8", connectivity=16)
    older.add(np.arange(1, 2001, dtype=np.int64), rows[:2000])
    old_name = ann_dir / f"{scope_file(ann_dir, KEY).name.split('.')[0]}{SUFFIX}"
    older.save(str(old_name))
    older.save(str(scope_file(ann_dir, KEY)))
    assert AnnIndex.load(scope_file(ann_dir, KEY), rows.shape[1]) is None  # another graph: not used

    index = _open(tmp_path)
    try:
        assert not old_name.exists()
        hits = index.vector_search(ORG, _flt(), rows[7], limit=5)
        assert hits[0].chunk_id == "k7"
    finally:
        index.close()
    rebuilt = AnnIndex.load(scope_file(ann_dir, KEY), rows.shape[1])
    assert rebuilt is not None and len(rebuilt) == 2000
    assert sorted(p.name for p in ann_dir.iterdir()) == [scope_file(ann_dir, KEY).name]


def test_written_rows_answer_before_the_index_is_fed_and_enter_it_after(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A write appends its rows to the scope and the index gets them in the background (adding a row to a 1M index
    costs ~0.9 ms: in the write path the ingest rate at 1M fell to 0.70x an empty index's). Until fed, a search
    scores them exactly beside the index's candidates; a row deleted before it was fed never enters the index."""
    rows, _ = real
    index = _built_in_background(tmp_path, rows[:3000])
    try:
        index._ann.stop()  # no feeding from here: what follows is what a search sees before the feeder runs
        _fill(index, _docs(rows[3000:], first=3000))
        index.delete_item(ORG, DB, "c1", "knowledge", "i3001")
        assert len(_ann_keys(index)) == 3000  # the write did not wait for the index
        for i in (3000, 3500, 3999):
            assert index.vector_search(ORG, _flt(), rows[i], limit=5)[0].chunk_id == f"k{i}"  # scored exactly
        assert index.vector_search(ORG, _flt("c1"), rows[3001], limit=5)[0].chunk_id != "k3001"
        _feeder(index)._stop.clear()
        assert _feeder(index).feed() == len(rows) - 3000 - 1
        alive = {int(r) for (r,) in index._db.conn.execute("SELECT id FROM chunks")}
        assert _ann_keys(index) == alive
        assert _feeder(index).feed() == 0  # nothing left
    finally:
        index.close()


def test_a_writer_feeds_the_index_itself_when_the_feeding_thread_falls_behind(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The feeding thread runs at a low priority and can fall behind a long ingest, while every search scores the
    rows not yet in the index exactly: past MAX_PENDING of them a writer feeds the index itself (back-pressure)."""
    rows, _ = real
    monkeypatch.setattr(ann_feeder, "MAX_PENDING", 300)
    index = _built_in_background(tmp_path, rows[:2000])
    try:
        _feeder(index)._thread = threading.Thread(target=lambda: None)  # a feeding thread that never feeds
        backlogs = []
        for start in range(2000, 4000, 100):
            _fill(index, _docs(rows[start : start + 100], first=start))
            backlogs.append(_feeder(index).backlog())
        assert max(backlogs) <= 300 and len(_ann_keys(index)) > 2000 + 2000 - 300, backlogs
        assert index.vector_search(ORG, _flt(), rows[3999], limit=5)[0].chunk_id == "k3999"
    finally:
        _feeder(index)._thread = None
        index.close()


def test_the_feeding_thread_waits_for_writes_to_pause_unless_too_many_rows_wait(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adding rows to a large index beside a burst of ingestion slowed the ingestion's embedding even at a low
    priority (writes_at_size at 1M: 0.84x an empty index's against 0.91-0.99x when the thread waits): it feeds once
    writes have paused for QUIET_S, or at once past SOFT_PENDING rows waiting."""
    rows, _ = real
    monkeypatch.setattr(ann_feeder, "QUIET_S", 1.0)
    monkeypatch.setattr(ann_feeder, "SOFT_PENDING", 400)
    index = _built_in_background(tmp_path, rows[:2000])
    try:
        burst_end = time.monotonic() + 0.6
        start = 2000
        while time.monotonic() < burst_end:  # writes 0.1 s apart: never quiet for 1 s
            _fill(index, _docs(rows[start : start + 20], first=start))
            start += 20
            time.sleep(0.1)
        assert len(_ann_keys(index)) == 2000  # nothing fed during the burst (fewer than 400 waiting)
        deadline = time.monotonic() + 30
        while len(_ann_keys(index)) < start and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_ann_keys(index)) == start  # fed once the writes paused
        fed = start
        _fill(index, _docs(rows[start : start + 500], first=start))  # past SOFT_PENDING in one write
        start += 500
        deadline = time.monotonic() + 20
        while len(_ann_keys(index)) == fed and time.monotonic() < deadline:  # writes never pause meanwhile
            _fill(index, _docs(rows[start : start + 1], first=start))
            start += 1
            time.sleep(0.1)
        assert len(_ann_keys(index)) > fed  # fed without waiting for a pause
    finally:
        index.close()

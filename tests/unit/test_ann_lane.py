"""The HNSW index of large vector scopes (adapters/local/ann_index.py) behind SqliteSearchIndex's vector lane.

Real MiniLM vectors (SciFact titles and mixtures of them, SciFact claims as queries: the `real` fixture of
test_vector_cache.py), with the size threshold lowered so a few thousand rows get an index.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ctxstore.adapters.local import ann_keeper, vector_cache
from ctxstore.adapters.local.ann_index import AnnIndex, scope_file
from ctxstore.adapters.local.sqlite_search_index import SqliteSearchIndex
from ctxstore.ports.search_index import ChunkDoc, SearchFilter
from tests.unit.test_vector_cache import real  # noqa: F401  (a fixture)

ORG, DB = "org1", "db1"
KEY = (ORG, DB, "knowledge")
Vectors = npt.NDArray[np.float32]


def _open(path: Path) -> SqliteSearchIndex:
    index = SqliteSearchIndex(path / "search.db", ann_min_rows=1000, ann_in_background=False)
    index.ensure_database(ORG, DB)
    return index


def _docs(rows: Vectors, first: int = 0, collections: int = 2) -> list[ChunkDoc]:
    return [
        ChunkDoc(f"k{i}", f"i{i}", DB, f"c{i % collections}", "knowledge", f"text {i}", v)
        for i, v in enumerate(rows, start=first)
    ]


def _fill(index: SqliteSearchIndex, docs: list[ChunkDoc]) -> None:
    for start in range(0, len(docs), 1000):
        index.upsert(ORG, docs[start : start + 1000])


def _flt(*collections: str) -> SearchFilter:
    return SearchFilter(database=DB, collections=list(collections), store="knowledge")


@pytest.fixture
def scored_rows(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many rows each exact scoring pass read: the index's candidates, or a scan of the scope."""
    seen: list[int] = []
    inner = vector_cache._scores

    def spy(mat: Vectors, query: Vectors) -> Vectors:
        seen.append(mat.shape[0])
        return inner(mat, query)

    monkeypatch.setattr(vector_cache, "_scores", spy)
    yield seen


def _ann_keys(index: SqliteSearchIndex) -> set[int]:
    ann = index._vectors[KEY].ann
    assert ann is not None
    return set(ann.keys().tolist())


def test_lane_recall_against_exact_with_exact_scores(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    scored_rows: list[int],
) -> None:
    rows, queries = real
    index = _open(tmp_path)
    try:
        _fill(index, _docs(rows))
        r10, r100 = [], []
        for q in queries:
            hits = index.vector_search(ORG, _flt(), q, limit=100)
            got = np.asarray([int(h.chunk_id[1:]) for h in hits])
            assert np.allclose([h.score for h in hits], rows[got] @ q, atol=1e-5)  # exact dot products
            exact = np.argsort(-(rows @ q), kind="stable")
            r10.append(len(set(got[:10].tolist()) & set(exact[:10].tolist())) / 10)
            r100.append(len(set(got.tolist()) & set(exact[:100].tolist())) / 100)
        assert float(np.mean(r10)) >= 0.99 and float(np.mean(r100)) >= 0.98, (np.mean(r10), np.mean(r100))
        assert max(scored_rows) < len(rows) // 4  # only the index's candidates were scored, never the scope
    finally:
        index.close()


def test_collection_filter_on_the_index_and_the_fallback_for_narrow_ones(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    scored_rows: list[int],
) -> None:
    rows, queries = real
    index = _open(tmp_path)
    try:
        docs = _docs(rows[:3960], collections=2) + _docs(rows[3960:], first=3960, collections=1)  # c0 + 40 in c0
        docs[-40:] = [ChunkDoc(d.chunk_id, d.item_id, DB, "tiny", d.store, d.text, d.vector) for d in docs[-40:]]
        _fill(index, docs)
        hits = index.vector_search(ORG, _flt("c1"), queries[0], limit=20)
        assert len(hits) == 20 and {h.collection for h in hits} == {"c1"}
        # The first k = 2 x 20 + 8 of the index's candidates in c1: not a scan of c1's rows, nor all of the
        # candidates over-fetched to find k in half the scope.
        assert scored_rows[-1] == 2 * 20 + 8
        tiny = index.vector_search(ORG, _flt("tiny"), queries[0], limit=20)
        assert len(tiny) == 20 and {h.collection for h in tiny} == {"tiny"}  # too narrow for the index: a scan
        exact = 3960 + np.argsort(-(rows[3960:] @ queries[0]))[:20]
        assert [int(h.chunk_id[1:]) for h in tiny] == exact.tolist()
    finally:
        index.close()


def test_deleted_and_replaced_rows_never_return(real: tuple[Vectors, Vectors], tmp_path: Path) -> None:  # noqa: F811
    rows, _ = real
    index = _open(tmp_path)
    try:
        _fill(index, _docs(rows))
        index.vector_search(ORG, _flt(), rows[0], limit=10)  # builds the index
        for i in range(0, 200, 2):
            assert index.delete_item(ORG, DB, f"c{i % 2}", "knowledge", f"i{i}") == 1
        moved = _docs(rows[200:300][::-1], first=200)  # the same chunk ids with other vectors: new rows
        index.upsert(ORG, moved)
        for i in range(0, 300, 2):
            hits = index.vector_search(ORG, _flt(), rows[i], limit=10)
            if i < 200:  # deleted: its own vector finds it no more
                assert f"k{i}" not in {h.chunk_id for h in hits}
            else:  # replaced: its old vector finds its new row only by the new vector's own score
                new = moved[i - 200].vector
                assert new is not None
                top = {h.chunk_id: h.score for h in hits}
                if f"k{i}" in top:
                    assert top[f"k{i}"] == pytest.approx(float(new @ rows[i]), abs=1e-5)
        alive = {int(r) for (r,) in index._db.conn.execute("SELECT id FROM chunks")}
        assert _ann_keys(index) == alive
    finally:
        index.close()


def test_stale_missing_or_corrupt_index_file_is_caught_up_or_rebuilt(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    rows, queries = real
    index = _open(tmp_path)
    _fill(index, _docs(rows[:3000]))
    index.vector_search(ORG, _flt(), queries[0], limit=10)
    index.close()  # saves the index next to search.db
    path = scope_file(tmp_path / "search.db.ann", KEY)
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
        _fill(index, _docs(rows[:50], first=len(rows)))  # writes after the build reach the index too
        assert len(_ann_keys(index)) == len(rows) + 50
    finally:
        index.close()
    assert scope_file(tmp_path / "search.db.ann", KEY).exists()


def test_usearch_and_onnxruntime_load_in_one_process() -> None:
    """usearch's extension loaded before onnxruntime made onnxruntime's import crash (SIGSEGV): ann_index.py
    loads onnxruntime first, so a process that imports the lane and then embeds survives."""
    code = (
        "import ctxstore.adapters.local.ann_index\n"
        "from ctxstore.adapters.models.local_embedder import LocalEmbedder\n"
        "print(LocalEmbedder().embed_query('hello').shape)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "(384,)"


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


def _resident_kb(path_part: str) -> int:
    """Resident kB of this process's mappings of files whose path holds `path_part` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(maxsplit=1)[0]
        if "-" in first and ":" not in first:  # a mapping's header: "start-end perms offset dev inode path"
            inside = path_part in line
        elif inside and first == "Rss:":
            total += int(line.split()[1])
    return total


def test_an_index_build_leaves_the_snapshot_matrix_out_of_the_resident_set(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    """The build reads every row of the memory-mapped matrix (1.5 GB at 1M); its pages are then released, and
    queries answered by the index read their candidates' rows with pread, which maps nothing (through the
    mapping, each row faults in up to 16 pages: a few queries here map the whole matrix again)."""
    rows, queries = real
    index = _open(tmp_path)
    _fill(index, _docs(rows))
    index.vector_search(ORG, _flt(), queries[0], limit=10)  # the scope in memory (and its index)
    index.close()  # saves the vector snapshot (the matrix as a .npy file)
    scope_file(tmp_path / "search.db.ann", KEY).unlink()  # the next start builds the index from the mapping
    matrix_kb = rows.nbytes // 1024
    reopened = _open(tmp_path)
    try:
        for q in queries[:5]:
            assert len(reopened.vector_search(ORG, _flt(), q, limit=10)) == 10
        assert reopened._vectors[KEY].ann is not None
        resident = _resident_kb(".mat.npy")
        assert resident < matrix_kb // 4, (resident, matrix_kb)  # without the release: the whole matrix
    finally:
        reopened.close()


def test_the_index_is_on_for_large_scopes_by_default_and_the_local_runtime_passes_the_setting(tmp_path: Path) -> None:
    from ctxstore.config import Settings
    from ctxstore.runtime import build_container

    assert Settings().vector_ann_min_rows == 200_000  # 0 turns it off
    for asked, expected in ((0, None), (50_000, 50_000), (Settings().vector_ann_min_rows, 200_000)):
        c = build_container(Settings(data_dir=tmp_path / str(asked), vector_ann_min_rows=asked))
        try:
            assert isinstance(c.search_index, SqliteSearchIndex)
            assert c.search_index._ann.min_rows == expected
        finally:
            c.close()


def test_rows_added_after_a_start_survive_the_release_and_are_rescored_from_memory(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A snapshot is mapped copy-on-write and rows written since the start fill its spare rows in private pages:
    the release after a build must leave those pages (MADV_DONTNEED would reset them to the file's zeros), and
    pread, which reads the file, must not serve them."""
    rows, queries = real
    index = _open(tmp_path)
    _fill(index, _docs(rows))
    index.vector_search(ORG, _flt(), queries[0], limit=10)
    index.close()
    scope_file(tmp_path / "search.db.ann", KEY).unlink()
    fresh = -rows[:40]  # unlike every saved row: each is its own nearest neighbour
    reopened = _open(tmp_path)
    try:
        reopened.upsert(ORG, _docs(fresh, first=len(rows)))  # caught up into the spare rows on the next load
        for i in range(0, 40, 3):
            top = reopened.vector_search(ORG, _flt(), fresh[i], limit=3)[0]
            assert top.chunk_id == f"k{len(rows) + i}" and top.score == pytest.approx(1.0, abs=1e-5)
        scope = reopened._vectors[KEY]
        assert scope.ann is not None and scope.file_rows is not None and scope.file_rows.rows == len(rows)
    finally:
        reopened.close()


def test_a_narrow_search_asks_the_index_for_the_narrow_breadth(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The feedback search (narrow) runs at NARROW_BREADTH, a first pass at the index's default breadth."""
    rows, queries = real
    breadths: list[int | None] = []
    inner = AnnIndex.search

    def spy(self: AnnIndex, query: Vectors, count: int, breadth: int | None = None) -> npt.NDArray[np.int64]:
        breadths.append(breadth)
        return inner(self, query, count, breadth)

    monkeypatch.setattr(AnnIndex, "search", spy)
    index = _open(tmp_path)
    try:
        _fill(index, _docs(rows))
        first = index.vector_search(ORG, _flt(), queries[0], limit=10)
        narrow = index.vector_search(ORG, _flt(), queries[0], limit=10, narrow=True)
        assert breadths == [None, vector_cache.NARROW_BREADTH]
        assert [h.chunk_id for h in narrow[:5]] == [h.chunk_id for h in first[:5]]
    finally:
        index.close()


def test_a_saved_index_is_loaded_before_the_warm_up_ends_and_a_first_query_waits_for_it(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    scored_rows: list[int],
) -> None:
    """A restart with the index on disk: the warm-up ends with the index installed, and a query sent before the
    load ends waits for it (a few seconds at most) instead of answering by a scan or the shortlist."""
    rows, queries = real
    index = _open(tmp_path)
    _fill(index, _docs(rows))
    index.vector_search(ORG, _flt(), queries[0], limit=10)
    index.close()  # saves the index
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
    """Writing the file holds the index's lock (~1 s at 1M rows, searches wait): after a start that caught up a
    few rows the file stays as it was until a clean stop; past SAVE_AFTER_CATCH_UP rows it is written at once."""
    rows, queries = real
    path = scope_file(tmp_path / "search.db.ann", KEY)
    index = _open(tmp_path)
    _fill(index, _docs(rows[:2000]))
    index.vector_search(ORG, _flt(), queries[0], limit=10)
    index.close()

    def written_after(added: range, threshold: int) -> bool:
        monkeypatch.setattr(ann_keeper, "SAVE_AFTER_CATCH_UP", threshold)
        plain = SqliteSearchIndex(tmp_path / "search.db")  # writes the saved file never saw
        _fill(plain, _docs(rows[added.start : added.stop], first=added.start))
        plain.close()
        before = path.stat().st_mtime_ns
        restarted = SqliteSearchIndex(tmp_path / "search.db", ann_min_rows=1000)
        try:
            restarted.warm_vectors()
            assert len(_ann_keys(restarted)) == added.stop
            assert restarted._ann.wait(timeout=60)  # the save, if any, follows the install
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
    path = tmp_path / "ann" / "scope.usearch"
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
    assert sorted(p.name for p in path.parent.iterdir()) == ["scope.usearch"]
    (path.parent / "scope.0123.tmp").write_bytes(b"cut short by a crash")
    ann_keeper.AnnKeeper(path.parent, threading.Lock(), min_rows=1000, in_background=True)
    assert sorted(p.name for p in path.parent.iterdir()) == ["scope.usearch"]


def test_candidates_among_rows_added_since_the_start_leave_the_snapshot_file_unmapped(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A candidate added since the start (in the mapping's private pages) once sent every candidate through the
    mapping, whose faults map the file's pages around each one into the resident set; the file's rows are read
    by pread instead, whatever rows they are rescored with."""
    rows, _ = real
    index = _open(tmp_path)
    _fill(index, _docs(rows))
    index.vector_search(ORG, _flt(), rows[0], limit=10)
    index.close()  # saves the vector snapshot and the index: the next start maps the matrix, builds nothing
    reopened = _open(tmp_path)
    try:
        added = (rows[:40] + 0.05 * rows[40:80]) / np.linalg.norm(rows[:40] + 0.05 * rows[40:80], axis=1)[:, None]
        reopened.upsert(ORG, _docs(added.astype(np.float32), first=len(rows)))
        before = _resident_kb(".mat.npy")
        for i in range(40):
            hits = reopened.vector_search(ORG, _flt(), rows[i], limit=100)
            ids = {int(h.chunk_id[1:]) for h in hits}
            assert len(rows) + i in ids and i in ids  # an added row and a saved one in the same rescoring
        assert _resident_kb(".mat.npy") - before < 512, _resident_kb(".mat.npy") - before
    finally:
        reopened.close()


def test_a_query_does_not_wait_for_a_build_that_replaces_an_unreadable_file(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a load from a saved file is waited for: when the file turns out unreadable, the build from the rows
    that replaces it (minutes at 1M) runs in the background while queries answer by the scan or the shortlist."""
    rows, queries = real
    index = _open(tmp_path)
    _fill(index, _docs(rows))
    index.vector_search(ORG, _flt(), queries[0], limit=10)
    index.close()
    scope_file(tmp_path / "search.db.ann", KEY).write_bytes(b"not an index" * 100)
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

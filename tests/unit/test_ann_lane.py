"""The HNSW index of large vector scopes (adapters/local/ann_index.py) behind SqliteSearchIndex's vector lane.

Real MiniLM vectors (SciFact titles and mixtures of them, SciFact claims as queries: the `real` fixture of
test_vector_cache.py), with the size threshold lowered so a few thousand rows get an index.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ctxstore.adapters.local import ann_candidates, ann_index, vector_cache
from ctxstore.adapters.local.ann_index import AnnIndex, Index, scope_file
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


def test_the_index_compares_codes_of_its_own_finer_than_usearchs_cast(real: tuple[Vectors, Vectors]) -> None:  # noqa: F811
    """usearch's own i8 cast normalises a vector and maps [-1, 1] onto [-127, 127]: a unit 384-d vector used about
    +-6 of the range and HNSW needed breadth 768 for recall@100 0.98. The index stores codes scaled by I8_SCALE,
    and their inner products follow the vectors' at least twice as closely."""
    rows, queries = real
    ids = np.arange(1, len(rows) + 1, dtype=np.int64)
    ann = AnnIndex.build(rows.shape[1], ids, lambda block: rows[block])
    stored = np.stack([ann._index.get(int(k), dtype="i8") for k in ids[:200]])
    assert np.array_equal(stored, ann_index.codes(rows[:200]))
    theirs = Index(ndim=rows.shape[1], metric="ip", dtype="i8")
    theirs.add(ids[:200], rows[:200])
    cast = np.stack([theirs.get(int(k), dtype="i8") for k in ids[:200]]).astype(np.float32)
    exact = queries @ rows[:200].T
    ours_err = np.abs(
        ann_index.codes(queries).astype(np.float32) @ stored.T.astype(np.float32) / ann_index.I8_SCALE**2 - exact
    )
    q_cast = np.clip(np.rint(queries * 127), -127, 127)  # unit queries: usearch's cast of them
    cast_err = np.abs(q_cast @ cast.T / 127**2 - exact)
    assert float(ours_err.mean()) * 2 < float(cast_err.mean()), (ours_err.mean(), cast_err.mean())


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


@pytest.fixture
def index_asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int | None, int]]]:
    """Each search of an HNSW index: (candidates asked for, breadth asked for, breadth it searched at)."""
    asked: list[tuple[int, int | None, int]] = []
    inner = AnnIndex.search

    def spy(self: AnnIndex, query: Vectors, count: int, breadth: int | None = None) -> npt.NDArray[np.int64]:
        found = inner(self, query, count, breadth)
        asked.append((count, breadth, int(self._index.expansion_search)))
        return found

    monkeypatch.setattr(AnnIndex, "search", spy)
    yield asked


def test_a_narrow_search_asks_the_index_for_the_narrow_breadth(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    index_asked: list[tuple[int, int | None, int]],
) -> None:
    """The feedback search (narrow) runs at NARROW_BREADTH, a first pass at the index's default breadth."""
    rows, queries = real
    index = _open(tmp_path)
    try:
        _fill(index, _docs(rows))
        first = index.vector_search(ORG, _flt(), queries[0], limit=10)
        narrow = index.vector_search(ORG, _flt(), queries[0], limit=10, narrow=True)
        assert [at for _, _, at in index_asked] == [ann_index.EXPANSION_SEARCH, vector_cache.NARROW_BREADTH]
        assert [h.chunk_id for h in narrow[:5]] == [h.chunk_id for h in first[:5]]
    finally:
        index.close()


def _recall_in(index: SqliteSearchIndex, rows: Vectors, allowed: npt.NDArray[np.int64], query: Vectors) -> float:
    hits = index.vector_search(ORG, _flt("c0"), query, limit=100)
    exact = allowed[np.argsort(-(rows[allowed] @ query))[:100]]
    return len({h.chunk_id for h in hits} & {f"k{i}" for i in exact}) / 100


def test_a_filter_allowing_most_rows_asks_the_index_for_little_more_than_k(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    index_asked: list[tuple[int, int | None, int]],
) -> None:
    """A default collection beside a few small ones: 98 % of the rows allowed. The index was asked for
    k / share x 2 candidates at that breadth (2.0x the work at 1M, for the first and the feedback search)."""
    rows, queries = real
    index = _open(tmp_path)
    try:
        docs = _docs(rows, collections=1)
        docs[-80:] = [ChunkDoc(d.chunk_id, d.item_id, DB, "other", d.store, d.text, d.vector) for d in docs[-80:]]
        _fill(index, docs)
        allowed = np.arange(len(rows) - 80)
        recalls = [_recall_in(index, rows, allowed, q) for q in queries[:20]]
        k, share = 2 * 100 + 8, (len(rows) - 80) / len(rows)
        for count, _, searched_at in index_asked:
            assert k < count <= k / share * 1.05 + 16, count
            assert searched_at == math.ceil(ann_index.EXPANSION_SEARCH / share)  # ~330, not 425
        assert float(np.mean(recalls)) >= 0.98, np.mean(recalls)
    finally:
        index.close()


def test_the_index_answers_filters_down_to_the_share_it_always_did() -> None:
    """The request shrank near a share of 1, not where the index gives way to the scan or the shortlist."""
    k = 2 * 100 + 8
    assert ann_candidates.fetch_size(k, 1.0) == k
    assert ann_candidates.fetch_size(k, 0.09) is None  # 100 of 1,000 collections and fewer: the shortlist
    for share in (0.11, 0.3, 0.7, 0.984):
        fetch = ann_candidates.fetch_size(k, share)
        assert fetch is not None and k / share < fetch <= k / share * 2.0, (share, fetch)


def test_rows_of_another_collection_crowding_a_query_are_asked_past_not_scanned(
    real: tuple[Vectors, Vectors],  # noqa: F811
    tmp_path: Path,
    scored_rows: list[int],
    index_asked: list[tuple[int, int | None, int]],
) -> None:
    """The same documents in a second collection: half of the index's nearest rows are filtered out where the
    filter allows 93 % overall. The index is asked once more for enough, rather than the scope scanned."""
    rows, queries = real
    query = queries[0]
    near = np.argsort(-(rows @ query))[:300]
    index = _open(tmp_path)
    try:
        copies = [ChunkDoc(f"x{i}", f"xi{i}", DB, "copy", "knowledge", "copy", rows[i]) for i in near]
        _fill(index, _docs(rows, collections=1) + copies)
        recall = _recall_in(index, rows, np.arange(len(rows)), query)
        assert len(index_asked) == 2 and index_asked[1][0] > index_asked[0][0]  # asked again, for more
        assert max(scored_rows) <= 2 * 100 + 8  # the first k allowed candidates only: no shortlist, no scan
        assert recall >= 0.98, recall
    finally:
        index.close()


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

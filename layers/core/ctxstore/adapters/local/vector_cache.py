"""In-memory vectors of one search scope, and their top-k search.

Below `APPROX_MIN_ROWS` candidates the top-k is an exact scan of the float32 matrix. Above it, an
exact scan (100k x 384 float32 = 150 MB read per query, ~20 ms on 2 cores) dominates a `fast`
query, so the search shortlists rows by the Hamming distance of 1-bit codes (the sign of each
component after subtracting the scope's mean, 48 bytes per 384-d row, ~0.5 ms over 100k rows)
and rescores the shortlist exactly in float32. Scores returned are always exact dot products; only
which rows reach the rescoring is approximate (recall@10 against the exact scan: 0.998 on the 100k
latency corpus with SciFact queries, see tests/unit/test_vector_cache.py and docs/benchmarks.md).

The codes are derived state: built on the first large search, extended for appended rows,
compacted with the matrix, and rebuilt around a fresh mean once the scope has doubled.

When the owner enables it (`serve` does for scopes of 200k rows or more, see ANN_MIN_ROWS), large scopes
get an HNSW index (ann_index.py, built in the background): its candidates, filtered by the mask, are
rescored exactly from the matrix, so the cost no longer grows with the scope (the shortlist rescores 5 %
of it). When the candidates allowed by a narrow
filter cannot fill k, the search falls back to the paths above.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.ann_candidates import ann_candidates
from ctxstore.adapters.local.candidate_memo import CandidateMemo
from ctxstore.adapters.local.mapped_rows import PREAD_MAX_ROWS, FileRows
from ctxstore.adapters.local.quantized_rows import BUILDING, narrowed
from ctxstore.adapters.local.remapped_matrix import compacted, grown
from ctxstore.adapters.local.row_positions import positions

if TYPE_CHECKING:  # usearch loads only where the HNSW index is on (ann_keeper.py)
    from ctxstore.adapters.local.ann_index import AnnIndex

Vector = npt.NDArray[np.float32]
Codes = npt.NDArray[np.uint64]

# Exact scan below this many candidate rows: 20k x 384 costs ~2-4 ms, and a shortlist of 4,000
# would already be a fifth of the rows.
APPROX_MIN_ROWS = 20_000
SHORTLIST_MIN = 4_000
_BLAS_MIN_ROWS = 50_000
# The owner sets the size (SqliteSearchIndex(ann_min_rows=...); `serve`: CTXSTORE_VECTOR_ANN_MIN_ROWS, 200k by
# default). At 1M rows grown from real vectors by mixtures (ann_1m.py) it answers at recall@100 0.986 in ~2.4 ms
# where the shortlist takes 42 ms (ann_index.py). History: on the 1M
# corpus grown from SciFact vectors (193 noisy copies of each), usearch HNSW (connectivity 16, expansion_add
# 128) reached only recall@100 0.51 at breadth 1024, i8 and f16 alike, where the shortlist keeps 0.998
# (ann_choice.py); on 107,556 real vectors (the 100k corpus ingested through the API plus LoCoMo turns) it
# needs breadth 768 for 0.980, where the shortlist keeps 0.995 at the same p50 (ann_1m.py, docs/benchmarks.md).
# When asked, the HNSW index answers for scopes this large: at 20k rows it took 0.55 ms a query against 7.1 ms for the
# exact scan in the same run (recall@100 0.988; bench/retrieval/ann_choice.py, load ~9), for 614 B a row of
# memory and ~13 s of building in the background; smaller scopes keep the scan. A filter keeps a share of
# the rows: how many candidates the index is asked for then is ann_candidates.py's; narrower filters use the
# paths above (one collection of 1,000 rows: a 0.1 ms scan).
ANN_MIN_ROWS = 20_000
# A query into a few collections of a large scope reads those collections' rows (VectorScope.collection_rows)
# instead of testing every row's collection: 1,000 collections of 1,000 rows, ~2 ms a search saved. Rows
# appended since the rows were grouped are found by a scan of that tail, regrouped past this share of the rows.
GROUP_TAIL_SHARE = 8
LARGE_SHARE = 8  # collections with 1/8 of a scope's rows or more: a mask by comparison, not by rows
# The feedback search's vector (the query moved toward its best rows) lies among the rows, where the index finds
# neighbours at a smaller breadth: at 1M, recall@100 0.987 at 208 (1.7 ms), the fewest candidates the lane asks
# for at limit 100, where a first pass's query has 0.976 (bench/retrieval/ann_1m.py feedback, ann_index.py).
NARROW_BREADTH = 208
_CANDIDATES = CandidateMemo()


def _scores(mat: Vector, query: Vector) -> Vector:
    """Dot products of every row with the query.

    Multi-threaded BLAS gemv costs a fixed 6-9 ms here when its worker threads have gone idle between
    queries (measured on 2 cores), far more than the product itself below ~50k rows; einsum stays
    single-threaded (5k x 384: ~0.5 ms, 20k: ~2 ms). Past that BLAS wins (100k: ~17 ms vs ~27 ms).
    """
    if mat.shape[0] < _BLAS_MIN_ROWS:
        small: Vector = np.einsum("ij,j->i", mat, query)
        return small
    large: Vector = np.dot(mat, query)
    return large


def shortlist_size(rows: int, k: int, minimum: int = SHORTLIST_MIN) -> int:
    """Rows rescored exactly: measured recall@10 0.998 / recall@100 0.986 at 5,000 of 100k."""
    return max(minimum, 16 * k, rows // 20)


_CODE_BLOCK = 65_536  # rows compared at once: the boolean temporary stays ~25 MB (384 MB at 1M rows in one go)


def sign_codes(rows: Vector, center: Vector) -> Codes:
    """1-bit codes, one column per row: shape (words, rows) so the distance is a few flat passes."""
    width = -(-rows.shape[1] // 64) * 8  # bytes per row, zero-padded to whole words
    bits = np.zeros((rows.shape[0], width), dtype=np.uint8)
    for start in range(0, rows.shape[0], _CODE_BLOCK):
        block = np.packbits(rows[start : start + _CODE_BLOCK] > center, axis=1)
        bits[start : start + len(block), : block.shape[1]] = block
    return np.ascontiguousarray(bits.view(np.uint64).T)


def _mean_of_alive(mat: Vector, alive: npt.NDArray[np.bool_]) -> Vector:
    """The mean of the alive rows without gathering them (a copy of the matrix: 1.5 GB at 1M rows)."""
    live = int(alive.sum())
    if live == 0:
        return np.zeros(mat.shape[1], dtype=np.float32)
    total = mat.sum(axis=0, dtype=np.float64)
    dead = np.flatnonzero(~alive)
    for start in range(0, len(dead), _CODE_BLOCK):
        total -= mat[dead[start : start + _CODE_BLOCK]].sum(axis=0, dtype=np.float64)
    mean: Vector = (total / live).astype(np.float32)
    return mean


def hamming(codes: Codes, query_code: Codes) -> npt.NDArray[np.uint16]:
    dist: npt.NDArray[np.uint16] = np.bitwise_count(codes[0] ^ query_code[0]).astype(np.uint16)
    for w in range(1, codes.shape[0]):
        dist += np.bitwise_count(codes[w] ^ query_code[w])
    return dist


@dataclass(frozen=True)
class ScopeView:
    """A consistent snapshot for one search; the arrays are never written in place below `n`."""

    mat: Vector
    ids: npt.NDArray[np.int64]
    coll: npt.NDArray[np.int32]
    alive: npt.NDArray[np.bool_]  # the rows the view's filter allows; read-only, shared: narrow a copy
    codes: Codes | None
    center: Vector | None
    ann: AnnIndex | None = None
    file_rows: FileRows | None = None  # reads rows of `mat` when it maps a snapshot file
    pending_from: int = 0  # rows from here on are not in `ann` yet: scored exactly beside its candidates


@dataclass
class VectorScope:
    """An in-memory copy of one scope's vectors; rows are appended, deletions are tombstones.

    Rows are appended in ascending rowid order (SQLite's AUTOINCREMENT never reuses one; a scope loads ORDER BY
    id), so a row is found by a binary search of `ids` rather than a dict of every rowid (~100 B a row in
    Python objects: ~100 MB at 1M). A write that would break the order raises ValueError: the owner then drops
    the scope and reads it again from SQLite.
    """

    generation: int
    dim: int
    mat: Vector
    ids: npt.NDArray[np.int64]
    coll: npt.NDArray[np.int32]
    alive: npt.NDArray[np.bool_]
    n: int = 0
    dead: int = 0
    coll_codes: dict[str, int] = field(default_factory=dict)
    center: Vector | None = None
    codes: Codes | None = None  # (words, capacity), valid for rows [0, coded)
    coded: int = 0
    centered_at: int = 0  # rows alive when the center was taken
    ann: AnnIndex | None = None  # removes follow at once, adds in the background (ann_feeder.py)
    ann_upto: int = 0  # the rowid up to which `ann` holds the rows
    # Positions of rows [0, grouped) ordered by collection code, and where each code's run starts.
    by_coll: npt.NDArray[np.intp] | None = None
    coll_starts: npt.NDArray[np.intp] | None = None
    grouped: int = 0
    changes: int = 0  # bumped by every write to the rows or their tombstones: the allowed-rows memo's key
    # The rows one filter allows, as last computed: (n, changes, codes) -> a read-only mask. The first and the
    # feedback search of a query share a filter, and so do queries between writes (~0.6 ms a search at 1M).
    _allowed_memo: tuple[tuple[int, int, tuple[int, ...] | None], npt.NDArray[np.bool_]] | None = field(
        init=False, default=None, repr=False
    )
    # Set while `mat` is a snapshot's mapping, for the rows read from its file (opened at once: a later
    # snapshot may unlink the file; rows added since live in copy-on-write pages, read through the mapping).
    file_rows: FileRows | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.file_rows = FileRows.of(self.mat, self.n)

    @classmethod
    def empty(cls, generation: int, dim: int, capacity: int = 1024) -> VectorScope:
        return cls(
            generation=generation,
            dim=dim,
            mat=np.zeros((capacity, dim), dtype=np.float32),
            ids=np.zeros(capacity, dtype=np.int64),
            coll=np.zeros(capacity, dtype=np.int32),
            alive=np.zeros(capacity, dtype=np.bool_),
        )

    def add_block(self, rowids: npt.NDArray[np.int64], collections: Sequence[str], rows: Vector) -> None:
        """`add` for many rows at once (loading a scope): array copies instead of a Python step per row."""
        count = len(rowids)
        if rows.shape != (count, self.dim):
            raise ValueError(f"vector block {rows.shape} does not match {count} rows of this scope's {self.dim}")
        self._check_ascending(rowids)
        self._grow(count)
        start, end = self.n, self.n + count
        self.mat[start:end] = rows
        self.ids[start:end] = rowids
        self.coll[start:end] = [self.coll_codes.setdefault(c, len(self.coll_codes)) for c in collections]
        self.alive[start:end] = True
        self.n = end
        self.changes += 1

    def _grow(self, need: int) -> None:
        cap = len(self.ids)
        if self.n + need <= cap:
            return
        new_cap = max(cap * 2, self.n + need)
        # Mapped from a snapshot: into a new file beside it, not a copy in memory (remapped_matrix.py).
        grew = grown(self.mat, self.file_rows, self.n, new_cap) if self.file_rows is not None else None
        if grew is not None:
            mat, reader = grew
        else:
            mat, reader = np.zeros((new_cap, self.dim), dtype=np.float32), None
            mat[: self.n] = self.mat[: self.n]
        ids = np.zeros(new_cap, dtype=np.int64)
        ids[: self.n] = self.ids[: self.n]
        coll = np.zeros(new_cap, dtype=np.int32)
        coll[: self.n] = self.coll[: self.n]
        alive = np.zeros(new_cap, dtype=np.bool_)
        alive[: self.n] = self.alive[: self.n]
        self.mat, self.ids, self.coll, self.alive = mat, ids, coll, alive
        self.file_rows = reader

    def _check_ascending(self, rowids: npt.NDArray[np.int64]) -> None:
        last = self.ids[self.n - 1] if self.n else np.iinfo(np.int64).min
        if len(rowids) and (rowids[0] <= last or bool(np.any(np.diff(rowids) <= 0))):
            raise ValueError("rows must be added in ascending rowid order")

    def add(self, rows: Sequence[tuple[int, str, Vector]]) -> None:
        self._check_ascending(np.asarray([r[0] for r in rows], dtype=np.int64))
        self._grow(len(rows))
        for rowid, collection, vector in rows:
            if vector.shape != (self.dim,):
                raise ValueError(f"vector dimension {vector.shape} does not match this scope's {self.dim}")
            code = self.coll_codes.setdefault(collection, len(self.coll_codes))
            i = self.n
            self.mat[i] = vector
            self.ids[i] = rowid
            self.coll[i] = code
            self.alive[i] = True
            self.n += 1
        self.changes += 1

    def alive_positions(self, rowids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Positions of those of `rowids` this scope holds alive (others are dropped)."""
        at = positions(self.ids[: self.n], np.asarray(rowids, dtype=np.int64))
        found: npt.NDArray[np.int64] = at[self.alive[at]]
        return found

    def remove(self, rowids: Iterable[int]) -> None:
        at = np.unique(self.alive_positions(np.fromiter(rowids, dtype=np.int64)))
        if at.size:
            self.alive[at] = False
            self.dead += int(at.size)
            self.changes += 1
            if self.ann is not None:
                self.ann.remove(self.ids[at])
        if self.dead > max(1024, self.n // 4):
            self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self.n])
        # Fresh arrays: readers holding the old ones keep a consistent view. Mapped: a new file (remapped_matrix.py).
        moved = compacted(self.mat, self.file_rows, keep) if self.file_rows is not None else None
        self.mat, self.file_rows = moved if moved is not None else (self.mat[keep].copy(), None)
        self.ids = self.ids[keep].copy()
        self.coll = self.coll[keep].copy()
        self.alive = np.ones(len(keep), dtype=np.bool_)
        if self.codes is not None:
            coded_keep = keep[keep < self.coded]  # rows past `coded` are encoded on the next search
            self.codes = np.ascontiguousarray(self.codes[:, coded_keep])
            self.coded = len(coded_keep)
        self.n = len(keep)
        self.dead = 0
        self.changes += 1
        self.by_coll = self.coll_starts = None  # positions moved
        self.grouped = 0

    def _groups(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """(by_coll, coll_starts), regrouped when the ungrouped tail has grown too long."""
        n = self.n
        if self.by_coll is None or self.coll_starts is None or n - self.grouped > max(1024, n // GROUP_TAIL_SHARE):
            order = np.argsort(self.coll[:n], kind="stable")
            self.coll_starts = np.searchsorted(self.coll[:n][order], np.arange(len(self.coll_codes) + 1))
            self.by_coll, self.grouped = order, n
        return self.by_coll, self.coll_starts

    def collection_mask(self, codes: Sequence[int], alive: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """`alive` (a view's, of this scope's first rows) narrowed to these collection codes; call under the owner's
        lock, with the view taken in the same hold. A few small collections scatter their rows into an empty
        mask; collections holding most of the scope compare every row's code instead: at 1M rows, 0.15 ms
        against 2 ms for scattering 900k rows."""
        n = alive.size
        _, starts = self._groups()
        held = sum(int(starts[c + 1] - starts[c]) for c in codes if c + 1 < len(starts))
        if held * LARGE_SHARE >= n:
            coll = self.coll[:n]
            return alive & (coll == codes[0] if len(codes) == 1 else np.isin(coll, codes))
        rows = self.collection_rows(codes)
        mask = np.zeros(n, dtype=np.bool_)
        mask[rows] = alive[rows]
        return mask

    def collection_rows(self, codes: Sequence[int]) -> npt.NDArray[np.intp]:
        """Positions of the rows of these collection codes (in no set order), dead rows included; call under the
        owner's lock, with the view taken in the same hold."""
        n = self.n
        by_coll, starts = self._groups()
        parts = [by_coll[starts[c] : starts[c + 1]] for c in codes if c + 1 < len(starts)]
        tail = self.coll[self.grouped : n]
        if tail.size:
            wanted = np.zeros(len(self.coll_codes), dtype=np.bool_)
            wanted[list(codes)] = True
            parts.append(self.grouped + np.flatnonzero(wanted[tail]))
        if not parts:
            return np.zeros(0, dtype=np.intp)
        return np.concatenate(parts)

    @property
    def nbytes(self) -> int:
        """Memory the scope may hold: its arrays at capacity, its codes and groups."""
        arrays: list[npt.NDArray[Any] | None] = [
            *(self.mat, self.ids, self.coll, self.alive),
            *(self.codes, self.by_coll, self.coll_starts),
        ]
        return sum(a.nbytes for a in arrays if a is not None)

    @property
    def live(self) -> int:
        return self.n - self.dead

    def alive_rows(self) -> tuple[npt.NDArray[np.int64], Vector, npt.NDArray[np.int64]]:
        """The alive rowids (ascending), the matrix and their rows in it; call under the owner's lock.

        The matrix is never written in place below `n` (compaction makes a new one), so it can be read
        without the lock: an index is built from it in blocks rather than from a copy (1.5 GB at 1M rows)."""
        keep = np.flatnonzero(self.alive[: self.n])
        return self.ids[keep], self.mat, keep

    def rows_of(self, rowids: npt.NDArray[np.int64]) -> Vector:
        """The vectors of alive rows (ascending rowids)."""
        at = self.alive_positions(np.asarray(rowids, dtype=np.int64))
        if at.size != len(rowids):
            raise KeyError("rows_of asked for rows this scope does not hold alive")
        rows: Vector = self.mat[at]
        return rows

    def fed_upto(self) -> int:
        """The position of the first row not in `ann` (rows are fed to it in rowid order, ann_feeder.py)."""
        return int(np.searchsorted(self.ids[: self.n], self.ann_upto, side="right"))

    def install_ann(self, ann: AnnIndex, upto: int | None = None) -> tuple[int, int]:
        """Catch `ann` up with the rows alive now (up to rowid `upto`: the rest is fed later) and keep it current
        from here; call under the owner's lock."""
        ids = self.ids[np.flatnonzero(self.alive[: self.n])]
        if upto is None:
            upto = int(self.ids[self.n - 1]) if self.n else 0
        changed = ann.sync(ids[: np.searchsorted(ids, upto, side="right")], self.rows_of)
        self.ann, self.ann_upto = ann, upto
        return changed

    def extend_codes(self) -> None:
        """Codes for the rows appended since they were last brought up to date, if the scope has codes at all
        (call under the owner's lock): a snapshot then carries codes for every row."""
        if self.codes is not None and self.coded < self.n:
            self._encode()

    def _encode(self) -> None:
        """Bring the codes up to `n` rows; a new center (and full re-encode) when the scope has doubled."""
        live = self.n - self.dead
        if self.center is None or live >= 2 * self.centered_at:
            self.center = _mean_of_alive(self.mat[: self.n], self.alive[: self.n])
            self.centered_at = max(1, live)
            self.codes = sign_codes(self.mat[: self.n], self.center)
            self.coded = self.n
            return
        if self.coded >= self.n:
            return
        assert self.codes is not None
        fresh = sign_codes(self.mat[self.coded : self.n], self.center)
        if self.codes.shape[1] < self.n:
            grown = np.zeros((self.codes.shape[0], len(self.ids)), dtype=np.uint64)  # a new array: readers keep theirs
            grown[:, : self.coded] = self.codes[:, : self.coded]
            self.codes = grown
        self.codes[:, self.coded : self.n] = fresh
        self.coded = self.n

    def allowed(self, codes: Sequence[int] | None = None) -> npt.NDArray[np.bool_]:
        """The alive rows of these collection codes (None: of every collection), read-only; call under the
        owner's lock."""
        key = (self.n, self.changes, tuple(codes) if codes is not None else None)
        if self._allowed_memo is not None and self._allowed_memo[0] == key:
            return self._allowed_memo[1]
        alive = self.alive[: self.n].copy()
        mask = self.collection_mask(codes, alive) if codes is not None else alive
        mask.flags.writeable = False
        self._allowed_memo = (key, mask)
        return mask

    def view(self, *, approximate: bool, collections: Sequence[int] | None = None) -> ScopeView:
        """Call under the owner's lock. With `approximate`, the codes are brought up to date first; `alive` is
        narrowed to these collection codes when given."""
        n = self.n
        if approximate:
            self._encode()
        return ScopeView(
            mat=self.mat[:n],
            ids=self.ids[:n],
            coll=self.coll[:n],
            alive=self.allowed(collections),
            codes=self.codes[:, :n] if approximate and self.codes is not None else None,
            center=self.center if approximate else None,
            ann=self.ann,
            file_rows=self.file_rows,
            pending_from=self.fed_upto() if self.ann else n,
        )


def nearest(
    view: ScopeView,
    query: Vector,
    mask: npt.NDArray[np.bool_],
    k: int,
    *,
    approx_min_rows: int = APPROX_MIN_ROWS,
    shortlist_min: int = SHORTLIST_MIN,
    ann_min_rows: int = ANN_MIN_ROWS,
    breadth: int | None = None,
) -> tuple[npt.NDArray[np.int64], Vector]:
    """Row ids and exact scores of the (about) k best rows allowed by `mask`, best first; `breadth`: the HNSW
    index's search breadth where it answers (None: its default)."""
    allowed = int(np.count_nonzero(mask))  # the positions themselves only when the index does not answer
    n = len(mask)
    if allowed == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if view.ann is not None and allowed >= ann_min_rows:
        proposed = ann_candidates(view, query, mask, allowed, k, breadth)
        if proposed is not None:
            if view.pending_from < n:  # written since the index was last fed (ann_feeder.py)
                proposed = np.concatenate([proposed, view.pending_from + np.flatnonzero(mask[view.pending_from :])])
            return _rescored(view, query, proposed, k)
    candidates = _CANDIDATES.rows(mask)  # the feedback search's mask is the first search's
    short = shortlist_size(candidates.size, k, shortlist_min)
    if view.codes is not None and view.center is not None and candidates.size >= max(approx_min_rows, 2 * short):
        query_code = sign_codes(query.reshape(1, -1), view.center)
        far = view.codes.shape[0] * 64 + 1  # past any real distance: rows the filters exclude
        if candidates.size * 4 <= n:  # a few collections of a large scope: only their rows' codes
            dist = hamming(_CANDIDATES.codes(mask, view.codes, candidates), query_code)
        else:
            dist = hamming(view.codes, query_code)
            if candidates.size < n:
                dist[~mask] = far
        # The smallest distance with at least `short` rows at or below it: a counting pass instead of a sort.
        counts = np.cumsum(np.bincount(dist, minlength=far + 1))
        cutoff = int(np.searchsorted(counts, short))
        candidates = candidates[dist <= cutoff] if dist.size < n else np.flatnonzero(dist <= cutoff)
    if candidates.size == n:
        return _top(view.ids, _scores(view.mat, query), k)
    return _rescored(view, query, candidates, k)


def _top(ids: npt.NDArray[np.int64], scores: Vector, k: int) -> tuple[npt.NDArray[np.int64], Vector]:
    k = min(k, scores.size)
    top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
    top = top[np.argsort(-scores[top], kind="stable")]
    return ids[top], scores[top]


def _rescored(
    view: ScopeView, query: Vector, rows: npt.NDArray[np.int64], k: int
) -> tuple[npt.NDArray[np.int64], Vector]:
    """The best k of `rows` (positions in the view) by their exact dot products.

    Rows the snapshot file holds are read by pread, those added since from memory: one added row among the
    candidates once sent all of them through the mapping, and each of those faults mapped a large folio of
    the page cache into the resident set (at 1M, +300 MB a query after ingesting 2,000 notes). More file rows
    than pread serves quickly are first narrowed on an int8 copy (quantized_rows.py)."""
    reader = view.file_rows
    if reader is not None and rows.size > PREAD_MAX_ROWS:
        rows = narrowed(reader, view.mat, query, rows, k)
    in_file = rows < reader.rows if reader is not None else None
    most = rows.size if reader is not None and reader.quantized == BUILDING else PREAD_MAX_ROWS  # slow, not mapped
    if reader is None or in_file is None or not 0 < int(np.count_nonzero(in_file)) <= most:
        return _top(view.ids[rows], _scores(view.mat[rows], query), k)
    if in_file.all():
        gathered = reader.take(rows)
    else:
        gathered = np.empty((rows.size, view.mat.shape[1]), dtype=np.float32)
        if in_file.any():
            gathered[in_file] = reader.take(rows[in_file])
        gathered[~in_file] = view.mat[rows[~in_file]]
    return _top(view.ids[rows], _scores(gathered, query), k)

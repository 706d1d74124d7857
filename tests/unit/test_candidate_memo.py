"""A query's feedback search reuses its first search's allowed rows and their codes (candidate_memo.py): only for
the same read-only mask and the same codes array, so a write or a re-encode never serves stale rows."""

from __future__ import annotations

import numpy as np
import pytest

from ctxstore.adapters.local import vector_cache
from ctxstore.adapters.local.candidate_memo import CandidateMemo
from ctxstore.adapters.local.vector_cache import VectorScope


def _mask(n: int, every: int) -> np.ndarray:
    mask = np.zeros(n, dtype=np.bool_)
    mask[::every] = True
    mask.flags.writeable = False  # as VectorScope.allowed hands it out
    return mask


def test_the_same_mask_and_codes_are_answered_from_the_memo_and_others_are_not() -> None:
    memo = CandidateMemo()
    codes = np.random.default_rng(1).integers(0, 2**63, size=(6, 1_000), dtype=np.uint64)
    mask = _mask(1_000, 7)
    rows = memo.rows(mask)
    assert np.array_equal(rows, np.flatnonzero(mask)) and memo.rows(mask) is rows
    gathered = memo.codes(mask, codes[:, :1_000], rows)
    assert np.array_equal(gathered, codes[:, rows])
    assert memo.codes(mask, codes[:, :1_000], rows) is gathered  # a view of the same codes: kept

    recoded = codes.copy()  # a re-encode gives the scope a new array
    assert memo.codes(mask, recoded, rows) is not gathered
    assert np.array_equal(memo.codes(mask, recoded, rows), recoded[:, rows])

    other = _mask(1_000, 7)  # equal but another mask (a write made it): computed again
    assert memo.rows(other) is not rows

    writable = np.ones(10, dtype=np.bool_)
    first = memo.rows(writable)
    writable[3] = False  # a mask its owner may change is never kept
    assert 3 not in memo.rows(writable) and 3 in first


def test_entries_are_bounded_and_a_dead_mask_never_answers() -> None:
    memo = CandidateMemo(entries=2)
    masks = [_mask(100, s) for s in (2, 3, 5)]
    kept = [memo.rows(m) for m in masks]
    assert memo.rows(masks[0]) is not kept[0]  # pushed out by the third
    assert memo.rows(masks[2]) is kept[2]
    del masks[2]
    fresh = _mask(100, 11)  # may take the dead mask's id: checked by identity, not by id alone
    assert np.array_equal(memo.rows(fresh), np.arange(0, 100, 11))


def test_a_feedback_search_into_a_few_collections_of_a_large_scope_reuses_the_first_searchs_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((100_000, 64)).astype(np.float32)
    scope = VectorScope.empty(0, 64)
    scope.add_block(np.arange(1, 100_001, dtype=np.int64), [f"c{i % 20}" for i in range(100_000)], rows)
    seen: list[int] = []
    inner = vector_cache.hamming

    def spy(codes: np.ndarray, query_code: np.ndarray) -> np.ndarray:
        seen.append(id(codes))
        return inner(codes, query_code)

    monkeypatch.setattr(vector_cache, "hamming", spy)
    wanted = [scope.coll_codes[c] for c in ("c3", "c4", "c5", "c6")]  # 20k of 100k rows
    answers = []
    for query in (rows[3], rows[3] + 0.1 * rows[4]):  # the first search, then the feedback one
        view = scope.view(approximate=True, collections=wanted)
        answers.append(vector_cache.nearest(view, query, view.alive, 10))
    assert len(seen) == 2 and seen[0] == seen[1]  # the same gathered codes
    assert answers[0][0][0] == 4  # row 3 (collection c3), found by its own vector

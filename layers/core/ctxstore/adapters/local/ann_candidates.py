"""Candidates of a scope's HNSW index for a query whose filter allows only part of the index's rows.

The index holds every row of the scope; a filter (collections, the rows not yet fed to the index) is applied to
what it returns. So the index is asked for enough candidates that k of them pass, and searches at a breadth
widened by the same share (the lane's breadth / share), so that about as many allowed rows are compared as an
unfiltered search compares. This module is where that policy lives; AnnIndex.search takes the breadth as given.

History: the index was asked for k / share x 2 at a breadth of at least that. For a filter allowing 98 % of
1M rows (a default collection beside a few others) that was 423 candidates at breadth 423 for both the first
and the feedback search, where 320 and 208 give the recall: 4.1-4.2 ms a search instead of 2.4 and 1.7.
The over-fetch now grows with the share filtered out, and a query whose filtered rows crowd around it (the
same documents in another collection) asks once more rather than falling back to the shortlist (~40 ms at 1M).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ctxstore.adapters.local.row_positions import positions

if TYPE_CHECKING:
    from ctxstore.adapters.local.vector_cache import ScopeView, Vector

# k / share alone leaves fewer than k allowed half the time; twice that gave recall@100 0.991 for one collection
# in ten at 100k. The factor is scaled by the share filtered out: x 1.9 at one in ten, x 1.02 at 98 %.
ANN_OVERFETCH = 2.0
ANN_FETCH_SLACK = 16  # a few more when anything is filtered: ~4 standard deviations of the allowed count at 98 %
ANN_MAX_FETCH = 4_096  # past this, narrower filters use the scan or the shortlist (vector_cache.nearest)
ATTEMPTS = 2


def fetch_size(k: int, share: float) -> int | None:
    """Candidates to ask the index for so that at least k of them pass a filter allowing `share` of its rows;
    None when the filter is too narrow for the index. That boundary is the former rule's (k / share x 2 past
    ANN_MAX_FETCH: a share under ~0.1 at limit 100). Which path is faster there depends on where the rows lie:
    the shortlist over 100 collections' own rows took ~11 ms a search (1,000 collections of 1,000 rows), over
    a tenth of 1M rows scattered at random 65 ms, against 32 ms for the index (bench/retrieval/ann_filters.py)."""
    if share >= 1.0:
        return k
    if k / share * ANN_OVERFETCH > ANN_MAX_FETCH:
        return None
    return math.ceil(k / share * (1 + (ANN_OVERFETCH - 1) * (1 - share))) + ANN_FETCH_SLACK


def ann_candidates(
    view: ScopeView, query: Vector, mask: npt.NDArray[np.bool_], allowed: int, k: int, breadth: int | None
) -> npt.NDArray[np.int64] | None:
    """Positions of the first k HNSW candidates that `mask` allows, or None when they cannot fill k.

    The over-fetch is there to find k allowed candidates, not to rescore more: the first k allowed, in the
    index's order, give the same recall@100 as all of them (1M rows, one collection in 10: 0.983 both;
    99 in 100: 0.981 both), and at 99 in 100 rescoring all 421 took 3.3 ms against 2.9 for 208."""
    ann = view.ann
    assert ann is not None
    unfed = int(np.count_nonzero(mask[view.pending_from :])) if view.pending_from < len(mask) else 0
    share = min(1.0, (allowed - unfed) / max(1, len(ann)))
    if share <= 0.0:
        return None
    from ctxstore.adapters.local.ann_index import EXPANSION_SEARCH  # loaded already: the view has an index

    # About as many allowed rows compared as an unfiltered search compares.
    widened = math.ceil((breadth or EXPANSION_SEARCH) / share)
    want = min(k, allowed)
    fetch = fetch_size(k, share)
    for _ in range(ATTEMPTS):
        if fetch is None or fetch > ANN_MAX_FETCH:
            return None
        rowids = ann.search(query, fetch, widened)
        found = positions(view.ids, rowids)  # rows this view does not hold (added since) are dropped
        found = found[mask[found]]
        if found.size >= want or rowids.size < fetch:  # enough, or the index has no more to give
            return found[:k] if found.size >= want else None
        # The filtered rows crowd around this query: ask for as many as the share seen here needs.
        seen = max(1, found.size) / max(1, rowids.size)
        fetch = max(min(ANN_MAX_FETCH, math.ceil(2 * k / seen)), fetch + 1)
    return None

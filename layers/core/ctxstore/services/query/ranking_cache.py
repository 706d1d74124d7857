"""Pages of ranked relation groups per graph, kept between reads until the graph changes.

Ranking the triplet groups of a collection scans all its groups (or, with `acl`, aggregates all its
evidence) for every page. A page (its pairs and the number of groups in all) is stored under the
graph's version token, which every entity-graph write replaces (in the graph itself, so a write by
another process invalidates too): a read whose token differs recomputes. The whole ranking is not
fetched on a miss: moving 50k pairs to the client costs far more than ranking them in the engine.
Entries go least recently used first, within a bound on the pairs held in memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence

Ranking = tuple[Sequence[tuple[str, str]], int]  # a page of (source eid, target eid) pairs, total pairs

MAX_PAIRS = 1_000_000  # pairs held across all entries (two short ids each)


class RankingCache:
    def __init__(self, max_pairs: int = MAX_PAIRS) -> None:
        self._max = max_pairs
        self._held = 0
        self._entries: OrderedDict[Hashable, tuple[str, Ranking]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, token: str) -> Ranking | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != token:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: Hashable, token: str, ranking: Ranking) -> None:
        if len(ranking[0]) > self._max:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._held -= len(old[1][0])
            self._entries[key] = (token, ranking)
            self._held += len(ranking[0])
            while self._held > self._max:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._held -= len(dropped[0])

    def __len__(self) -> int:
        return len(self._entries)

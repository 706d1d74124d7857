"""Ranked relation groups per graph, kept between reads until the graph changes.

Ranking every triplet group of a collection is a scan of all its groups (or, with `acl`, an
aggregate over all its evidence); a page of it is not. Each entry is stored under the graph's
version token, which every entity-graph write replaces (in the graph itself, so a write by another
process invalidates too): a read whose token differs recomputes. Entries are kept least recently
used first out, within a bound on the pairs held in memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence

Ranking = Sequence[tuple[str, str]]

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
        if len(ranking) > self._max:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._held -= len(old[1])
            self._entries[key] = (token, ranking)
            self._held += len(ranking)
            while self._held > self._max:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._held -= len(dropped)

    def __len__(self) -> int:
        return len(self._entries)

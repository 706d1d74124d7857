"""`completed` means searchable: on an index whose writes lag (OpenSearch Serverless refreshes every 60 s),
the Complete task waits, bounded, until a search sees every chunk of the item's version once.

Each poll also settles the item (`LaggingSearchIndex.settle_item`): copies of an older version that a
replace's delete could not see yet, and second copies from a re-sent bulk, are deleted once visible. So
an item reaches `completed` only with exactly its own chunks findable, and `count` is exact after it.
Past the bound the task raises StoreUnavailable: Step Functions retries it (E6001 after the last retry),
and the item stays `graph_creation` meanwhile. Indexes that show writes at once (SQLite) skip all this.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.search_index import ItemKey, LaggingSearchIndex, SearchIndex

# Inside the Complete function's 60 s timeout; five task attempts watch for ~3.5 min, > 3 refresh intervals.
WAIT_S = 40.0
POLL_S = 5.0


@dataclass
class SearchVisibility:
    wait_s: float = WAIT_S
    poll_s: float = POLL_S
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = field(default=time.sleep)

    def await_searchable(self, index: SearchIndex | None, org: str, item: ItemKey, version: str, chunks: int) -> int:
        """Polls until searches see `chunks` distinct chunks of the item at `version`; answers how many polls
        it took (0: the index shows writes at once). Raises StoreUnavailable past `wait_s`."""
        if not isinstance(index, LaggingSearchIndex):
            return 0
        deadline = self.clock() + self.wait_s
        polls = 0
        while True:
            polls += 1
            seen = index.settle_item(org, item, version)
            if seen >= chunks:
                return polls
            if self.clock() >= deadline:
                raise StoreUnavailable(
                    f"{seen} of {chunks} chunks of {item.item_id} are searchable after {self.wait_s:.0f} s; retrying"
                )
            self.sleep(self.poll_s)

"""The typed Python client of the ctxstore HTTP API.

```python
from ctxstore.client import CtxstoreClient, CtxstoreError
```

It depends on httpx, pydantic and tenacity only (no server code), so applications can use it as is.
"""

from ctxstore.client.client import CtxstoreClient
from ctxstore.client.errors import CtxstoreError
from ctxstore.client.models import (
    Chunk,
    DatabaseStatus,
    DeleteResult,
    Document,
    IngestItem,
    IngestResult,
    InspectResult,
    ItemStatus,
    ListedSource,
    QueryResult,
    Relations,
    Source,
    SourcePage,
    Subgraph,
    SubgraphMember,
)

__all__ = [
    "Chunk",
    "CtxstoreClient",
    "CtxstoreError",
    "DatabaseStatus",
    "DeleteResult",
    "Document",
    "IngestItem",
    "IngestResult",
    "InspectResult",
    "ItemStatus",
    "ListedSource",
    "QueryResult",
    "Relations",
    "Source",
    "SourcePage",
    "Subgraph",
    "SubgraphMember",
]

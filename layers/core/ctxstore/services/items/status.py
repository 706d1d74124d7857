"""GET /context/status: the indexing state of items, by id."""

from __future__ import annotations

from typing import TypedDict

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.services.access.principal import Principal
from ctxstore.services.databases import DatabaseService
from ctxstore.services.items.service import ItemService

_MESSAGES = {
    "queued": "accepted and waiting to be processed",
    "processing": "being parsed, chunked and embedded",
    "graph_creation": "searchable; relations and links are being built",
    "completed": "indexed",
    "errored": "indexing failed",
}
MAX_IDS = 1000


class _StatusOfAnyId(TypedDict):
    id: str
    success: bool
    indexing_status: str | None
    error_code: str
    error_message: str
    message: str


# total=False rather than NotRequired: with postponed annotations only this is seen at run time too.
class ItemStatusView(_StatusOfAnyId, total=False):
    """One id's indexing state; an unknown id has no type, chunk count or update time."""

    type: str
    chunk_count: int
    updated_at: float


class StatusAnswer(TypedDict):
    """GET /context/status's data."""

    statuses: list[ItemStatusView]


class StatusService:
    def __init__(self, databases: DatabaseService, items: ItemService) -> None:
        self._databases = databases
        self._items = items

    def lookup(self, principal: Principal, database: str, collection: str, ids: list[str]) -> StatusAnswer:
        self._databases.require(principal, database)
        if len(ids) > MAX_IDS:
            raise ApiError(ErrorCode.INVALID_PARAMETERS, f"at most {MAX_IDS} ids per status request")
        statuses: list[ItemStatusView] = []
        records = self._items.find_many(principal.org, database, collection, ids)
        for item_id in ids:
            found = records.get(item_id)
            if found is None:
                statuses.append(
                    {
                        "id": item_id,
                        "success": False,
                        "indexing_status": None,
                        "error_code": "FILE_NOT_FOUND",
                        "error_message": f"no item '{item_id}' in this database and collection",
                        "message": "not found",
                    }
                )
                continue
            ref, rec = found
            status = str(rec.data["status"])
            statuses.append(
                {
                    "id": item_id,
                    "type": ref.store,
                    "success": status != "errored",
                    "indexing_status": status,
                    "error_code": rec.data["error_code"] or "",
                    "error_message": rec.data["error_message"] or "",
                    "message": _MESSAGES.get(status, status),
                    "chunk_count": rec.data["chunk_count"],
                    "updated_at": rec.data["updated_at"],
                }
            )
        if all(s["error_code"] == "FILE_NOT_FOUND" for s in statuses):
            missing = ", ".join(ids[:5])
            raise ApiError(ErrorCode.FILE_NOT_FOUND, f"no status record for: {missing}")
        return {"statuses": statuses}

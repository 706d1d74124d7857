"""Typed results. Each model keeps fields it does not name (`extra="allow"`), so newer servers lose nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TERMINAL_STATUSES = frozenset({"completed", "errored"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def raw(self) -> dict[str, Any]:
        """The object as the API sent it (named and unnamed fields)."""
        return self.model_dump(mode="json", exclude_unset=True)


@dataclass(frozen=True)
class Document:
    """A file to ingest from memory: its name decides the format (as the API's rule 4 says)."""

    filename: str
    data: bytes
    content_type: str | None = None


class IngestItem(_Model):
    id: str
    filename: str | None = None
    title: str | None = None
    status: str  # queued | failed
    error: str | None = None
    error_code: str | None = None
    infer: bool = False
    relations_created: int = 0

    @property
    def queued(self) -> bool:
        return self.status == "queued"


class IngestResult(_Model):
    success: bool = False
    message: str = ""
    success_count: int = 0
    failed_count: int = 0
    results: list[IngestItem] = Field(default_factory=list)

    @property
    def queued_ids(self) -> list[str]:
        """Ids of the items accepted and queued: poll them with `status` or `wait_for`."""
        return [r.id for r in self.results if r.queued]

    @property
    def failed(self) -> list[IngestItem]:
        return [r for r in self.results if not r.queued]

    @staticmethod
    def merge(parts: list[IngestResult]) -> IngestResult:
        results = [r for p in parts for r in p.results]
        ok = sum(1 for r in results if r.queued)
        return IngestResult(
            success=ok == len(results),
            message=f"{ok} queued, {len(results) - ok} failed",
            success_count=ok,
            failed_count=len(results) - ok,
            results=results,
        )


class ItemStatus(_Model):
    id: str
    type: str | None = None
    indexing_status: str | None = None  # queued | processing | graph_creation | completed | errored | None (unknown)
    error_code: str | None = None
    error_message: str | None = None
    chunk_count: int | None = None

    @property
    def found(self) -> bool:
        return self.indexing_status is not None

    @property
    def done(self) -> bool:
        """No further change will come: indexed, failed for good, or unknown to the server."""
        return self.indexing_status in TERMINAL_STATUSES or not self.found


class Chunk(_Model):
    chunk_uuid: str = ""
    id: str = ""  # the source (item) id
    chunk_content: str = ""
    source_title: str | None = None
    source_type: str | None = None
    type: str | None = None  # knowledge | memory
    collection: str | None = None
    relevancy_score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    additional_metadata: dict[str, Any] = Field(default_factory=dict)


class Source(_Model):
    id: str
    title: str | None = None
    type: str | None = None
    source_type: str | None = None
    collection: str | None = None
    url: str | None = None
    timestamp: str | None = None


class QueryResult(_Model):
    chunks: list[Chunk] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)
    additional_context: dict[str, Any] = Field(default_factory=dict)
    graph_context: dict[str, Any] | None = None
    query_plan: dict[str, Any] | None = None


class ListedSource(_Model):
    id: str
    title: str | None = None
    type: str | None = None
    collection: str | None = None
    indexing_status: str | None = None
    error_code: str | None = None
    chunk_count: int | None = None
    created_at: str | None = None
    updated_at: str | None = None


class SourcePage(_Model):
    sources: list[ListedSource] = Field(default_factory=list)
    total: int = 0
    pagination: dict[str, Any] = Field(default_factory=dict)

    @property
    def has_next(self) -> bool:
        return bool(self.pagination.get("has_next"))


class InspectResult(_Model):
    id: str
    title: str | None = None
    type: str | None = None
    indexing_status: str | None = None
    content_type: str | None = None
    size_bytes: int | None = None
    content: str | None = None
    inferred_content: str | None = None
    presigned_url: str | None = None


class Relations(_Model):
    relations: list[dict[str, Any]] = Field(default_factory=list)
    auxiliary_relations: list[dict[str, Any]] = Field(default_factory=list)
    is_truncated: bool = False
    next_cursor: Any = None


class SubgraphMember(_Model):
    source_id: str
    title: str | None = None
    app_kind: str | None = None
    depth: int = 0
    discovered_via: str | None = None
    discovered_relation: str | None = None


class Subgraph(_Model):
    seed_source_id: str | None = None
    sources: list[SubgraphMember] = Field(default_factory=list)
    relations: list[dict[str, Any]] = Field(default_factory=list)
    auxiliary_relations: list[dict[str, Any]] = Field(default_factory=list)
    is_truncated: bool = False
    max_depth_reached: int = 0


class DeleteResult(_Model):
    success: bool = False
    deleted_count: int = 0
    results: list[dict[str, Any]] = Field(default_factory=list)


class DatabaseStatus(_Model):
    database: str | None = None
    status: str | None = None
    ready_for_ingestion: bool | None = None
    infra: dict[str, Any] = Field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """The spec's readiness rule: scheduler, graph and both vector stores report true."""
        vs = self.infra.get("vectorstore_status") or {}
        return bool(
            self.infra.get("scheduler_status")
            and self.infra.get("graph_status")
            and vs.get("knowledge")
            and vs.get("memories")
        )

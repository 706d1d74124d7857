"""POST /feedback (the reference's `feedback.SubmitRequest`): a comment or ground truth about a query that ran,
kept as a record of the organisation (kind `feedback`, pk "", sk time-ordered id) that it can read back.

Rules are the reference's: `request_id` a UUID; `feedback` (non-blank, at most 8,000 characters) or
`ground_truth` (an `answer`, or `source_ids` with one non-blank id) required; `rating` positive, negative or
neutral; `source` user (default) or agent; `metadata` at most 20 string values of at most 512 characters under
keys of at most 64; `collection` only with `database`, which must exist. Broken rules are 400
INVALID_PARAMETERS; a missing database is 404 DATABASE_NOT_FOUND.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any, Literal, TypedDict, cast

from ctxstore.domain.clock_utils import iso
from ctxstore.domain.errors import invalid
from ctxstore.domain.scopes import validate_collection_name
from ctxstore.ports.clock import Clock
from ctxstore.ports.records import Put, RecordStore
from ctxstore.services import record_kinds as rk
from ctxstore.services.access.principal import Principal
from ctxstore.services.databases import DatabaseService

MAX_TEXT = 8000
MAX_SOURCE_IDS = 100
MAX_SOURCE_ID = 256
MAX_METADATA_KEYS = 20
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
RATINGS = ("positive", "negative", "neutral")
SOURCES = ("user", "agent")


def _text(body: dict[str, Any], name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(f"'{name}' must be a string")
    if len(value) > limit:
        raise invalid(f"'{name}' is longer than {limit} characters")
    return value


def _request_id(body: dict[str, Any]) -> str:
    value = body.get("request_id")
    if not isinstance(value, str) or not value.strip():
        raise invalid("'request_id' is required: the meta.request_id of the query this feedback is about")
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise invalid("'request_id' must be a UUID (the meta.request_id of a query)") from None


def _ground_truth(body: dict[str, Any]) -> dict[str, Any] | None:
    gt = body.get("ground_truth")
    if gt is None:
        return None
    if not isinstance(gt, dict):
        raise invalid("'ground_truth' must be an object with 'answer' and/or 'source_ids'")
    answer = _text(gt, "answer", MAX_TEXT)
    ids = gt.get("source_ids")
    if ids is not None and (
        not isinstance(ids, list) or not all(isinstance(i, str) and len(i) <= MAX_SOURCE_ID for i in ids)
    ):
        raise invalid(f"'ground_truth.source_ids' must be a list of ids of at most {MAX_SOURCE_ID} characters")
    if ids is not None and len(ids) > MAX_SOURCE_IDS:
        raise invalid(f"'ground_truth.source_ids' lists more than {MAX_SOURCE_IDS} ids")
    has_answer = bool(answer and answer.strip())
    has_ids = any(i.strip() for i in ids or [])
    if not (has_answer or has_ids):
        raise invalid("'ground_truth' needs a non-blank 'answer' or at least one id in 'source_ids'")
    out: dict[str, Any] = {}
    if answer is not None:
        out["answer"] = answer
    if ids is not None:
        out["source_ids"] = list(ids)
    return out


def _choice(body: dict[str, Any], name: str, allowed: tuple[str, ...], default: str | None) -> str | None:
    value = body.get(name)
    if value is None:
        return default
    if value not in allowed:
        raise invalid(f"'{name}' must be one of {', '.join(allowed)}")
    return str(value)


def _metadata(body: dict[str, Any]) -> dict[str, str]:
    md = body.get("metadata")
    if md is None:
        return {}
    if not isinstance(md, dict):
        raise invalid("'metadata' must be an object of strings")
    if len(md) > MAX_METADATA_KEYS:
        raise invalid(f"'metadata' has more than {MAX_METADATA_KEYS} keys")
    for key, value in md.items():
        if len(key) > MAX_METADATA_KEY:
            raise invalid(f"'metadata' key '{key[:20]}...' is longer than {MAX_METADATA_KEY} characters")
        if not isinstance(value, str) or len(value) > MAX_METADATA_VALUE:
            raise invalid(f"'metadata.{key}' must be a string of at most {MAX_METADATA_VALUE} characters")
    return {str(k): str(v) for k, v in md.items()}


class FeedbackAnswer(TypedDict):
    """`POST /feedback`."""

    feedback_id: str
    recorded: Literal[True]
    request_id: str
    created_at: str
    message: str


class FeedbackRecord(TypedDict):
    """A stored piece of feedback (what `recorded` lists)."""

    feedback_id: str
    request_id: str
    feedback: str | None
    ground_truth: dict[str, Any] | None
    rating: str | None
    source: str
    metadata: dict[str, str]
    database: str | None
    collection: str | None
    key_prefix: str
    created_at: str


class FeedbackService:
    def __init__(self, records: RecordStore, clock: Clock, databases: DatabaseService) -> None:
        self._records = records
        self._clock = clock
        self._databases = databases

    def submit(self, principal: Principal, body: dict[str, Any]) -> FeedbackAnswer:
        """`body` has canonical scope names (the router resolved the legacy aliases)."""
        request_id = _request_id(body)
        comment = _text(body, "feedback", MAX_TEXT)
        ground_truth = _ground_truth(body)
        if not (comment and comment.strip()) and ground_truth is None:
            raise invalid("send a non-blank 'feedback' comment, a 'ground_truth', or both")
        rating = _choice(body, "rating", RATINGS, None)
        source = _choice(body, "source", SOURCES, "user")
        metadata = _metadata(body)
        database, collection = body.get("database"), body.get("collection")
        if collection is not None and database is None:
            raise invalid("'collection' needs 'database': a collection belongs to a database")
        if database is not None:
            if not isinstance(database, str):
                raise invalid("'database' must be a string")
            self._databases.require(principal, database)
        if collection is not None:
            collection = validate_collection_name(collection)
        now = self._clock.now()
        feedback_id = f"fb_{int(now * 1000):013d}_{secrets.token_hex(4)}"  # time-ordered within the organisation
        record: FeedbackRecord = {
            "feedback_id": feedback_id,
            "request_id": request_id,
            "feedback": comment,
            "ground_truth": ground_truth,
            "rating": rating,
            "source": source or "user",  # _choice answers the default when absent
            "metadata": metadata,
            "database": database,
            "collection": collection,
            "key_prefix": principal.key_prefix,
            "created_at": iso(now),
        }
        self._records.put(principal.org, Put(rk.FEEDBACK, "", feedback_id, record, if_absent=True))
        return {
            "feedback_id": feedback_id,
            "recorded": True,
            "request_id": request_id,
            "created_at": record["created_at"],
            "message": "Success",
        }

    def recorded(self, principal: Principal, *, limit: int = 100) -> list[FeedbackRecord]:
        """The organisation's feedback, oldest first."""
        page = self._records.query(principal.org, rk.FEEDBACK, "", limit=limit)
        return [cast(FeedbackRecord, dict(r.data)) for r in page.records]  # written by `submit` above

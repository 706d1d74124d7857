"""POST /query's request, defined once: its body (`QueryBody`, the model the route reads and FastAPI documents)
and its rules (`build_request`: field values, scope selection, metadata filters) into a `QueryRequest`.

A wrong JSON type or a missing field is 400 INVALID_PARAMETERS (the route's model); a well-typed
value outside its rule (an unknown enum value, a number out of range, too many collections, a weight
with two decimals) is 400 INVALID_INPUT: the reference documents only 400 for /query, and clients
generated from it treat any other 4xx as unexpected. Filter keys the schema does not let anyone match
are 400, like undeclared metadata keys at ingest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    WithJsonSchema,
)

from ctxstore.domain import metadata_schema as ms
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.scopes import validate_collection_name
from ctxstore.ports.search_index import Store

MAX_COLLECTIONS = 100
MAX_RESULTS = 100
DEFAULT_MAX_RESULTS = 10
MAX_RELATED_CHUNKS = 10
MAX_FILTER_BYTES = 64 * 1024
MAX_FILTER_VALUES = 500
MAX_IDS = 1000
MAX_QUERY_CHARS = 10_000

QueryType = Literal["knowledge", "memory", "all"]
QueryBy = Literal["hybrid", "text"]
Operator = Literal["or", "and", "phrase"]
Mode = Literal["fast", "thinking", "auto"]
TYPES: tuple[QueryType, ...] = get_args(QueryType)
QUERY_BY: tuple[QueryBy, ...] = get_args(QueryBy)
OPERATORS: tuple[Operator, ...] = get_args(Operator)
MODES: tuple[Mode, ...] = get_args(Mode)


def _one_of(values: tuple[str, ...]) -> WithJsonSchema:
    """The document lists the choices; the value is still read as any string, so that a string outside them
    is answered by the rules below (400 INVALID_INPUT naming the choices), not as a wrong JSON type."""
    return WithJsonSchema({"type": "string", "enum": list(values)})


class QueryBody(BaseModel):
    """The POST /query body: its JSON types (a wrong one is 400 INVALID_PARAMETERS) and, for the OpenAPI
    document, its defaults and choices. `build_request` applies the rules. A field sent as null takes the
    default, as when it is left out."""

    # The reference carries more optional knobs (temporal_*, graph_vector_prune...): accepted, not used.
    model_config = ConfigDict(extra="ignore")
    database: StrictStr = Field(description="The database to search.")
    query: StrictStr = Field(description=f"The question or keywords, at most {MAX_QUERY_CHARS} characters.")
    collection: StrictStr | None = Field(None, description="One collection (the default one when neither is sent).")
    collections: list[StrictStr] | dict[StrictStr, StrictInt | StrictFloat] | None = Field(
        None,
        description=f"Several collections, at most {MAX_COLLECTIONS}: a list (equal weights) or an object of"
        " relative weights (> 0, at most one decimal). Not with `collection`.",
    )
    type: Annotated[StrictStr, _one_of(TYPES)] | None = Field("knowledge", description="The store(s) searched.")
    query_by: Annotated[StrictStr, _one_of(QUERY_BY)] | None = Field(
        "hybrid", description="`text`: the keyword lane only."
    )
    operator: Annotated[StrictStr, _one_of(OPERATORS)] | None = Field(
        "or", description="How the keyword lane combines the query's words."
    )
    mode: Annotated[StrictStr, _one_of(MODES)] | None = Field(
        "auto", description="`fast`: one hybrid pass; `thinking`: more passes and reranking; `auto` picks."
    )
    alpha: StrictInt | StrictFloat | Annotated[StrictStr, _one_of(("auto",))] | None = Field(
        "auto", description="The vector lane's share, 0.0 (keywords) to 1.0 (vectors), or `auto`."
    )
    max_results: StrictInt | None = Field(DEFAULT_MAX_RESULTS, description=f"1 to {MAX_RESULTS}.")
    metadata_filters: dict[str, Any] | None = Field(
        None,
        description="Schema fields declared with enable_match (a value, or a list for VARCHAR) and free-form"
        " `additional_metadata` filters.",
    )
    graph_context: StrictBool | None = Field(True, description="Add the graph context of the retrieved items.")
    query_apps: StrictBool | None = Field(False, description="Add the parent and thread of app items.")
    recency_bias: StrictInt | StrictFloat | None = Field(0.0, description="0.0 (off) to 1.0: favour new items.")
    ids: list[StrictStr] | None = Field(
        None, description=f"Only these items (at most {MAX_IDS}; empty: the whole scope)."
    )
    num_related_chunks: StrictInt | None = Field(
        0, description=f"0 to {MAX_RELATED_CHUNKS} neighbouring chunks of each result."
    )
    additional_context: StrictStr | None = Field(None, description="Prepended to the query for the vector lane.")
    query_forceful_relations: StrictBool | None = Field(
        True, description="Thinking mode: add chunks of the items a result names in `relations.ids`."
    )


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_PARAMETERS, message)


def _rule(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_INPUT, message)


@dataclass(frozen=True)
class QueryRequest:
    database: str
    query: str
    collections: dict[str, float]  # collection -> relative weight (max weight is 1.0)
    stores: tuple[Store, ...]
    query_by: QueryBy = "hybrid"
    operator: Operator = "or"
    mode: Mode = "auto"
    alpha: float | None = None  # None: auto
    max_results: int = DEFAULT_MAX_RESULTS
    metadata: dict[str, Any] = field(default_factory=dict)
    additional_metadata: dict[str, Any] = field(default_factory=dict)
    graph_context: bool = True
    query_apps: bool = False
    recency_bias: float = 0.0
    ids: tuple[str, ...] | None = None
    num_related_chunks: int = 0
    additional_context: str = ""
    forceful_relations: bool = True
    type: QueryType = "knowledge"


_Choice = TypeVar("_Choice", bound=str)


def _choice(name: str, value: object, allowed: tuple[_Choice, ...], default: _Choice) -> _Choice:
    if value is None:
        return default
    for choice in allowed:
        if value == choice:
            return choice
    raise _rule(f"'{name}' must be one of {', '.join(allowed)}; got '{value}'")


def _weight(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"'collections' weight of '{name}' must be a number")
    w = float(value)
    if not math.isfinite(w) or w <= 0:
        raise _rule(f"'collections' weight of '{name}' must be greater than 0")
    if abs(w * 10 - round(w * 10)) > 1e-9:
        raise _rule(f"'collections' weight of '{name}' may have at most one decimal place; got {value}")
    return w


def parse_collections(collection: str | None, collections: object) -> dict[str, float]:
    """One collection, a list (equal weights) or an object of relative weights; at most 100."""
    if collections is None:
        return {validate_collection_name(collection): 1.0}
    if collection is not None:
        raise _invalid("send either 'collection' or 'collections' (or their legacy aliases), not both")
    if isinstance(collections, list):
        if not collections:
            raise _rule("'collections' must name at least one collection")
        if len(collections) > MAX_COLLECTIONS:
            raise _rule(f"'collections' may name at most {MAX_COLLECTIONS} collections; got {len(collections)}")
        names = [validate_collection_name(c, "collections") if isinstance(c, str) else None for c in collections]
        if any(n is None for n in names):
            raise _invalid("'collections' list items must be strings")
        return {str(n): 1.0 for n in names}
    if isinstance(collections, dict):
        if not collections:
            raise _rule("'collections' must name at least one collection")
        if len(collections) > MAX_COLLECTIONS:
            raise _rule(f"'collections' may name at most {MAX_COLLECTIONS} collections; got {len(collections)}")
        weights = {validate_collection_name(k, "collections"): _weight(k, v) for k, v in collections.items()}
        top = max(weights.values())
        return {k: w / top for k, w in weights.items()}
    raise _invalid("'collections' must be a list of collection ids or an object of collection id to weight")


def parse_alpha(value: object) -> float | None:
    if value is None or value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _invalid("'alpha' must be a number from 0.0 to 1.0 or \"auto\"")
    if isinstance(value, str):
        raise _rule(f"'alpha' must be a number from 0.0 to 1.0 or \"auto\"; got '{value}'")
    if not (0.0 <= float(value) <= 1.0):
        raise _rule(f"'alpha' must be from 0.0 to 1.0; got {value}")
    return float(value)


def _filter_values(where: str, value: object) -> list[Any]:
    values = value if isinstance(value, list) else [value]
    if len(values) > MAX_FILTER_VALUES:
        raise _invalid(f"'{where}' may list at most {MAX_FILTER_VALUES} values; got {len(values)}")
    if isinstance(value, list) and not values:
        raise _rule(f"'{where}' must list at least one value")
    for v in values:
        if isinstance(v, dict | list):
            raise _invalid(f"'{where}' values must be strings, numbers, booleans or null")
    return values


def parse_metadata_filters(raw: object, schema: list[ms.FieldDef]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(schema metadata filters, additional_metadata filters). `document_metadata` is the legacy nested key."""
    if raw is None:
        return {}, {}
    if not isinstance(raw, dict):
        raise _invalid("'metadata_filters' must be an object")
    size = len(json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_FILTER_BYTES:
        raise _invalid(f"'metadata_filters' is {size} bytes; at most {MAX_FILTER_BYTES} are accepted")
    by_name = {f.name: f for f in schema}
    top = {key: _schema_filter(key, value, by_name.get(key), schema) for key, value in raw.items() if key not in NESTED}
    return top, _nested_filters(raw)


NESTED = ("additional_metadata", "document_metadata")


def _nested_filters(raw: dict[str, Any]) -> dict[str, Any]:
    """The free-form filters: `additional_metadata`, merged with its legacy alias `document_metadata`."""
    nested: dict[str, Any] = {}
    for key in NESTED:
        if key not in raw:
            continue
        sub = raw[key]
        if not isinstance(sub, dict):
            raise _invalid(f"'metadata_filters.{key}' must be an object")
        for k, v in sub.items():
            _filter_values(f"metadata_filters.{key}.{k}", v)
            if k in nested and nested[k] != v:
                raise _invalid(
                    f"'metadata_filters.additional_metadata.{k}' and its legacy alias"
                    f" 'metadata_filters.document_metadata.{k}' differ"
                )
            nested[k] = v
    return nested


def _schema_filter(key: str, value: object, fd: ms.FieldDef | None, schema: list[ms.FieldDef]) -> object:
    """One top-level filter on a field the database's metadata schema declares (and lets match)."""
    if fd is None:
        raise _invalid(
            f"'metadata_filters' key '{key}' is not declared in the database metadata schema;"
            " free-form fields go under 'metadata_filters.additional_metadata'"
        )
    if not fd.enable_match:
        raise _invalid(f"'metadata_filters' key '{key}' is declared with enable_match=false and cannot be matched")
    values = _filter_values(f"metadata_filters.{key}", value)
    if isinstance(value, list) and fd.data_type is not ms.DataType.VARCHAR:
        raise _rule(f"'metadata_filters.{key}': a list of values is accepted for VARCHAR fields only")
    if fd.data_type not in (ms.DataType.ARRAY, ms.DataType.JSON):
        for v in values:
            if v is None:
                continue
            try:
                ms.validate_metadata(schema, {key: v}, "metadata_filters")
            except ApiError as exc:  # the schema's own 422, answered as /query's 400
                raise _rule(exc.message) from None
    return value


def stores_of(type_: QueryType) -> tuple[Store, ...]:
    if type_ == "all":
        return ("knowledge", "memory")
    return ("memory",) if type_ == "memory" else ("knowledge",)


def query_body(body: QueryBody | Mapping[str, Any]) -> QueryBody:
    """The body as the route's model. In-process callers (MCP tools, the console playground) send JSON that
    the route did not type-check: it is taken as it is, and the rules of build_request check it as before."""
    return body if isinstance(body, QueryBody) else QueryBody.model_construct(**body)


def build_request(body: QueryBody, schema: list[ms.FieldDef]) -> QueryRequest:
    """Validate the route's already-typed body into a QueryRequest."""
    query = body.query
    if not isinstance(query, str) or not query.strip():
        raise _invalid("'query' is required and must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise _rule(f"'query' may be at most {MAX_QUERY_CHARS} characters")
    type_ = _choice("type", body.type, TYPES, "knowledge")
    max_results = body.max_results
    if max_results is None:
        max_results = DEFAULT_MAX_RESULTS
    elif not 1 <= max_results <= MAX_RESULTS:
        raise _rule(f"'max_results' must be from 1 to {MAX_RESULTS}; got {max_results}")
    related = body.num_related_chunks or 0
    if not 0 <= related <= MAX_RELATED_CHUNKS:
        raise _rule(f"'num_related_chunks' must be from 0 to {MAX_RELATED_CHUNKS}; got {related}")
    recency = body.recency_bias or 0.0
    if not (math.isfinite(recency) and 0.0 <= recency <= 1.0):
        raise _rule(f"'recency_bias' must be from 0.0 (off) to 1.0; got {recency}")
    ids: tuple[str, ...] | None = None
    if body.ids is not None:
        if len(body.ids) > MAX_IDS:
            raise _rule(f"'ids' may list at most {MAX_IDS} ids; got {len(body.ids)}")
        ids = tuple(dict.fromkeys(body.ids)) or None  # empty: the whole scope, as the reference says
    md, amd = parse_metadata_filters(body.metadata_filters, schema)
    return QueryRequest(
        database=str(body.database),
        query=query,
        collections=parse_collections(body.collection, body.collections),
        stores=stores_of(type_),
        type=type_,
        query_by=_choice("query_by", body.query_by, QUERY_BY, "hybrid"),
        operator=_choice("operator", body.operator, OPERATORS, "or"),
        mode=_choice("mode", body.mode, MODES, "auto"),
        alpha=parse_alpha(body.alpha),
        max_results=int(max_results),
        metadata=md,
        additional_metadata=amd,
        graph_context=body.graph_context is not False,
        query_apps=bool(body.query_apps),
        recency_bias=float(recency),
        ids=ids,
        num_related_chunks=int(related),
        additional_context=(body.additional_context or "").strip(),
        forceful_relations=body.query_forceful_relations is not False,
    )

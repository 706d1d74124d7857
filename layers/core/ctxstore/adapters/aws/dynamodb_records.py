"""RecordStore on one DynamoDB table.

Item layout (table keys ``pk`` and ``sk``, both strings):

- ``pk`` = ``f"{org}#{kind}#{pk}"`` (org ids and kinds never contain ``#``), ``sk`` = the record's sort key.
  DynamoDB refuses empty key strings and the default collection's records use ``sk=""``, so every sort key
  is stored with a one-character prefix (``.``); a shared prefix keeps ordering and begins_with intact.
- ``body``: the record's data as a compact JSON string. A string rather than a map keeps floats, nested
  lists and ``None`` byte-exact (no Decimal round trip) and nothing queries inside a body.
- ``v``: the version (number), incremented atomically by every write (``if_not_exists(v, 0) + 1``).
- ``expires_at``: epoch seconds; the table's TTL attribute. DynamoDB deletes expired items lazily (up to
  days later), so every read filters them out and every condition treats an expired item as absent.

Reads are strongly consistent (``ConsistentRead``), like the SQLite store they mirror: a database created by
one request is visible to the next. ``delete_partitions`` is the one Scan; see its docstring.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws._common import error_code
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.records import ConditionFailed, Delete, Page, Put, Record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_NOT_EXPIRED = "attribute_not_exists(expires_at) OR expires_at > :now"
_ABSENT = "attribute_not_exists(pk) OR expires_at <= :now"
_MAX_TRANSACT = 100
_BATCH_WRITE = 25
_MAX_BATCH_GET = 100  # BatchGetItem's limit of keys a call
SCOPES_INDEX = "scopes"  # template.yaml RecordsTable GSI: pg (org#kind#database) + pk, keys only
_SCOPE_SEP = "\x1f"  # services.record_kinds.SEP: "<database>\x1f<collection>\x1f..." partitions


def _n(value: float | int) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def _until_processed(
    call: Callable[..., Any], request: dict[str, Any], unprocessed: str, what: str
) -> Iterator[dict[str, Any]]:
    """Each answer of a batch call, the part DynamoDB left unprocessed (throttling, size) sent again with backoff."""
    delay = 0.05
    for _ in range(10):
        resp: dict[str, Any] = call(RequestItems=request)
        yield resp
        request = dict(resp.get(unprocessed) or {})
        if not request:
            return
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
    raise StoreUnavailable(f"DynamoDB kept throttling {what}; retry shortly", retry_after_s=2)


def _all(conditions: list[str]) -> str:
    """AND of conditions; DynamoDB rejects redundant parentheses, so only ORs inside an AND get them."""
    if len(conditions) == 1:
        return conditions[0]
    return " AND ".join(f"({c})" if " OR " in c else c for c in conditions)


def _num(attr: Any) -> float | None:
    if attr is None:
        return None
    return float(attr["N"])


_SK_MARK = "."  # stored before every sort key: DynamoDB key strings cannot be empty


class DynamoDbRecordStore:
    def __init__(self, table: str, *, client: DynamoDBClient | None = None) -> None:
        if not table:
            raise ValueError("a DynamoDB table name is required (CTXSTORE_RECORDS_TABLE)")
        self._table = table
        self._ddb: DynamoDBClient = map_faults(client or make_client("dynamodb"))  # throttles/5xx -> E6001

    # ---- keys and items ------------------------------------------------------------------
    @staticmethod
    def _pk(org: str, kind: str, pk: str) -> str:
        return f"{org}#{kind}#{pk}"

    @staticmethod
    def _sk(sk: str) -> str:
        return _SK_MARK + sk

    @staticmethod
    def _scope(org: str, kind: str, pk: str) -> str | None:
        """The GSI partition of a scoped record (pk "<database>\x1f..."): org, kind and database."""
        if _SCOPE_SEP not in pk:
            return None
        return f"{org}#{kind}#{pk.split(_SCOPE_SEP, 1)[0]}"

    def _key(self, org: str, kind: str, pk: str, sk: str) -> dict[str, Any]:
        return {"pk": {"S": self._pk(org, kind, pk)}, "sk": {"S": self._sk(sk)}}

    @staticmethod
    def _record(kind: str, pk: str, item: dict[str, Any]) -> Record:
        return Record(
            kind=kind,
            pk=pk,
            sk=item["sk"]["S"].removeprefix(_SK_MARK),
            data=json.loads(item["body"]["S"]),
            version=int(item["v"]["N"]),
            expires_at=_num(item.get("expires_at")),
        )

    def _update_args(self, org: str, put: Put, now: float) -> dict[str, Any]:
        """UpdateItem arguments for a Put (also used inside TransactWriteItems)."""
        values: dict[str, Any] = {
            ":body": {"S": json.dumps(put.data, separators=(",", ":"))},
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
        }
        expr = "SET body = :body, v = if_not_exists(v, :zero) + :one"
        scope = self._scope(org, put.kind, put.pk)
        if scope is not None:  # sparse GSI "scopes": purges query one database's partitions, no scan
            expr += ", pg = :pg"
            values[":pg"] = {"S": scope}
        if put.expires_at is not None:
            expr += ", expires_at = :exp"
            values[":exp"] = _n(put.expires_at)
        else:
            expr += " REMOVE expires_at"
        conditions: list[str] = []
        if put.if_absent:
            conditions.append(_ABSENT)
        if put.if_version is not None:
            conditions += ["v = :ver", _NOT_EXPIRED]
            values[":ver"] = _n(put.if_version)
        if conditions:
            values[":now"] = _n(now)
        args: dict[str, Any] = {
            "TableName": self._table,
            "Key": self._key(org, put.kind, put.pk, put.sk),
            "UpdateExpression": expr,
            "ExpressionAttributeValues": values,
        }
        if conditions:
            args["ConditionExpression"] = _all(conditions)
        return args

    def _delete_args(self, org: str, op: Delete, now: float) -> dict[str, Any]:
        args: dict[str, Any] = {"TableName": self._table, "Key": self._key(org, op.kind, op.pk, op.sk)}
        conditions: list[str] = []
        values: dict[str, Any] = {}
        if op.if_version is not None:
            conditions.append("v = :ver")
            values[":ver"] = _n(op.if_version)
        if op.must_exist:
            conditions.append("attribute_exists(pk)")
        if conditions:
            conditions.append(_NOT_EXPIRED)
            values[":now"] = _n(now)
            args["ConditionExpression"] = _all(conditions)
            args["ExpressionAttributeValues"] = values
        return args

    # ---- single-item operations ------------------------------------------------------------
    def get(self, org: str, kind: str, pk: str, sk: str) -> Record | None:
        resp = self._ddb.get_item(TableName=self._table, Key=self._key(org, kind, pk, sk), ConsistentRead=True)
        item = resp.get("Item")
        if item is None:
            return None
        expires = _num(item.get("expires_at"))
        if expires is not None and expires <= time.time():
            return None
        return self._record(kind, pk, item)

    def get_many(self, org: str, kind: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Record]:
        """BatchGetItem, strongly consistent, 100 keys a call (a key may appear once per call)."""
        wanted = {(self._pk(org, kind, pk), self._sk(sk)): (pk, sk) for pk, sk in keys}
        out: dict[tuple[str, str], Record] = {}
        now = time.time()
        stored = list(wanted)
        for start in range(0, len(stored), _MAX_BATCH_GET):
            keys_part = [{"pk": {"S": p}, "sk": {"S": s}} for p, s in stored[start : start + _MAX_BATCH_GET]]
            request = {self._table: {"Keys": keys_part, "ConsistentRead": True}}
            for resp in _until_processed(self._ddb.batch_get_item, request, "UnprocessedKeys", "batch reads"):
                for item in resp.get("Responses", {}).get(self._table, []):
                    pk, sk = wanted[(item["pk"]["S"], item["sk"]["S"])]
                    expires = _num(item.get("expires_at"))
                    if expires is None or expires > now:
                        out[(pk, sk)] = self._record(kind, pk, item)
        return out

    def put(self, org: str, put: Put) -> Record:
        args = self._update_args(org, put, time.time())
        try:
            resp = self._ddb.update_item(**args, ReturnValues="ALL_NEW")
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise ConditionFailed(f"{put.kind} '{put.sk}': condition failed") from None
            raise
        version = int(resp["Attributes"]["v"]["N"])
        return Record(put.kind, put.pk, put.sk, dict(put.data), version, put.expires_at)

    def delete(self, org: str, kind: str, pk: str, sk: str, *, if_version: int | None = None) -> bool:
        now = time.time()
        args = self._delete_args(org, Delete(kind, pk, sk, if_version=if_version), now)
        try:
            resp = self._ddb.delete_item(**args, ReturnValues="ALL_OLD")
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise ConditionFailed(f"{kind} '{sk}': version mismatch") from None
            raise
        old = resp.get("Attributes")
        if not old:
            return False
        expires = _num(old.get("expires_at"))
        return expires is None or expires > now

    def transact(self, org: str, ops: Sequence[Put | Delete]) -> None:
        """TransactWriteItems: all or nothing, at most 100 items, each item at most once per call."""
        if not ops:
            return
        if len(ops) > _MAX_TRANSACT:
            raise ValueError(f"a transaction holds at most {_MAX_TRANSACT} operations")
        now = time.time()
        items: list[dict[str, Any]] = []
        for op in ops:
            if isinstance(op, Put):
                items.append({"Update": self._update_args(org, op, now)})
            else:
                items.append({"Delete": self._delete_args(org, op, now)})
        try:
            self._ddb.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                reasons = exc.response.get("CancellationReasons", [])
                if any(r.get("Code") == "ConditionalCheckFailed" for r in reasons):
                    raise ConditionFailed("a transaction condition failed") from None
                if not reasons and "ConditionalCheckFailed" in str(exc):
                    raise ConditionFailed("a transaction condition failed") from None
            raise

    # ---- partition reads ---------------------------------------------------------------------
    def _query_args(self, org: str, kind: str, pk: str, sk_prefix: str, descending: bool, now: float) -> dict[str, Any]:
        values: dict[str, Any] = {":pk": {"S": self._pk(org, kind, pk)}, ":now": _n(now)}
        cond = "pk = :pk"
        if sk_prefix:
            cond += " AND begins_with(sk, :prefix)"
            values[":prefix"] = {"S": self._sk(sk_prefix)}
        return {
            "TableName": self._table,
            "KeyConditionExpression": cond,
            "FilterExpression": _NOT_EXPIRED,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
            "ScanIndexForward": not descending,
        }

    def query(
        self,
        org: str,
        kind: str,
        pk: str,
        *,
        sk_prefix: str = "",
        after: str | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> Page:
        if limit <= 0:
            return Page()
        args = self._query_args(org, kind, pk, sk_prefix, descending, time.time())
        if after is not None:
            if sk_prefix and not after.startswith(sk_prefix):
                # DynamoDB refuses a start key outside the key condition: resolve it here.
                before_range = after < sk_prefix
                if before_range != descending:
                    after = None  # `after` precedes the whole prefix range in reading order
                else:
                    return Page()  # `after` is past the whole prefix range
            if after is not None:
                args["ExclusiveStartKey"] = {"pk": {"S": self._pk(org, kind, pk)}, "sk": {"S": self._sk(after)}}
        records: list[Record] = []
        # Ask for one more than the page so next_after is only set when a further record exists.
        while len(records) <= limit:
            args["Limit"] = min(1000, limit + 1 - len(records))
            resp = self._ddb.query(**args)
            records.extend(self._record(kind, pk, item) for item in resp.get("Items", []))
            last = resp.get("LastEvaluatedKey")
            if not last:
                break
            args["ExclusiveStartKey"] = last
        more = len(records) > limit
        records = records[:limit]
        return Page(records=records, next_after=records[-1].sk if more and records else None)

    def count(self, org: str, kind: str, pk: str, *, sk_prefix: str = "") -> int:
        args = self._query_args(org, kind, pk, sk_prefix, False, time.time())
        args["Select"] = "COUNT"
        total = 0
        while True:
            resp = self._ddb.query(**args)
            total += int(resp.get("Count", 0))
            last = resp.get("LastEvaluatedKey")
            if not last:
                return total
            args["ExclusiveStartKey"] = last

    # ---- admin -----------------------------------------------------------------------------
    def delete_partitions(self, org: str, kind: str, pk_prefix: str) -> int:
        """Delete every item whose partition starts with ``org#kind#pk_prefix``.

        A scope prefix (``<database>\x1f…``, what database and collection purges pass) is a Query on the
        sparse keys-only GSI ``scopes`` (``pg`` = org#kind#database, range = ``pk``) with
        ``begins_with(pk, …)``: the cost follows what is removed. Any other prefix falls back to a
        consistent Scan of the table. Deletes are BatchWriteItem. The GSI is eventually consistent,
        so an item written within about a second of the purge can be missed; callers mark the scope
        deleted first so nothing new is written under it.
        """
        prefix = self._pk(org, kind, pk_prefix)
        scope = self._scope(org, kind, pk_prefix)
        args: dict[str, Any]
        if scope is not None:
            args = {
                "TableName": self._table,
                "IndexName": SCOPES_INDEX,
                "KeyConditionExpression": "pg = :g AND begins_with(pk, :p)",
                "ExpressionAttributeValues": {":g": {"S": scope}, ":p": {"S": prefix}},
            }
        else:
            args = {
                "TableName": self._table,
                "FilterExpression": "begins_with(pk, :p)",
                "ExpressionAttributeValues": {":p": {"S": prefix}},
                "ProjectionExpression": "pk, sk",
                "ConsistentRead": True,
            }
        removed = 0
        while True:
            resp = self._ddb.query(**args) if scope is not None else self._ddb.scan(**args)
            keys = [{"pk": item["pk"], "sk": item["sk"]} for item in resp.get("Items", [])]
            for i in range(0, len(keys), _BATCH_WRITE):
                self._batch_delete(keys[i : i + _BATCH_WRITE])
            removed += len(keys)
            last = resp.get("LastEvaluatedKey")
            if not last:
                return removed
            args["ExclusiveStartKey"] = last

    def _batch_delete(self, keys: list[dict[str, Any]]) -> None:
        request: dict[str, Any] = {self._table: [{"DeleteRequest": {"Key": k}} for k in keys]}
        for _ in _until_processed(self._ddb.batch_write_item, request, "UnprocessedItems", "batch deletes"):
            pass

"""Connector records in the RecordStore: the connector, its resources, and the per-object index.

Every update is read-modify-write with a version check (compare-and-set), retried on a concurrent change,
so the API (configure, PATCH) and a running sync never overwrite each other's fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ctxstore.domain.errors import StoreUnavailable
from ctxstore.ports.records import ConditionFailed, Put, Record, RecordStore
from ctxstore.services import record_kinds as rk

Mutation = Callable[[dict[str, Any]], dict[str, Any] | None]  # new data, or None to write nothing
CAS_ATTEMPTS = 50


def object_pk(connector_id: str, resource_id: str) -> str:
    return f"{connector_id}{rk.SEP}{resource_id}"


class ConnectorStore:
    def __init__(self, records: RecordStore) -> None:
        self.records = records

    # ---- connectors ----------------------------------------------------------------------------
    def get(self, org: str, connector_id: str) -> Record | None:
        return self.records.get(org, rk.CONNECTOR, "", connector_id)

    def connectors(self, org: str) -> Iterator[Record]:
        after: str | None = None
        while True:
            page = self.records.query(org, rk.CONNECTOR, "", after=after, limit=1000)
            yield from page.records
            if page.next_after is None:
                return
            after = page.next_after

    def update(self, org: str, connector_id: str, mutate: Mutation) -> Record | None:
        """Apply `mutate` to the connector's data compare-and-set; None when the connector is gone."""
        return self._update(org, rk.CONNECTOR, "", connector_id, mutate)

    # ---- resources ------------------------------------------------------------------------------
    def resource(self, org: str, connector_id: str, resource_id: str) -> Record | None:
        return self.records.get(org, rk.CONNECTOR_RESOURCE, connector_id, resource_id)

    def resources(self, org: str, connector_id: str) -> list[Record]:
        out: list[Record] = []
        after: str | None = None
        while True:
            page = self.records.query(org, rk.CONNECTOR_RESOURCE, connector_id, after=after, limit=1000)
            out.extend(page.records)
            if page.next_after is None:
                return out
            after = page.next_after

    def update_resource(self, org: str, connector_id: str, resource_id: str, mutate: Mutation) -> Record | None:
        return self._update(org, rk.CONNECTOR_RESOURCE, connector_id, resource_id, mutate)

    def put_resource(self, org: str, connector_id: str, resource_id: str, data: dict[str, Any]) -> Record:
        return self.records.put(org, Put(rk.CONNECTOR_RESOURCE, connector_id, resource_id, data))

    # ---- object index -----------------------------------------------------------------------------
    def object(self, org: str, connector_id: str, resource_id: str, native_id: str) -> Record | None:
        return self.records.get(org, rk.CONNECTOR_OBJECT, object_pk(connector_id, resource_id), native_id)

    def objects(self, org: str, connector_id: str, resource_id: str) -> Iterator[Record]:
        pk = object_pk(connector_id, resource_id)
        after: str | None = None
        while True:
            page = self.records.query(org, rk.CONNECTOR_OBJECT, pk, after=after, limit=1000)
            yield from page.records
            if page.next_after is None:
                return
            after = page.next_after

    def count_objects(self, org: str, connector_id: str, resource_id: str) -> int:
        return self.records.count(org, rk.CONNECTOR_OBJECT, object_pk(connector_id, resource_id))

    def put_object(self, org: str, connector_id: str, resource_id: str, native_id: str, data: dict[str, Any]) -> None:
        self.records.put(org, Put(rk.CONNECTOR_OBJECT, object_pk(connector_id, resource_id), native_id, data))

    def delete_object(self, org: str, connector_id: str, resource_id: str, native_id: str) -> None:
        self.records.delete(org, rk.CONNECTOR_OBJECT, object_pk(connector_id, resource_id), native_id)

    def drop_objects(self, org: str, connector_id: str, resource_id: str | None = None) -> int:
        """Forget the index of one resource (or of every resource): items stay, as the reference documents."""
        if resource_id is None:
            return self.records.delete_partitions(org, rk.CONNECTOR_OBJECT, f"{connector_id}{rk.SEP}")
        # One partition exactly: a pk prefix would also take resources whose id extends this one.
        natives = [r.sk for r in self.objects(org, connector_id, resource_id)]
        for native_id in natives:
            self.delete_object(org, connector_id, resource_id, native_id)
        return len(natives)

    # ---- shared ------------------------------------------------------------------------------------
    def _update(self, org: str, kind: str, pk: str, sk: str, mutate: Mutation) -> Record | None:
        for _ in range(CAS_ATTEMPTS):
            rec = self.records.get(org, kind, pk, sk)
            if rec is None:
                return None
            data = mutate(dict(rec.data))
            if data is None:
                return rec
            try:
                return self.records.put(org, Put(kind, pk, sk, data, if_version=rec.version))
            except ConditionFailed:
                continue
        raise StoreUnavailable(f"{kind} '{sk}' kept changing; retry shortly")

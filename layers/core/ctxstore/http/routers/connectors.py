"""/connectors*, /connector-discovery, /connector-catalog: thin handlers over services/connectors.

Every answer is in the envelope, with `data`'s fields also at the top level where the reference answers a bare
object (http/reference_shape.py); connector objects mirror `database`/`collection` and the legacy
`tenant_id`/`sub_tenant_id`. Statuses: 400 INVALID_PARAMETERS (a missing or malformed field, a rule such as
custom_instructions over 4,000 characters or sync_interval_seconds outside the provider's range),
400 INVALID_INPUT (the provider rejected the credentials, or a resource it does not have), 401, 403
(a key limited to other databases; the internal credentials route), 404 NOT_FOUND (no such connector in
this organisation, another organisation's included; no such resource or provider), 404
DATABASE_NOT_FOUND, 409 CONFLICT (provider_account_scope taken; a sync already queued or running; a
sync_blocked connector), 502 PROVIDER_UNAVAILABLE (the provider could not answer), 503.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.http import envelope
from ctxstore.http.aliases import normalize_pairs
from ctxstore.http.context import RequestContext
from ctxstore.http.deps import Caller, Ctx, Svc, echo_scope
from ctxstore.services.connectors import ConnectorService
from ctxstore.services.registry import Services

router = APIRouter(tags=["connectors"])


class ConnectorCreateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    provider: str
    name: str | None = None
    database: str | None = None
    collection: str | None = None
    provider_account_scope: str | None = None
    credentials: dict[str, Any]
    auth_type: str | None = None
    custom_instructions: str | None = None
    sync_interval_seconds: int | None = None


class ConnectorUpdateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sync_interval_seconds: int | None = None
    credentials: dict[str, Any] | None = None
    custom_instructions: str | None = None
    name: str | None = None


class DiscoveryBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    provider: str
    credentials: dict[str, Any]
    auth_type: str | None = None


class ResourceMapping(BaseModel):
    model_config = ConfigDict(extra="ignore")
    resource_id: str
    resource_type: str | None = None
    name: str | None = None
    database: str | None = None
    collection: str | None = None
    tenant_id: str | None = None
    sub_tenant_id: str | None = None
    metadata: dict[str, Any] | None = None
    additional_metadata: dict[str, Any] | None = None
    sync_mode: str | None = None
    custom_instructions: str | None = None


class ConfigureBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    resources: list[ResourceMapping]
    lookback_days: int | None = None
    backfill_chunk_interval_seconds: int | None = None
    table_configs: list[dict[str, Any]] | None = None


class ResourceCreateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    resource_id: str
    resource_type: str | None = None
    display_name: str | None = None
    collection_override: str | None = None
    database_override: str | None = None
    sub_tenant_id_override: str | None = None
    tenant_id_override: str | None = None
    metadata: dict[str, Any] | None = None
    additional_metadata: dict[str, Any] | None = None
    filters: dict[str, Any] | None = None
    provider_metadata: dict[str, Any] | None = None
    sync_mode: str | None = None
    custom_instructions: str | None = None


def _svc(svc: Services) -> ConnectorService:
    if svc.connectors is None:
        raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "connectors are not configured on this server")
    return svc.connectors


def _override(ctx: RequestContext, body: dict[str, Any], canon: str, legacy: str) -> None:
    """The resource routes' own legacy names (`*_id_override`), with the same rules as scope aliases."""
    if body.get(legacy) is None:
        return
    ctx.deprecate(f"{legacy} is deprecated; use {canon} instead.", legacy, canon)
    if body.get(canon) is not None and body[canon] != body[legacy]:
        raise ApiError(ErrorCode.INVALID_PARAMETERS, f"'{canon}' and its legacy alias '{legacy}' differ")
    body[canon] = body.pop(legacy)


# ---- providers --------------------------------------------------------------------------------------
@router.get("/connectors/providers")
def list_providers(
    ctx: Ctx, caller: Caller, svc: Svc, id: str | None = Query(default=None, alias="id")
) -> JSONResponse:
    """With `id`, that one provider's full entry (its catalogue fields too), listed like the catalogue: the
    reference's providerListResponse either way."""
    service = _svc(svc)
    listed = service.catalogue(None)
    if not id:
        return envelope.ok(ctx, listed)
    detail = service.catalogue(id)
    entry = next(e for e in listed["providers"] if e["provider"] == detail["provider"])
    return envelope.ok(ctx, {"providers": [{**entry, **detail}]})


@router.get("/connector-catalog")
def connector_catalog(ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, {"connectors": _svc(svc).catalogue(None)["providers"]})


@router.post("/connector-discovery")
def discover_preview(
    body: DiscoveryBody,
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    cursor: str | None = Query(default=None),
    limit: int | None = Query(default=None),
) -> JSONResponse:
    return envelope.ok(ctx, _svc(svc).preview(body.model_dump(), cursor, limit))


# ---- connectors ---------------------------------------------------------------------------------------
@router.post("/connectors", status_code=201)
def create_connector(body: ConnectorCreateBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    if body.database:
        echo_scope(ctx, body.database, body.collection or "")
    return envelope.ok(ctx, _svc(svc).create(caller, body.model_dump()), status=201)


@router.get("/connectors")
def list_connectors(ctx: Ctx, caller: Caller, svc: Svc, provider: str | None = Query(default=None)) -> JSONResponse:
    return envelope.ok(ctx, _svc(svc).list_connectors(caller, provider or None))


@router.get("/connectors/{connector_id}")
def get_connector(connector_id: str, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _svc(svc).get(caller, connector_id))


@router.patch("/connectors/{connector_id}")
def update_connector(connector_id: str, body: ConnectorUpdateBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _svc(svc).update(caller, connector_id, body.model_dump(exclude_unset=True)))


@router.delete("/connectors/{connector_id}")
def delete_connector(connector_id: str, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _svc(svc).delete(caller, connector_id))


@router.patch("/connectors/{connector_id}/credentials")
def rotate_credentials_internal(connector_id: str, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    """The reference's internal rotation route: rotated tokens are persisted by the server itself, so an API
    key can never call it (use PATCH /connectors/{id} with `credentials`)."""
    _svc(svc).get(caller, connector_id)  # 404 first, like every connector route
    raise ApiError(
        ErrorCode.FORBIDDEN,
        "this route is internal: rotated tokens are persisted by the server; send new credentials with"
        " PATCH /connectors/{id}",
    )


@router.get("/connectors/{connector_id}/discover")
def discover(
    connector_id: str,
    ctx: Ctx,
    caller: Caller,
    svc: Svc,
    cursor: str | None = Query(default=None),
    limit: int | None = Query(default=None),
) -> JSONResponse:
    return envelope.ok(ctx, _svc(svc).discover(caller, connector_id, cursor, limit))


@router.post("/connectors/{connector_id}/configure")
def configure(connector_id: str, body: ConfigureBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    raw = body.model_dump(exclude_none=True)
    raw["resources"] = [
        dict(normalize_pairs(r.model_dump(exclude_none=True).items(), ctx, f"resources[{i}]"))
        for i, r in enumerate(body.resources)
    ]
    return envelope.ok(ctx, _svc(svc).configure(caller, connector_id, raw))


@router.post("/connectors/{connector_id}/sync", status_code=202)
def trigger_sync(
    connector_id: str, ctx: Ctx, caller: Caller, svc: Svc, full: bool = Query(default=False)
) -> JSONResponse:
    """`full=true` also reconciles deletions over everything synced, whatever the reconcile cadence."""
    return envelope.ok(ctx, _svc(svc).trigger_sync(caller, connector_id, full=full), status=202)


@router.get("/connectors/{connector_id}/resources")
def list_resources(connector_id: str, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _svc(svc).list_resources(caller, connector_id))


@router.post("/connectors/{connector_id}/resources", status_code=201)
def add_resource(connector_id: str, body: ResourceCreateBody, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    raw = body.model_dump(exclude_none=True)
    _override(ctx, raw, "database_override", "tenant_id_override")
    _override(ctx, raw, "collection_override", "sub_tenant_id_override")
    return envelope.ok(ctx, _svc(svc).add_resource(caller, connector_id, raw), status=201)


@router.delete("/connectors/{connector_id}/resources/{resource_id}")
def delete_resource(connector_id: str, resource_id: str, ctx: Ctx, caller: Caller, svc: Svc) -> JSONResponse:
    return envelope.ok(ctx, _svc(svc).delete_resource(caller, connector_id, resource_id))

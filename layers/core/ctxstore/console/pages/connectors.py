"""Connectors: list with live state, create (the provider's credential schema as a form), discover and
configure resources, resources with cursors and first-sync state, sync now, interval, credentials, delete.

Every action is one ConnectorService call with the signed-in key's Principal, the calls the /connectors*
routes make: the same checks, the same errors, the same organisation isolation (another organisation's
connector is not found, exactly like one that does not exist). Credentials go one way: typed into a
password input, posted once, sealed by the service; no page, URL, redirect or log line carries them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ctxstore.console import web
from ctxstore.console.connector_forms import (
    configure_body,
    credential_fields,
    credentials_from_form,
    duration,
    optional_int,
)
from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.services.connectors import ConnectorService

router = APIRouter()

PROVIDER_NAMES = {"slack": "Slack", "github": "GitHub", "linear": "Linear", "notion": "Notion", "gmail": "Gmail"}
web.templates.filters["provider_name"] = lambda p: PROVIDER_NAMES.get(str(p), str(p))

LIVE_LIFECYCLES = {"syncing", "ingesting"}
CREATE_FIELDS = ("name", "database", "collection", "provider_account_scope", "sync_interval_seconds")
SYNC_MODES = [("rescan", "Rescan (see edits)"), ("new_only", "New objects only")]

# What a redirect after a successful write says on the connector's page (?done=...).
DONE = {
    "created": "Connector created and its credentials checked. Next: discover its resources and choose what to sync.",
    "sync": "Sync queued. The state below follows it.",
    "interval": "Sync interval saved; the next sync is scheduled from it.",
    "credentials": "Credentials checked with the provider and saved. A blocked or reauth-needing connector is cleared.",
    "settings": "Settings saved; they apply to objects synced from now on.",
    "resource-removed": "Resource removed: its cursor is forgotten, its items stay.",
}


def _svc(caller: web.Caller) -> ConnectorService:
    if caller.services.connectors is None:
        raise ApiError(ErrorCode.SERVICE_UNAVAILABLE, "connectors are not configured on this server")
    return caller.services.connectors


def is_live(c: Mapping[str, Any]) -> bool:
    """Something is moving: the page polls faster."""
    return c.get("lifecycle") in LIVE_LIFECYCLES or c.get("sync_status") == "running"


def _path(connector_id: str, tail: str = "") -> str:
    return f"/connectors/{quote(connector_id, safe='')}{tail}"


def _not_started(request: Request, err: ApiError, headline: str = "") -> web.Problem:
    """A refused write on an existing connector, in plain words first (a 409 says what is going on)."""
    plain = {
        ErrorCode.CONFLICT: "That was not done.",
        ErrorCode.INVALID_INPUT: "The provider did not accept that.",
        ErrorCode.PROVIDER_UNAVAILABLE: "The provider could not answer; try again shortly.",
    }.get(err.code)
    p = web.Problem.of(request, err)
    return replace(p, headline=headline or plain or p.headline)


# ---- list -----------------------------------------------------------------------------------------
def _listing(caller: web.Caller) -> dict[str, Any]:
    connectors = _svc(caller).list_connectors(caller.principal, None)["connectors"]
    connectors.sort(key=lambda c: (c.get("name") or "", c["connector_id"]))
    return {"connectors": connectors, "live": any(is_live(c) for c in connectors)}


@router.get("/connectors")
def connectors_page(request: Request, caller: web.SignedIn) -> Response:
    providers = _svc(caller).catalogue(None)["providers"]
    return web.render(
        request,
        "connectors.html",
        caller,
        section="connectors",
        providers=providers,
        deleted=request.query_params.get("deleted", ""),
        **_listing(caller),
    )


@router.get("/connectors/rows")
def connector_rows(request: Request, caller: web.SignedIn) -> Response:
    return web.render(request, "partials/connector_rows.html", caller, **_listing(caller))


# ---- create ---------------------------------------------------------------------------------------
def _new_form(
    request: Request, caller: web.Caller, provider: str, auth_type: str, status: int = 200, **values: Any
) -> Response:
    info = _svc(caller).catalogue(provider)  # NOT_FOUND for a provider this server does not run
    auth_type = auth_type if auth_type in info["auth_types"] else info["auth_types"][0]
    return web.render(
        request,
        "connector_new.html",
        caller,
        status=status,
        section="connectors",
        info=info,
        auth_type=auth_type,
        fields=credential_fields(info["credential_schema"], auth_type),
        databases=caller.services.databases.list(caller.principal)["databases"],
        duration=duration,
        typed=values.pop("typed", {}),
        **values,
    )


@router.get("/connectors/new")
def new_connector(request: Request, caller: web.SignedIn) -> Response:
    qp = request.query_params
    if not qp.get("provider"):
        return web.redirect(request, "/connectors")
    return _new_form(request, caller, qp["provider"], qp.get("auth_type", ""))


@router.post("/connectors")
async def create_connector(request: Request, caller: web.Write) -> Response:
    form = await request.form()
    provider, auth_type = web.form_str(form, "provider"), web.form_str(form, "auth_type")
    # What is shown again after a refusal: never a credential.
    typed = {k: web.form_str(form, k) for k in CREATE_FIELDS}
    typed["custom_instructions"] = web.form_str(form, "custom_instructions")
    svc = _svc(caller)
    try:
        info = svc.catalogue(provider)
        fields = credential_fields(info["credential_schema"], auth_type or info["auth_types"][0])
        body = {
            "provider": provider,
            "auth_type": auth_type or None,
            "credentials": credentials_from_form(form, fields),
            "sync_interval_seconds": optional_int(typed["sync_interval_seconds"], "sync_interval_seconds"),
            **{k: typed[k] or None for k in ("name", "database", "collection", "provider_account_scope")},
            "custom_instructions": typed["custom_instructions"] or None,
        }
        created = await run_in_threadpool(svc.create, caller.principal, body)
    except ApiError as err:
        if err.code == ErrorCode.NOT_FOUND:
            raise
        return _new_form(
            request,
            caller,
            provider,
            auth_type,
            status=err.status,
            problem=_not_started(request, err),
            typed=typed,
        )
    # POST-redirect-GET: a reload of the next page posts nothing (and no credential) again.
    return web.redirect(request, _path(created["connector_id"], "?done=created"))


# ---- one connector ----------------------------------------------------------------------------------
def _state(caller: web.Caller, connector_id: str) -> dict[str, Any]:
    svc = _svc(caller)
    c = svc.get(caller.principal, connector_id)
    resources = svc.list_resources(caller.principal, connector_id)["resources"]
    return {"c": c, "resources": resources, "live": is_live(c), "duration": duration}


def _detail(request: Request, caller: web.Caller, connector_id: str, status: int = 200, **values: Any) -> Response:
    state = _state(caller, connector_id)
    c = state["c"]
    try:
        info: dict[str, Any] | None = _svc(caller).catalogue(c["provider"])
    except ApiError:
        info = None  # a provider this server no longer runs: the page still shows the connector
    qp = request.query_params
    return web.render(
        request,
        "connector.html",
        caller,
        status=status,
        section="connectors",
        fields=credential_fields(info["credential_schema"], c["auth_type"]) if info else [],
        info=info,
        done=DONE.get(qp.get("done", ""), ""),
        run_id=qp.get("run", ""),
        **state,
        **values,
    )


@router.get("/connectors/{connector_id}")
def connector_page(connector_id: str, request: Request, caller: web.SignedIn) -> Response:
    return _detail(request, caller, connector_id)


@router.get("/connectors/{connector_id}/state")
def connector_state(connector_id: str, request: Request, caller: web.SignedIn) -> Response:
    return web.render(request, "partials/connector_state.html", caller, **_state(caller, connector_id))


# ---- discover and configure ---------------------------------------------------------------------------
_NOT_SHOWN = {"name", "created", "id", "is_member"}


def resource_details(metadata: dict[str, Any]) -> list[str]:
    """A discovered resource's provider facts as short phrases: 'private', 'num members: 3'."""
    out: list[str] = []
    for key, value in metadata.items():
        if key in _NOT_SHOWN or value is None or value == "" or value is False:
            continue
        label = key.removeprefix("is_").replace("_", " ")
        out.append(label if value is True else f"{label}: {value}")
    return out


def _discover(request: Request, caller: web.Caller, connector_id: str, status: int = 200, **values: Any) -> Response:
    svc = _svc(caller)
    c = svc.get(caller.principal, connector_id)
    configured = {r["resource_id"]: r for r in svc.list_resources(caller.principal, connector_id)["resources"]}
    try:
        found = svc.discover(caller.principal, connector_id, None, None)["resources"]
    except ApiError as err:
        if err.code == ErrorCode.NOT_FOUND:
            raise
        return _detail(request, caller, connector_id, status=err.status, problem=_not_started(request, err))
    rows = []
    for i, r in enumerate(found):
        mine: Mapping[str, Any] = configured.get(r["id"], {})
        rows.append(
            {
                "i": i,
                "id": r["id"],
                "name": r["name"],
                "type": r["resource_type"],
                "details": resource_details(r["metadata"]),
                "outside": r["metadata"].get("is_member") is False,
                "on": mine.get("status") == "active",
                "collection": mine.get("collection_override", ""),
                "sync_mode": mine.get("sync_mode", "rescan"),
                "first_sync_done": bool(mine.get("first_sync_completed_at")),
            }
        )
    return web.render(
        request,
        "connector_discover.html",
        caller,
        status=status,
        section="connectors",
        c=c,
        rows=rows,
        sync_modes=SYNC_MODES,
        **values,
    )


@router.get("/connectors/{connector_id}/discover")
def discover_page(connector_id: str, request: Request, caller: web.SignedIn) -> Response:
    return _discover(request, caller, connector_id)


@router.post("/connectors/{connector_id}/configure")
async def configure(connector_id: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    try:
        body = configure_body(form)
        result = await run_in_threadpool(_svc(caller).configure, caller.principal, connector_id, body)
    except ApiError as err:
        if err.code == ErrorCode.NOT_FOUND:
            raise
        return await run_in_threadpool(
            _discover, request, caller, connector_id, err.status, problem=_not_started(request, err)
        )
    # The warnings (resources that produced nothing when probed) are kept for the page redirected to.
    return web.done(request, caller, _path(connector_id), configured=result)


# ---- sync, interval, credentials, settings --------------------------------------------------------------
@router.post("/connectors/{connector_id}/sync")
async def sync_now(connector_id: str, request: Request, caller: web.Write) -> Response:
    try:
        run = await run_in_threadpool(_svc(caller).trigger_sync, caller.principal, connector_id)
    except ApiError as err:
        if err.code == ErrorCode.NOT_FOUND:
            raise
        problem = _not_started(request, err, "The sync was not started." if err.code == ErrorCode.CONFLICT else "")
        return _detail(request, caller, connector_id, status=err.status, problem=problem)
    return web.redirect(request, _path(connector_id, f"?done=sync&run={quote(run['run_id'], safe='')}"))


async def _update(
    request: Request, caller: web.Caller, connector_id: str, body_of: Callable[[Any], dict[str, Any]], panel: str
) -> Response:
    """One PATCH /connectors/{id} with the body the form makes; a refusal shows the connector's page with
    the service's words, a success redirects back to the panel (?done=<panel>)."""
    form = await request.form()
    try:
        body = body_of(form)
        await run_in_threadpool(_svc(caller).update, caller.principal, connector_id, body)
    except ApiError as err:
        if err.code == ErrorCode.NOT_FOUND:
            raise
        return _detail(
            request, caller, connector_id, status=err.status, problem=_not_started(request, err), open_panel=panel
        )
    return web.redirect(request, _path(connector_id, f"?done={panel}#{panel}"))


@router.post("/connectors/{connector_id}/interval")
async def set_interval(connector_id: str, request: Request, caller: web.Write) -> Response:
    def body_of(form: Any) -> dict[str, Any]:
        raw = "0" if web.form_str(form, "reset") else web.form_str(form, "sync_interval_seconds")
        seconds = optional_int(raw, "sync_interval_seconds")
        if seconds is None:
            raise ApiError(ErrorCode.INVALID_PARAMETERS, "enter the sync interval in seconds")
        return {"sync_interval_seconds": seconds}

    return await _update(request, caller, connector_id, body_of, "interval")


@router.post("/connectors/{connector_id}/credentials")
async def set_credentials(connector_id: str, request: Request, caller: web.Write) -> Response:
    def body_of(form: Any) -> dict[str, Any]:
        svc = _svc(caller)
        c = svc.get(caller.principal, connector_id)
        schema = svc.catalogue(c["provider"])["credential_schema"]
        credentials = credentials_from_form(form, credential_fields(schema, c["auth_type"]))
        if not credentials:
            raise ApiError(ErrorCode.INVALID_PARAMETERS, "enter at least one credential value")
        return {"credentials": credentials}

    return await _update(request, caller, connector_id, body_of, "credentials")


@router.post("/connectors/{connector_id}/settings")
async def set_settings(connector_id: str, request: Request, caller: web.Write) -> Response:
    def body_of(form: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"custom_instructions": web.form_str(form, "custom_instructions")}
        if web.form_str(form, "name"):
            body["name"] = web.form_str(form, "name")
        return body

    return await _update(request, caller, connector_id, body_of, "settings")


# ---- removals -------------------------------------------------------------------------------------------
@router.post("/connectors/{connector_id}/resources/delete")
async def delete_resource(connector_id: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    resource_id = web.form_str(form, "resource_id")
    await run_in_threadpool(_svc(caller).delete_resource, caller.principal, connector_id, resource_id)
    return web.redirect(request, _path(connector_id, "?done=resource-removed"))


@router.post("/connectors/{connector_id}/delete")
async def delete_connector(connector_id: str, request: Request, caller: web.Write) -> Response:
    form = await request.form()
    svc = _svc(caller)
    c = svc.get(caller.principal, connector_id)
    expected = c.get("name") or connector_id
    err = web.typed_mismatch(form, expected, "deleting this connector")
    if err is not None:
        return _detail(request, caller, connector_id, status=400, problem=web.Problem.of(request, err))
    await run_in_threadpool(svc.delete, caller.principal, connector_id)
    return web.redirect(request, f"/connectors?deleted={quote(expected, safe='')}")

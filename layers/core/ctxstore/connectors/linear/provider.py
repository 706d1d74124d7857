"""The Linear connector provider (``ConnectorProvider``) on a small GraphQL client over httpx.

Resources are teams (``resource_id`` = the team's id, resource type ``linear_team``). A team syncs its
issues (sub-issues, relations) and their threaded comments; see ``linear_sync`` for the windows, cursors
and deletions, ``linear_mapping`` for native ids and graph links, ``linear_client`` for auth and the error
and rate-limit policy.

Account scope: the workspace's URL key (``organization.urlKey``, unique across Linear, the ``acme`` of
``linear.app/acme``); the workspace name is the account name. One key or token belongs to one workspace.

OAuth: ``refresh`` is one refresh-token exchange at ``ctx.token_url`` (Linear's ``/oauth/token``, which
rotates the refresh token and answers a dead one with 400 ``invalid_grant``); an authentication error on
an OAuth connector raises ``TokenExpired`` and the service refreshes (persisting the rotated set first)
before calling again. API-key connectors never refresh: a rejected key is ``CredentialsRejected``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.linear.info import INFO, validate_credentials
from ctxstore.connectors.linear.sync import PAGE, anything_since, begin_cycle, existing_ids, sync_team
from ctxstore.ports.connector_provider import (
    AccountInfo,
    ConnectorProvider,
    DiscoveredResource,
    DiscoverPage,
    KnownObject,
    ProviderContext,
    ProviderError,
    ProviderInfo,
    ResourceUnavailable,
    SyncEvent,
    SyncRequest,
)

if TYPE_CHECKING:
    from ctxstore.connectors.linear.client import LinearSession

DEFAULT_TOKEN_URL = "https://api.linear.app/oauth/token"

ACCOUNT = """
query Account {
  viewer { id name displayName email }
  organization { id name urlKey }
}
"""

TEAMS = """
query Teams($first: Int!, $after: String) {
  teams(first: $first, after: $after, orderBy: createdAt) {
    nodes { id key name description private issueCount }
    pageInfo { hasNextPage endCursor }
  }
}
"""


class LinearProvider:
    info: ProviderInfo = INFO

    def validate_credentials(self, auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
        return validate_credentials(auth_type, credentials)

    def account(self, ctx: ProviderContext) -> AccountInfo:
        with _session(ctx) as session:
            data = session.query(ACCOUNT, operation="Account")
        org, viewer = data.get("organization"), data.get("viewer")
        if not isinstance(org, dict) or not org.get("urlKey"):
            raise ProviderError("Linear answered Account without the workspace's urlKey")
        details = {"linear_workspace": str(org["urlKey"])}
        if isinstance(viewer, dict) and viewer.get("email"):
            details["linear_user_email"] = str(viewer["email"])
        return AccountInfo(account_scope=str(org["urlKey"]), account_name=str(org.get("name") or ""), details=details)

    def discover(self, ctx: ProviderContext, *, cursor: str | None = None, limit: int | None = None) -> DiscoverPage:
        """Teams the credentials' user can see (private teams only for members)."""
        first = PAGE if limit is None else max(1, min(PAGE, limit))
        after = cursor or None
        resources: list[DiscoveredResource] = []
        with _session(ctx) as session:
            while True:
                data = session.query(TEAMS, {"first": first, "after": after}, operation="Teams")
                connection = data.get("teams") if isinstance(data.get("teams"), dict) else None
                if connection is None or not isinstance(connection.get("nodes"), list):
                    raise ProviderError("Linear answered Teams without teams.nodes")
                resources += [_team(t) for t in connection["nodes"] if isinstance(t, dict) and t.get("id")]
                info = connection.get("pageInfo") or {}
                after = str(info["endCursor"]) if info.get("hasNextPage") and info.get("endCursor") else None
                if after is None or limit is not None:
                    return DiscoverPage(resources, after)

    def probe(self, ctx: ProviderContext, request: SyncRequest) -> bool:
        """Whether an issue or comment of the team changed since ``start`` (one request)."""
        with _session(ctx) as session:
            return anything_since(session, _team_of(request), request.start)

    def sync(self, ctx: ProviderContext, request: SyncRequest) -> Iterator[SyncEvent]:
        team_id = _team_of(request)
        state = begin_cycle(request.checkpoint, request.start, ctx.now())
        with _session(ctx) as session:
            yield from sync_team(session, team_id, state, new_only=request.sync_mode == "new_only")

    def reconcile(
        self, ctx: ProviderContext, request: SyncRequest, *, since: float | None, known: Sequence[KnownObject]
    ) -> list[str]:
        _team_of(request)
        with _session(ctx) as session:
            return existing_ids(session, [k.native_id for k in known])

    def refresh(self, ctx: ProviderContext) -> dict[str, Any]:
        from ctxstore.connectors.linear.client import USER_AGENT
        from ctxstore.connectors.oauth_refresh import refresh_token_grant

        return refresh_token_grant(
            ctx, provider="Linear", token_url=ctx.token_url or DEFAULT_TOKEN_URL, user_agent=USER_AGENT
        )


def _session(ctx: ProviderContext) -> LinearSession:
    # httpx is imported only when a call is made, so the catalogue (info, credential validation) costs nothing.
    from ctxstore.connectors.linear.client import LinearSession

    return LinearSession(ctx)


def _team_of(request: SyncRequest) -> str:
    if request.resource_type != "linear_team" or not request.resource_id or len(request.resource_id) > 100:
        raise ResourceUnavailable(
            f"Linear resources are teams of type linear_team (got {request.resource_type} {request.resource_id!r})"
        )
    return request.resource_id


def _team(team: dict[str, Any]) -> DiscoveredResource:
    return DiscoveredResource(
        resource_id=str(team["id"]),
        resource_type="linear_team",
        name=str(team.get("name") or team.get("key") or team["id"]),
        metadata={
            "key": team.get("key"),
            "description": team.get("description"),
            "private": bool(team.get("private")),
            "issue_count": team.get("issueCount"),
        },
    )


def build_provider() -> ConnectorProvider:
    """The provider instance the connector service registers (stateless: one serves every connector)."""
    return LinearProvider()

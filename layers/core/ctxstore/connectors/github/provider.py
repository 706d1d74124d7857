"""The GitHub connector provider (``ConnectorProvider``) on githubkit.

Resources are repositories (``resource_id`` = ``owner/repo``, resource type ``repo``). A repo syncs its issues,
pull requests, issue/PR comments and PR review comments; see ``github_sync`` for the cursor, overlap window,
keyset paging and ETags, ``github_mapping`` for native ids and graph links, ``github_client`` for auth and the
error policy.

OAuth: ``refresh`` is one refresh-token exchange at ``ctx.token_url``; a 401 on an OAuth connector raises
``TokenExpired`` and the service refreshes (and persists the rotated set) before calling again.

Account scope: the login of the token's user (``GET /user``), also for repositories of organisations. A token
belongs to a user, not an org, and one token sees repos of many owners; every native id carries
``owner/repo``, so objects of different owners never collide within one scope. Two connectors with tokens
of different users that sync the same repo keep separate items (their scopes differ), which is what
scoping by account means.

Deletions: GitHub keeps no tombstones for deleted issues or comments, so ``sync`` never sees them (it never
fetches a single object; a 404/410 on a list is the repository itself: ``ResourceUnavailable``).
``reconcile`` lists what exists now, newest first down to ``since``, only for the streams the service holds
objects of, stopping a stream once every known object of it has been seen (at most one request per 100
objects per stream created since ``since``); each known object the listing missed is fetched alone and only
a 404/410 (or a transfer to another repo) reports it deleted (see ``github_sync.existing_ids``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.github.info import INFO, validate_credentials
from ctxstore.connectors.github.sync import PER_PAGE, begin_cycle, existing_ids, iso, sync_repo
from ctxstore.ports.connector_provider import (
    AccountInfo,
    ConnectorProvider,
    CredentialsRejected,
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
    from ctxstore.connectors.github.client import GitHubSession

_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")


class GitHubProvider:
    info: ProviderInfo = INFO

    def validate_credentials(self, auth_type: str, credentials: dict[str, Any]) -> dict[str, Any]:
        return validate_credentials(auth_type, credentials)

    def account(self, ctx: ProviderContext) -> AccountInfo:
        with _session(ctx) as session:
            user = session.get("/user", missing=CredentialsRejected).data
        if not isinstance(user, dict) or not user.get("login"):
            raise ProviderError("GitHub /user answered without a login")
        login = str(user["login"])
        return AccountInfo(
            account_scope=login, account_name=str(user.get("name") or login), details={"github_login": login}
        )

    def discover(self, ctx: ProviderContext, *, cursor: str | None = None, limit: int | None = None) -> DiscoverPage:
        """Repositories the token can see (``/user/repos``: owned, collaborator, org member), by full name."""
        per_page = PER_PAGE if limit is None else max(1, min(PER_PAGE, limit))
        page = int(cursor) if cursor and cursor.isdigit() else 1
        resources: list[DiscoveredResource] = []
        with _session(ctx) as session:
            while True:
                params: dict[str, str | int] = {"per_page": per_page, "page": page, "sort": "full_name"}
                reply = session.get("/user/repos", params, missing=CredentialsRejected)
                if not isinstance(reply.data, list):
                    raise ProviderError("GitHub /user/repos answered without a list")
                resources.extend(_repo_resource(r) for r in reply.data if isinstance(r, dict) and r.get("full_name"))
                if reply.next_page is None:
                    return DiscoverPage(resources, None)
                if limit is not None:
                    return DiscoverPage(resources, str(reply.next_page))
                page = reply.next_page

    def probe(self, ctx: ProviderContext, request: SyncRequest) -> bool:
        """Whether anything changed since ``start``: a comment or review bumps its issue, so issues suffice."""
        full_name = _repo_of(request)
        params: dict[str, str | int] = {"state": "all", "since": iso(request.start), "per_page": 1}
        with _session(ctx) as session:
            reply = session.get(f"/repos/{full_name}/issues", params)
        return isinstance(reply.data, list) and len(reply.data) > 0

    def sync(self, ctx: ProviderContext, request: SyncRequest) -> Iterator[SyncEvent]:
        full_name = _repo_of(request)
        state = begin_cycle(request.checkpoint, request.start)
        with _session(ctx) as session:
            yield from sync_repo(session, full_name, state, new_only=request.sync_mode == "new_only")

    def reconcile(
        self, ctx: ProviderContext, request: SyncRequest, *, since: float | None, known: Sequence[KnownObject]
    ) -> list[str]:
        full_name = _repo_of(request)
        with _session(ctx) as session:
            return existing_ids(session, full_name, since, [k.native_id for k in known])

    def refresh(self, ctx: ProviderContext) -> dict[str, Any]:
        from ctxstore.connectors.github.client import refresh_oauth

        return refresh_oauth(ctx)


def _session(ctx: ProviderContext) -> GitHubSession:
    # githubkit (with hishel, httpx) takes about a second to import: only when a call is made, so the
    # catalogue (info, credential validation) costs nothing.
    from ctxstore.connectors.github.client import GitHubSession

    return GitHubSession(ctx)


def _repo_of(request: SyncRequest) -> str:
    if request.resource_type != "repo" or not _REPO.match(request.resource_id):
        raise ResourceUnavailable(
            f"GitHub resources are repositories 'owner/repo' of type repo (got {request.resource_type} "
            f"{request.resource_id!r})"
        )
    return request.resource_id


def _repo_resource(repo: dict[str, Any]) -> DiscoveredResource:
    owner = repo.get("owner") if isinstance(repo.get("owner"), dict) else {}
    return DiscoveredResource(
        resource_id=str(repo["full_name"]),
        resource_type="repo",
        name=str(repo["full_name"]),
        metadata={
            "full_name": repo["full_name"],
            "github_id": repo.get("id"),
            "private": bool(repo.get("private")),
            "default_branch": repo.get("default_branch"),
            "description": repo.get("description"),
            "archived": bool(repo.get("archived")),
            "has_issues": repo.get("has_issues"),
            "open_issues_count": repo.get("open_issues_count"),
            "owner": (owner or {}).get("login"),
            "html_url": repo.get("html_url"),
        },
    )


def build_provider() -> ConnectorProvider:
    """The provider instance the connector service registers (stateless: one serves every connector)."""
    return GitHubProvider()


PROVIDER: ConnectorProvider = GitHubProvider()

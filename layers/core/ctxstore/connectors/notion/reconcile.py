"""Deletions of a Notion resource: which known objects still exist (`reconcile`).

Trashed pages and rows leave search and queries, and a page no longer shared answers 404: a listing (search
over pages; the data source's query, bounded by `created_time`, for rows) is followed by confirming each
known object missing from it with `pages.retrieve`, up to MAX_CONFIRM per cycle, because search is known to
miss pages (see `notion_sync` for the whole mechanism).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.notion.markdown import nid
from ctxstore.connectors.notion.sync import LIST_PAGE, Gone, is_trashed, iso, live_data_source, parent_ref

if TYPE_CHECKING:
    from ctxstore.connectors.notion.session import NotionSession

MAX_CONFIRM = 50  # known objects missing from a listing, confirmed one call each per cycle


def existing_pages(session: NotionSession, root: str, known: list[str]) -> list[str]:
    """Known pages of a page resource that still exist (searchable, or confirmed one by one)."""
    listed: set[str] = set()
    cursor: str | None = None
    while True:
        res = session.search("page", cursor=cursor, page_size=LIST_PAGE)
        listed.update(nid(r["id"]) for r in res.get("results") or [] if isinstance(r, dict) and r.get("id"))
        cursor = res.get("next_cursor") if res.get("has_more") else None
        if not cursor:
            break
    return _confirmed(session, known, listed, lambda page: True)


def existing_rows(session: NotionSession, dsid: str, since: float | None, known: list[str]) -> list[str]:
    """Known objects of a data source resource that still exist: the data source, and rows still in it."""
    live_data_source(session, dsid)
    listed: set[str] = {dsid}
    cursor: str | None = None
    while True:
        body: dict[str, Any] = {"page_size": LIST_PAGE}
        if since is not None:
            body["filter"] = {"timestamp": "created_time", "created_time": {"on_or_after": iso(since)}}
        if cursor:
            body["start_cursor"] = cursor
        res = session.query(dsid, body)
        listed.update(nid(r["id"]) for r in res.get("results") or [] if isinstance(r, dict) and r.get("id"))
        cursor = res.get("next_cursor") if res.get("has_more") else None
        if not cursor:
            break
    return _confirmed(session, known, listed, lambda page: parent_ref(page) == ("data_source_id", dsid))


def _confirmed(
    session: NotionSession, known: list[str], listed: set[str], belongs: Callable[[dict[str, Any]], bool]
) -> list[str]:
    present = [k for k in known if k in listed]
    missing = [k for k in known if k not in listed]
    for pid in missing[:MAX_CONFIRM]:
        try:
            page = session.page(pid, missing=Gone)
        except Gone:
            continue
        if not is_trashed(page) and belongs(page):
            present.append(pid)
    present.extend(missing[MAX_CONFIRM:])  # not confirmed this cycle: kept until a later one
    return present

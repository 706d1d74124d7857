"""Sync of one Gmail label: a first sync bounded by the lookback, then the mailbox history from a historyId.

First sync (`phase` backfill): `users.getProfile` gives the mailbox's current `historyId` before anything
is listed, so every change made while the listing runs is in the history read afterwards. Then
`users.messages.list(labelIds=[label], q="after:<start>")` a page at a time (newest first; the page token is
the checkpoint); the page's messages are fetched by thread (`users.threads.get(format=full)`, one call per
thread: the whole conversation gives each message its thread root and resolves In-Reply-To/References to
the parent) and attachments of accepted formats with `users.messages.attachments.get`.

Incremental (`phase` incremental): `users.history.list(startHistoryId, labelId=label, historyTypes=
messageAdded,messageDeleted,labelAdded,labelRemoved)`, a checkpoint per page; the last page's `historyId`
is the next cursor. A deleted message is a `DeletedObject`; an added message, or one whose labels changed
(this label, or TRASH/SPAM), is fetched again: present with the label -> synced (unchanged content is
skipped by the service's hash), gone or without the label -> `DeletedObject`. A label is a set of messages:
a message taken out of it (archived out of INBOX, trashed) leaves the resource; the service keeps the item
while another label of the same connector still holds it.

History gap: Gmail keeps history for about a week (sometimes hours); an older `startHistoryId` answers 404.
Then the label is synced again from scratch over the same lookback as its first sync (`lookback_s`, counted
back from now), which is a bounded full resync, not an error; the deletions history would have reported
are found once by `reconcile` (a listing of the label since the oldest message the service holds), which
the resync's final checkpoint asks for (`reconcile: true`) and the next incremental pass switches off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ctxstore.connectors.gmail.mapping import ThreadView, accepted, b64decode, file_parts, map_message
from ctxstore.ports.connector_provider import (
    Attachment,
    Checkpoint,
    DeletedObject,
    ObjectFailure,
    ProviderContext,
    ResourceUnavailable,
    SyncEvent,
)

if TYPE_CHECKING:
    from ctxstore.connectors.gmail.client import GmailSession

STATE_VERSION = 1
LIST_PAGE = 100  # messages.list page (Gmail allows 500; 100 keeps a checkpoint's work small)
HISTORY_PAGE = 500
HISTORY_TYPES = ["messageAdded", "messageDeleted", "labelAdded", "labelRemoved"]
HIDDEN = frozenset({"SPAM", "TRASH"})  # a message with one of these has left every other label
DAY = 86400.0
DEFAULT_LOOKBACK_S = 30 * DAY


def caught_up(history_id: str, lookback_s: float, *, reconcile: bool) -> Checkpoint:
    """The checkpoint of a label that is caught up: the next sync reads history from `history_id`."""
    state = {
        "v": STATE_VERSION,
        "phase": "incremental",
        "history_id": history_id,
        "page_token": None,
        "lookback_s": lookback_s,
        "reconcile": reconcile,
    }
    return Checkpoint(state, cursor=history_id, has_more=False)


class HistoryGap(Exception):
    """history.list answered 404: the stored historyId is older than the history Gmail keeps."""


class LabelSync:
    def __init__(self, session: GmailSession, ctx: ProviderContext, label: str) -> None:
        self._s = session
        self._ctx = ctx
        self.label = label

    # ---- calls -----------------------------------------------------------------------------------
    def profile(self) -> dict[str, Any]:
        data = self._s.call("getProfile", lambda api: api.users().getProfile(userId="me"), missing=ResourceUnavailable)
        assert data is not None
        return data

    def list_page(self, after: float, page_token: str | None, size: int) -> dict[str, Any]:
        data = self._s.call(
            "messages.list",
            lambda api: (
                api.users()
                .messages()
                .list(
                    userId="me",
                    labelIds=[self.label],
                    q=f"after:{int(after)}",
                    maxResults=size,
                    pageToken=page_token,
                    includeSpamTrash=self.label in HIDDEN,
                )
            ),
            missing=ResourceUnavailable,
            bad_request=ResourceUnavailable,
        )
        assert data is not None
        return data

    def _thread(self, thread_id: str) -> list[dict[str, Any]] | None:
        data = self._s.call(
            "threads.get", lambda api: api.users().threads().get(userId="me", id=thread_id, format="full")
        )
        return [m for m in data.get("messages") or [] if isinstance(m, dict)] if data else None

    def _attachment(self, message_id: str, attachment_id: str) -> bytes | None:
        data = self._s.call(
            "attachments.get",
            lambda api: api.users().messages().attachments().get(userId="me", messageId=message_id, id=attachment_id),
        )
        return b64decode(str(data.get("data") or "")) if data else None

    # ---- objects -------------------------------------------------------------------------------------
    def _present(self, m: dict[str, Any]) -> bool:
        labels = set(m.get("labelIds") or [])
        return self.label in labels and (self.label in HIDDEN or not labels & HIDDEN)

    def objects(self, wanted: dict[str, str]) -> Iterator[SyncEvent]:
        """The current state of each wanted message (id -> thread id, in order), fetched thread by thread."""
        by_thread: dict[str, list[str]] = {}
        for message_id, thread_id in wanted.items():
            by_thread.setdefault(thread_id or message_id, []).append(message_id)
        for thread_id, ids in by_thread.items():
            messages = self._thread(thread_id)
            if messages is None:  # the whole thread is gone
                yield from (DeletedObject(i) for i in ids)
                continue
            view = ThreadView.of(messages)
            by_id = {str(m.get("id")): m for m in messages}
            for message_id in ids:
                m = by_id.get(message_id)
                if m is None or not self._present(m):
                    yield DeletedObject(message_id)
                    continue
                try:
                    yield self._object(m, view)
                except (KeyError, ValueError, TypeError) as exc:
                    yield ObjectFailure(message_id, f"unreadable message: {type(exc).__name__}: {exc}")

    def _object(self, m: dict[str, Any], view: ThreadView) -> SyncEvent:
        message_id = str(m["id"])
        files: list[Attachment] = []
        for f in file_parts(m.get("payload") or {}):
            if not accepted(f):
                continue
            data = b64decode(f.inline_data) if f.inline_data else None
            if data is None and f.attachment_id:
                data = self._attachment(message_id, f.attachment_id)
            if data is not None:
                files.append(Attachment(f.filename, f.mime_type, data))
        account = self._ctx.account.details.get("account_email", "") if self._ctx.account else ""
        return map_message(
            m,
            view,
            account_email=str(account),
            fetch_body=lambda attachment_id: self._attachment(message_id, attachment_id) or b"",
            attachments=files,
        )

    # ---- first sync (and the resync after a history gap) -------------------------------------------------
    def backfill(self, state: dict[str, Any] | None, start: float, *, resync: bool) -> Iterator[SyncEvent]:
        if state is None:
            st: dict[str, Any] = {
                "v": STATE_VERSION,
                "phase": "backfill",
                "history_id": str(self.profile()["historyId"]),
                "after": int(start),
                "page_token": None,
                "lookback_s": max(0.0, self._ctx.now() - start),
                "resync": resync,
            }
        else:
            st = dict(state)
        while True:
            page = self.list_page(float(st["after"]), st["page_token"], LIST_PAGE)
            listed = {str(m["id"]): str(m.get("threadId") or m["id"]) for m in page.get("messages") or []}
            yield from self.objects(listed)
            token = page.get("nextPageToken")
            if token:
                st["page_token"] = str(token)
                yield Checkpoint(dict(st), cursor=str(st["history_id"]), has_more=True)
                continue
            yield caught_up(str(st["history_id"]), float(st["lookback_s"]), reconcile=bool(st["resync"]))
            return

    # ---- incremental ------------------------------------------------------------------------------------
    def incremental(self, state: dict[str, Any]) -> Iterator[SyncEvent]:
        st = dict(state)
        while True:
            page = self._s.call(
                "history.list",
                lambda api: (
                    api.users()
                    .history()
                    .list(
                        userId="me",
                        startHistoryId=st["history_id"],
                        labelId=self.label,
                        historyTypes=HISTORY_TYPES,
                        maxResults=HISTORY_PAGE,
                        pageToken=st.get("page_token"),
                    )
                ),
            )
            if page is None:
                raise HistoryGap(str(st["history_id"]))
            deleted, changed = self.changes(page.get("history") or [])
            yield from (DeletedObject(i) for i in deleted)
            yield from self.objects(changed)
            token = page.get("nextPageToken")
            if token:
                st["page_token"] = str(token)
                yield Checkpoint(dict(st), cursor=str(st["history_id"]), has_more=True)
                continue
            history_id = str(page.get("historyId") or st["history_id"])
            yield caught_up(history_id, float(st.get("lookback_s") or DEFAULT_LOOKBACK_S), reconcile=False)
            return

    def changes(self, records: list[dict[str, Any]]) -> tuple[list[str], dict[str, str]]:
        """(deleted message ids, message id -> thread id of messages to fetch again) from history records."""
        deleted: dict[str, None] = {}
        changed: dict[str, str] = {}
        relevant = {self.label} | HIDDEN
        for record in records:
            for entry in record.get("messagesAdded") or []:
                msg = entry.get("message") or {}
                if self.label in (msg.get("labelIds") or [self.label]):
                    changed[str(msg["id"])] = str(msg.get("threadId") or msg["id"])
            for key in ("labelsAdded", "labelsRemoved"):
                for entry in record.get(key) or []:
                    msg = entry.get("message") or {}
                    if relevant & set(entry.get("labelIds") or []):
                        changed[str(msg["id"])] = str(msg.get("threadId") or msg["id"])
            for entry in record.get("messagesDeleted") or []:
                deleted[str((entry.get("message") or {})["id"])] = None
        return list(deleted), {k: v for k, v in changed.items() if k not in deleted}

    # ---- deletions after a resync -------------------------------------------------------------------------
    def existing_since(self, oldest: float) -> list[str]:
        """Every message id of the label received after `oldest` (a day of margin for clock differences)."""
        ids: list[str] = []
        token: str | None = None
        while True:
            page = self.list_page(oldest - DAY, token, 500)
            ids.extend(str(m["id"]) for m in page.get("messages") or [])
            token = page.get("nextPageToken")
            if not token:
                return ids


def sync_label(
    session: GmailSession, ctx: ProviderContext, label: str, checkpoint: dict[str, Any] | None, start: float
) -> Iterator[SyncEvent]:
    """One label from its checkpoint (None or an unknown version: a first sync from `start`)."""
    s = LabelSync(session, ctx, label)
    state = checkpoint if checkpoint and checkpoint.get("v") == STATE_VERSION else None
    if state is None or state.get("phase") == "backfill":
        yield from s.backfill(state, start, resync=False)
        return
    try:
        yield from s.incremental(state)
    except HistoryGap:
        lookback = float(state.get("lookback_s") or DEFAULT_LOOKBACK_S)
        yield from s.backfill(None, ctx.now() - lookback, resync=True)

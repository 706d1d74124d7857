"""A loopback fake of the Gmail API (v1) and Google's OAuth token endpoint, for the real client libraries.

`googleapiclient.discovery.build("gmail", "v1", client_options={"api_endpoint": fake.base_url})` reaches
it at `/gmail/v1/users/me/...`; `google.oauth2.credentials.Credentials(token_uri=fake.token_url)` refreshes
at `/token`. It answers with Gmail's shapes and conventions:

- `users.getProfile`, `users.labels.list`, `users.messages.list` (`labelIds` all required, `q` with
  `after:`/`before:` epoch seconds, newest first, `pageToken`/`maxResults`), `users.messages.get` and
  `users.threads.get` (`format=full|metadata|minimal`: payload trees built from real RFC 822 messages, with
  base64url bodies and `attachmentId`s for attachments), `users.messages.attachments.get`, and
  `users.history.list` (records after `startHistoryId`, filtered by `labelId` and `historyTypes`,
  `messagesAdded`/`messagesDeleted`/`labelsAdded`/`labelsRemoved`, the mailbox's current `historyId`);
- a `startHistoryId` older than the kept history answers 404 (the "history gap": the client must resync);
- errors in Google's JSON error shape: 401 for an unknown, revoked or expired token, 403
  `insufficientPermissions` for a token without a Gmail read scope, 400 `failedPrecondition` "Mail service
  not enabled", and 429 / 403 `rateLimitExceeded` / `userRateLimitExceeded` (with Retry-After when told);
- the token endpoint: `grant_type=refresh_token` answers a new access token (and, when `rotate_refresh_tokens`
  is set, a new refresh token that replaces the old, single-use one); a revoked or unknown refresh token is
  400 `invalid_grant` "Token has been expired or revoked."; a wrong client is 401 `invalid_client`.
Every call is recorded (method name, path, query, token) so tests can assert what a sync asked for.

Usage: `with FakeGmail() as gmail: token = gmail.add_token("ya29.x"); seed_mailbox(gmail)` and point the
server at `gmail.base_url` (CTXSTORE_CONNECTOR_BASE_URL_GMAIL) and `gmail.token_url` (..._TOKEN_URL_GMAIL).
"""

from __future__ import annotations

import base64
import csv
import email.policy
import io
import threading
import time
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, make_msgid, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.loopback import CallLog, LoopbackFake, OAuthClients, RestHandler

GMAIL_SCOPES = frozenset(
    {
        "https://mail.google.com/",
        "https://www.googleapis.com/auth/gmail.readonly",
        "https://www.googleapis.com/auth/gmail.modify",
    }
)
SYSTEM_LABELS = ("INBOX", "SENT", "DRAFT", "SPAM", "TRASH", "UNREAD", "STARRED", "IMPORTANT")
HISTORY_TYPES = ("messageAdded", "messageDeleted", "labelAdded", "labelRemoved")


@dataclass
class Label:
    id: str
    name: str
    type: str = "user"  # "system" | "user"


@dataclass
class Message:
    id: str
    thread_id: str
    label_ids: set[str]
    internal_date: float  # epoch seconds
    raw: bytes  # the RFC 822 message
    history_id: int
    deleted: bool = False


@dataclass
class Token:
    value: str
    expires_at: float | None = None
    revoked: bool = False
    calls_left: int | None = None  # expires after this many more API calls (a token that dies mid-sync)
    scopes: frozenset[str] = frozenset({"https://www.googleapis.com/auth/gmail.readonly"})


@dataclass
class HistoryRecord:
    id: int
    kind: str  # one of HISTORY_TYPES
    message_id: str
    thread_id: str
    labels: frozenset[str]  # the message's labels at the change (before a removal, with the removed ones)
    changed: tuple[str, ...] = ()  # labelAdded / labelRemoved: the labels that changed


@dataclass(frozen=True)
class Call:
    method: str  # e.g. "messages.list", "history.list", "token"
    path: str
    params: dict[str, list[str]]
    token: str | None
    at: float

    def param(self, name: str) -> str | None:
        values = self.params.get(name)
        return values[0] if values else None


@dataclass
class _Failure:
    status: int
    reason: str
    message: str
    retry_after: float | None
    times: int


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def pdf_bytes(text: str) -> bytes:
    """A minimal valid one-page PDF whose content stream draws `text` (for attachment parsing)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def docx_bytes(text: str) -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(text)
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def csv_bytes(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue().encode()


def zip_bytes(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(name, data)
    return buf.getvalue()


MIME_OF = {
    ".pdf": ("application", "pdf"),
    ".docx": ("application", "vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ".csv": ("text", "csv"),
    ".zip": ("application", "zip"),
}


def compose(
    *,
    subject: str,
    sender: str,
    to: str,
    text: str | None = None,
    html: str | None = None,
    attachments: tuple[tuple[str, bytes], ...] = (),
    in_reply_to: str | None = None,
    references: tuple[str, ...] = (),
    at: float | None = None,
    message_id: str | None = None,
) -> EmailMessage:
    """A real RFC 822 message: text/plain, text/html, multipart/alternative, or multipart/mixed with files."""
    m = EmailMessage()
    m["Subject"] = subject
    m["From"] = sender
    m["To"] = to
    m["Date"] = format_datetime(datetime.fromtimestamp(at if at is not None else time.time(), UTC))
    m["Message-ID"] = message_id or make_msgid(domain="mail.example.com")
    if in_reply_to:
        m["In-Reply-To"] = in_reply_to
    if references:
        m["References"] = " ".join(references)
    if text is not None:
        m.set_content(text)
        if html is not None:
            m.add_alternative(html, subtype="html")
    elif html is not None:
        m.set_content(html, subtype="html")
    else:
        m.set_content("")
    for filename, data in attachments:
        ext = filename[filename.rfind(".") :].lower()
        maintype, subtype = MIME_OF.get(ext, ("application", "octet-stream"))
        m.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
    return m


class FakeGmail(LoopbackFake, OAuthClients, CallLog[Call, _Failure]):
    refresh_token_format = "1//refresh-{n}-secret"
    thread_name = "fake-gmail"

    def __init__(self, *, email_address: str = "owner@example.com") -> None:
        self.email_address = email_address
        self.labels: dict[str, Label] = {name: Label(name, name, "system") for name in SYSTEM_LABELS}
        self.messages: dict[str, Message] = {}
        self.history: list[HistoryRecord] = []
        self.history_id = 1000
        self.history_floor = 0  # a startHistoryId below this answers 404 (the history gap)
        self.tokens: dict[str, Token] = {}
        self.rotate_refresh_tokens = False  # answer a new refresh token on every refresh (the old dies)
        self.access_token_lifetime_s = 3599
        self.mail_disabled = False
        self.max_results_cap = 500  # lower it to force small pages
        self.delay_s = 0.0  # added to every answer (a slow provider)
        self._lock = threading.RLock()
        self._next_id = 0x18C0000000000000
        self._oauth_books()
        self._call_log()
        self._listen(self._handler())

    # ---- lifecycle -----------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}token"

    # ---- tokens --------------------------------------------------------------------------------------
    def add_token(self, value: str, *, expires_in: float | None = 3599, scopes: frozenset[str] | None = None) -> str:
        with self._lock:
            expires = time.time() + expires_in if expires_in is not None else None
            self.tokens[value] = Token(value, expires, scopes=scopes if scopes is not None else Token.scopes)
        return value

    def expire(self, token: str) -> None:
        with self._lock:
            self.tokens[token].expires_at = time.time() - 1

    def expire_after(self, token: str, calls: int) -> None:
        """The token works for `calls` more API calls, then it has expired (mid-sync)."""
        with self._lock:
            self.tokens[token].calls_left = calls

    def revoke(self, token: str) -> None:
        with self._lock:
            self.tokens[token].revoked = True

    def issued_access_tokens(self) -> list[str]:
        with self._lock:
            return [t for t in self.tokens if t.startswith("ya29.issued-")]

    # ---- mailbox -------------------------------------------------------------------------------------
    def add_label(self, label_id: str, name: str) -> Label:
        with self._lock:
            label = Label(label_id, name, "user")
            self.labels[label_id] = label
            return label

    def _bump(self) -> int:
        self.history_id += 1
        return self.history_id

    def _record(self, kind: str, m: Message, labels: set[str], changed: tuple[str, ...] = ()) -> None:
        self.history.append(HistoryRecord(self._bump(), kind, m.id, m.thread_id, frozenset(labels), changed))
        m.history_id = self.history_id

    def deliver(self, mail: EmailMessage, *, labels: tuple[str, ...] = ("INBOX",), thread_of: str | None = None) -> str:
        """Add a message (a new thread, or a reply in `thread_of`'s thread); its Gmail id."""
        with self._lock:
            self._next_id += 0x1F3
            mid = f"{self._next_id:016x}"
            date = mail["Date"]
            at = parsedate_to_datetime(date).timestamp() if date else time.time()
            thread = self.messages[thread_of].thread_id if thread_of else mid
            m = Message(mid, thread, set(labels), at, mail.as_bytes(policy=email.policy.SMTP), 0)
            self.messages[mid] = m
            self._record("messageAdded", m, m.label_ids)
            return mid

    def delete(self, message_id: str) -> None:
        with self._lock:
            m = self.messages[message_id]
            m.deleted = True
            self._record("messageDeleted", m, m.label_ids)

    def add_labels(self, message_id: str, *labels: str) -> None:
        with self._lock:
            m = self.messages[message_id]
            m.label_ids |= set(labels)
            self._record("labelAdded", m, m.label_ids, labels)

    def remove_labels(self, message_id: str, *labels: str) -> None:
        with self._lock:
            m = self.messages[message_id]
            before = set(m.label_ids)
            m.label_ids -= set(labels)
            self._record("labelRemoved", m, before, labels)

    def expire_history(self) -> None:
        """Forget every history record so far: an older startHistoryId now answers 404."""
        with self._lock:
            self.history_floor = self.history_id
            self.history.clear()

    def message_id_header(self, message_id: str) -> str:
        with self._lock:
            parsed = BytesParser(policy=email.policy.default).parsebytes(self.messages[message_id].raw)
            return str(parsed["Message-ID"])

    # ---- failures and the call log ---------------------------------------------------------------------
    def fail(
        self,
        method: str,
        *,
        status: int = 429,
        reason: str = "rateLimitExceeded",
        message: str = "Rate Limit Exceeded",
        retry_after: float | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` calls of `method` (e.g. "messages.list", "token") answer this error."""
        self._inject(method, _Failure(status, reason, message, retry_after, times))

    # ---- rendering -------------------------------------------------------------------------------------
    def _part(self, m: Message, part: Any, part_id: str, attachments: dict[str, bytes]) -> dict[str, Any]:
        headers = [{"name": k, "value": str(v)} for k, v in part.items()]
        out: dict[str, Any] = {
            "partId": part_id,
            "mimeType": part.get_content_type(),
            "filename": part.get_filename() or "",
            "headers": headers,
        }
        if part.is_multipart():
            out["body"] = {"size": 0}
            children = part.get_payload()
            out["parts"] = [
                self._part(m, child, f"{part_id}.{i}" if part_id else str(i), attachments)
                for i, child in enumerate(children)
            ]
            return out
        data = part.get_payload(decode=True) or b""
        if out["filename"]:
            attachment_id = f"ANGj{m.id}{part_id.replace('.', 'x')}"
            attachments[attachment_id] = data
            out["body"] = {"size": len(data), "attachmentId": attachment_id}
        else:
            out["body"] = {"size": len(data), "data": b64url(data)}
        return out

    def _attachments(self, m: Message) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        self._part(m, BytesParser(policy=email.policy.default).parsebytes(m.raw), "", found)
        return found

    def _render(self, m: Message, fmt: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": m.id,
            "threadId": m.thread_id,
            "labelIds": sorted(m.label_ids),
            "historyId": str(m.history_id),
            "internalDate": str(int(m.internal_date * 1000)),
            "sizeEstimate": len(m.raw),
        }
        if fmt == "minimal":
            return out
        parsed = BytesParser(policy=email.policy.default).parsebytes(m.raw)
        body_part = parsed.get_body(preferencelist=("plain", "html"))
        snippet = ""
        if body_part is not None:
            snippet = " ".join(str(body_part.get_content()).split())[:200]
        out["snippet"] = snippet
        if fmt == "metadata":
            out["payload"] = {
                "mimeType": parsed.get_content_type(),
                "headers": [{"name": k, "value": str(v)} for k, v in parsed.items()],
            }
            return out
        out["payload"] = self._part(m, parsed, "", {})
        return out

    def _visible(self, m: Message, include_spam_trash: bool) -> bool:
        if m.deleted:
            return False
        return include_spam_trash or not (m.label_ids & {"SPAM", "TRASH"})

    # ---- the API ----------------------------------------------------------------------------------------
    def _error(self, status: int, reason: str, message: str) -> tuple[int, dict[str, Any], dict[str, str]]:
        google_status = {
            400: "FAILED_PRECONDITION" if reason == "failedPrecondition" else "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            403: "PERMISSION_DENIED",
            404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED",
        }.get(status, "INTERNAL")
        body = {
            "error": {
                "code": status,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}],
                "status": google_status,
            }
        }
        return status, body, {}

    def _authorize(self, token: str | None) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        t = self.tokens.get(token or "")
        if t is not None and t.calls_left is not None:
            if t.calls_left <= 0:
                t.expires_at = min(t.expires_at or time.time(), time.time() - 1)
            t.calls_left -= 1
        if t is None or t.revoked or (t.expires_at is not None and t.expires_at <= time.time()):
            return self._error(
                401,
                "authError",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or"
                " other valid authentication credential.",
            )
        if not t.scopes & GMAIL_SCOPES:
            message = "Request had insufficient authentication scopes."
            status, body, headers = self._error(403, "insufficientPermissions", message)
            body["error"]["details"] = [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT"}
            ]
            return status, body, headers
        if self.mail_disabled:
            return self._error(400, "failedPrecondition", "Mail service not enabled")
        return None

    def _injected(self, method: str) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        f = self._take_failure(method)
        if f is None:
            return None
        status, body, headers = self._error(f.status, f.reason, f.message)
        if f.retry_after is not None:
            headers["Retry-After"] = str(int(f.retry_after))
        return status, body, headers

    def _max_results(self, p: dict[str, list[str]], default: int, cap: int) -> int:
        try:
            return max(1, min(int(p.get("maxResults", [default])[0]), cap, self.max_results_cap))
        except ValueError:
            return default

    @staticmethod
    def _offset(p: dict[str, list[str]]) -> int:
        token = p.get("pageToken", [""])[0]
        return int(token) if token.isdigit() else 0

    def _list_messages(self, p: dict[str, list[str]]) -> tuple[int, dict[str, Any], dict[str, str]]:
        wanted = set(p.get("labelIds", []))
        unknown = wanted - set(self.labels)
        if unknown:
            return self._error(400, "invalidArgument", f"Invalid label: {sorted(unknown)[0]}")
        after, before = 0.0, float("inf")
        for term in " ".join(p.get("q", [])).split():
            if term.startswith("after:"):
                after = float(term[6:])
            elif term.startswith("before:"):
                before = float(term[7:])
        spam_trash = p.get("includeSpamTrash", ["false"])[0] == "true"
        found = [
            m
            for m in self.messages.values()
            if self._visible(m, spam_trash or bool(wanted & {"SPAM", "TRASH"}))
            and wanted <= m.label_ids
            and after < m.internal_date < before
        ]
        found.sort(key=lambda m: (m.internal_date, m.id), reverse=True)
        start, size = self._offset(p), self._max_results(p, 100, 500)
        page = found[start : start + size]
        out: dict[str, Any] = {"resultSizeEstimate": len(found)}
        if page:
            out["messages"] = [{"id": m.id, "threadId": m.thread_id} for m in page]
        if start + size < len(found):
            out["nextPageToken"] = str(start + size)
        return 200, out, {}

    def _list_history(self, p: dict[str, list[str]]) -> tuple[int, dict[str, Any], dict[str, str]]:
        try:
            start = int(p.get("startHistoryId", [""])[0])
        except ValueError:
            return self._error(400, "invalidArgument", "Invalid startHistoryId")
        if start < self.history_floor:
            return self._error(404, "notFound", "Requested entity was not found.")
        label = p.get("labelId", [None])[0]
        types = set(p.get("historyTypes", [])) or set(HISTORY_TYPES)
        records = [r for r in self.history if r.id > start and r.kind in types and (label is None or label in r.labels)]
        offset, size = self._offset(p), self._max_results(p, 100, 500)
        page = records[offset : offset + size]
        out: dict[str, Any] = {"historyId": str(self.history_id)}
        if page:
            out["history"] = [self._history_entry(r) for r in page]
        if offset + size < len(records):
            out["nextPageToken"] = str(offset + size)
        return 200, out, {}

    def _history_entry(self, r: HistoryRecord) -> dict[str, Any]:
        msg = {"id": r.message_id, "threadId": r.thread_id, "labelIds": sorted(r.labels)}
        entry: dict[str, Any] = {"id": str(r.id), "messages": [{"id": r.message_id, "threadId": r.thread_id}]}
        key = {
            "messageAdded": "messagesAdded",
            "messageDeleted": "messagesDeleted",
            "labelAdded": "labelsAdded",
            "labelRemoved": "labelsRemoved",
        }[r.kind]
        item: dict[str, Any] = {"message": msg}
        if r.changed:
            item["labelIds"] = list(r.changed)
        entry[key] = [item]
        return entry

    def _token_endpoint(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any], dict[str, str]]:
        def one(name: str) -> str:
            return form.get(name, [""])[0]

        if one("grant_type") != "refresh_token":
            return 400, {"error": "unsupported_grant_type"}, {}
        client_id, secret = one("client_id"), one("client_secret")
        if self.clients.get(client_id) != secret:
            return 401, {"error": "invalid_client", "error_description": "The OAuth client was not found."}, {}
        refresh = one("refresh_token")
        if self.refresh_tokens.get(refresh) != client_id:
            return 400, {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}, {}
        self._issued += 1
        access = self.add_token(f"ya29.issued-{self._issued}-secret", expires_in=self.access_token_lifetime_s)
        body: dict[str, Any] = {
            "access_token": access,
            "expires_in": self.access_token_lifetime_s,
            "scope": "https://www.googleapis.com/auth/gmail.readonly",
            "token_type": "Bearer",
        }
        if self.rotate_refresh_tokens:
            del self.refresh_tokens[refresh]
            body["refresh_token"] = self.issue_refresh_token(client_id)
        return 200, body, {}

    def _route(self, verb: str, path: str, p: dict[str, list[str]]) -> tuple[str, Any]:
        """(method name, handler) for a request path under /gmail/v1/users/me."""
        parts = [unquote(x) for x in path.strip("/").split("/")]
        if parts[:3] != ["gmail", "v1", "users"] or len(parts) < 5 or verb != "GET":
            return "unknown", None
        rest = parts[4:]
        if rest == ["profile"]:
            profile = {
                "emailAddress": self.email_address,
                "messagesTotal": sum(not m.deleted for m in self.messages.values()),
                "threadsTotal": len({m.thread_id for m in self.messages.values() if not m.deleted}),
                "historyId": str(self.history_id),
            }
            return "getProfile", lambda: (200, profile, {})
        if rest == ["labels"]:
            labels = [
                {"id": x.id, "name": x.name, "type": x.type}
                | ({"messageListVisibility": "show", "labelListVisibility": "labelShow"} if x.type == "user" else {})
                for x in self.labels.values()
            ]
            return "labels.list", lambda: (200, {"labels": labels}, {})
        if rest == ["messages"]:
            return "messages.list", lambda: self._list_messages(p)
        if rest == ["history"]:
            return "history.list", lambda: self._list_history(p)
        fmt = p.get("format", ["full"])[0]
        if len(rest) == 2 and rest[0] == "messages":
            m = self.messages.get(rest[1])
            found = m is not None and not m.deleted
            return (
                "messages.get",
                lambda: (200, self._render(m, fmt), {}) if found and m else self._error(404, "notFound", "Not Found"),
            )
        if len(rest) == 4 and rest[0] == "messages" and rest[2] == "attachments":
            m = self.messages.get(rest[1])
            data = self._attachments(m).get(rest[3]) if m is not None and not m.deleted else None
            return (
                "attachments.get",
                lambda: (
                    (200, {"size": len(data), "data": b64url(data)}, {})
                    if data is not None
                    else self._error(404, "notFound", "Not Found")
                ),
            )
        if len(rest) == 2 and rest[0] == "threads":
            members = sorted(
                (m for m in self.messages.values() if m.thread_id == rest[1] and not m.deleted),
                key=lambda m: (m.internal_date, m.id),
            )
            return (
                "threads.get",
                lambda: (
                    (
                        200,
                        {
                            "id": rest[1],
                            "historyId": str(self.history_id),
                            "messages": [self._render(m, fmt) for m in members],
                        },
                        {},
                    )
                    if members
                    else self._error(404, "notFound", "Not Found")
                ),
            )
        return "unknown", None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(RestHandler):
            content_type = "application/json; charset=UTF-8"

            def _serve(self, verb: str) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                auth = self.headers.get("Authorization") or ""
                token = auth[7:] if auth.startswith("Bearer ") else None
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                with fake._lock:
                    if split.path == "/token" and verb == "POST":
                        form = parse_qs(body.decode(), keep_blank_values=True)
                        fake.calls.append(Call("token", split.path, form, None, time.time()))
                        answer = fake._injected("token") or fake._token_endpoint(form)
                        self._answer(*answer)
                        return
                    params = parse_qs(split.query, keep_blank_values=True)
                    method, run = fake._route(verb, split.path, params)
                    fake.calls.append(Call(method, split.path, params, token, time.time()))
                    if run is None:
                        answer = fake._error(404, "notFound", f"unknown path {split.path}")
                    else:
                        answer = fake._authorize(token) or fake._injected(method) or run()
                self._answer(*answer)

        return Handler


# ---- a seeded mailbox ------------------------------------------------------------------------------------


@dataclass
class Mailbox:
    """Ids of the seeded messages, by what each exercises."""

    project_label: str = "Label_1"
    invoices_label: str = "Label_2"
    too_old: str = ""
    thread_root: str = ""
    reply: str = ""
    reply_to_reply: str = ""
    html_only: str = ""
    alternative: str = ""
    attachments: str = ""
    sent_reply: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def inbox(self) -> list[str]:
        """The INBOX messages inside a 30-day lookback."""
        return [self.thread_root, self.reply, self.reply_to_reply, self.html_only, self.alternative, self.attachments]


DAY = 86400.0
ALICE = "Alice Example <alice@example.com>"
BOB = "Bob Builder <bob@example.com>"
OWNER = "Owner <owner@example.com>"


def seed_mailbox(fake: FakeGmail, now: float | None = None) -> Mailbox:
    """Labels (system, Project, Invoices); a thread with a reply and a reply to the reply (In-Reply-To and
    References), plain, HTML-only and multipart/alternative mail, a multipart/mixed mail with pdf, docx,
    csv and zip attachments, one message older than a 30-day lookback, and a sent reply (SENT only)."""
    now = now if now is not None else time.time()
    box = Mailbox()
    fake.add_label(box.project_label, "Project Falcon")
    fake.add_label(box.invoices_label, "Invoices")
    old = compose(subject="Ancient kickoff", sender=BOB, to=OWNER, text="The archive of 2019.", at=now - 60 * DAY)
    box.too_old = fake.deliver(old, labels=("INBOX",))
    root = compose(
        subject="Falcon launch plan",
        sender=ALICE,
        to=OWNER,
        text="Team, the Falcon launch is planned for March 3rd. Marketing owns the announcement.",
        at=now - 5 * DAY,
    )
    box.thread_root = fake.deliver(root, labels=("INBOX", box.project_label))
    root_id = str(root["Message-ID"])
    reply = compose(
        subject="Re: Falcon launch plan",
        sender=BOB,
        to=ALICE,
        text="Engineering confirms the launch date; the load tests passed yesterday.",
        in_reply_to=root_id,
        references=(root_id,),
        at=now - 4 * DAY,
    )
    box.reply = fake.deliver(reply, labels=("INBOX", box.project_label), thread_of=box.thread_root)
    reply_id = str(reply["Message-ID"])
    sent = compose(
        subject="Re: Falcon launch plan",
        sender=OWNER,
        to=BOB,
        text="Thanks Bob, I will tell the board.",
        in_reply_to=reply_id,
        references=(root_id, reply_id),
        at=now - 4 * DAY + 600,
    )
    box.sent_reply = fake.deliver(sent, labels=("SENT",), thread_of=box.thread_root)
    deeper = compose(
        subject="Re: Falcon launch plan",
        sender=ALICE,
        to=BOB,
        text="Great news about the load tests. Legal still has to review the press release.",
        in_reply_to=reply_id,
        references=(root_id, reply_id),
        at=now - 3 * DAY,
    )
    box.reply_to_reply = fake.deliver(deeper, labels=("INBOX", box.project_label), thread_of=box.thread_root)
    html = compose(
        subject="Weekly newsletter",
        sender="News <news@example.com>",
        to=OWNER,
        html="<html><head><style>p{color:red}</style><script>track()</script></head><body><h1>Quarterly"
        " roadmap</h1><p>The <b>observability</b> initiative ships in the second quarter.</p></body></html>",
        at=now - 2 * DAY,
    )
    box.html_only = fake.deliver(html, labels=("INBOX",))
    alternative = compose(
        subject="Office move",
        sender=BOB,
        to=OWNER,
        text="Plain text wins: the office moves to Pier 39 on Friday.",
        html="<p>HTML loses: the office moves somewhere else.</p>",
        at=now - 2 * DAY + 60,
    )
    box.alternative = fake.deliver(alternative, labels=("INBOX",))
    files = compose(
        subject="Invoice bundle for October",
        sender="Billing <billing@example.com>",
        to=OWNER,
        text="Attached: the invoice, the contract and the usage export.",
        attachments=(
            ("invoice-october.pdf", pdf_bytes("Invoice total due 4812 euros")),
            ("contract.docx", docx_bytes("The contract renews automatically every twelve months.")),
            ("usage.csv", csv_bytes([["service", "hours"], ["compute", "731"], ["storage", "112"]])),
            ("logs.zip", zip_bytes("log.txt", b"zipped logs are not indexed")),
        ),
        at=now - DAY,
    )
    box.attachments = fake.deliver(files, labels=("INBOX", box.invoices_label))
    return box

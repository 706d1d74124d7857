"""A Gmail message (API `format=full`) as a synced object: headers, MIME body, attachments, thread and parent.

- Body: the MIME tree is walked as a mail client shows it: in `multipart/alternative` the `text/plain`
  part wins, else `text/html` converted to text (html-text on lxml: scripts and styles dropped, block
  elements on their own lines); other multiparts join their parts; parts with a file name are attachments.
  Bodies are decoded with their part's charset (unknown charsets as UTF-8, bad bytes replaced).
- Thread and parent: `thread_native_id` is the first message of the Gmail thread (the one with the
  earliest internalDate), so every message of a conversation shares one `thread_id`. The parent is the
  message whose Message-ID the reply names: `In-Reply-To` first, then `References` from the last entry
  back, resolved among the thread's messages; a reply gets a `reply_to` link to it.
- Attachments of formats ingestion accepts (the same `classify` as uploads) are listed with their
  attachment id; the caller downloads them (`users.messages.attachments.get`) and the service ingests each
  as a child file item. Others (zip, images) are named in the text only.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.header import decode_header, make_header
from email.message import Message
from email.utils import getaddresses
from typing import Any

from ctxstore.parsing.formats import classify
from ctxstore.ports.connector_provider import Attachment, ObjectLink, SyncedObject

MAX_BODY_CHARS = 1_000_000  # longer bodies are cut (a mail this long is a data dump, not correspondence)
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024  # Gmail's own limit for a received attachment
MAX_ADDRESSES = 20  # per header in additional_metadata (a mail to a whole company must not break the cap)
_MSGID = re.compile(r"<[^<>\s]+>")


@dataclass(frozen=True)
class FilePart:
    filename: str
    mime_type: str
    attachment_id: str | None
    inline_data: str | None  # base64url, when the part's body came inline
    size: int
    embedded: bool  # an image the HTML body shows (Content-ID), not a file someone attached


def b64decode(data: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        return b""


def header_map(part: dict[str, Any]) -> dict[str, str]:
    """Lower-cased header names -> first value, RFC 2047 encoded words decoded."""
    out: dict[str, str] = {}
    for h in part.get("headers") or []:
        name = str(h.get("name") or "").lower()
        if name and name not in out:
            out[name] = _decoded(str(h.get("value") or ""))
    return out


def _decoded(value: str) -> str:
    try:
        return str(make_header(decode_header(value)))
    except (ValueError, LookupError, UnicodeError):
        return value


def _charset(part: dict[str, Any]) -> str:
    msg = Message()
    msg["Content-Type"] = header_map(part).get("content-type", "text/plain")
    return msg.get_content_charset("utf-8") or "utf-8"


def _decode_text(raw: bytes, charset: str) -> str:
    try:
        return raw.decode(charset, errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def html_to_text(html: str) -> str:
    import html_text

    if not html.strip():
        return ""
    try:
        return str(html_text.extract_text(html))
    except ValueError:  # lxml refuses some documents (e.g. an XML declaration with an encoding)
        return str(html_text.extract_text(html.encode("utf-8", "replace").decode("utf-8")))


def _is_file(part: dict[str, Any]) -> bool:
    if part.get("filename"):
        return True
    return "attachment" in header_map(part).get("content-disposition", "").lower()


BodyFetcher = Callable[[str], bytes]  # attachment id -> bytes (a text body Gmail did not send inline)


def _leaf_text(part: dict[str, Any], fetch: BodyFetcher) -> tuple[str, str] | None:
    """(mime type, text) of a non-multipart body part, None for anything not text/plain or text/html."""
    mime = str(part.get("mimeType") or "").lower()
    if mime not in ("text/plain", "text/html") or _is_file(part):
        return None
    body = part.get("body") or {}
    raw = b64decode(str(body["data"])) if body.get("data") else b""
    if not raw and body.get("attachmentId"):
        raw = fetch(str(body["attachmentId"]))
    text = _decode_text(raw, _charset(part))
    return mime, html_to_text(text) if mime == "text/html" else text


def body_text(part: dict[str, Any], fetch: BodyFetcher) -> str:
    mime = str(part.get("mimeType") or "").lower()
    children = [p for p in part.get("parts") or [] if isinstance(p, dict)]
    if not mime.startswith("multipart/") and mime != "message/rfc822":
        leaf = _leaf_text(part, fetch)
        return leaf[1] if leaf else ""
    if mime == "multipart/alternative":
        for wanted in ("text/plain", "multipart/", "text/html"):
            for child in children:
                child_mime = str(child.get("mimeType") or "").lower()
                if child_mime.startswith(wanted) and not _is_file(child):
                    text = body_text(child, fetch)
                    if text.strip():
                        return text
        return ""
    texts = [body_text(child, fetch) for child in children if not _is_file(child)]
    return "\n\n".join(t.strip() for t in texts if t.strip())


def file_parts(part: dict[str, Any]) -> Iterator[FilePart]:
    for child in part.get("parts") or []:
        if isinstance(child, dict):
            yield from file_parts(child)
    if part.get("parts") or not _is_file(part):
        return
    body = part.get("body") or {}
    yield FilePart(
        filename=str(part.get("filename") or "attachment"),
        mime_type=str(part.get("mimeType") or "application/octet-stream"),
        attachment_id=str(body["attachmentId"]) if body.get("attachmentId") else None,
        inline_data=str(body["data"]) if body.get("data") else None,
        size=int(body.get("size") or 0),
        embedded=str(part.get("mimeType") or "").startswith("image/") and "content-id" in header_map(part),
    )


def accepted(f: FilePart) -> bool:
    """Downloaded and ingested: formats uploads accept, within Gmail's size, not logos embedded in HTML."""
    return not f.embedded and f.size <= MAX_ATTACHMENT_BYTES and classify(f.filename, f.mime_type) is not None


def message_ids(value: str | None) -> list[str]:
    return _MSGID.findall(value or "")


@dataclass(frozen=True)
class ThreadView:
    """What a message's graph fields need from its whole thread."""

    root: str  # Gmail id of the thread's first message
    by_rfc_id: dict[str, str]  # Message-ID header -> Gmail id

    @classmethod
    def of(cls, messages: list[dict[str, Any]]) -> ThreadView:
        ordered = sorted(messages, key=lambda m: (int(m.get("internalDate") or 0), str(m.get("id"))))
        by_rfc: dict[str, str] = {}
        for m in ordered:
            for rfc_id in message_ids(header_map(m.get("payload") or {}).get("message-id")):
                by_rfc.setdefault(rfc_id, str(m["id"]))
        return cls(root=str(ordered[0]["id"]) if ordered else "", by_rfc_id=by_rfc)

    def parent_of(self, message_id: str, headers: dict[str, str]) -> str | None:
        candidates = message_ids(headers.get("in-reply-to")) + list(reversed(message_ids(headers.get("references"))))
        for rfc_id in candidates:
            found = self.by_rfc_id.get(rfc_id)
            if found and found != message_id:
                return found
        return None


def _addresses(value: str | None) -> list[str]:
    return [addr.lower() for _, addr in getaddresses([value or ""]) if addr][:MAX_ADDRESSES]


def map_message(
    m: dict[str, Any],
    thread: ThreadView,
    *,
    account_email: str,
    fetch_body: BodyFetcher,
    attachments: list[Attachment],
) -> SyncedObject:
    """The synced object of one message; `attachments` are the downloaded files of accepted formats."""
    mid = str(m["id"])
    payload = m.get("payload") or {}
    headers = header_map(payload)
    subject = headers.get("subject", "").strip()
    created = int(m.get("internalDate") or 0) / 1000.0 or None
    body = body_text(payload, fetch_body).strip()
    if len(body) > MAX_BODY_CHARS:
        body = body[:MAX_BODY_CHARS] + "\n[... message truncated]"
    files = [f.filename for f in file_parts(payload)]
    lines = [f"From: {headers.get('from', '')}", f"To: {headers.get('to', '')}"]
    if headers.get("cc"):
        lines.append(f"Cc: {headers['cc']}")
    if created:
        lines.append(f"Date: {datetime.fromtimestamp(created, UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    lines.append(f"Subject: {subject or '(no subject)'}")
    if files:
        lines.append("Attachments: " + ", ".join(files))
    text = "\n".join(lines) + ("\n\n" + body if body else "")
    parent = thread.parent_of(mid, headers)
    sender = _addresses(headers.get("from"))
    fields: dict[str, Any] = {
        "gmail_message_id": mid,
        "gmail_thread_id": str(m.get("threadId") or mid),
        "gmail_from": sender[0] if sender else "",
        "gmail_to": (_addresses(headers.get("to")) + _addresses(headers.get("cc")))[:MAX_ADDRESSES],
    }
    rfc_ids = message_ids(headers.get("message-id"))
    if rfc_ids:
        fields["gmail_rfc822_message_id"] = rfc_ids[0]
    url = f"https://mail.google.com/mail/?authuser={account_email}#all/{mid}" if account_email else None
    return SyncedObject(
        native_id=mid,
        kind="email",
        title=subject or "(no subject)",
        text=text,
        url=url,
        author=headers.get("from") or None,
        created_at=created,
        thread_native_id=thread.root or mid,
        parent_native_id=parent,
        links=(ObjectLink(parent, "reply_to"),) if parent else (),
        native_fields=fields,
        attachments=tuple(attachments),
    )

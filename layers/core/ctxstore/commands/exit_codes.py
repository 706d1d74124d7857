"""Exit codes of the client verbs: scripts branch on these (documented in docs/agents.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxstore.client import CtxstoreError

OK = 0
UNEXPECTED = 1  # a bug: please report it with the output
USAGE = 2  # bad flags or arguments, or the API refused the request as invalid (400, 413, 422)
AUTH = 3  # no key, a bad/expired/revoked key (401), or the key may not do this (403)
NOT_FOUND = 4  # the database, item or resource does not exist (404)
CONFLICT = 5  # it exists already or is in a conflicting state (409)
UNAVAILABLE = 6  # server unreachable, busy or failing after retries (429, 5xx, connection errors, not ctxstore)
PARTIAL = 7  # some of the work failed: items errored or were refused, a doctor check failed
TIMEOUT = 8  # gave up waiting (e.g. for indexing); the work may still finish

TABLE: dict[int, str] = {
    OK: "success",
    UNEXPECTED: "unexpected error (a bug)",
    USAGE: "usage error or invalid request (HTTP 400/413/422)",
    AUTH: "authentication or permission (HTTP 401/403, no key)",
    NOT_FOUND: "not found (HTTP 404)",
    CONFLICT: "conflict: already exists or busy (HTTP 409)",
    UNAVAILABLE: "server unreachable, rate limited or failing (HTTP 429/5xx, connection, not a ctxstore server)",
    PARTIAL: "partial failure: some items failed or a check did not pass",
    TIMEOUT: "timed out waiting; the work may still finish",
}


def for_error(err: CtxstoreError) -> int:
    from ctxstore.client.errors import BAD_RESPONSE

    status = err.status
    if err.code == BAD_RESPONSE:  # not ctxstore's answer (another web server, a proxy page): the server is not there
        return UNAVAILABLE
    if status is None:
        return USAGE if err.code == "INVALID_PARAMETERS" else UNAVAILABLE
    if status in (401, 403):
        return AUTH
    if status == 404:
        return NOT_FOUND
    if status == 409:
        return CONFLICT
    if status == 429 or status >= 500:
        return UNAVAILABLE
    if 400 <= status < 500:
        return USAGE
    return UNEXPECTED

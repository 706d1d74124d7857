"""Issue 12 item 7: every malformed `/blobs/{token}` answers the same 403 as any bad token, without a key."""

from __future__ import annotations

import pytest

from tests.support.app import LocalApp

# Percent-encoded non-ASCII (decoded by the router into non-ASCII str, which hmac.compare_digest refused with a
# TypeError: a 500), invalid UTF-8, lone separators, overlong and base64-looking junk.
MALFORMED = [
    "%C3%A9",
    "%C3%A9.%C3%A9",
    "abc.%E2%82%AC",
    "%FF%FE.%FF",
    "%ED%A0%80.x",  # an encoded lone surrogate
    "%2E",  # "." and ".." as literal segments would be resolved away by the client
    "%2E%2E",
    "a.",
    ".a",
    "a.b.c",
    "x" * 5000,
    "eyJvIjoiZGVmYXVsdCJ9.AAAA",
    "eyJvIjoiZGVmYXVsdCJ9.%00",
]


@pytest.mark.parametrize("token", MALFORMED)
def test_malformed_download_token_is_403(local: LocalApp, token: str) -> None:
    r = local.client.get(f"/blobs/{token}")
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["success"] is False and body["error"]["code"] == "FORBIDDEN"


@pytest.mark.parametrize("token", MALFORMED)
def test_malformed_upload_token_is_403(local: LocalApp, token: str) -> None:
    r = local.client.post(f"/blobs/{token}", files={"file": ("a.txt", b"hello", "text/plain")})
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "FORBIDDEN"


def test_a_valid_token_with_one_changed_character_is_the_same_403(local: LocalApp) -> None:
    url = local.container.blobs.presigned_url(  # type: ignore[attr-defined]
        "default", "k", expires_in=60, filename="a.txt", content_type="text/plain"
    )
    token = url.removeprefix("/blobs/")
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    for t in (forged, token[:-1] + "%C3%A9", token + "%C3%A9"):
        r = local.client.get(f"/blobs/{t}")
        assert r.status_code == 403 and r.json()["error"]["code"] == "FORBIDDEN", (t, r.text)

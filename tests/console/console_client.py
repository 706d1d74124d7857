"""A console session driven over plain HTTP (no browser), for the security tests."""

from __future__ import annotations

import re

import httpx

_SIGNIN_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
_SESSION_CSRF = re.compile(r'"X-CSRF-Token": "([^"]+)"')


class ConsoleSession:
    def __init__(self, base_url: str, key: str | None = None) -> None:
        self.http = httpx.Client(base_url=base_url + "/console", timeout=30, follow_redirects=False)
        self.csrf = ""
        if key is not None:
            self.sign_in(key)

    def sign_in(self, key: str) -> httpx.Response:
        page = self.http.get("/sign-in")
        token = _SIGNIN_CSRF.search(page.text)
        assert token, page.text
        r = self.http.post("/sign-in", data={"api_key": key, "csrf_token": token.group(1)})
        assert r.status_code == 303, r.text
        home = self.http.get("/databases")
        found = _SESSION_CSRF.search(home.text)
        assert found, home.text
        self.csrf = found.group(1)
        return r

    def get(self, path: str, **kw: object) -> httpx.Response:
        return self.http.get(path, **kw)  # type: ignore[arg-type]

    def post(self, path: str, data: dict[str, str] | None = None, *, token: str | None = "session") -> httpx.Response:
        body = dict(data or {})
        if token == "session":
            body["csrf_token"] = self.csrf
        elif token is not None:
            body["csrf_token"] = token
        return self.http.post(path, data=body)

    def close(self) -> None:
        self.http.close()

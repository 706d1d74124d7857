"""The console's Lambda (functions/console_web) under moto: sign-in page, sign-in over HTTPS, a page after."""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import urlencode

from tests.aws.moto_env import MotoWorld
from tests.aws.test_handlers import FakeContext, aws, event, load_function, new_key  # noqa: F401 (aws: fixture)


def _request(base: dict[str, Any], method: str, path: str, cookies: list[str], body: str = "") -> dict[str, Any]:
    ev = copy.deepcopy(base)
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = path
    ev["requestContext"]["http"]["method"] = method
    ev["routeKey"] = ev["requestContext"]["routeKey"] = f"{method} /console/{{proxy+}}"
    ev["cookies"] = cookies
    if body:
        ev["body"] = body
        ev["headers"]["content-type"] = "application/x-www-form-urlencoded"
    return ev


def _cookie(resp: dict[str, Any], name: str) -> str:
    found = next(c for c in resp.get("cookies", []) if c.startswith(name + "="))
    return str(found)


def test_console_function_signs_in_over_https_and_serves_pages(aws: MotoWorld) -> None:  # noqa: F811
    key = new_key("acme-org")
    fn = load_function("console_web")
    base = event("console_web")
    page = fn.handler(base, FakeContext())
    assert page["statusCode"] == 200, page
    assert "Sign in" in page["body"] and page["headers"]["content-security-policy"].startswith("default-src 'self'")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page["body"])
    assert token
    signin_cookie = _cookie(page, "ctxstore_console_signin").split(";")[0]
    form = urlencode({"api_key": key, "csrf_token": token.group(1)})
    resp = fn.handler(_request(base, "POST", "/console/sign-in", [signin_cookie], form), FakeContext())
    assert resp["statusCode"] == 303, resp
    session = _cookie(resp, "ctxstore_console")
    assert "Secure" in session and "HttpOnly" in session and "SameSite=strict" in session  # API Gateway is TLS
    keys = fn.handler(_request(base, "GET", "/console/keys", [session.split(";")[0]]), FakeContext())
    assert keys["statusCode"] == 200, keys
    assert key.split("_")[1] in keys["body"] and key not in keys["body"]

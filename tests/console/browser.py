"""Debian's Chromium driven by Playwright (the system browser; no browser download), axe-core, screenshots."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
AXE_JS = ROOT / "node_modules" / "axe-core" / "axe.min.js"
# The committed screenshots are refreshed on request (CTXSTORE_UPDATE_SCREENSHOTS=1); a plain test run
# still takes every one (it proves the page renders) but leaves the working tree clean.
SHOTS = (
    ROOT / "docs" / "console"
    if os.environ.get("CTXSTORE_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.gettempdir()) / "ctxstore-console-shots"
)
# Headless, no sandbox (root in CI) and nothing that reaches for the network on start.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
LAPTOP = {"width": 1366, "height": 860}
INLINE_MAX_BYTES = 64 * 1024  # the console servers' CTXSTORE_CONSOLE_INLINE_UPLOAD_MAX_BYTES (conftest)


@contextmanager
def chromium() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: run scripts/install-system-deps.sh"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def new_context(browser: Browser) -> BrowserContext:
    ctx = browser.new_context(viewport=LAPTOP, permissions=["clipboard-read", "clipboard-write"])
    ctx.set_default_timeout(20_000)
    return ctx


def sign_in(page: Page, base_url: str, key: str) -> None:
    page.goto(base_url + "/console/")
    expect(page).to_have_url(base_url + "/console/sign-in")
    page.fill("#api_key", key)
    page.click("button[type=submit]")
    expect(page).to_have_url(base_url + "/console/databases")


class Recorder:
    """Every URL the browser asked for and every HTML body it got, to look for secrets afterwards."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.html: list[tuple[str, str]] = []

    def attach(self, page: Page) -> None:
        page.on("request", lambda req: self.urls.append(req.url))
        page.on("response", self._response)

    def _response(self, response: Any) -> None:
        if "text/html" in (response.headers.get("content-type") or ""):
            try:
                self.html.append((response.url, response.text()))
            except Exception:  # a body the browser dropped (redirect, navigation away): nothing to read
                pass


def axe_check(page: Page, name: str) -> None:
    """axe-core on the page as it is: no serious or critical violation."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE_JS.read_text())  # evaluate is not subject to the page's CSP; a script tag would be
    result = page.evaluate(
        "async () => await axe.run(document, {resultTypes: ['violations'],"
        " runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})"
    )
    bad = [
        f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert not bad, f"accessibility violations on {name}:\n" + "\n".join(bad)


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    # Secrets shown once (a new key, a signing secret) are masked: screenshots are committed.
    secrets = page.locator("#new-key, #new-secret")
    page.evaluate("() => window.scrollTo(0, 0)")  # the sticky sidebar is drawn where the page is scrolled to
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True, mask=[secrets], mask_color="#3949ab")


def check_page(page: Page, name: str) -> None:
    """Every page the flows visit: accessibility first, then its screenshot."""
    axe_check(page, name)
    shot(page, name)


KEY_RE = re.compile(r"csk_[A-Za-z0-9]{12}_[A-Za-z0-9]{32,128}")

"""A plain test run leaves the working tree clean: screenshots go to docs/console only when asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _shots_dir(update: str | None) -> Path:
    env = {k: v for k, v in os.environ.items() if k != "CTXSTORE_UPDATE_SCREENSHOTS"}
    if update is not None:
        env["CTXSTORE_UPDATE_SCREENSHOTS"] = update
    out = subprocess.run(
        [sys.executable, "-c", "from tests.console.browser import SHOTS; print(SHOTS)"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(out.stdout.strip())


def test_screenshots_stay_out_of_the_repository_unless_asked() -> None:
    default = _shots_dir(None)
    assert not default.is_relative_to(ROOT), f"a plain run would write screenshots into the checkout: {default}"
    assert _shots_dir("0") == default
    assert _shots_dir("1") == ROOT / "docs" / "console"

"""Wheel build hook: a wheel without the console's vendored scripts would serve a console that cannot run.

They are built by scripts/build-console-assets.sh (`make setup`, `make wheel`); a build without them stops here
with the command to run instead of producing a broken wheel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

VENDORED = ("htmx.min.js", "cytoscape.min.js")


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        vendor = Path(self.root) / "layers/core/ctxstore/console/static/vendor"
        missing = [name for name in VENDORED if not (vendor / name).is_file()]
        if missing:
            raise RuntimeError(
                f"console assets missing in {vendor}: {', '.join(missing)}; run ./scripts/build-console-assets.sh"
            )

"""The size gate (issue 26): no module of the product over 500 lines, so each stays readable in one sitting.

Complexity has its own gate (ruff's C90 at 15, pyproject.toml); this one is a test because ruff has no rule
for a module's length.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "core" / "ctxstore"
MAX_LINES = 500


def test_no_module_of_the_product_is_over_500_lines() -> None:
    sizes = {
        str(p.relative_to(PACKAGE)): sum(1 for _ in p.open(encoding="utf-8"))
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert len(sizes) > 100, "the package was not found"
    over = {name: n for name, n in sorted(sizes.items()) if n > MAX_LINES}
    assert over == {}, f"split these modules (at most {MAX_LINES} lines): {over}"

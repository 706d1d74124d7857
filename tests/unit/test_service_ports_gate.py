"""The ports gate (issue 26): a service names the ports it uses in its constructor, it does not take the
whole `Container`.

Only the seam itself (`container.py`, `registry.py`) may import `Container` under `ctxstore/services`, plus the
modules listed in NOT_YET, which still take it. The list may only shrink: a listed module that no longer
imports `Container` fails the test until its line is removed, so the count cannot grow back.
"""

from __future__ import annotations

import ast
from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "layers" / "core" / "ctxstore" / "services"
CONTAINER_MODULE = "ctxstore.services.container"
SEAM = {"container.py": "defines Container", "registry.py": "reads the container to build each service"}
NOT_YET = {
    "items/ingest.py": "not yet: its constructor is being retyped with the item record (typed-records)",
    "items/service.py": "not yet: its constructor is being retyped with the item record (typed-records)",
    "items/sources.py": "not yet: its constructor is being retyped with the item record (typed-records)",
    "items/uploads.py": "not yet: its constructor is being retyped with the item record (typed-records)",
    "query/service.py": "not yet: its constructor is being retyped with the query request (typed-records)",
}


def imports_container(source: str) -> bool:
    """Whether a module imports `Container` (by name, or the container module itself)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == CONTAINER_MODULE:
            if any(alias.name in ("Container", "*") for alias in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.module == "ctxstore.services":
            if any(alias.name == "container" for alias in node.names):
                return True
        elif isinstance(node, ast.Import) and any(alias.name == CONTAINER_MODULE for alias in node.names):
            return True
    return False


def _takers() -> set[str]:
    return {
        str(p.relative_to(SERVICES))
        for p in SERVICES.rglob("*.py")
        if "__pycache__" not in p.parts and imports_container(p.read_text(encoding="utf-8"))
    }


def test_no_service_module_takes_the_whole_container() -> None:
    takers = _takers()
    assert "registry.py" in takers, "the services package was not found"
    extra = sorted(takers - SEAM.keys() - NOT_YET.keys())
    assert extra == [], f"these modules import Container: name the ports in the constructor instead: {extra}"


def test_the_not_yet_list_only_shrinks() -> None:
    done = sorted(NOT_YET.keys() - _takers())
    assert done == [], f"these modules no longer import Container: remove them from NOT_YET: {done}"


def test_the_gate_sees_every_form_of_the_import() -> None:
    assert imports_container("from ctxstore.services.container import Capabilities, Container\n")
    assert imports_container("def f():\n    from ctxstore.services.container import Container\n")
    assert imports_container("import ctxstore.services.container\n")
    assert imports_container("from ctxstore.services import container\n")
    assert not imports_container("from ctxstore.services.container import Capabilities\n")
    assert not imports_container("from ctxstore.services.databases import DatabaseService\n")

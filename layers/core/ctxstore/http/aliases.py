"""Canonical scope names and their legacy aliases, applied the same way to query strings, JSON and forms."""

from __future__ import annotations

from collections.abc import Iterable

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.domain.scopes import LEGACY_TO_CANONICAL
from ctxstore.http.context import RequestContext


def _norm(values: list[object]) -> list[object]:
    return [v.strip() if isinstance(v, str) else v for v in values]


def normalize_pairs(pairs: Iterable[tuple[str, object]], ctx: RequestContext, where: str) -> list[tuple[str, object]]:
    """Rename legacy keys to canonical ones.

    A legacy name adds a deprecation notice. Given both names, equal values are
    accepted (the canonical ones are kept) and different values are a 400.
    """
    items = list(pairs)
    canonical: dict[str, list[object]] = {}
    legacy: dict[str, list[object]] = {}
    legacy_name: dict[str, str] = {}
    for key, value in items:
        if key in LEGACY_TO_CANONICAL:
            canon = LEGACY_TO_CANONICAL[key]
            legacy.setdefault(canon, []).append(value)
            legacy_name[canon] = key
        elif key in LEGACY_TO_CANONICAL.values():
            canonical.setdefault(key, []).append(value)
    for canon, values in legacy.items():
        alias = legacy_name[canon]
        ctx.deprecate(f"{alias} is deprecated; use {canon} instead.", alias, canon)
        if canon in canonical and _norm(canonical[canon]) != _norm(values):
            raise ApiError(
                ErrorCode.INVALID_PARAMETERS,
                f"'{canon}' and its legacy alias '{alias}' were both given with different values in {where}",
            )
    out: list[tuple[str, object]] = []
    for key, value in items:
        target = LEGACY_TO_CANONICAL.get(key)
        if target is None:
            out.append((key, value))
        elif target not in canonical:
            out.append((target, value))
    return out

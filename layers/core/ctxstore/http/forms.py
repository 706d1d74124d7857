"""Multipart and urlencoded forms with the same scope-name rules as query strings and JSON bodies."""

from __future__ import annotations

from fastapi import Request
from starlette.datastructures import FormData, UploadFile

from ctxstore.http.aliases import normalize_pairs
from ctxstore.http.context import get_context


async def scoped_form(request: Request, *, max_part_size: int = 64 * 1024 * 1024) -> FormData:
    """The request's form with legacy scope names renamed (and conflicts rejected), files untouched."""
    form = await request.form(max_part_size=max_part_size)
    pairs: list[tuple[str, str | UploadFile]] = list(form.multi_items())
    normalized = normalize_pairs(pairs, get_context(request.scope), "the form")
    return FormData([(k, v) for k, v in normalized if isinstance(v, str | UploadFile)])

"""Liveness: no key needed."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ctxstore import API_VERSION

router = APIRouter(tags=["health"])


@router.get("/health")
def health() -> dict[str, Any]:
    return {"status": "ok", "api_version": API_VERSION}

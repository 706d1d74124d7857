"""Helpers shared by the AWS adapters: client construction and error inspection."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

# Standard retry mode backs off on throttling and 5xx; timeouts stay well inside a Lambda's budget.
CLIENT_CONFIG = Config(
    retries={"max_attempts": 5, "mode": "standard"},
    connect_timeout=3,
    read_timeout=10,
    tcp_keepalive=True,
)


def client(
    service: str, *, region: str | None = None, endpoint_url: str | None = None, read_timeout: float | None = None
) -> Any:
    """A boto3 client with the shared config (thread-safe; build once per process).

    read_timeout: for calls that generate (an LLM answer takes longer than the 10 s a data call gets).
    """
    config = CLIENT_CONFIG
    if read_timeout is not None:
        config = config.merge(Config(read_timeout=read_timeout))
    if service == "s3":
        # SigV4 everywhere: presigned URLs for SSE-KMS objects and newer regions require it.
        config = config.merge(Config(signature_version="s3v4", s3={"addressing_style": "virtual"}))
    return boto3.client(
        service,  # type: ignore[call-overload]
        region_name=region or None,
        endpoint_url=endpoint_url or None,
        config=config,
    )


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))

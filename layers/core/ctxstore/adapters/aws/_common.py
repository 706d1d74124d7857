"""Helpers shared by the AWS adapters: client construction and error inspection."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

# Standard retry mode backs off on throttling, 5xx and timeouts: 3 attempts in all, sleeping at most 1 + 2 s
# (full jitter), so a request still answers 503 + Retry-After well inside API Gateway's 29 s. Longer waits
# belong to the caller: the client retries after Retry-After, a pipeline step by its Step Functions Retry.
# (5 retries slept 15 s on average and up to 31 s.) What still fails becomes StoreUnavailable (faults.py).
CLIENT_CONFIG = Config(
    retries={"total_max_attempts": 3, "mode": "standard"},
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

"""Service-wide options taken from the settings (the one place that copies them)."""

from __future__ import annotations

from ctxstore.config import Settings
from ctxstore.services.container import Options


def options_from(settings: Settings) -> Options:
    return Options(
        backend=settings.backend,
        max_databases_per_org=settings.max_databases_per_org,
        rate_limit_per_minute=settings.rate_limit_per_minute,
        rate_limit_burst=settings.rate_limit_burst,
        query_rate_limit_per_minute=settings.query_rate_limit_per_minute,
        byog_max_rows=settings.byog_max_rows,
        byog_cluster_name=settings.byog_cluster_name,
        byog_read_timeout_ms=settings.byog_read_timeout_ms,
        byog_write_timeout_ms=settings.byog_write_timeout_ms,
        byog_graphs=frozenset(settings.byog_graph_ids) if settings.backend == "aws" else None,
        allow_private_webhooks=settings.allow_private_webhooks,
        console_inline_upload_max_bytes=settings.console_inline_upload_max_bytes,
        max_inflight_queries=settings.max_inflight_queries,
        max_inflight_ingests=settings.max_inflight_ingests,
        max_inflight_other=settings.max_inflight_other,
        admission_wait_s=settings.admission_wait_s,
        webhook_timeout_s=settings.webhook_timeout_s,
        webhook_max_attempts=settings.webhook_max_attempts,
        webhook_retry_interval_s=settings.webhook_retry_interval_s,
        webhook_retry_max_delay_s=settings.webhook_retry_max_delay_s,
        connector_urls=connector_urls(settings),
        connector_chunk_objects=settings.connector_chunk_objects,
        connector_chunk_seconds=settings.connector_chunk_seconds,
        connector_continue_after_s=settings.connector_continue_after_s,
        connector_max_wait_s=settings.connector_max_wait_s,
        connector_http_timeout_s=settings.connector_http_timeout_s,
        connector_min_interval_s=settings.connector_min_interval_s,
        connector_reconcile_interval_s=settings.connector_reconcile_interval_s,
    )


def connector_urls(settings: Settings) -> dict[str, tuple[str, str]]:
    """(API base URL, OAuth token URL) per provider, from CTXSTORE_CONNECTOR_BASE_URL_/_TOKEN_URL_<PROVIDER>."""
    from ctxstore.domain.connector_rules import PROVIDER_IDS

    return {
        p: (str(getattr(settings, f"connector_base_url_{p}")), str(getattr(settings, f"connector_token_url_{p}")))
        for p in PROVIDER_IDS
    }

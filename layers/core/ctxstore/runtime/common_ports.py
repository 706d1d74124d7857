"""Adapters both backends build the same way: the webhook sender, the connector providers, the extractor."""

from __future__ import annotations

from ctxstore.config import Settings
from ctxstore.ports.connector_provider import ConnectorProvider
from ctxstore.ports.extractor import Extractor
from ctxstore.ports.http_sender import HttpSender
from ctxstore.services.container import Container


def webhook_sender(c: Container) -> HttpSender:
    """Outbound HTTP for webhook deliveries (httpx; no redirects, no proxies from the environment)."""
    from ctxstore.adapters.system.httpx_sender import HttpxSender

    sender = HttpxSender()
    c.closers.append(sender.close)
    return sender


def connector_providers(settings: Settings) -> dict[str, ConnectorProvider]:
    """Provider implementations on their official SDKs (ctxstore.connectors), shared by both backends."""
    from ctxstore.connectors.registry import build_providers

    enabled = {p.strip() for p in settings.connectors.providers.split(",") if p.strip()}
    return build_providers(enabled or None)


def build_extractor(settings: Settings) -> Extractor | None:
    """The entity/relation extractor of the graph step: offline rules unless an LLM is configured."""
    if settings.extraction.extractor == "none":
        return None
    if settings.extraction.extractor == "llm":
        from ctxstore.adapters.models.llm_extractor import LlmExtractor

        if not (settings.llm.base_url and settings.llm.model):
            raise ValueError("CTXSTORE_EXTRACTOR=llm needs CTXSTORE_LLM_BASE_URL and CTXSTORE_LLM_MODEL")
        return LlmExtractor(
            settings.llm.base_url, settings.llm.model, api_key=settings.llm.api_key, timeout_s=settings.llm.timeout_s
        )
    if settings.extraction.extractor == "bedrock":
        from ctxstore.adapters.aws.bedrock_extractor import BedrockExtractor

        if not settings.extraction.extractor_model_id:
            raise ValueError("CTXSTORE_EXTRACTOR=bedrock needs CTXSTORE_EXTRACTOR_MODEL_ID")
        return BedrockExtractor(settings.extraction.extractor_model_id)
    from ctxstore.adapters.models.spacy_extractor import SpacyExtractor

    # A process pool needs /dev/shm, which Lambda lacks: only the local server runs one.
    return SpacyExtractor(processes=settings.extraction.extractor_processes if settings.backend == "local" else 0)

"""On Lambda the measurements of /metrics are Powertools (EMF) metrics of the invocation (issue 27, part 5)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from ctxstore import observability as obs
from tests.aws.test_handlers import FakeContext


@pytest.fixture
def lo(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The module as a Lambda imports it: Powertools reads the template's namespace at import (the handler tests
    import it later in this process and rely on that too)."""
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ctxstore")
    lo = importlib.import_module("ctxstore.runtime.lambda_observability")
    if lo.metrics.provider.namespace is None:  # imported earlier without it
        monkeypatch.setattr(lo.metrics.provider, "namespace", "ctxstore")
    yield lo


@pytest.fixture
def on_lambda(lo: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "ctxstore-test")
    yield lo
    for sink in lo._sink:
        obs.remove_sink(sink)
    lo._sink.clear()


def _emf(out: str) -> list[dict[str, Any]]:
    return [d for line in out.splitlines() if line.startswith("{") and "_aws" in (d := json.loads(line))]


def test_the_hooks_become_metrics_of_the_invocation(on_lambda: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    lo = on_lambda

    def handle(event: dict[str, Any], context: Any) -> str:
        obs.observe(obs.PIPELINE_STEP, 0.25, step="embed")
        obs.count(obs.WEBHOOK_DELIVERY, outcome="delivered")
        obs.count(obs.CONNECTOR_SYNC, provider="slack", outcome="done")
        obs.observe(obs.REQUEST, 0.01, route="/query", method="POST", status="200")  # API Gateway's, not ours
        return "ok"

    assert lo.observed(handle, http=False)({}, FakeContext()) == "ok"
    [line] = _emf(capsys.readouterr().out)
    assert line["PipelineStep_embed"] == [0.25] and line["WebhookDelivery_delivered"] == [1.0]
    assert line["ConnectorSync_slack_done"] == [1.0]
    [directive] = line["_aws"]["CloudWatchMetrics"]
    units = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert units == {
        "PipelineStep_embed": "Seconds",
        "WebhookDelivery_delivered": "Count",
        "ConnectorSync_slack_done": "Count",
    }
    assert directive["Namespace"] == "ctxstore"


def test_no_sink_outside_lambda(lo: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    lo.observed(lambda e, c: None, http=False)
    assert lo._sink == []

"""The template's alarms and dashboard (issue 27, part 5) watch metrics the code really emits.

Each metric in the `ctxstore` namespace named by an alarm or a dashboard widget is produced here by the real
Powertools sink from a measurement whose name and label values come from the code that emits it (the
`obs.*` call sites, the connector registry), and the EMF line it writes has that name, namespace and
dimensions. AWS metrics are held to the names AWS documents for the resource each alarm points at.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ctxstore import observability as obs
from ctxstore.connectors.registry import build_providers
from tests.aws.test_handlers import FakeContext
from tests.aws.test_powertools_metrics import _emf
from tests.aws.test_powertools_metrics import lo as lambda_observability
from tests.support.cfn_template import load_template

PACKAGE = Path(obs.__file__).resolve().parents[1]
# AWS metrics each namespace's documentation lists for the resources alarmed on (HTTP API, Lambda, SQS, Step
# Functions): https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-metrics.html etc.
AWS_METRICS = {
    "AWS/ApiGateway": ({"4xx", "5xx", "Count", "Latency", "IntegrationLatency"}, "ApiId", "HttpApi"),
    "AWS/Lambda": ({"Duration", "Errors", "Invocations", "Throttles"}, "FunctionName", None),
    "AWS/SQS": ({"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage"}, "QueueName", None),
    "AWS/States": ({"ExecutionsFailed", "ExecutionsSucceeded"}, "StateMachineArn", "IngestStateMachine"),
}
# What alarms must cover (the brief of issue 27: API errors, query latency, ingest failures, queue depth,
# connector sync failures, webhook failures).
COVERED = {
    ("AWS/ApiGateway", "5xx"),
    ("AWS/Lambda", "Duration"),
    ("AWS/States", "ExecutionsFailed"),
    ("AWS/SQS", "ApproximateAgeOfOldestMessage"),
    ("ctxstore", "ConnectorSync_slack_error"),
    ("ctxstore", "ConnectorSync_slack_blocked"),
    ("ctxstore", "WebhookDelivery_permanently_failed"),
}


def _resources(kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in load_template()["Resources"].items() if v["Type"] == kind}


def _alarm_metrics() -> Iterator[tuple[str, str, str, list[dict[str, Any]]]]:
    """(alarm, namespace, metric name, dimensions) of every metric an alarm reads."""
    for name, res in _resources("AWS::CloudWatch::Alarm").items():
        p = res["Properties"]
        if "MetricName" in p:
            yield name, p["Namespace"], p["MetricName"], p.get("Dimensions", [])
        for m in p.get("Metrics", []):
            if "MetricStat" in m:
                metric = m["MetricStat"]["Metric"]
                yield name, metric["Namespace"], metric["MetricName"], metric.get("Dimensions", [])


def _dashboard_metrics() -> Iterator[tuple[str, str, list[Any]]]:
    """(namespace, metric name, the row's dimension pairs) of every dashboard widget row, '.' and '...' resolved."""
    [dash] = _resources("AWS::CloudWatch::Dashboard").values()
    body = json.loads(re.sub(r"\$\{[^}]+\}", "X", dash["Properties"]["DashboardBody"]["Sub"]))
    for widget in body["widgets"]:
        previous: list[Any] = []
        for row in widget["properties"]["metrics"]:
            cells = [c for c in row if not isinstance(c, dict)]
            if cells and cells[0] == "...":
                cells = previous[: len(previous) - len(cells) + 1] + cells[1:]
            cells = [previous[i] if c == "." else c for i, c in enumerate(cells)]
            previous = cells
            yield cells[0], cells[1], cells[2:]


def _strings(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _imported_modules(tree: ast.AST, path: Path) -> Iterator[Path]:
    """Files of the ctxstore modules `path` imports names from."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = path.parents[node.level - 1]
        elif node.module and node.module.startswith("ctxstore."):
            base = PACKAGE.parent
        else:
            continue
        target = base.joinpath(*(node.module or "").split(".")).with_suffix(".py")
        if target.is_file():
            yield target


@functools.cache
def _emitted_label_values(measurement: str) -> set[str]:
    """String constants in the modules that emit `measurement` (its label values are literals there), and
    the connector providers' names (a sync's provider label)."""
    const = next(k for k in dir(obs) if getattr(obs, k) == measurement and k.isupper())
    values: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if "observability" in path.parts or path.name == "lambda_observability.py":
            continue
        text = path.read_text()
        if f"obs.{const}" in text:
            tree = ast.parse(text)
            values |= _strings(tree)
            for imported in _imported_modules(tree, path):  # constants it takes from its package's modules
                values |= _strings(ast.parse(imported.read_text()))
    assert values, f"nothing emits {const}"
    if measurement in (obs.CONNECTOR_SYNC, obs.CONNECTOR_RATE_LIMIT_WAIT):
        values |= set(build_providers())
    return values


lo = lambda_observability  # the fixture: the module as a Lambda imports it


@pytest.fixture
def emitted(lo: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """emitted(metric name) -> the EMF directive the real sink writes for the measurement it stands for."""
    # The service dimension Powertools adds comes from the functions' environment in the template.
    service = load_template()["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    monkeypatch.setattr(lo.metrics.provider, "service", service)

    def emit(metric: str) -> dict[str, Any]:
        if metric in _direct_metrics():  # a handler's own count (lambda_jobs.py: JobsDeadLettered)
            return _flushed(lo, capsys, lambda: lo.metrics.add_metric(name=metric, unit="Count", value=1), metric)
        [(measurement, base)] = [(m, b) for m, b in lo.METRIC_NAMES.items() if metric.startswith(b + "_")]
        rest = metric[len(base) + 1 :]
        values = _emitted_label_values(measurement)
        # Label values are joined with "_" and may hold one ("permanently_failed"): try each split.
        parts = rest.split("_")
        for cut in range(1, len(parts) + 1):
            labels = ["_".join(parts[:cut]), *([("_".join(parts[cut:]))] if cut < len(parts) else [])]
            if all(v in values for v in labels):
                break
        else:
            raise AssertionError(f"{metric}: label values {parts} are not ones the code emits for {measurement}")
        sink = lo.PowertoolsSink()
        return _flushed(
            lo, capsys, lambda: sink.observe(measurement, 1.0, {str(i): v for i, v in enumerate(labels)}), metric
        )

    return emit


@functools.cache
def _direct_metrics() -> set[str]:
    """Names the Lambda code adds to Powertools itself: `metrics.add_metric(name="...")` literals."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_metric":
                names |= {
                    str(k.value.value) for k in node.keywords if k.arg == "name" and isinstance(k.value, ast.Constant)
                }
    return names


def _flushed(lo: ModuleType, capsys: pytest.CaptureFixture[str], record: Any, metric: str) -> dict[str, Any]:
    """The EMF line an invocation that records one measurement writes: its namespace and dimensions."""

    def handle(event: dict[str, Any], context: Any) -> None:
        record()

    lo.observed(handle, http=False)({}, FakeContext())
    [line] = _emf(capsys.readouterr().out)
    [directive] = line["_aws"]["CloudWatchMetrics"]
    assert [m["Name"] for m in directive["Metrics"]] == [metric]
    return {"namespace": directive["Namespace"], "dimensions": {d: line[d] for [d] in directive["Dimensions"]}}


def test_every_ctxstore_metric_alarmed_on_is_emitted_with_those_dimensions(emitted: Any) -> None:
    seen = 0
    for alarm, namespace, metric, dims in _alarm_metrics():
        if namespace != "ctxstore":
            continue
        seen += 1
        got = emitted(metric)
        assert got["namespace"] == "ctxstore", alarm
        assert {d["Name"]: d["Value"] for d in dims} == got["dimensions"], alarm
    assert seen >= 11


def test_every_ctxstore_metric_on_the_dashboard_is_emitted(emitted: Any) -> None:
    for namespace, metric, dims in _dashboard_metrics():
        if namespace == "ctxstore":
            got = emitted(metric)
            assert dict(zip(dims[::2], dims[1::2], strict=True)) == got["dimensions"], metric


def test_aws_metrics_are_documented_ones_on_the_stack_s_own_resources() -> None:
    resources = load_template()["Resources"]
    for alarm, namespace, metric, dims in _alarm_metrics():
        if namespace == "ctxstore":
            continue
        names, dimension, resource = AWS_METRICS[namespace]
        assert metric in names, (alarm, metric)
        [d] = dims
        assert d["Name"] == dimension, alarm
        target = next(iter(d["Value"].values()))  # !Ref X or !GetAtt X.Attr
        target = target if isinstance(target, str) else target[0]
        assert target.split(".")[0] in resources, alarm
        if resource is not None:
            assert target == resource, alarm
    for namespace, metric, _ in _dashboard_metrics():
        if namespace != "ctxstore":
            assert metric in AWS_METRICS[namespace][0], metric


def test_the_alarms_cover_errors_latency_ingest_queues_connectors_and_webhooks() -> None:
    alarmed = {(ns, m) for _, ns, m, _ in _alarm_metrics()}
    assert alarmed >= COVERED, COVERED - alarmed

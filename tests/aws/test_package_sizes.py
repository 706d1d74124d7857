"""The Lambda packages as `sam build` makes them (bench/aws/lambda_package.py reads the build):

- every function's code plus the layers it lists, unzipped, fits our budget of 200 MiB (Lambda refuses more than
  262,144,000 bytes at deploy time; moto checks no size);
- every layer ships Python 3.12 bytecode that a read-only /opt uses as is;
- every handler imports in a fresh `python3.12 -S` whose sys.path is only its folder and its layers (the layer
  list is complete), and the trimmed connector and parser libraries still do their work.

Needs `sam` (a dev dependency), a Python 3.12 interpreter and PyPI (the layers' arm64 wheels, through uv's cache):
without them the tests fail with the reason. A repeat takes about a minute (`sam build --cached`, layer cache).
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bench.aws.lambda_package import (
    BUDGET_BYTES,
    LAMBDA_LIMIT_BYTES,
    ROOT,
    FunctionPackage,
    function_bytes,
    host_layer,
    import_handler,
    lambda_layers,
    layer_bytes,
    packages,
    python312,
    sam_build,
)

from tests.aws.moto_env import template

pytestmark = pytest.mark.timeout(900)

FUNCTIONS = sorted(
    Path(r["Properties"]["CodeUri"]).name
    for r in template()["Resources"].values()
    if r["Type"] == "AWS::Serverless::Function"
)


@pytest.fixture(scope="module")
def build() -> Path:
    return sam_build()


@pytest.fixture(scope="module")
def py312() -> str:
    return python312()


@pytest.fixture(scope="module")
def built(build: Path) -> dict[str, FunctionPackage]:
    return packages(build)


def _run_child(py312: str, code: str, paths: list[Path], cwd: Path, timeout: int = 300) -> dict[str, Any]:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(map(str, paths)), "LANG": "C.UTF-8"}
    proc = subprocess.run(
        [py312, "-S", "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------------------------------------------ sizes -----
def test_every_function_fits_200_mib_with_its_layers(build: Path, built: dict[str, FunctionPackage]) -> None:
    layers = layer_bytes(build)
    sizes = {name: function_bytes(pkg, layers) for name, pkg in built.items()}
    assert set(sizes) == set(FUNCTIONS)
    table = "\n".join(f"{n:20} {b / 2**20:7.1f} MiB  {' + '.join(built[n].layers)}" for n, b in sorted(sizes.items()))
    over = {n: b for n, b in sizes.items() if b > BUDGET_BYTES}
    assert not over, f"over 200 MiB ({BUDGET_BYTES:,} bytes) code + layers, unzipped:\n{table}"
    assert max(sizes.values()) < LAMBDA_LIMIT_BYTES
    # The split is what keeps them small: no function carries every layer.
    assert all(len(pkg.layers) < len(layers) for pkg in built.values())


def test_functions_list_only_the_layers_of_their_kind(built: dict[str, FunctionPackage]) -> None:
    assert built["api_health"].layers == ["CoreLayer"]  # answers with the standard library only
    for name, pkg in built.items():
        assert len(pkg.layers) <= 5, f"{name}: Lambda allows 5 layers"
        if name != "api_health":
            assert pkg.layers[:2] == ["CoreLayer", "BaseLayer"], name
        # Parsers only for the Parse task; connector SDKs only where connectors are driven; HTTP only for the API.
        assert ("ParseLayer" in pkg.layers) == (name == "ingest_parse"), name
        assert ("ConnectorsLayer" in pkg.layers) == (name in {"api_connectors", "console_web", "connector_sync"}), name
        assert ("WebLayer" in pkg.layers) == (
            (name.startswith("api_") and name != "api_health") or name == "console_web"
        )


# ------------------------------------------------------------------------------------------------ bytecode --
_MAGIC = "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"


def test_every_layer_ships_unchecked_python312_bytecode(build: Path, py312: str) -> None:
    magic = bytes.fromhex(subprocess.run([py312, "-c", _MAGIC], capture_output=True, text=True, check=True).stdout)
    for layer in sorted(p for p in build.iterdir() if p.name.endswith("Layer")):
        sources = list((layer / "python").rglob("*.py"))
        assert len(sources) > 10, layer
        missing, stale = [], []
        for src in sources:
            pyc = src.parent / "__pycache__" / f"{src.stem}.cpython-312.pyc"
            if not pyc.is_file():
                missing.append(src)
                continue
            header = pyc.read_bytes()[:8]
            # PEP 552: flags 0b01 = hash-based, not checked against the source (no mtime compare on /opt).
            if header[:4] != magic or int.from_bytes(header[4:8], "little") != 0b01:
                stale.append(pyc)
        assert not missing, f"{layer.name}: {len(missing)} modules without 3.12 bytecode, e.g. {missing[:3]}"
        assert not stale, f"{layer.name}: bytecode not unchecked-hash 3.12, e.g. {stale[:3]}"


# ------------------------------------------------------------------------------------------------ imports ---
@pytest.mark.parametrize("function", FUNCTIONS)
def test_handler_imports_with_only_its_layers(
    function: str, build: Path, built: dict[str, FunctionPackage], py312: str
) -> None:
    report = import_handler(built[function], py312, build)
    assert report["error"] is None, f"{function} with {built[function].layers}:\n{report['error']}"
    assert report["outside"] == [], f"{function} imported modules from outside its layers: {report['outside']}"


def test_botocore_keeps_every_service_the_code_creates_a_client_for() -> None:
    used: set[str] = set()
    for path in (ROOT / "layers/core/ctxstore").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            name = node.args[0].value
            callee = ast.unparse(node.func)
            if re.fullmatch(r"(make_client|client|boto3\.client|session\.client)", callee) and isinstance(name, str):
                used.add(name)
    assert {"dynamodb", "s3", "kms", "neptune-graph", "bedrock-runtime"} <= used, used  # the scan finds them
    assert used <= set(lambda_layers.BOTOCORE_SERVICES), used - set(lambda_layers.BOTOCORE_SERVICES)


# The connector SDKs, trimmed (one Gmail discovery document, no githubkit REST models, no gRPC), against a
# loopback server: our Gmail and GitHub sessions build their clients and make a call.
_CONNECTORS_CHILD = r"""
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Answer(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"path": self.path, "messages": [], "login": "octocat"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_port}"

from ctxstore.ports.connector_provider import ProviderContext
from ctxstore.connectors.gmail.client import GmailSession
from ctxstore.connectors.github.client import GitHubSession

ctx = ProviderContext(credentials={"access_token": "t"}, auth_type="oauth", base_url=base)
out = {"gmail": GmailSession(ctx).api.users().messages().list(userId="me").execute()["path"]}
with GitHubSession(ctx) as gh:
    out["github"] = gh._gh.request("GET", "/user").json()["path"]
import ctxstore.connectors.slack.provider, ctxstore.connectors.notion.session, ctxstore.connectors.linear.client
absent = []
for name in ("grpc", "opensearch", "githubkit_schemas.latest", "setuptools"):
    try:
        __import__(name)
    except ImportError:
        absent.append(name)
out["absent"] = absent
print(json.dumps(out))
"""


def test_connector_sdks_work_trimmed(build: Path, py312: str) -> None:
    paths = [host_layer(layer, build) for layer in ("CoreLayer", "BaseLayer", "ConnectorsLayer")]
    out = _run_child(py312, _CONNECTORS_CHILD, paths, build)
    assert out["gmail"].startswith("/gmail/v1/users/me/messages"), out
    assert out["github"] == "/user", out
    assert out["absent"] == ["grpc", "opensearch", "githubkit_schemas.latest", "setuptools"]
    docs = host_layer("ConnectorsLayer", build) / "googleapiclient/discovery_cache/documents"
    assert sorted(p.name for p in docs.iterdir() if p.is_file()) == ["gmail.v1.json"]


# The search adapter's client without grpc/opensearch-protobufs: builds, signs and sends a request.
_SEARCH_CHILD = r"""
import json
from ctxstore.adapters.aws.opensearch_index import opensearch_client
client = opensearch_client("https://127.0.0.1:9", "us-east-1")
try:
    client.info()
except Exception as exc:
    kind = type(exc).__name__
print(json.dumps({"kind": kind, "grpc": "grpc" in __import__("sys").modules}))
"""


def test_search_client_needs_no_grpc(build: Path, py312: str) -> None:
    paths = [host_layer(layer, build) for layer in ("CoreLayer", "BaseLayer")]
    child = "import os; os.environ.update(AWS_ACCESS_KEY_ID='t', AWS_SECRET_ACCESS_KEY='t')\n" + _SEARCH_CHILD
    out = _run_child(py312, child, paths, build)
    assert out == {"kind": "ConnectionError", "grpc": False}, out


# Every accepted file of the shared parser corpus through parse_document with only the parse layer: a parser
# may refuse a file (ParseError; images need tesseract, which Lambda lacks), but never for a missing module.
_PARSE_CHILD = r"""
import json, sys, pathlib
docs = pathlib.Path(sys.argv[1])
from ctxstore.parsing import ParseError, classify, parse_document
parsed, missing = 0, []
for entry in json.loads((docs / "index.json").read_text()):
    name = entry["file"].rsplit("/", 1)[-1]
    ext = classify(name, None)
    if ext is None:
        continue
    try:
        parse_document(name, (docs / entry["file"]).read_bytes(), ext)
        parsed += 1
    except ParseError as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, ImportError) or "No module named" in str(exc):
            missing.append([entry["file"], repr(cause or exc)])
    except ImportError as exc:
        missing.append([entry["file"], repr(exc)])
# A workbook written by a library carries formulas without values: pycel (networkx, openpyxl) computes them.
formulas = parse_document("calc.xlsx", pathlib.Path(sys.argv[2]).read_bytes(), ".xlsx").text
mods = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps({"parsed": parsed, "missing": missing, "modules": mods, "formulas": formulas}))
"""


# As tests/unit/parsing/parsing_testlib.py finds it (beside the checkout), or CTXSTORE_PARSER_DOCS.
PARSER_DOCS = Path(os.environ.get("CTXSTORE_PARSER_DOCS") or ROOT.parent / "shared" / "data" / "parser_docs")


def _workbook_with_uncached_formulas() -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws.append(["Item", "Qty", "Price", "Total"])
    ws.append(["Widget", 3, 2.5, "=B2*C2"])
    ws.append(["Gadget", 4, 10, "=B3*C3"])
    ws.append(["Sum", "=SUM(B2:B3)", None, "=SUM(D2:D3)"])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def test_parse_layer_parses_the_corpus_without_missing_modules(build: Path, py312: str, tmp_path: Path) -> None:
    # The shared corpus is part of the test material (../shared/data): missing, this check fails, never skips.
    corpus = PARSER_DOCS / "index.json"
    assert corpus.is_file(), f"shared parser corpus not found at {PARSER_DOCS} (CTXSTORE_PARSER_DOCS)"
    workbook = tmp_path / "calc.xlsx"
    workbook.write_bytes(_workbook_with_uncached_formulas())
    paths = [host_layer(layer, build) for layer in ("CoreLayer", "BaseLayer", "ParseLayer")]
    code = f"import sys; sys.argv[1:] = [{str(PARSER_DOCS)!r}, {str(workbook)!r}]\n" + _PARSE_CHILD
    out = _run_child(py312, code, paths, build, timeout=600)
    assert out["missing"] == [], out["missing"]
    assert out["parsed"] >= 90, out
    # The iWork, PDF, OOXML and OpenDocument paths all ran.
    assert {"keynote_parser", "pypdfium2", "docx", "pptx", "odf", "python_calamine", "lxml"} <= set(out["modules"])
    assert {"pycel", "networkx", "openpyxl"} <= set(out["modules"])
    assert "47.5" in out["formulas"], out["formulas"]

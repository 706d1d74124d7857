"""The `ctxstore` client verbs end to end against a real `ctxstore serve`: output, `-o json`, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from ctxstore.commands import exit_codes
from tests.agent.cli_support import cli, cli_process, env_for
from tests.agent.conftest import Served

DOCS = Path(__file__).resolve().parents[3] / "shared" / "data" / "parser_docs"
ACCEPTED = [
    "tika/testTXT.txt",
    "unstructured/stanley-cups.csv",
    "tika/testMARKDOWN.md",
    "markitdown/masterformat_partial_numbering.pdf",
    "tika/testWORD.docx",
    "unstructured/simple.odt",
]
REJECTED = [
    "docling/unit_test_01.html",
    "tika/testSVG.svg",
    "docling/eml_simple.eml",
    "tika/testHEIF.heic",
    "tika/test-zip-of-zip.zip",
    "markitdown/test.epub",
]


def _mixed_folder(root: Path, names: list[str]) -> Path:
    """parser_docs files in a nested tree, plus a hidden file the walk must skip."""
    for i, name in enumerate(names):
        target = root / ("nested/deeper" if i % 3 == 2 else "nested" if i % 3 == 1 else "") / Path(name).name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DOCS / name, target)
    (root / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    return root


@pytest.fixture
def env(served: Served, tmp_path: Path) -> dict[str, str]:
    return env_for(served.url, served.key, tmp_path / "cfg" / "config.json")


def test_mixed_folder_ingest_with_progress_and_failure_summary(
    served: Served, env: dict[str, str], tmp_path: Path
) -> None:
    db = served.ready_database("docs")
    folder = _mixed_folder(tmp_path / "mixed", ACCEPTED + REJECTED)
    (folder / "nested" / "broken.pdf").write_bytes(os.urandom(3000))  # a supported extension that cannot be parsed
    tty = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "160"}
    ran = cli_process({**env, **tty}, "ingest", str(folder), "-d", db)
    assert ran.code == exit_codes.PARTIAL, ran.stderr + ran.stdout  # broken.pdf errored
    assert "Uploading" in ran.stderr and "Indexing" in ran.stderr and "7/7" in ran.stderr  # the live progress bar
    out = ran.stdout
    assert f'7 of 13 items accepted into database "{db}", default collection; 6 indexed' in out
    for ext in (".heic", ".html", ".svg", ".eml", ".zip", ".epub"):
        assert f"{ext} 1" in out  # rejected kinds, each reported
    [failure] = [line for line in out.splitlines() if "broken.pdf" in line]
    assert "errored" in failure and "E3001" in failure
    assert ".DS_Store" not in out

    listed = cli(env, "list", "-d", db, "-o", "json", "--page-size", "100").json()
    titles = sorted(s["title"] for s in listed["sources"])
    assert titles == sorted([Path(n).name for n in ACCEPTED] + ["broken.pdf"])


def test_ingest_json_output_strict_and_records(served: Served, env: dict[str, str], tmp_path: Path) -> None:
    db = served.ready_database("json")
    folder = _mixed_folder(tmp_path / "two", [ACCEPTED[0], REJECTED[3]])
    ran = cli(env, "-o", "json", "ingest", str(folder), "-d", db)
    assert ran.code == exit_codes.OK, ran.stderr
    report = ran.json()
    assert report["counts"]["indexed"] == 1 and report["counts"]["rejected"] == 1
    [rejected] = [i for i in report["items"] if i["status"] == "rejected"]
    assert rejected["name"].endswith("testHEIF.heic") and rejected["error_code"] == "E1002"
    assert cli(env, "ingest", str(folder), "-d", db, "--strict", "--no-wait").code == exit_codes.PARTIAL

    mem = tmp_path / "memories.jsonl"
    mem.write_text(
        json.dumps({"id": "m-1", "text": "I am allergic to peanuts.", "infer": True})
        + "\n"
        + json.dumps({"id": "m-2", "user_assistant_pairs": [{"user": "Call me Sam.", "assistant": "Sure, Sam."}]})
        + "\n"
    )
    apps = tmp_path / "apps.json"
    apps.write_text(
        json.dumps([{"id": "t-1", "title": "Ticket", "type": "ticket", "content": {"text": "Printer jam"}}])
    )
    records = cli(env, "-o", "json", "ingest", "--memories", str(mem), "--app-items", str(apps), "-d", db)
    assert records.code == exit_codes.OK, records.stderr
    assert {i["id"] for i in records.json()["items"]} == {"m-1", "m-2", "t-1"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    refused = cli(env, "ingest", "--memories", str(bad), "-d", db)
    assert refused.code == exit_codes.USAGE and "neither a JSON array nor JSON Lines" in refused.stderr
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps([{"title": "no text"}]))
    partial = cli(env, "-o", "json", "ingest", "--memories", str(invalid), "-d", db)
    assert partial.code == exit_codes.PARTIAL
    assert partial.json()["items"][0]["error_code"] == "INVALID_PARAMETERS"  # refused by the API, reported per item


def test_query_status_inspect_list_relations_subgraph_delete(served: Served, env: dict[str, str]) -> None:
    db = served.ready_database("verbs")
    note = "Acme Rockets was founded by Ada Lovelace in London."
    stored = cli(env, "-o", "json", "ingest", "--text", note, "--kind", "knowledge", "-d", db)
    assert stored.code == 0, stored.stderr
    [item] = [i["id"] for i in stored.json()["items"]]
    env = {**env, "CTXSTORE_DATABASE": db}  # the default database from the environment from here on

    found = cli(env, "query", "who founded Acme Rockets", "-n", "3")
    assert found.code == 0 and "Acme Rockets" in found.stdout and item[:10] in found.stdout
    as_json = cli(env, "query", "who founded Acme Rockets", "-o", "json", "--mode", "fast", "--no-graph").json()
    assert as_json["chunks"][0]["id"] == item and "graph_context" not in as_json
    assert cli(env, "query", "x", "--filter", "nokey").code == exit_codes.USAGE

    st = cli(env, "status", item, "-o", "json")
    assert st.code == 0 and st.json()[0]["indexing_status"] == "completed"
    assert cli(env, "status", item, "never-was").code == exit_codes.NOT_FOUND
    shown = cli(env, "inspect", item)
    assert shown.code == 0 and note in shown.stdout
    assert cli(env, "inspect", item, "-o", "json", "--url").json()["presigned_url"].startswith(served.url + "/blobs/")
    assert item in cli(env, "list").stdout
    rel = cli(env, "relations", item, "-o", "json")
    assert rel.code == 0 and any(g["target"]["name"] == "Ada Lovelace" for g in rel.json()["relations"])
    assert "founded_by" in cli(env, "relations").stdout
    sub = cli(env, "subgraph", item, "-o", "json")
    assert sub.json()["sources"][0]["source_id"] == item

    refused = cli(env, "delete", item)  # not a terminal and no --yes: nothing is deleted
    assert refused.code == exit_codes.USAGE and "--yes" in refused.stderr
    gone = cli(env, "delete", item, "ghost", "--yes", "-o", "json")
    assert gone.code == exit_codes.NOT_FOUND and gone.json()["deleted_count"] == 1
    assert cli(env, "status", item).code == exit_codes.NOT_FOUND


def test_database_verbs(served: Served, env: dict[str, str]) -> None:
    name = "cli-db-" + os.urandom(3).hex()
    created = cli(env, "database", "create", name)
    assert created.code == 0 and "ready" in created.stdout
    assert cli(env, "database", "create", name).code == exit_codes.CONFLICT
    assert name in cli(env, "database", "list", "-o", "json").json()
    assert cli(env, "database", "status", name, "-o", "json").json()["infra"]["graph_status"] is True
    assert cli(env, "database", "stats", name, "-o", "json").json()["knowledge_collection"]["row_count"] == 0
    assert cli(env, "database", "collections", name, "-o", "json").code == 0
    assert cli(env, "database", "status").code == exit_codes.USAGE  # no name and no default database
    assert cli(env, "database", "delete", name, "--yes").code == 0
    missing = cli(env, "database", "status", name)
    assert missing.code == exit_codes.NOT_FOUND and "DATABASE_NOT_FOUND" in missing.stderr
    assert "ctxstore database create" in missing.stderr  # the error says what to do


def test_byog_and_webhooks_verbs(served: Served, env: dict[str, str]) -> None:
    g = "cli-g-" + os.urandom(3).hex()
    assert cli(env, "byog", "create", g).code == 0
    w = cli(env, "byog", "query", "CREATE (:City {name: $n, pop: $p})", "-d", g, "-p", "n=Oslo", "-p", "p=700000")
    assert w.code == 0
    rows = cli(env, "byog", "query", "MATCH (c:City) RETURN c.name AS name, c.pop AS pop", "-d", g, "-o", "json")
    assert rows.json() == [{"name": "Oslo", "pop": 700000}]
    assert cli(env, "byog", "collections", "-d", g, "-o", "json").json() == ["default"]
    bad = cli(env, "byog", "query", "CALL db.labels()", "-d", g)
    assert bad.code == exit_codes.USAGE and "Error" in bad.stderr
    assert cli(env, "byog", "drop", "-d", g, "--yes").code == 0

    hook = cli(env, "webhooks", "set", "http://127.0.0.1:9/ctx", "--generate-secret", "-o", "json")
    assert hook.code == 0 and hook.json()["signing_secret"].startswith("whsec_")
    assert cli(env, "webhooks", "show", "-o", "json").json()["url"] == "http://127.0.0.1:9/ctx"
    assert cli(env, "webhooks", "deliveries", "-o", "json").json()["deliveries"] == []
    assert cli(env, "webhooks", "delete", "--yes").code == 0
    assert cli(env, "webhooks", "test").code == exit_codes.NOT_FOUND


def test_auth_errors_doctor_login_and_config(served: Served, env: dict[str, str], tmp_path: Path) -> None:
    no_key = {**env, "CTXSTORE_API_KEY": ""}
    ran = cli(no_key, "database", "list")
    assert ran.code == exit_codes.AUTH and "ctxstore login" in ran.stderr
    bad = cli({**env, "CTXSTORE_API_KEY": "csk_aaaaaaaaaaaa_bbbb"}, "-o", "json", "database", "list")
    assert bad.code == exit_codes.AUTH
    assert json.loads(bad.stderr)["error"]["code"] == "UNAUTHORIZED"  # errors as JSON on stderr in json mode
    down = cli({**env, "CTXSTORE_URL": "http://127.0.0.1:9"}, "--timeout", "2", "doctor")
    assert down.code == exit_codes.UNAVAILABLE and "ctxstore serve" in down.stdout

    doctor = cli(env, "doctor", "-o", "json")
    assert doctor.code == 0 and [(c["check"], c["state"]) for c in doctor.json()["checks"]] == [
        ("config", "ok"),
        ("reachable", "ok"),
        ("version", "ok"),
        ("api key", "ok"),
        ("database", "next"),  # none chosen: what to do next, not a failure
    ]
    assert cli(no_key, "doctor").code == exit_codes.AUTH
    missing = cli({**env, "CTXSTORE_DATABASE": "nope"}, "doctor", "-o", "json")
    assert missing.code == exit_codes.OK and missing.json()["checks"][-1]["fix"] == (
        "create it: `ctxstore database create nope`"
    )

    config = Path(env["CTXSTORE_CONFIG"])
    logged = cli(no_key, "login", "--api-key", served.key, "--database", "from-login")
    assert logged.code == 0 and config.exists()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600  # the key is readable by its owner only
    shown = cli({**no_key, "CTXSTORE_URL": ""}, "config", "-o", "json").json()
    assert shown["database"] == "from-login" and shown["api_key"].endswith("_…") and served.key not in json.dumps(shown)
    assert cli({**no_key, "CTXSTORE_URL": ""}, "database", "list").code == 0  # the saved key and URL are used
    wrong = cli(no_key, "login", "--api-key", "csk_aaaaaaaaaaaa_bbbb")
    assert wrong.code == exit_codes.AUTH and json.loads(config.read_text())["api_key"] == served.key  # not saved
    assert cli(no_key, "logout").code == 0 and not config.exists()


def test_serve_and_keys_keep_their_interface(env: dict[str, str], tmp_path: Path) -> None:
    # `keys create` printing exactly the key through main() is tests/api/test_serve_process.py::test_keys_cli.
    helped = cli(env, "serve", "--help")  # the same flags as when serve was an argparse parser
    assert helped.code == 0 and all(f in helped.stdout for f in ("--data-dir", "--host", "--port"))
    assert "--allow-private-webhooks" in helped.stdout and "--no-allow-private-webhooks" not in helped.stdout
    keys = cli(env, "keys", "--help")
    assert keys.code == 0 and all(f"  {verb}  " in keys.stdout for verb in ("create", "list", "revoke"))
    assert cli(env, "keys").code == 2 and cli(env).code == 2  # a verb is required, as before
    assert cli(env, "serve", "--port", "eighty").code == 2
    listed = cli(env, "--help")
    assert all(verb in listed.stdout for verb in ("serve", "keys", "ingest", "query", "doctor", "mcp", "database"))
    assert "Exit codes" in listed.stdout
    # --data-dir before or after the sub-verb; the exit codes of a refused value (2) and an unknown prefix (1)
    data = str(tmp_path / "keys-data")
    made = cli_process(env, "keys", "create", "--org", "acme", "--data-dir", data)
    assert made.code == 0 and made.stdout.startswith("csk_") and len(made.stdout.splitlines()) == 1
    listing = cli_process(env, "keys", "--data-dir", data, "list", "--org", "acme")
    assert listing.code == 0 and made.stdout.split("_")[1] in listing.stdout and "\tacme\tactive\t" in listing.stdout
    bad = cli_process(env, "keys", "create", "--org", "acme", "--expires-in", "soon", "--data-dir", data)
    assert bad.code == 2 and bad.stderr.startswith("ctxstore: ")
    gone = cli_process(env, "keys", "revoke", "nosuchprefix", "--data-dir", data)
    assert gone.code == 1 and "no key with prefix nosuchprefix" in gone.stderr

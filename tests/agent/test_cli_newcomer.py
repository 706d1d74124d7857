"""The command line as a newcomer meets it, against a real `ctxstore serve`: re-running an ingest, URLs typed
without a scheme or pointing at another web server, `doctor` before the first database, tables at 80 columns."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.commands import exit_codes
from ctxstore.commands.file_identity import file_id
from tests.agent.cli_support import cli, env_for
from tests.agent.conftest import Served
from tests.support.server import ServerProcess


@pytest.fixture
def env(served: Served, tmp_path: Path) -> dict[str, str]:
    return env_for(served.url, served.key, tmp_path / "cfg" / "config.json")


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def _ids_and_titles(env: dict[str, str], db: str) -> list[tuple[str, str]]:
    listed = cli(env, "list", "-d", db, "-o", "json", "--page-size", "100").json()
    return sorted((s["id"], s["title"]) for s in listed["sources"])


def test_ingesting_a_folder_twice_updates_each_file_in_place(
    served: Served, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = served.ready_database("again")
    folder = tmp_path / "handbook"
    _write(
        folder,
        {
            "leave.md": "# Leave\nEvery employee gets 27 vacation days a year.",
            "badges.txt": "Visitors wear an orange badge at the front desk.",
            "it/laptops.md": "# Laptops\nLaptops are replaced every four years.",
        },
    )
    first = cli(env, "-o", "json", "ingest", str(folder), "-d", db)
    assert first.code == exit_codes.OK, first.stderr
    assert first.json()["files"] == {"new": 3, "updated": 0, "unchanged": 0}
    before = _ids_and_titles(env, db)
    # The documented rule: the path inside the folder given, with the folder's name, hashed with the scope.
    assert sorted(i for i, _ in before) == sorted(
        file_id(db, "", key) for key in ("handbook/leave.md", "handbook/badges.txt", "handbook/it/laptops.md")
    )

    (folder / "badges.txt").write_text("Visitors now wear a purple badge at the front desk.")
    (folder / "parking.md").write_text("# Parking\nThe garage opens at 7am.")
    monkeypatch.chdir(tmp_path)  # the same folder spelt another way: relative this time
    second = cli(env, "-o", "json", "ingest", "handbook", "-d", db)
    assert second.code == exit_codes.OK, second.stderr
    report = second.json()
    assert report["files"] == {"new": 1, "updated": 1, "unchanged": 2}
    assert report["counts"]["indexed"] == 2 and report["counts"]["unchanged"] == 2
    change = {Path(i["name"]).name: i["change"] for i in report["items"]}
    assert change == {"badges.txt": "updated", "parking.md": "new", "leave.md": "unchanged", "laptops.md": "unchanged"}

    after = _ids_and_titles(env, db)
    assert len(after) == 4 and sorted(t for _, t in after) == ["badges.txt", "laptops.md", "leave.md", "parking.md"]
    assert set(before) < set(after)  # the same ids as before, one more

    hits = cli(env, "query", "what colour badge do visitors wear", "-d", db, "-o", "json", "--mode", "fast").json()
    ids = [c["id"] for c in hits["chunks"]]
    assert len(ids) == len(set(ids)), ids  # one copy of each file
    badge = [c for c in hits["chunks"] if c["source_title"] == "badges.txt"]
    assert len(badge) == 1 and "purple" in badge[0]["chunk_content"]  # the new content replaced the old
    assert not any("orange" in c["chunk_content"] for c in hits["chunks"])

    third = cli(env, "ingest", str(folder), "-d", db)
    assert third.code == exit_codes.OK, third.stderr
    assert "files: 0 new, 0 updated, 4 unchanged (same content as stored: not sent again)" in third.stdout
    assert "Nothing to send" in third.stdout


def test_two_folders_with_one_name_are_refused_before_sending(
    served: Served, env: dict[str, str], tmp_path: Path
) -> None:
    db = served.ready_database("clash")
    _write(tmp_path / "a" / "docs", {"x.md": "one"})
    _write(tmp_path / "b" / "docs", {"x.md": "two"})
    ran = cli(env, "ingest", str(tmp_path / "a" / "docs"), str(tmp_path / "b" / "docs"), "-d", db)
    assert ran.code == exit_codes.USAGE and "docs/x.md" in ran.stderr and "Hint" in ran.stderr
    assert _ids_and_titles(env, db) == []


def test_a_bare_host_and_port_is_taken_as_http(served: Served, env: dict[str, str]) -> None:
    bare = served.url.removeprefix("http://")
    ran = cli({**env, "CTXSTORE_URL": bare}, "database", "list")
    assert ran.code == exit_codes.OK, ran.stderr
    assert f"using {served.url}" in ran.stderr  # and says so
    doctor = cli({**env, "CTXSTORE_URL": ""}, "--url", bare, "doctor", "-o", "json")
    assert doctor.code == exit_codes.OK, doctor.stdout
    config = doctor.json()["checks"][0]
    assert config["check"] == "config" and f"url {served.url} (from flag; http:// assumed)" in config["detail"]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http:/127.0.0.1:8080", "a scheme needs '://'"),
        ("ftp://127.0.0.1", "not an http or https URL"),
        ("127.0.0.1:80x", "invalid port"),
    ],
)
def test_a_malformed_url_says_what_to_do(env: dict[str, str], url: str, why: str) -> None:
    ran = cli(env, "--url", url, "database", "list")
    assert ran.code == exit_codes.USAGE and why in ran.stderr and "Hint: pass --url http://HOST:PORT" in ran.stderr
    doctor = cli(env, "--url", url, "doctor", "-o", "json")
    assert doctor.code == exit_codes.USAGE
    [config] = doctor.json()["checks"]  # the URL is checked, not called "config ok"
    assert config["state"] == "FAIL" and why in config["detail"] and "--url" in config["fix"]


class _OtherServer(http.server.BaseHTTPRequestHandler):
    """Some other web server: an HTML page for every path, or a JSON document without ctxstore's fields."""

    json_body = False

    def _answer(self) -> None:
        body = b'{"hello": "world"}' if self.json_body else b"<!doctype html><html><body>It works!</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if self.json_body else "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


class _JsonServer(_OtherServer):
    json_body = True


@pytest.fixture
def other_server() -> Iterator[str]:
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), h) for h in (_OtherServer, _JsonServer)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        yield ",".join(f"http://127.0.0.1:{s.server_port}" for s in servers)
    finally:
        for s in servers:
            s.shutdown()


def test_a_url_that_reaches_another_web_server(env: dict[str, str], other_server: str) -> None:
    html, json_only = other_server.split(",")
    ran = cli({**env, "CTXSTORE_URL": html}, "database", "list")
    assert ran.code == exit_codes.UNAVAILABLE
    assert f"this does not look like a ctxstore server: got text/html (HTTP 200) from {html}/databases" in ran.stderr
    assert "<html" not in ran.stderr and "Hint: point --url / CTXSTORE_URL at the ctxstore server" in ran.stderr
    for url in (html, json_only):
        doctor = cli({**env, "CTXSTORE_URL": url}, "doctor", "-o", "json")
        assert doctor.code == exit_codes.UNAVAILABLE
        reach = doctor.json()["checks"][1]
        assert reach["check"] == "reachable" and reach["state"] == "FAIL"
        assert "this does not look like a ctxstore server" in reach["detail"] and "--url" in reach["fix"]


def test_doctor_on_a_fresh_server_names_the_next_step(tmp_path: Path) -> None:
    """The README's flow on a server just started: login with a database that does not exist yet, then doctor."""
    with ServerProcess(tmp_path / "fresh") as srv:
        srv.wait_ready(60)
        [key] = srv.printed_keys
        env = env_for(srv.base_url, "", tmp_path / "config.json")
        assert cli(env, "login", "--api-key", key).code == exit_codes.OK
        bare = cli(env, "doctor", "-o", "json")
        assert bare.code == exit_codes.OK, bare.stdout
        last = bare.json()["checks"][-1]
        assert last["check"] == "database" and last["state"] == "next" and "ctxstore database create" in last["fix"]

        assert cli(env, "login", "--api-key", key, "--database", "acme").code == exit_codes.OK
        first = cli(env, "doctor")
        assert first.code == exit_codes.OK, first.stdout  # no database yet is a next step, not a failure
        assert "next" in first.stdout and "ctxstore database create acme" in first.stdout
        assert "FAIL" not in first.stdout
        assert cli(env, "database", "create", "acme").code == exit_codes.OK
        ready = cli(env, "doctor", "-o", "json")
        assert ready.code == exit_codes.OK
        assert ready.json()["checks"][-1] == {
            "check": "database",
            "ok": True,
            "state": "ok",
            "detail": '"acme" is ready',
            "fix": "",
        }


def test_ids_stay_whole_in_tables_at_80_columns(served: Served, env: dict[str, str], tmp_path: Path) -> None:
    db = served.ready_database("narrow")
    folder = tmp_path / "a-folder-with-a-rather-long-name"
    _write(
        folder,
        {
            f"quarterly-report-of-the-northern-region-{i}.md": f"Region {i} sold {i * 7} tractors this quarter."
            for i in range(3)
        },
    )
    assert cli(env, "ingest", str(folder), "-d", db).code == exit_codes.OK
    memo = cli(env, "-o", "json", "ingest", "--text", "Tractor sales rose in every region.", "-d", db)
    assert memo.code == exit_codes.OK
    narrow = {**env, "COLUMNS": "80", "CTXSTORE_DATABASE": db}
    ids = [s["id"] for s in cli(narrow, "list", "-o", "json").json()["sources"]]
    assert len(ids) == 3

    def whole_on_one_line(text: str, wanted: list[str]) -> None:
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 80
        for i in wanted:
            assert any(i in line for line in lines), f"{i} is not whole on one line:\n{text}"

    whole_on_one_line(cli(narrow, "list").stdout, ids)
    found = cli(narrow, "query", "how many tractors were sold", "--mode", "fast")
    hit_ids = [c["id"] for c in cli(narrow, "query", "how many tractors were sold", "-o", "json").json()["chunks"]]
    assert set(ids) <= set(hit_ids)
    whole_on_one_line(found.stdout, hit_ids)
    whole_on_one_line(cli(narrow, "status", *ids).stdout, ids)
    [memo_id] = [i["id"] for i in memo.json()["items"]]
    whole_on_one_line(cli(narrow, "list", "--type", "memory").stdout, [memo_id])


def test_json_mode_errors_keep_the_hint(env: dict[str, str]) -> None:
    ran = cli(env, "-o", "json", "--url", "ftp://x", "database", "list")
    assert ran.code == exit_codes.USAGE
    assert "pass --url" in json.loads(ran.stderr)["error"]["hint"]


def test_every_error_says_what_to_do_next(served: Served, env: dict[str, str], tmp_path: Path) -> None:
    db = served.ready_database("hints")
    bad_records = tmp_path / "bad.json"
    bad_records.write_text('"just a string"')
    failing = [
        (exit_codes.USAGE, ["database", "create", "no spaces allowed"]),  # the API refuses the name (400)
        (exit_codes.USAGE, ["ingest", "--memories", str(bad_records), "-d", db]),
        (exit_codes.USAGE, ["byog", "query", "RETURN 1", "-d", "g", "-p", "novalue"]),
        (exit_codes.NOT_FOUND, ["inspect", "no-such-item", "-d", db]),
        (exit_codes.CONFLICT, ["database", "create", db]),
        (exit_codes.UNAVAILABLE, ["--url", "127.0.0.1:9", "--timeout", "2", "database", "list"]),
    ]
    for code, args in failing:
        ran = cli(env, *args)
        assert ran.code == code, (args, ran.stderr)
        assert "Error" in ran.stderr and "\nHint: " in ran.stderr, (args, ran.stderr)

"""`ctxstore ingest`: files and folders, memories and app items from JSON/JSONL, or one note; then a progress
bar until every item is indexed or errored, and a summary of what failed and why."""

from __future__ import annotations

import json
import mimetypes
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ctxstore.client import CtxstoreClient, CtxstoreError, Document, IngestResult, ItemStatus
from ctxstore.client import documents as docs
from ctxstore.commands import exit_codes
from ctxstore.commands.common import CollectionOpt, DatabaseOpt, OutputOpt, Refused, StoreKind, connect, need_database
from ctxstore.commands.output import Output

REJECTED_FORMAT = "E1002"
# After these a later request cannot do better: stop sending and report what was done.
FATAL_CODES = frozenset({"UNAUTHORIZED", "FORBIDDEN", "DATABASE_NOT_FOUND", "UNREACHABLE"})


@dataclass
class Entry:
    """One thing the command sends, and what became of it."""

    name: str
    id: str = ""
    stage: str = "pending"  # accepted | rejected | refused | indexed | errored | pending | missing
    error_code: str = ""
    error: str = ""

    def row(self) -> dict[str, str]:
        return {
            "name": self.name,
            "id": self.id,
            "status": self.stage,
            "error_code": self.error_code,
            "error": self.error,
        }


@dataclass
class Ledger:
    entries: list[Entry] = field(default_factory=list)

    def accepted(self, names: list[str], result: IngestResult) -> None:
        for name, item in zip(names, result.results, strict=False):
            e = Entry(name, item.id)
            if item.queued:
                e.stage = "accepted"
            else:
                e.stage = "rejected" if item.error_code == REJECTED_FORMAT else "refused"
                e.error_code, e.error = item.error_code or "", item.error or ""
            self.entries.append(e)

    def refused(self, names: list[str], err: CtxstoreError) -> None:
        self.entries.extend(Entry(n, stage="refused", error_code=err.code, error=err.message) for n in names)

    def queued_ids(self) -> list[str]:
        return [e.id for e in self.entries if e.stage == "accepted"]

    def settle(self, statuses: list[ItemStatus]) -> None:
        by_id = {s.id: s for s in statuses}
        for e in self.entries:
            s = by_id.get(e.id)
            if e.stage != "accepted" or s is None:
                continue
            if s.indexing_status == "completed":
                e.stage = "indexed"
            elif s.indexing_status == "errored":
                e.stage, e.error_code, e.error = "errored", s.error_code or "", s.error_message or ""
            elif not s.found:
                e.stage, e.error_code = "missing", s.error_code or "FILE_NOT_FOUND"
            else:
                e.stage = "pending"

    def count(self, stage: str) -> int:
        return sum(1 for e in self.entries if e.stage == stage)


def load_records(path: Path) -> list[dict[str, Any]]:
    """A JSON array, one JSON object, or JSON Lines (one object per line)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc}") from None
    stripped = raw.lstrip()
    records: Any
    try:
        if stripped.startswith("["):
            records = json.loads(raw)
        elif stripped.startswith("{") and "\n{" not in stripped.rstrip():
            records = [json.loads(raw)]
        else:
            records = [json.loads(line) for line in raw.splitlines() if line.strip()]
    except ValueError as exc:
        raise Refused(f"{path} is neither a JSON array nor JSON Lines: {exc}") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise Refused(f"{path}: every record must be a JSON object")
    return [dict(r) for r in records]


def _record_name(source: Path, i: int, record: dict[str, Any]) -> str:
    label = record.get("id") or record.get("title")
    return f"{source.name}:{i + 1}" + (f" ({label})" if label else "")


def _display(path: Path, roots: list[Path]) -> str:
    for root in roots:
        if root.is_dir() and path.is_relative_to(root):
            return str(path.relative_to(root.parent))
    return str(path)


def _send_files(
    client: CtxstoreClient,
    ledger: Ledger,
    files: list[Path],
    roots: list[Path],
    progress: Progress,
    task: Any,
    upsert: bool,
) -> None:
    sizes = {p: p.stat().st_size for p in files}
    too_big = [p for p in files if sizes[p] > docs.MAX_FILE_BYTES]
    for p in too_big:
        ledger.entries.append(
            Entry(
                _display(p, roots),
                stage="refused",
                error_code="PAYLOAD_TOO_LARGE",
                error="over the 50 MB per-file limit; not sent",
            )
        )
        progress.advance(task)
    for batch in docs.batches([p for p in files if p not in too_big], lambda p: sizes[p]):
        names = [_display(p, roots) for p in batch]
        try:
            loaded = [Document(p.name, p.read_bytes(), mimetypes.guess_type(p.name)[0]) for p in batch]
            ledger.accepted(names, client.ingest_files(loaded, upsert=upsert))
        except CtxstoreError as err:
            ledger.refused(names, err)
            if err.code in FATAL_CODES:
                raise
        progress.advance(task, len(batch))


def _send_records(
    client: CtxstoreClient,
    ledger: Ledger,
    store: str,
    records: list[tuple[str, dict[str, Any]]],
    progress: Progress,
    task: Any,
    upsert: bool,
) -> None:
    for start in range(0, len(records), 100):
        part = records[start : start + 100]
        names = [n for n, _ in part]
        try:
            items = [r for _, r in part]
            result = (
                client.ingest_memories(items, upsert=upsert)
                if store == "memory"
                else client.ingest_app_items(items, upsert=upsert)
            )
            ledger.accepted(names, result)
        except CtxstoreError as err:
            ledger.refused(names, err)
            if err.code in FATAL_CODES:
                raise
        progress.advance(task, len(part))


def _summary(out: Output, ledger: Ledger, where: str, seconds: float) -> None:
    counts = {
        stage: ledger.count(stage)
        for stage in ("indexed", "errored", "rejected", "refused", "missing", "pending", "accepted")
    }
    if out.json:
        out.data(
            {"scope": where, "seconds": round(seconds, 2), "counts": counts, "items": [e.row() for e in ledger.entries]}
        )
        return
    total = len(ledger.entries)
    taken = total - counts["rejected"] - counts["refused"]
    out.line(f"{taken} of {total} items accepted into {where}; {counts['indexed']} indexed ({seconds:.1f} s)")
    by_ext = Counter(
        Path(e.name.split(" (")[0]).suffix.lower() or "(none)" for e in ledger.entries if e.stage == "rejected"
    )
    notes = {
        "indexed": "searchable, relations built",
        "accepted": "queued; not waited for (--no-wait)",
        "pending": "still indexing when the wait ended",
        "errored": "indexing failed (codes below)",
        "rejected": "unsupported format, not stored: " + ", ".join(f"{ext} {n}" for ext, n in sorted(by_ext.items())),
        "refused": "refused by the API before storing (codes below)",
        "missing": "deleted while indexing",
    }
    out.table(None, ["outcome", "items", "meaning"], [(s, n, notes[s]) for s, n in counts.items() if n])
    failures = [e for e in ledger.entries if e.stage in ("errored", "refused", "missing")]
    if failures:
        out.table(
            "failures",
            ["item", "id", "outcome", "code", "message"],
            [(e.name, e.id, e.stage, e.error_code, e.error) for e in failures],
        )


def register(app: typer.Typer) -> None:
    @app.command()
    def ingest(
        ctx: typer.Context,
        paths: Annotated[
            list[Path] | None, typer.Argument(help="Files and folders (folders are walked recursively).")
        ] = None,
        memories: Annotated[Path | None, typer.Option(help="Memories from a JSON array or JSON Lines file.")] = None,
        app_items: Annotated[
            Path | None, typer.Option(help="App items (app_knowledge) from a JSON array or JSON Lines file.")
        ] = None,
        text: Annotated[str | None, typer.Option(help="One note to store (see --kind).")] = None,
        kind: Annotated[StoreKind, typer.Option(help="For --text: memory or knowledge.")] = StoreKind.memory,
        title: Annotated[str | None, typer.Option(help="For --text: a title.")] = None,
        infer: Annotated[
            bool, typer.Option(help="For --text memories: extract stated preferences and facts too.")
        ] = True,
        recursive: Annotated[bool, typer.Option(help="Walk folders recursively.")] = True,
        upsert: Annotated[
            bool, typer.Option(help="Replace items whose id exists (else the request is refused).")
        ] = True,
        wait: Annotated[
            bool, typer.Option(help="Wait, with a progress bar, until every item is indexed or errored.")
        ] = True,
        timeout: Annotated[float, typer.Option(help="Seconds to wait for indexing.")] = 1800.0,
        strict: Annotated[bool, typer.Option(help="Count unsupported formats as failures (exit 7).")] = False,
        database: DatabaseOpt = None,
        collection: CollectionOpt = None,
        output: OutputOpt = None,
    ) -> None:
        """Ingest files, folders, memories, app items or a note, and follow indexing to the end.

        Exit 0 when everything sent was indexed (unsupported formats are reported, and fail only with --strict),
        7 when some items errored or were refused, 8 when the wait timed out.
        """
        roots = list(paths or [])
        missing = [str(p) for p in roots if not p.exists()]
        if missing:
            raise typer.BadParameter(f"no such file or folder: {', '.join(missing)}", param_hint="PATHS")
        files = docs.walk(roots, recursive=recursive)
        with connect(ctx, output, database, collection) as (client, out, _):
            need_database(client, None)
            mems = [(_record_name(memories, i, r), r) for i, r in enumerate(load_records(memories))] if memories else []
            apps = (
                [(_record_name(app_items, i, r), r) for i, r in enumerate(load_records(app_items))] if app_items else []
            )
            if text is not None:
                note: dict[str, Any] = (
                    {"text": text, "infer": infer}
                    if kind is StoreKind.memory
                    else {"title": title or text[:80], "type": "note", "content": {"text": text}}
                )
                if title and kind is StoreKind.memory:
                    note["title"] = title
                (mems if kind is StoreKind.memory else apps).append(("--text", note))
            total = len(files) + len(mems) + len(apps)
            if total == 0:
                raise Refused(
                    "nothing to ingest", hint="give files or folders, --memories FILE, --app-items FILE or --text TEXT"
                )
            where = f'database "{client.database}", ' + (
                f'collection "{client.collection}"' if client.collection else "default collection"
            )
            ledger = Ledger()
            started = time.monotonic()
            columns = (
                TextColumn("{task.description:<10}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
            )
            with Progress(*columns, console=out.err, disable=out.json, transient=False) as progress:
                sending = progress.add_task("Uploading", total=total, note="")
                try:
                    _send_files(client, ledger, files, roots, progress, sending, upsert)
                    _send_records(client, ledger, "memory", mems, progress, sending, upsert)
                    _send_records(client, ledger, "knowledge", apps, progress, sending, upsert)
                finally:
                    if ledger.entries and not out.json and ledger.count("accepted") < len(ledger.entries):
                        progress.update(sending, note=f"{len(ledger.entries) - ledger.count('accepted')} not accepted")
                queued = ledger.queued_ids()
                if wait and queued:
                    indexing = progress.add_task("Indexing", total=len(queued), note="")

                    def update(statuses: list[ItemStatus]) -> None:
                        errored = sum(1 for s in statuses if s.indexing_status == "errored")
                        progress.update(
                            indexing,
                            completed=sum(1 for s in statuses if s.done),
                            note=f"{errored} errored" if errored else "",
                        )

                    ledger.settle(client.wait_for(queued, timeout=timeout, poll_interval=1.0, on_update=update))
            _summary(out, ledger, where, time.monotonic() - started)
            if (
                ledger.count("errored")
                or ledger.count("refused")
                or ledger.count("missing")
                or (strict and ledger.count("rejected"))
            ):
                raise typer.Exit(exit_codes.PARTIAL)
            if ledger.count("pending"):
                raise typer.Exit(exit_codes.TIMEOUT)

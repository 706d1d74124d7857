"""`ctxstore ingest`: files and folders, memories and app items from JSON/JSONL, or one note; then a progress
bar until every item is indexed or errored, and a summary of what failed and why."""

from __future__ import annotations

import json
import mimetypes
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctxstore.commands import exit_codes
from ctxstore.commands.common import CollectionOpt, DatabaseOpt, OutputOpt, Refused, StoreKind, connect, need_database
from ctxstore.commands.file_identity import HASH_FIELD, LocalFile, change_of, identify, stored_copies, unique
from ctxstore.commands.output import Output

if TYPE_CHECKING:  # rich and the client load when the verb runs, not for --help
    from rich.progress import Progress

    from ctxstore.client import CtxstoreClient, CtxstoreError, IngestResult, ItemStatus

REJECTED_FORMAT = "E1002"
RECORDS_HINT = "give a JSON array of objects, one JSON object, or JSON Lines (one object per line)"
# After these a later request cannot do better: stop sending and report what was done.
FATAL_CODES = frozenset({"UNAUTHORIZED", "FORBIDDEN", "DATABASE_NOT_FOUND", "UNREACHABLE"})


@dataclass
class Entry:
    """One thing the command sends, and what became of it."""

    name: str
    id: str = ""
    stage: str = "pending"  # accepted | rejected | refused | indexed | errored | pending | missing | unchanged
    error_code: str = ""
    error: str = ""
    change: str = ""  # files: new | updated | unchanged (what the server held under the file's id before)

    def row(self) -> dict[str, str]:
        return {
            "name": self.name,
            "id": self.id,
            "status": self.stage,
            "change": self.change,
            "error_code": self.error_code,
            "error": self.error,
        }


@dataclass
class Ledger:
    entries: list[Entry] = field(default_factory=list)

    def accepted(self, names: list[str], result: IngestResult, changes: list[str] | None = None) -> None:
        for i, (name, item) in enumerate(zip(names, result.results, strict=False)):
            e = Entry(name, item.id, change=changes[i] if changes else "")
            if item.queued:
                e.stage = "accepted"
            else:
                e.stage = "rejected" if item.error_code == REJECTED_FORMAT else "refused"
                e.error_code, e.error = item.error_code or "", item.error or ""
            self.entries.append(e)

    def refused(self, names: list[str], err: CtxstoreError, changes: list[str] | None = None) -> None:
        self.entries.extend(
            Entry(n, stage="refused", error_code=err.code, error=err.message, change=changes[i] if changes else "")
            for i, n in enumerate(names)
        )

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

    def changes(self) -> dict[str, int]:
        """Files by what the server held before: new, updated (replaced), unchanged (not sent). Files the API
        rejected or refused were stored neither way, and are not counted here."""
        stored = [e for e in self.entries if e.change and e.stage not in ("rejected", "refused")]
        return {c: sum(1 for e in stored if e.change == c) for c in ("new", "updated", "unchanged")}


def load_records(path: Path) -> list[dict[str, Any]]:
    """A JSON array, one JSON object, or JSON Lines (one object per line)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc}", hint="check the path and that the file is readable") from None
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
        raise Refused(f"{path} is neither a JSON array nor JSON Lines: {exc}", hint=RECORDS_HINT) from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise Refused(f"{path}: every record must be a JSON object", hint=RECORDS_HINT)
    return [dict(r) for r in records]


def _record_name(source: Path, i: int, record: dict[str, Any]) -> str:
    label = record.get("id") or record.get("title")
    return f"{source.name}:{i + 1}" + (f" ({label})" if label else "")


def _send_files(
    client: CtxstoreClient,
    ledger: Ledger,
    files: list[LocalFile],
    progress: Progress,
    task: Any,
    upsert: bool,
) -> None:
    """Send new and changed files under their stable ids (file_identity); record unchanged ones unsent."""
    from ctxstore.client import CtxstoreError, Document
    from ctxstore.client import documents as docs

    too_big = [f for f in files if f.size > docs.MAX_FILE_BYTES]
    for f in too_big:
        ledger.entries.append(
            Entry(
                f.key, stage="refused", error_code="PAYLOAD_TOO_LARGE", error="over the 50 MB per-file limit; not sent"
            )
        )
        progress.advance(task)
    sendable = [f for f in files if f.size <= docs.MAX_FILE_BYTES]
    stored = stored_copies(client, [f.id for f in sendable])
    outgoing: list[tuple[LocalFile, str]] = []
    for f in sendable:
        change = change_of(f, stored.get(f.id))
        if change == "unchanged":
            status = stored[f.id].status
            # Still indexing from an earlier run (--no-wait): follow it like a new item.
            stage = "unchanged" if status == "completed" else "accepted"
            ledger.entries.append(Entry(f.key, f.id, stage=stage, change=change))
            progress.advance(task)
        else:
            outgoing.append((f, change))
    for batch in docs.batches(outgoing, lambda pair: pair[0].size):
        names = [f.key for f, _ in batch]
        changes = [change for _, change in batch]
        try:
            loaded = [
                Document(f.path.name, f.path.read_bytes(), mimetypes.guess_type(f.path.name)[0]) for f, _ in batch
            ]
            metadata = [{"id": f.id, "additional_metadata": {HASH_FIELD: f.sha256}} for f, _ in batch]
            ledger.accepted(names, client.ingest_files(loaded, metadata=metadata, upsert=upsert), changes)
        except CtxstoreError as err:
            ledger.refused(names, err, changes)
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
    from ctxstore.client import CtxstoreError

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


def _summary(out: Output, ledger: Ledger, where: str, seconds: float, with_files: bool) -> None:
    counts = {
        stage: ledger.count(stage)
        for stage in ("indexed", "unchanged", "errored", "rejected", "refused", "missing", "pending", "accepted")
    }
    files = ledger.changes()
    if out.json:
        report: dict[str, Any] = {"scope": where, "seconds": round(seconds, 2), "counts": counts}
        if with_files:
            report["files"] = files
        out.data({**report, "items": [e.row() for e in ledger.entries]})
        return
    total = len(ledger.entries) - counts["unchanged"]
    taken = total - counts["rejected"] - counts["refused"]
    if with_files:
        out.line(
            f"files: {files['new']} new, {files['updated']} updated, {files['unchanged']} unchanged "
            "(same content as stored: not sent again)"
        )
    if total:
        out.line(f"{taken} of {total} items accepted into {where}; {counts['indexed']} indexed ({seconds:.1f} s)")
    else:
        out.line(f"Nothing to send: every file is stored with this content in {where} already.")
    by_ext = Counter(
        Path(e.name.split(" (")[0]).suffix.lower() or "(none)" for e in ledger.entries if e.stage == "rejected"
    )
    notes = {
        "indexed": "searchable, relations built",
        "unchanged": "already stored with this content; not sent",
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

        Running it again on the same files updates them in place: a file's id comes from its path inside the
        folder given (and the database and collection), and files whose content is already stored are skipped.

        Exit 0 when everything sent was indexed (unsupported formats are reported, and fail only with --strict),
        7 when some items errored or were refused, 8 when the wait timed out.
        """
        roots = list(paths or [])
        missing = [str(p) for p in roots if not p.exists()]
        if missing:
            raise typer.BadParameter(f"no such file or folder: {', '.join(missing)}", param_hint="PATHS")
        from ctxstore.client import documents as docs

        walked = unique(docs.walk(roots, recursive=recursive))
        with connect(ctx, output, database, collection) as (client, out, _):
            files = identify(walked, roots, need_database(client, None), client.collection or "")
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
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
                    _send_files(client, ledger, files, progress, sending, upsert)
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
            _summary(out, ledger, where, time.monotonic() - started, with_files=bool(files))
            if (
                ledger.count("errored")
                or ledger.count("refused")
                or ledger.count("missing")
                or (strict and ledger.count("rejected"))
            ):
                raise typer.Exit(exit_codes.PARTIAL)
            if ledger.count("pending"):
                raise typer.Exit(exit_codes.TIMEOUT)

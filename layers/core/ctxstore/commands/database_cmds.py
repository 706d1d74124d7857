"""`ctxstore database create|list|status|stats|collections|delete`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxstore.commands import exit_codes
from ctxstore.commands.common import OutputOpt, Refused, YesOpt, confirm, connect, need_database

NameArg = Annotated[str | None, typer.Argument(help="Database name (default: the configured database).")]


def _flags(infra: dict[str, Any]) -> list[tuple[str, Any]]:
    vs = infra.get("vectorstore_status") or {}
    return [
        ("scheduler", infra.get("scheduler_status")),
        ("graph", infra.get("graph_status")),
        ("vector store: knowledge", vs.get("knowledge")),
        ("vector store: memories", vs.get("memories")),
    ]


def _read_schema(schema: Path | None) -> Any:
    """The metadata schema file's fields (None without a file)."""
    if schema is None:
        return None
    try:
        return json.loads(schema.read_text())
    except (OSError, ValueError) as exc:
        raise Refused(
            f"cannot read the schema file {schema}: {exc}",
            hint='a JSON list of fields, e.g. [{"name": "team", "data_type": "VARCHAR"}]',
        ) from None


def register(app: typer.Typer) -> None:
    db = typer.Typer(help="Create, inspect and delete databases.", no_args_is_help=True)
    app.add_typer(db, name="database")

    @db.command()
    def create(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="New database name.")],
        schema: Annotated[
            Path | None, typer.Option(help="JSON file with the metadata schema (a list of field definitions).")
        ] = None,
        wait: Annotated[bool, typer.Option(help="Wait until the database is ready for ingestion.")] = True,
        timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait.")] = 60.0,
        output: OutputOpt = None,
    ) -> None:
        """Create a database (provisioned in the background; --wait follows it until ready)."""
        with connect(ctx, output) as (client, out, _):
            created = client.databases.create(name, metadata_schema=_read_schema(schema))
            status = client.databases.wait_ready(name, timeout=timeout) if wait else None
            if out.json:
                out.data(status.raw() if status else created)
            else:
                state = "ready" if status and status.ready else str(created.get("status", "provisioning"))
                out.line(f'Database "{name}" created: {state}.')
            if status is not None and not status.ready:
                raise typer.Exit(exit_codes.TIMEOUT)

    @db.command("list")
    def list_(ctx: typer.Context, output: OutputOpt = None) -> None:
        """Databases this key can see."""
        with connect(ctx, output) as (client, out, _):
            names = client.databases.list()
            if out.json:
                out.data(names)
            else:
                out.table(f"{len(names)} databases", ["database"], [(n,) for n in names])

    @db.command()
    def status(ctx: typer.Context, name: NameArg = None, output: OutputOpt = None) -> None:
        """Readiness of a database (exit 7 while not ready)."""
        with connect(ctx, output) as (client, out, _):
            st = client.databases.status(need_database(client, name))
            if out.json:
                out.data(st.raw())
            else:
                out.table(
                    f'"{st.database}": {"ready" if st.ready else st.status}', ["component", "ready"], _flags(st.infra)
                )
            raise typer.Exit(exit_codes.OK if st.ready else exit_codes.PARTIAL)

    @db.command()
    def stats(ctx: typer.Context, name: NameArg = None, output: OutputOpt = None) -> None:
        """Indexed chunks per store."""
        with connect(ctx, output) as (client, out, _):
            data = client.databases.stats(need_database(client, name))
            if out.json:
                out.data(data)
            else:
                rows = [
                    ("knowledge", (data.get("knowledge_collection") or {}).get("row_count")),
                    ("memory", (data.get("memory_collection") or {}).get("row_count")),
                ]
                out.table(f'"{data.get("database")}"', ["store", "chunks"], rows)

    @db.command()
    def collections(ctx: typer.Context, name: NameArg = None, output: OutputOpt = None) -> None:
        """Collections that hold data in a database ('' is the default collection)."""
        with connect(ctx, output) as (client, out, _):
            names = client.databases.collections(need_database(client, name))
            if out.json:
                out.data(names)
            else:
                out.table(f"{len(names)} collections", ["collection"], [(n or "(default)",) for n in names])

    @db.command()
    def delete(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(help="Database to delete with everything in it.")],
        yes: YesOpt = False,
        output: OutputOpt = None,
    ) -> None:
        """Delete a database and all its data, for good."""
        with connect(ctx, output) as (client, out, _):
            confirm(f'Delete database "{name}" and everything in it?', yes)
            data = client.databases.delete(name)
            if out.json:
                out.data(data)
            else:
                out.line(f'Database "{name}" deleted.')

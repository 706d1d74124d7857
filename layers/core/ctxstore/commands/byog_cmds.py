"""`ctxstore byog query|collections|create|drop`: hosted openCypher graphs."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ctxstore.commands.common import OutputOpt, Refused, YesOpt, confirm, connect

GraphDbOpt = Annotated[str, typer.Option("--database", "-d", help="BYOG database.")]
GraphOpt = Annotated[str, typer.Option("--graph", "-g", help="Graph (collection) inside the database.")]

PARAMS_HINT = 'e.g. -p name=Ada -p born=1815, or --params \'{"name": "Ada"}\''


def _params(pairs: list[str], blob: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if blob:
        try:
            loaded = json.loads(blob)
        except ValueError as exc:
            raise Refused(f"--params is not JSON: {exc}", hint=PARAMS_HINT) from None
        if not isinstance(loaded, dict):
            raise Refused("--params must be a JSON object", hint=PARAMS_HINT)
        params.update(loaded)
    for raw in pairs:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise Refused(f"--param '{raw}' is not name=value", hint=PARAMS_HINT)
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return params


def register(app: typer.Typer) -> None:
    byog = typer.Typer(help="Hosted openCypher graphs (BYOG).", no_args_is_help=True)
    app.add_typer(byog, name="byog")

    @byog.command()
    def query(
        ctx: typer.Context,
        cypher: Annotated[str, typer.Argument(help="One openCypher statement; pass values as $params.")],
        database: GraphDbOpt,
        graph: GraphOpt = "default",
        param: Annotated[
            list[str] | None, typer.Option("--param", "-p", help="name=value (JSON or text), repeatable.")
        ] = None,
        params: Annotated[str | None, typer.Option(help="All parameters as one JSON object.")] = None,
        output: OutputOpt = None,
    ) -> None:
        """Run openCypher against one graph; rows keyed by RETURN alias."""
        with connect(ctx, output) as (client, out, _):
            rows = client.byog.query(database, graph, cypher, _params(param or [], params) or None)
            if out.json:
                out.data(rows)
                return
            columns = list(dict.fromkeys(k for r in rows for k in r))
            cells = [
                [
                    json.dumps(r.get(c), ensure_ascii=False, default=str)
                    if isinstance(r.get(c), dict | list)
                    else r.get(c)
                    for c in columns
                ]
                for r in rows
            ]
            out.table(f"{len(rows)} rows", columns or ["(no columns)"], cells)

    @byog.command()
    def collections(ctx: typer.Context, database: GraphDbOpt, output: OutputOpt = None) -> None:
        """Graphs of a BYOG database."""
        with connect(ctx, output) as (client, out, _):
            names = client.byog.collections(database)
            if out.json:
                out.data(names)
            else:
                out.table(f"{len(names)} graphs", ["graph"], [(n,) for n in names])

    @byog.command()
    def create(
        ctx: typer.Context,
        database: Annotated[str, typer.Argument(help="New BYOG database.")],
        output: OutputOpt = None,
    ) -> None:
        """Create a BYOG database (ready at once)."""
        with connect(ctx, output) as (client, out, _):
            data = client.byog.create_database(database)
            if out.json:
                out.data(data)
            else:
                out.line(f'BYOG database "{database}" is {data.get("status")}.')

    @byog.command()
    def drop(
        ctx: typer.Context,
        database: GraphDbOpt,
        graph: Annotated[str | None, typer.Option("--graph", "-g", help="Drop only this graph.")] = None,
        yes: YesOpt = False,
        output: OutputOpt = None,
    ) -> None:
        """Drop one graph, or the whole BYOG database with every graph."""
        with connect(ctx, output) as (client, out, _):
            what = f'graph "{graph}" of "{database}"' if graph else f'BYOG database "{database}" and all its graphs'
            confirm(f"Drop {what}?", yes)
            data = client.byog.drop_collection(database, graph) if graph else client.byog.drop_database(database)
            if out.json:
                out.data(data)
            else:
                out.line(f"Dropped {what}.")

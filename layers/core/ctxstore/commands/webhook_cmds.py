"""`ctxstore webhooks set|show|delete|deliveries|retry|test`: this key's indexing webhook."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ctxstore.commands.common import OutputOpt, YesOpt, confirm, connect
from ctxstore.commands.output import Output


def _show(out: Output, data: dict[str, Any], title: str | None = None) -> None:
    if out.json:
        out.data(data)
    else:
        out.table(title, ["field", "value"], [(k, v) for k, v in data.items() if k != "message"])


def register(app: typer.Typer) -> None:
    hooks = typer.Typer(help="The indexing webhook of this API key.", no_args_is_help=True)
    app.add_typer(hooks, name="webhooks")

    @hooks.command("set")
    def set_(
        ctx: typer.Context,
        url: Annotated[str, typer.Argument(help="Where to POST indexing.status_changed events.")],
        secret: Annotated[str | None, typer.Option(help="Signing secret to use (16+ characters).")] = None,
        generate_secret: Annotated[bool, typer.Option(help="Generate a signing secret (shown once).")] = False,
        output: OutputOpt = None,
    ) -> None:
        """Register or re-point the webhook (signed with the Standard Webhooks scheme when a secret is set)."""
        with connect(ctx, output) as (client, out, _):
            _show(out, client.webhooks.register(url, signing_secret=secret, generate_signing_secret=generate_secret))

    @hooks.command()
    def show(ctx: typer.Context, output: OutputOpt = None) -> None:
        """The registered webhook, if any."""
        with connect(ctx, output) as (client, out, _):
            _show(out, client.webhooks.get())

    @hooks.command()
    def delete(ctx: typer.Context, yes: YesOpt = False, output: OutputOpt = None) -> None:
        """Remove the webhook."""
        with connect(ctx, output) as (client, out, _):
            confirm("Remove this key's webhook?", yes)
            _show(out, client.webhooks.delete())

    @hooks.command()
    def deliveries(
        ctx: typer.Context,
        status: Annotated[str | None, typer.Option(help="pending, failed, completed or permanently_failed.")] = None,
        limit: Annotated[int | None, typer.Option(min=1, help="Most deliveries.")] = None,
        output: OutputOpt = None,
    ) -> None:
        """Recent deliveries, newest first."""
        with connect(ctx, output) as (client, out, _):
            data = client.webhooks.deliveries(status=status, limit=limit)
            if out.json:
                out.data(data)
                return
            rows = [
                (
                    d.get("delivery_id") or d.get("id"),
                    d.get("status"),
                    d.get("attempts"),
                    d.get("last_status_code"),
                    d.get("created_at"),
                )
                for d in data.get("deliveries", [])
            ]
            out.table(
                f"{len(rows)} deliveries",
                ["delivery", "item", "indexing", "status", "attempts", "error", "created"],
                rows,
            )

    @hooks.command()
    def retry(
        ctx: typer.Context,
        delivery_id: Annotated[str, typer.Argument(help="Delivery to send again.")],
        output: OutputOpt = None,
    ) -> None:
        """Queue a failed delivery again."""
        with connect(ctx, output) as (client, out, _):
            _show(out, client.webhooks.retry(delivery_id))

    @hooks.command()
    def test(ctx: typer.Context, output: OutputOpt = None) -> None:
        """Send a webhook.test event now."""
        with connect(ctx, output) as (client, out, _):
            _show(out, client.webhooks.test())

"""The client verbs of the `ctxstore` command (typer + rich) over ctxstore.client."""

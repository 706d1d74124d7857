"""`python -m ctxstore.cli ...`: the same as the `ctxstore` command."""

from ctxstore.cli import main

raise SystemExit(main())

"""Use cases: ports in, plain data out."""

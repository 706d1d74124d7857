"""Adapters: implementations of the ports, one set per backend."""

"""Protocols the services depend on. Every method takes the organisation first."""

"""Embedded local backend: SQLite, files on disk, embedded FalkorDB."""

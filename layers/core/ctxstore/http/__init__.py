"""HTTP surface: one FastAPI app factory shared by the local server and every Lambda."""

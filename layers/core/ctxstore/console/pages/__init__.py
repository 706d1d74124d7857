"""One module per console page group; each has a `router`."""

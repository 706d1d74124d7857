"""Pure models and rules: no I/O, no SDKs."""

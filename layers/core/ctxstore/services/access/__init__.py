"""Who calls: API keys, the principal a request acts as, and per-key rate limits."""

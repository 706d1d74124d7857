"""Indexing webhooks: the events the service emits, endpoints, signed deliveries and their retries."""

"""Pipeline steps and the local runner that drives them off the durable queue."""

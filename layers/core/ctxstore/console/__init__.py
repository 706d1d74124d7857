"""The web console at /console: server-rendered pages over the same services the API routers call."""

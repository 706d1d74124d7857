"""ctxstore: a context store for AI applications."""

API_VERSION = "2.0.0"

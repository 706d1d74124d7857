"""The Notion provider: provider.py (the ConnectorProvider), info.py (its catalogue entry) and its helpers."""

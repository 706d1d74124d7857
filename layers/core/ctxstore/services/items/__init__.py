"""Items (one stored file, app item or memory; the spec's "source"): records and statuses, ingestion, the catalog
(list, inspect, chunks, delete, metadata), uploads and their locks."""

"""Items (one stored source or memory): records and statuses, ingestion, listing, uploads and their locks."""

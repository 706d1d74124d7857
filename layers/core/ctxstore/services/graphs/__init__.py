"""Both graphs of a scope (entities and items): the ingestion graph step, relations, subgraphs, graph context."""

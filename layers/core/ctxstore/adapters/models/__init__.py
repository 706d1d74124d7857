"""Model adapters: the in-process embedding model and entity extractor, clients of OpenAI-compatible and rerank
endpoints, and the extraction prompt and answer parser AWS's Bedrock extractor shares. They belong to no backend
(a model runs wherever the process runs), so they live apart from `local` (the single-machine engines) and `aws`."""

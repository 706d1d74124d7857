"""Model adapters: the in-process embedding model and entity extractor, and clients of OpenAI-compatible and
rerank endpoints. They belong to no backend (a model runs wherever the process runs), so they live apart from
`local` (the single-machine engines) and `aws`; the AWS functions build the extractors too."""

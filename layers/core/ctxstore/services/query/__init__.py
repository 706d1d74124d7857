"""POST /query: the request, the retrieval lanes and their fusion, the ranking cache."""

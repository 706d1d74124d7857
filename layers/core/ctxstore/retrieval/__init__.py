"""Retrieval: hybrid fusion, reranking, multi-query expansion, auto routing and the graph-context seam."""

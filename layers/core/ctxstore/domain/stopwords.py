"""Lucene's English stop set, shared by keyword search and the query-signal heuristics."""

from __future__ import annotations

# fmt: off
ENGLISH_STOPWORDS = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
])
# fmt: on

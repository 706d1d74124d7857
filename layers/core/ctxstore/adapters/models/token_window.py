"""The token ids the embedder reads of a text: its first `max_tokens` (specials included), tokenized from a prefix.

The tokenizer's cost is linear in characters (~0.2 µs each here) while the model reads only the first
`max_tokens`: a SciFact abstract of 1,600 characters fills MiniLM's 256 tokens after ~1,150. A long text is
tokenized from a prefix cut at a space past CHARS_PER_TOKEN characters a token; when that prefix fills the
window, its words are the text's first words, tokenized alike (the normaliser and pre-tokenizer work per
character and per word), so the ids are those of the whole text. When it does not, the whole text is tokenized
again. Cut only at a space, tab or newline: a control character is deleted by the normaliser and would join the
words around it. `encode_batch_fast` skips the character offsets, which nothing here reads (~20 % less).

That argument is BERT's tokenizer's (BertNormalizer, BertPreTokenizer: MiniLM's); a tokenizer of another kind may
merge across spaces, so it gets whole texts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

CHARS_PER_TOKEN = 6  # SciFact's widest 256-token windows: 1,400 characters left 134 of 5,183 short, 1,600 one
MAX_CHARS = 50_000  # far beyond what a window can hold; spares the tokenizer megabyte-long inputs
_CUT = re.compile("[ \t\n]")


def _prefix(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    space = _CUT.search(text, chars)
    return text[: space.start()] if space is not None and space.start() < MAX_CHARS else text[:MAX_CHARS]


def _bert_like(tokenizer: Any) -> bool:
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    return isinstance(tokenizer.normalizer, BertNormalizer) and isinstance(tokenizer.pre_tokenizer, BertPreTokenizer)


def encode_window(tokenizer: Any, texts: Sequence[str], max_tokens: int) -> list[Any]:
    """`tokenizer` (truncating at `max_tokens`) encodings of `texts`, as the whole texts would give them."""
    if not _bert_like(tokenizer):
        return list(tokenizer.encode_batch_fast([t[:MAX_CHARS] for t in texts]))
    chars = CHARS_PER_TOKEN * max_tokens
    cut = [_prefix(t, chars) for t in texts]
    encodings: list[Any] = tokenizer.encode_batch_fast(cut)
    short = [
        i for i, e in enumerate(encodings) if len(cut[i]) < min(len(texts[i]), MAX_CHARS) and len(e.ids) < max_tokens
    ]
    if short:
        for i, again in zip(short, tokenizer.encode_batch_fast([texts[i][:MAX_CHARS] for i in short]), strict=True):
            encodings[i] = again
    return encodings

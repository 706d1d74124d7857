"""The embedder tokenizes a long text from a prefix: the ids must be exactly those of the whole text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer
from tokenizers.pre_tokenizers import Metaspace

from ctxstore.adapters.models.local_embedder import MINILM_L6_V2, SPECS, model_tokenizer
from ctxstore.adapters.models.token_window import CHARS_PER_TOKEN, MAX_CHARS, encode_window

SCIFACT = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "beir_scifact" / "corpus.jsonl"
WINDOW = 256


class _Counting:
    """The real tokenizer, counting the characters it is given."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._t = tokenizer
        self.chars = 0

    @property
    def normalizer(self) -> Any:
        return self._t.normalizer

    @property
    def pre_tokenizer(self) -> Any:
        return self._t.pre_tokenizer

    def encode_batch_fast(self, texts: list[str]) -> Any:
        self.chars += sum(map(len, texts))
        return self._t.encode_batch_fast(texts)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    tok: Tokenizer = model_tokenizer(SPECS[MINILM_L6_V2])
    assert tok.truncation is not None and tok.truncation["max_length"] == WINDOW
    return tok


def _whole(tokenizer: Tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text[:MAX_CHARS]).ids)


def _ids(tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [list(e.ids) for e in encode_window(tokenizer, texts, WINDOW)]


def test_scifact_abstracts_get_the_whole_texts_ids_from_fewer_characters(tokenizer: Tokenizer) -> None:
    assert SCIFACT.exists(), "../shared/data/beir_scifact is part of the test material (MANIFEST.md)"
    docs = [json.loads(line) for line in SCIFACT.read_text().splitlines()[:1500]]
    texts = [f"{d['title']}\n# {d['title']}\n{d['text']}" for d in docs]
    counting = _Counting(tokenizer)
    got = [list(e.ids) for e in encode_window(counting, texts, WINDOW)]
    assert got == [_whole(tokenizer, t) for t in texts]
    assert counting.chars < 0.9 * sum(map(len, texts))  # the tails past the window were not tokenized


@pytest.mark.parametrize(
    "text",
    [
        "short text",
        "x" * 5000,  # one word, no place to cut
        "antidisestablishmentarianism " * 400,  # long words: the prefix does not fill the window, tokenized again
        "word " * 300 + "\x1c" + "joined " * 500,  # a control character is deleted, joining its neighbours
        ("alpha\u00a0beta " * 300),  # no-break spaces are spaces to the tokenizer, not places to cut here
        "数据" * 3000,  # no spaces at all
        "cell " * 20_000,  # past MAX_CHARS
        "a " * (CHARS_PER_TOKEN * WINDOW // 2) + "tail",  # the cut lands exactly at the window's width
        "naïve café résumé " * 200,  # accents stripped per character
    ],
)
def test_edge_cases_match_the_whole_text(tokenizer: Tokenizer, text: str) -> None:
    assert _ids(tokenizer, [text]) == [_whole(tokenizer, text)]


def test_a_batch_mixes_cut_and_retokenized_texts_in_order(tokenizer: Tokenizer) -> None:
    texts = ["antidisestablishmentarianism " * 400, "short", "word " * 2000, "x" * 3000]
    assert _ids(tokenizer, texts) == [_whole(tokenizer, t) for t in texts]


def test_a_tokenizer_of_another_kind_gets_whole_texts(tokenizer: Tokenizer) -> None:
    # The prefix argument holds for BERT's normaliser and pre-tokenizer; another may merge across spaces.
    other = Tokenizer.from_str(tokenizer.to_str())
    other.pre_tokenizer = Metaspace()
    counting = _Counting(other)
    text = "word " * 2000
    got = [list(e.ids) for e in encode_window(counting, [text], WINDOW)]
    assert got == [list(other.encode(text).ids)] and counting.chars == len(text)

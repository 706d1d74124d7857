"""Every file of the shared parser corpus: accepted ones parse and meet their expectations, rejected ones
are refused by the upload check."""

from __future__ import annotations

import json
from typing import Any

import pytest
from parsing_testlib import PARSER_DOCS, normalise

from ctxstore.parsing import ACCEPTED_EXTENSIONS, REJECTED_EXTENSIONS, classify, parse_document

pytestmark = pytest.mark.skipif(
    not (PARSER_DOCS / "index.json").is_file(), reason=f"shared parser corpus not present at {PARSER_DOCS}"
)


def _load(name: str) -> Any:
    path = PARSER_DOCS / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


INDEX: list[dict[str, Any]] = _load("index.json") or []
EXPECTATIONS: dict[str, dict[str, Any]] = _load("expectations_detail.json")

ACCEPTED = [e["file"] for e in INDEX if "." + e["ext"] in ACCEPTED_EXTENSIONS]
REJECTED = [e["file"] for e in INDEX if "." + e["ext"] in REJECTED_EXTENSIONS]

MUST_PASS = {
    "asserted",
    "groundtruth_output",
    "asserted_ocr",
    "groundtruth_ocr",
    "asserted_via_llm_caption",
    "metadata",
    "asserted_macro",
}
# Expected strings that this copy of the file does not contain anywhere (checked below on the raw bytes and
# the decoded image), so no parser could produce them.
NOT_IN_FILE = {
    "tika/testGIF.gif": "Tika's assertion targets another revision of testGIF.gif; this copy's only comment "
    "block is the ASF licence text (extracted) and the pixels are a photo of a cat",
}
# Metadata the expectation's note names without listing it in must_include.
NOTED_METADATA = {
    "markitdown/test.jpg": [
        "Author: AutoGen Authors",
        "Title: AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation",
        "AutoGen enables diverse LLM-based applications",
        "2024:03:14 22:10:00",
    ],
}
# Files whose correct output is empty, checked as such rather than faked.
KNOWN_EMPTY = {
    "unstructured/empty.txt": "0-byte file",
    "odftoolkit/textTestTemplate.ott": "template whose body is a single empty paragraph",
}
TEXTLESS_IMAGES = {
    "unstructured/example.jpg": "photo of a flower, no text",
    "unstructured/bmp_24.bmp": "three coloured triangles, no text",
    "tika/testWEBP.webp": "photo of a kitten, no text",
    "tika/testBMP.bmp": "photo of a cat, no text",
}


def _parse(rel: str) -> Any:
    name = rel.rsplit("/", 1)[-1]
    ext = classify(name, None)
    assert ext is not None, f"{rel} should be accepted"
    return parse_document(name, (PARSER_DOCS / rel).read_bytes(), ext)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rel", ACCEPTED)
def test_accepted_file_parses_and_meets_expectations(rel: str) -> None:
    doc = _parse(rel)
    expectation = EXPECTATIONS.get(rel)
    text = normalise(doc.text)
    if rel in KNOWN_EMPTY:
        assert doc.text == "", KNOWN_EMPTY[rel]
        return
    if rel in TEXTLESS_IMAGES:
        assert any("no text" in w for w in doc.warnings), TEXTLESS_IMAGES[rel]
        return
    assert doc.text.strip(), f"{rel} parsed to empty text"
    if expectation is None:
        return
    for banned in expectation.get("must_not_include", []):
        assert normalise(banned) not in text, f"{rel} must not contain {banned!r}"
    kind = expectation["kind"]
    for noted in NOTED_METADATA.get(rel, []):
        assert normalise(noted) in text, f"{rel} is missing its metadata {noted!r}"
    if rel in NOT_IN_FILE:
        raw = (PARSER_DOCS / rel).read_bytes()
        for s in expectation.get("must_include", []):
            assert s.encode() not in raw and s.encode("utf-16-le") not in raw, NOT_IN_FILE[rel]
            assert normalise(s) not in text
        return
    if kind == "asserted_empty_without_ocr":
        assert any("OCR" in w for w in doc.warnings), "scanned PDF should have been OCRed"
        return
    assert kind in MUST_PASS, f"unhandled expectation kind {kind}"
    missing = [s for s in expectation.get("must_include", []) if normalise(s) not in text]
    assert not missing, f"{rel} is missing {missing}"


@pytest.mark.parametrize("rel", REJECTED)
def test_rejected_file_is_refused_by_the_upload_check(rel: str) -> None:
    name = rel.rsplit("/", 1)[-1]
    assert classify(name, None) is None


def test_corpus_covers_every_accepted_extension_but_two() -> None:
    seen = {"." + e["ext"] for e in INDEX}
    # No Word 97 template in the corpus (MANIFEST section 5); .markdown is parsed exactly like .md.
    assert ACCEPTED_EXTENSIONS - seen == {".dot", ".markdown"}

"""Text encodings, delimited files and modern iWork documents built on the fly."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from ctxstore.parsing import ParseError, parse_document

SAMPLE = "Grüße aus Köln, naïve café"


@pytest.mark.parametrize(
    "data",
    [
        SAMPLE.encode("utf-8"),
        codecs.BOM_UTF8 + SAMPLE.encode("utf-8"),
        codecs.BOM_UTF16_LE + SAMPLE.encode("utf-16-le"),
        codecs.BOM_UTF16_BE + SAMPLE.encode("utf-16-be"),
        SAMPLE.encode("utf-16-be"),
        SAMPLE.encode("utf-16-le"),
    ],
)
def test_text_encodings_are_detected(data: bytes) -> None:
    assert parse_document("t.txt", data, ".txt").text == SAMPLE


def test_shift_jis_csv_becomes_a_table() -> None:
    data = "名前,年齢,住所\n佐藤太郎,30,東京\n".encode("cp932")
    doc = parse_document("k.csv", data, ".csv")
    assert doc.text == "| 名前 | 年齢 | 住所 |\n|---|---|---|\n| 佐藤太郎 | 30 | 東京 |"
    assert doc.tables == 1


def test_quoted_delimiters_stay_in_their_cell() -> None:
    doc = parse_document("q.csv", b'a,b\n"1,5",2\n', ".csv")
    assert "| 1,5 | 2 |" in doc.text
    assert "| x | y |" in parse_document("t.tsv", b"x\ty\n", ".tsv").text


def test_json_is_pretty_printed_and_invalid_json_is_an_error() -> None:
    doc = parse_document("j.json", json.dumps({"k": ["v", 1]}).encode(), ".json")
    assert '"k": [' in doc.text and doc.text.startswith("```json")
    with pytest.raises(ParseError):
        parse_document("j.json", b"{not json", ".json")


def test_empty_text_file_gives_empty_text() -> None:
    assert parse_document("e.txt", b"", ".txt").text == ""
    assert parse_document("e.md", b"", ".md").text == ""


def test_markdown_passes_through() -> None:
    src = "# Title\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    assert parse_document("m.markdown", src.encode(), ".markdown").text == src


def test_modern_numbers_document_via_numbers_parser(tmp_path: Path) -> None:
    from numbers_parser import Document

    doc = Document(num_header_rows=1, num_header_cols=0, num_rows=3, num_cols=2)
    table = doc.sheets[0].tables[0]
    table.write(0, 0, "Fruit")
    table.write(0, 1, "Count")
    table.write(1, 0, "Apple")
    table.write(1, 1, 7)
    table.write(2, 0, "Pear")
    table.write(2, 1, 12)
    path = tmp_path / "fruit.numbers"
    doc.save(str(path))
    parsed = parse_document("fruit.numbers", path.read_bytes(), ".numbers")
    assert "| Fruit | Count |" in parsed.text
    assert "| Apple | 7 |" in parsed.text and "| Pear | 12 |" in parsed.text
    assert parsed.tables == 1


def test_parsing_imports_no_web_or_cloud_stack() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ctxstore.parsing as p\n"
        "p.parse_document('a.txt', b'hi', '.txt')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('fastapi', 'boto3', 'falkordb', 'starlette')"
        " or m.startswith(('ctxstore.adapters', 'ctxstore.http'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

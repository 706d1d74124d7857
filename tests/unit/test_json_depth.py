"""json_depth counts only structural brackets: brackets inside strings, escaped quotes and backslashes do not count."""

from __future__ import annotations

import json

import pytest

from ctxstore.domain.json_limits import json_depth


@pytest.mark.parametrize(
    ("raw", "depth"),
    [
        (b'"scalar"', 0),
        (b"[[1], {}]", 2),
        (b'["[[[[", "]]]]", {"k": "{{{"}]', 2),
        (rb'["a\"[[[", "b"]', 1),  # an escaped quote does not end the string
        (rb'["a\\", [["b"]]]', 3),  # an escaped backslash does: the brackets after it count
        (rb'["\u005b\u005b", ["x\\\"]"]]', 2),
        (b'["line\nbreak [[", [1]]', 2),
        (b'"unterminated [[[', 3),  # malformed text is measured as is
        ('["caf\u00e9 [[", ["\U0001f600"]]', 2),
    ],
)
def test_only_structural_brackets_count(raw: bytes | str, depth: int) -> None:
    assert json_depth(raw) == depth


def test_a_request_of_app_items_measures_as_its_nesting() -> None:
    items = [{"id": str(i), "title": "T [x]", "content": {"text": 'quote \\" and [[[ brackets ]'}} for i in range(50)]
    assert json_depth(json.dumps(items)) == 3

"""API key names: optional, trimmed, at most 80 printable characters (shown in the console, never a credential)."""

from __future__ import annotations

import pytest

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.services.access.keys import key_name


def test_a_name_is_trimmed_and_may_be_empty() -> None:
    assert key_name("  billing worker ") == "billing worker"
    assert key_name(None) == "" and key_name("") == ""


@pytest.mark.parametrize("bad", ["x" * 81, "tab\there", "line\nbreak"])
def test_a_name_too_long_or_with_control_characters_is_refused(bad: str) -> None:
    with pytest.raises(ApiError) as caught:
        key_name(bad)
    assert caught.value.code == ErrorCode.INVALID_INPUT

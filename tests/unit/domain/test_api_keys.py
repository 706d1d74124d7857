from __future__ import annotations

import pytest

from ctxstore.domain import api_keys


def test_generated_keys_are_well_formed_and_unique() -> None:
    keys = {api_keys.generate().token for _ in range(200)}
    assert len(keys) == 200
    for token in list(keys)[:20]:
        parts = api_keys.split(token)
        assert parts is not None
        prefix, secret = parts
        assert len(prefix) == 12 and len(secret) == 40


def test_hash_and_match() -> None:
    k = api_keys.generate()
    h = api_keys.hash_secret(k.secret)
    assert k.secret not in h
    assert api_keys.matches(k.secret, h)
    assert not api_keys.matches(k.secret + "x", h)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "csk_",
        "csk_abc_def",
        "xsk_aaaaaaaaaaaa_" + "b" * 40,
        "csk_aaaaaaaaaaaa_" + "b" * 31,
        "csk_aaaaaaaaaaa!_" + "b" * 40,
    ],
)
def test_split_rejects_malformed(bad: str) -> None:
    assert api_keys.split(bad) is None


@pytest.mark.parametrize(("text", "seconds"), [("30d", 2592000), ("12h", 43200), ("90s", 90), ("2w", 1209600)])
def test_durations(text: str, seconds: int) -> None:
    assert api_keys.parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "0d", "30", "-1d", "3y", "d"])
def test_bad_durations(bad: str) -> None:
    with pytest.raises(ValueError):
        api_keys.parse_duration(bad)

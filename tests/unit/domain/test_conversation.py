"""Conversation memories are chunked one turn at a time, each with the previous turn as context."""

from __future__ import annotations

from ctxstore.domain.chunking import embedding_input
from ctxstore.domain.conversation import CONTEXT_CHARS, Turn, pair_turns, turn_chunks

PAIRS = [
    {"user": "Did you go to the support group?", "assistant": "Yes, last Saturday. It was so powerful!"},
    {"user": "Great.", "assistant": ""},
]


def test_pairs_become_named_turns_and_empty_sides_are_skipped() -> None:
    assert pair_turns(PAIRS, "Kim") == [
        Turn("Kim", "Did you go to the support group?"),
        Turn("Assistant", "Yes, last Saturday. It was so powerful!"),
        Turn("Kim", "Great."),
    ]
    assert pair_turns(PAIRS[:1], None)[0].speaker == "User"


def test_one_chunk_per_turn_with_the_previous_turn_as_context() -> None:
    chunks = turn_chunks("m1", pair_turns(PAIRS, "Kim"), scope="s")
    assert [c.text for c in chunks] == [
        "Kim: Did you go to the support group?",
        "Assistant: Yes, last Saturday. It was so powerful!",
        "Kim: Great.",
    ]
    assert [c.context for c in chunks] == ["", chunks[0].text, chunks[1].text]
    assert [c.position for c in chunks] == [0, 1, 2]
    # The embedder sees the context; the stored text stays the turn alone.
    assert embedding_input("", chunks[1]) == f"{chunks[0].text}\n{chunks[1].text}"
    assert embedding_input("Trip", chunks[0]) == f"Trip\n{chunks[0].text}"


def test_context_is_part_of_the_id() -> None:
    a = turn_chunks("m1", [Turn("Kim", "Did you go?"), Turn("Bo", "Yes.")])
    b = turn_chunks("m1", [Turn("Kim", "Did you swim?"), Turn("Bo", "Yes.")])
    assert a[1].text == b[1].text
    assert a[1].id != b[1].id  # a new previous turn must give the reply a new vector


def test_long_turn_is_split_and_every_piece_keeps_the_speaker() -> None:
    sentence = "We talked about the garden and the new fence for a long while. "
    chunks = turn_chunks("m1", [Turn("Kim", sentence * 40), Turn("Bo", "Sounds nice.")], size=400)
    kim = [c for c in chunks if c.text.startswith("Kim: ")]
    assert len(kim) >= 3 and all(len(c.text) <= 400 for c in kim)
    assert chunks[-1].text == "Bo: Sounds nice."
    # The context is the end of the previous piece, cut at a word boundary.
    assert 0 < len(chunks[-1].context) <= CONTEXT_CHARS
    assert kim[-1].text.endswith(chunks[-1].context)

"""Conversation memories: one chunk per turn, each embedded with the turn before it as context.

A turn alone is often a fragment whose subject sits in the previous turn ("Yes, last Saturday, it
was so powerful!" answers "Did you go to the support group?"). Packing whole exchanges into
1,200-character chunks returns a page of conversation for one fact; a bare turn loses its subject.
So the stored and keyword-indexed text of a chunk is the turn itself, and its vector is computed
over the end of the previous turn plus the turn (LoCoMo evidence R@10 in `fast`: 0.635 with bare
turns, 0.650 with the previous turn as context; docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore.domain.chunking import DEFAULT_SIZE, Chunk, chunk_id, chunk_markdown

# The context is cut to the previous turn's last few hundred characters (at a word boundary) so the
# turn itself always fits in the embedder's 256-token window.
CONTEXT_CHARS = 400


@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str


def pair_turns(pairs: Sequence[Mapping[str, Any]], user_name: str | None) -> list[Turn]:
    """The turns of `user_assistant_pairs` in order; a side left empty is not a turn."""
    user = user_name or "User"
    turns: list[Turn] = []
    for p in pairs:
        for speaker, text in ((user, p.get("user")), ("Assistant", p.get("assistant"))):
            if isinstance(text, str) and text.strip():
                turns.append(Turn(speaker, text.strip()))
    return turns


def turn_chunks(
    item_id: str, turns: Sequence[Turn], *, scope: str = "", size: int = DEFAULT_SIZE, start: int = 0
) -> list[Chunk]:
    """One chunk per turn ("Speaker: text"); a turn longer than `size` is split and every piece keeps
    the speaker. Each chunk's context is the end of the chunk before it, and is part of its id, so a
    changed previous turn gives a new vector."""
    out: list[Chunk] = []
    context = ""
    for turn in turns:
        label = f"{turn.speaker}: "
        for piece in chunk_markdown("", turn.text, size=max(100, size - len(label)), overlap=0):
            text = label + piece.text
            position = start + len(out)
            out.append(Chunk(chunk_id(item_id, position, f"{context}\x1e{text}", scope), position, text, "", context))
            context = _last_chars(text, CONTEXT_CHARS)
    return out


def _last_chars(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.find(" ", len(text) - limit)
    return text[cut + 1 :] if cut != -1 else text[-limit:]

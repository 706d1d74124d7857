"""Embedder: text to unit-length vectors, computed offline by a model shipped in a package."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # types only: a Lambda function that never embeds need not load numpy
    import numpy as np
    import numpy.typing as npt


class Embedder(Protocol):
    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Shape (len(texts), dim), L2-normalised rows."""
        ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...

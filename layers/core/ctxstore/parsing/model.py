"""Result and error types shared by every format parser, plus the limits that keep parsing bounded."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

# Bounds against decompression bombs and pathological inputs.
MAX_TEXT_CHARS = 20_000_000
MAX_SHEET_CELLS = 2_000_000
MAX_ZIP_UNCOMPRESSED = 512 * 1024 * 1024
MAX_ZIP_MEMBERS = 20_000
MAX_IMAGE_PIXELS = 80_000_000
MAX_OCR_PAGES = 30
DEFAULT_TIME_BUDGET_S = 120.0


class ParseError(Exception):
    """The input could not be parsed (corrupt, renamed, encrypted or over a limit)."""

    def __init__(self, message: str, code: str = "E3001") -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ParsedDocument:
    text: str
    format: str
    pages: int | None = None
    tables: int = 0
    warnings: list[str] = field(default_factory=list)


class Budget:
    """A per-document wall-clock budget, checked cooperatively inside long loops."""

    def __init__(self, seconds: float = DEFAULT_TIME_BUDGET_S) -> None:
        self.deadline = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise ParseError("parse time budget exceeded")


class TextSink:
    """Collects markdown blocks and enforces the extracted-text cap."""

    def __init__(self, limit: int = MAX_TEXT_CHARS) -> None:
        self.blocks: list[str] = []
        self.size = 0
        self.limit = limit
        self.truncated = False
        self.tables = 0

    def add(self, block: str) -> None:
        block = block.strip("\n")
        if not block.strip() or self.truncated:
            return
        if self.size + len(block) > self.limit:
            block = block[: max(0, self.limit - self.size)]
            self.truncated = True
        self.blocks.append(block)
        self.size += len(block) + 2

    @property
    def full(self) -> bool:
        return self.truncated

    def text(self) -> str:
        return "\n\n".join(self.blocks)

    def warnings(self) -> list[str]:
        return [f"text truncated at {self.limit} characters"] if self.truncated else []

"""The local data dir's format version (data_dir/format.json) and the migrations that bring an older one up to it.

Releases up to 2.0.0 wrote no version: a data dir holding records.db but no format.json is format 0. Every start
of the local backend (`serve`, `keys`, `backup`) opens the data dir through `open_data_dir`: it runs the
migrations from the recorded format to `CURRENT` in order, recording each in format.json as it completes (a start
killed midway runs the rest next time; each migration is idempotent, so one interrupted before it was recorded
simply runs again). A data dir written by a newer release, with a format this code does not know, is refused
before anything touches it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

FORMAT_FILE = "format.json"
CURRENT = 2


class DataDirTooNew(RuntimeError):
    """The data dir was written by a newer ctxstore whose format this one cannot read."""


def product_version() -> str:
    try:
        return metadata.version("ctxstore")
    except metadata.PackageNotFoundError:  # a checkout on sys.path without an installed distribution
        from ctxstore import API_VERSION

        return API_VERSION


def _record_format(data_dir: Path) -> None:
    """0 -> 1: nothing changes in the stores; the data dir starts recording its format."""


def _term_first_doc_freqs(data_dir: Path) -> None:
    """1 -> 2: nothing to change here; the search index adds the term-first copy of its document frequencies when it
    opens the file (keyword_df_copy.create). Recorded as a format because a release before it would change `kw_df`
    without taking collections out of the copy's clean set: once written by such a release, the copy would answer
    stale counts, so such a release must refuse the dir."""


# Migration to format N (key) from N - 1. Each must be idempotent: it may run again after a kill.
MIGRATIONS: dict[int, Callable[[Path], None]] = {1: _record_format, 2: _term_first_doc_freqs}


def read_format(data_dir: Path) -> dict[str, Any]:
    """format.json's content; format 0 for a data dir of a release before formats were recorded."""
    try:
        found: dict[str, Any] = json.loads((data_dir / FORMAT_FILE).read_text())
    except FileNotFoundError:
        return {"format": 0, "written_by": "2.0.0 or earlier", "migrations": []}
    return found


def _write_format(data_dir: Path, content: dict[str, Any]) -> None:
    """Atomically (temp file, fsync, rename): a kill leaves the old record or the new, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=data_dir, prefix=".format-")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(content, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, data_dir / FORMAT_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _is_new(data_dir: Path) -> bool:
    return not (data_dir / "records.db").exists() and not (data_dir / FORMAT_FILE).exists()


def check_readable(found: dict[str, Any], where: str) -> None:
    """Refuse a format newer than this code's, naming both releases and both formats."""
    if int(found["format"]) > CURRENT:
        raise DataDirTooNew(
            f"{where} has data-dir format {found['format']} (written by ctxstore {found.get('written_by', '?')}); "
            f"this ctxstore {product_version()} reads formats up to {CURRENT}: install ctxstore "
            f"{found.get('written_by', 'of that release')} or newer to open it"
        )


def open_data_dir(data_dir: Path) -> list[int]:
    """Make `data_dir` ready for this code: record the format of a new one, migrate an older one, refuse a newer
    one. Returns the formats migrated to in this call (empty when there was nothing to do)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if _is_new(data_dir):
        _write_format(data_dir, {"format": CURRENT, "written_by": product_version(), "migrations": []})
        return []
    found = read_format(data_dir)
    check_readable(found, f"data dir {data_dir}")
    done: list[int] = []
    for target in range(int(found["format"]) + 1, CURRENT + 1):
        MIGRATIONS[target](data_dir)
        found = {
            "format": target,
            "written_by": product_version(),
            "migrations": [
                *found.get("migrations", []),
                {"to": target, "by": product_version(), "at": datetime.now(UTC).isoformat(timespec="seconds")},
            ],
        }
        _write_format(data_dir, found)
        done.append(target)
    return done

"""A small real filesystem for tests that fill a disk: a tmpfs mounted under the test's folder (root only, as CI
runs on this machine kind), unmounted afterwards."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def mounted_tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    assert os.geteuid() == 0, "this test mounts a tmpfs: it runs as root, as CI does on this machine kind"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)

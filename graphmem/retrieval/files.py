"""Writing index and cache files so that a crash never leaves half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import numpy as np


@contextmanager
def _replacing(path: str | Path) -> Iterator[BinaryIO]:
    """A temporary file beside ``path`` to write; flushed to disk and renamed into place when the
    block ends without error, so readers see the old file or the new one, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_npz_atomic(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an ``.npz`` at ``path`` atomically."""
    import numpy as np  # here: the text writers' callers need no numpy

    with _replacing(path) as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` at ``path`` atomically."""
    with _replacing(path) as fh:
        fh.write(data)

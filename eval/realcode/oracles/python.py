"""The Python oracle's command: the standard library's ``ast``, run by this interpreter."""

from __future__ import annotations

import sys
from pathlib import Path


def command(cache: Path) -> list[str]:
    """Nothing to prepare: ``ast`` ships with Python."""
    del cache
    return [sys.executable, "-m", "eval.realcode.oracles.python_ast"]

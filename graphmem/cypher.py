"""Locating and reading the ``.cypher`` files the engine loads (``cypher/`` at the project root)."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

from graphmem.errors import ConfigError


@cache
def cypher_dir() -> Path:
    """``$GRAPHMEM_CYPHER_DIR``, else ``cypher/`` shipped inside the package or beside it."""
    env = os.environ.get("GRAPHMEM_CYPHER_DIR")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parent
    candidates += [here / "cypher", here.parent / "cypher"]
    for path in candidates:
        if (path / "schema.cypher").is_file():
            return path
    raise ConfigError("cannot find graphmem's cypher/ folder (set GRAPHMEM_CYPHER_DIR)")


def split_statements(text: str) -> list[str]:
    """Statements of a ``.cypher`` file: ``//`` comment lines dropped, split at ``;`` ending a line."""
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    return [s.strip() for s in re.split(r";\s*(?:\n|$)", body) if s.strip()]


@cache
def read_cypher(name: str) -> str:
    """The text of ``cypher/<name>`` (``name`` may include a sub-folder)."""
    path = (cypher_dir() / name).resolve()
    if cypher_dir().resolve() not in path.parents:
        raise ConfigError(f"not a graphmem cypher file: {name!r}")
    return path.read_text(encoding="utf-8")

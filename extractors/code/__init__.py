"""The code extractor: source files -> files, symbols, imports, inheritance and calls.

Two phases, so parsing can run in worker processes and be cached by content hash:

* :func:`parse_file` turns one file into :class:`FileFacts` (pure, JSON round-trippable);
* :func:`build_graph` resolves names across all files and emits an :class:`Extraction`.

:func:`extract_tree` runs both over a directory, for scripts and tests.
"""

from __future__ import annotations

import os
from pathlib import Path

from extractors.base import Extraction, Skipped
from extractors.code.facts import FACTS_VERSION, CallFact, FileFacts, ImportFact, SymbolFact
from extractors.code.languages import language_for, supports
from extractors.code.parse import parse_file
from extractors.code.resolve import EXTRACTOR, EXTRACTOR_VERSION, build_graph

# Directories that hold dependencies or build output, not the project's own code.
IGNORED_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "vendor", "target", "dist", "build", "__pycache__", ".venv", "venv"}
)


def extract_tree(root: str | os.PathLike[str], *, commit: str | None = None) -> Extraction:
    """Parse every supported file under ``root`` and build its graph (single process)."""
    base = Path(root)
    facts: dict[str, FileFacts] = {}
    skipped: list[Skipped] = []
    for directory, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
        for filename in sorted(filenames):
            full = Path(directory) / filename
            rel = full.relative_to(base).as_posix()
            if not supports(rel):
                continue
            try:
                data = full.read_bytes()
            except OSError as exc:
                skipped.append(Skipped(rel, f"unreadable: {exc}"))
                continue
            facts[rel] = parse_file(rel, data)
    extraction = build_graph(facts, commit=commit)
    extraction.skipped.extend(skipped)
    return extraction


def symbol_ranges(path: str, data: bytes) -> list[tuple[str, int, int]]:
    """``(qualname, start line, end line)`` of every definition in one version of a file, for
    mapping changed lines onto symbols: a key defined more than once (overloads, a property's
    setter) has a tuple for each definition. Empty for a language graphmem does not parse."""
    if not supports(path):
        return []
    return [(s.qualname, start, end) for s in parse_file(path, data).symbols for start, end in s.ranges()]


__all__ = [
    "EXTRACTOR",
    "EXTRACTOR_VERSION",
    "FACTS_VERSION",
    "CallFact",
    "FileFacts",
    "ImportFact",
    "SymbolFact",
    "build_graph",
    "extract_tree",
    "symbol_ranges",
    "language_for",
    "parse_file",
    "supports",
]

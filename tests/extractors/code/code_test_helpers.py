"""Helpers for the code extractor tests (a uniquely named module, unlike conftest)."""

from __future__ import annotations

from pathlib import Path

from extractors.code import FileFacts, parse_file, supports

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_text(rel: str) -> str:
    return (FIXTURES / rel).read_text("utf-8")


def line_of(rel: str, needle: str, occurrence: int = 1) -> int:
    """1-based line of the n-th line of a fixture file containing ``needle``."""
    seen = 0
    for number, line in enumerate(fixture_text(rel).splitlines(), start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{needle!r} not in {rel}")


def parse_tree(root: Path) -> dict[str, FileFacts]:
    facts = {}
    for full in sorted(root.rglob("*")):
        rel = full.relative_to(root).as_posix()
        if full.is_file() and supports(rel):
            facts[rel] = parse_file(rel, full.read_bytes())
    return facts

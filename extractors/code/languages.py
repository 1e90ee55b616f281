"""Which languages the code extractor reads, and lazy access to their grammars and queries.

Grammars and compiled queries are built on first use in each process (parsing runs in worker
processes, and importing this module must stay cheap).
"""

from __future__ import annotations

import functools
import importlib
import re
from importlib import resources

# Extension -> language name. ``go.mod`` is matched by file name, see ``language_for``.
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".java": "java",
    ".rs": "rust",
}
GO_MOD = "go.mod"
# A JavaScript/TypeScript package's manifest: its name and entry points, through which the
# project's own code imports itself ("preact/hooks", a workspace's "@acme/util").
NPM_MANIFEST = "package.json"

# language -> (grammar module, function returning the language pointer, query file stem)
_GRAMMARS: dict[str, tuple[str, str, str]] = {
    "python": ("tree_sitter_python", "language", "python"),
    "javascript": ("tree_sitter_javascript", "language", "javascript"),
    "typescript": ("tree_sitter_typescript", "language_typescript", "typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx", "typescript"),
    "go": ("tree_sitter_go", "language", "go"),
    "java": ("tree_sitter_java", "language", "java"),
    "rust": ("tree_sitter_rust", "language", "rust"),
}

# Languages that resolve modules the same way share a family (TSX imports TS and JS files).
FAMILY: dict[str, str] = {
    "python": "python",
    "javascript": "js",
    "typescript": "js",
    "tsx": "js",
    "go": "go",
    "gomod": "go",
    "npmpackage": "js",
    "java": "java",
    "rust": "rust",
}


MINIFIED_SNIFF_BYTES = 8192


def looks_minified(data: bytes) -> bool:
    """Whether source text is minified or generated: no line break in its first 8 KiB. Its symbols
    say little, and one expression tens of thousands of calls deep costs tree-sitter's queries
    minutes, so such code is recorded, never parsed."""
    head = data[:MINIFIED_SNIFF_BYTES]
    return len(head) == MINIFIED_SNIFF_BYTES and b"\n" not in head and b"\r" not in head


def language_for(path: str) -> str | None:
    """The language of a file from its name, or None when the extractor does not read it."""
    name = path.rsplit("/", 1)[-1]
    if name == GO_MOD:
        return "gomod"
    if name == NPM_MANIFEST:
        return "npmpackage"
    dot = name.rfind(".")
    if dot <= 0 and not name.startswith("."):
        return None
    return EXTENSIONS.get(name[dot:].lower()) if dot >= 0 else None


def supports(path: str) -> bool:
    """Whether the code extractor reads this file."""
    return language_for(path) is not None


@functools.cache
def grammar(language: str):  # -> tree_sitter.Language
    import tree_sitter

    module_name, func_name, _ = _GRAMMARS[language]
    module = importlib.import_module(module_name)
    return tree_sitter.Language(getattr(module, func_name)())


@functools.cache
def query_source(language: str) -> str:
    """The language's query, with the files it includes (a line ``; include: ecmascript``) after
    it: patterns JavaScript and TypeScript share live once."""
    stem = _GRAMMARS[language][2]
    text = _query_file(stem)
    return text + "".join("\n" + _query_file(name) for name in re.findall(r"^; include: (\w+)$", text, re.MULTILINE))


def _query_file(stem: str) -> str:
    return resources.files("extractors.code").joinpath("queries").joinpath(f"{stem}.scm").read_text("utf-8")


@functools.cache
def query(language: str):  # -> tree_sitter.Query
    import tree_sitter

    return tree_sitter.Query(grammar(language), query_source(language))


def parser(language: str):  # -> tree_sitter.Parser
    """A parser for the language; cached per process because parsers are cheap to reuse."""
    return _parser(language)


@functools.cache
def _parser(language: str):
    import tree_sitter

    return tree_sitter.Parser(grammar(language))

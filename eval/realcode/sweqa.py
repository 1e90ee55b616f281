"""SWE-QA questions as graphmem datasets, with file-level silver labels.

SWE-QA (peng-weihan/SWE-QA-Bench, ``Benchmark/<repo>.jsonl``) pairs a question about a real
repository with a free-text reference answer and nothing else: no gold files. The answers do cite
code, though: paths (``src/_pytest/fixtures.py``, ``/workspace/conan/api/...``), dotted modules
(``_pytest.fixtures``), and names of classes and functions. This module turns those citations into
``file:<path>`` keys of one release tree, keeping a citation only when it names exactly one file of
that tree, so a label is never a guess between two candidates. Questions with no such citation are
dropped. Code inside fenced blocks is not read (only a fence's header, which often carries the path):
a snippet's calls are the answer's material, not what it points at.

    python -m eval.realcode.sweqa --benchmark pytest.jsonl --tree /tmp/pytest-8.4.1 \\
        --repo pytest --manifest eval/realcode/repos/pytest.json --out eval/realcode/sweqa/pytest.jsonl
"""

from __future__ import annotations

import argparse
import ast
import builtins
import fnmatch
import functools
import importlib
import json
import keyword
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

CODE_SUFFIXES = (".py", ".pyi")
# Names that read as code but point at Python itself, never at the project.
_NOT_PROJECT = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | frozenset(sys.stdlib_module_names)
# Standard-library modules whose members answers name bare (``defaultdict``, ``Enum``, ``Path``).
_STDLIB_MEMBER_MODULES = ("collections", "typing", "functools", "itertools", "dataclasses", "enum", "abc",
                          "contextlib", "pathlib")
# Methods of built-in types: a lone ``append`` or ``get`` in an answer is almost never the project's own.
_GENERIC = frozenset(n for t in (object, str, bytes, int, list, tuple, dict, set, frozenset) for n in dir(t))
# Leading receivers that say nothing about where a method lives.
_RECEIVERS = frozenset({"self", "cls", "super", "mcs", "obj"})
# A dotted token whose last part is one of these is a file name (``tox.ini``), not a module chain.
_FILE_EXTENSIONS = frozenset(
    "py pyi pyc cfg ini toml txt rst md json yaml yml html htm js css po mo sql cpp c h sh bat rc in "
    "lock log csv xml svg png jinja j2 tex sty tmpl".split())

_FENCE = re.compile(r"```([^\n`]*)\n(.*?)(?:```|\Z)", re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
# A path-like token: ends in a code suffix or contains a slash (directories, URLs).
_PATH = re.compile(r"(?<![\w./-])(?:[\w./-]*[\w-]\.pyi?(?!\w)|[\w.-]*(?:/[\w.-]+)+/?)")
_CHAIN = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")
_DUNDER = re.compile(r"__\w+__\Z")


@functools.cache
def _stdlib_members() -> frozenset[str]:
    return frozenset(n for m in _STDLIB_MEMBER_MODULES for n in dir(importlib.import_module(m)))


def distinctive(name: str) -> bool:
    """A single name that could not be an ordinary word: snake_case or CamelCase with an inner capital."""
    return "_" in name.strip("_") or name.startswith("_") or bool(re.search(r"[a-z][A-Z]|[A-Z]{2}[a-z]", name))


@dataclass
class TreeIndex:
    """What a release tree defines: its code files, modules, definitions and top-level names."""

    paths: frozenset[str]
    modules: dict[str, str]                    # dotted module -> path (unambiguous names only)
    qualnames: dict[str, set[str]]             # qualname or any dotted tail of one -> paths
    attributes: dict[str, set[str]]            # the same for assigned names (``Class.attr``, ``CONSTANT``)
    parameters: dict[str, set[str]]            # parameter name -> paths of functions taking it
    top: dict[str, dict[str, tuple[str, str | None] | None]] = field(default_factory=dict)
    packages: frozenset[str] = frozenset()     # first parts of package modules (``_pytest``, ``sphinx``)

    def module_path(self, dotted: str) -> str | None:
        return self.modules.get(dotted)

    def resolve_path(self, token: str) -> str | None:
        """A cited path as the one tree file it names, trying shorter tails for clone prefixes."""
        parts = [p for p in token.replace("\\", "/").split("/") if p not in ("", ".")]
        for start in range(len(parts)):
            tail = "/".join(parts[start:])
            hits = [p for p in self.paths if p == tail or p.endswith("/" + tail)]
            if hits:
                # The longest tail that names anything decides: a shorter one would only add guesses.
                return hits[0] if len(hits) == 1 else None
        return None

    def resolve_name(self, module: str, name: str, depth: int = 0) -> str | None:
        """The file that defines ``name`` as seen from ``module``, following re-exports."""
        path = self.modules.get(module)
        if path is None or depth > 8:
            return None
        entry = self.top.get(path, {}).get(name, False)
        if entry is False:
            return self.modules.get(f"{module}.{name}")
        if entry is None:
            return path
        source, attr = entry
        if attr is None:
            return self.modules.get(source)
        return (self.modules.get(f"{source}.{attr}") or self.resolve_name(source, attr, depth + 1)
                or self.modules.get(source))

    def resolve_symbol(self, parts: Sequence[str]) -> set[str]:
        """Files defining a class or function with this dotted tail; a file that only assigns the
        name (``longrepr = ...``) makes it ambiguous too, since the answer may mean that one."""
        key = ".".join(parts)
        defined = self.qualnames.get(key, set())
        return defined | self.attributes.get(key, set()) if defined else set()


def _module_names(paths: Iterable[str]) -> dict[str, str]:
    """Dotted module names of code files: rooted at the topmost package, plus the plain dotted path."""
    code = sorted(paths)
    inits = {p.rsplit("/", 1)[0] if "/" in p else "" for p in code
             if p.rsplit("/", 1)[-1] in ("__init__.py", "__init__.pyi")}
    names: dict[str, set[str]] = defaultdict(set)
    for path in code:
        stem = path.rsplit(".", 1)[0]
        parts = stem.split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts or not all(_IDENT.match(p) for p in parts):
            continue
        names[".".join(parts)].add(path)
        directory = path.rsplit("/", 1)[0] if "/" in path else ""
        top = len(path.split("/")) - 1  # index of the first part inside the package chain
        while directory and directory in inits:
            top -= 1
            directory = directory.rsplit("/", 1)[0] if "/" in directory else ""
        rooted = path.split("/")[top:]
        rooted[-1] = rooted[-1].rsplit(".", 1)[0]
        if rooted[-1] == "__init__":
            rooted = rooted[:-1]
        if rooted:
            names[".".join(rooted)].add(path)
    out = {}
    for name, where in names.items():
        py = {p for p in where if p.endswith(".py")} or where  # a stub beside its module is the same module
        if len(py) == 1:
            out[name] = next(iter(py))
    return out


def _definitions(tree: ast.Module) -> Iterator[str]:
    """Qualnames of classes and functions: the dotted nesting of named definitions."""
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = f"{prefix}{child.name}"
                yield qualname
                stack.append((child, qualname + "."))
            elif not isinstance(child, (ast.expr, ast.Lambda)):
                stack.append((child, prefix))


def _assigned(tree: ast.Module) -> Iterator[str]:
    """Qualnames of assigned names: module constants, class attributes, ``self.x`` in methods."""
    stack: list[tuple[ast.AST, str, str]] = [(tree, "", "")]  # node, qualname prefix, enclosing class
    while stack:
        node, prefix, klass = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                stack.append((child, f"{prefix}{child.name}.", f"{prefix}{child.name}."))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.append((child, f"{prefix}{child.name}.", klass if prefix == klass else ""))
            elif isinstance(child, (ast.Assign, ast.AnnAssign)):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for target in targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and (not prefix or prefix == klass):
                            yield f"{prefix}{sub.id}"
                        elif (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                              and sub.value.id == "self" and klass):
                            yield f"{klass}{sub.attr}"
            elif not isinstance(child, (ast.expr, ast.Lambda)):
                stack.append((child, prefix, klass))


def _top_names(tree: ast.Module, module: str, is_package: bool) -> dict[str, tuple[str, str | None] | None]:
    """Module-level names: None when defined here, (module, attr) when imported (attr None: a module)."""
    out: dict[str, tuple[str, str | None] | None] = {}
    body: list[ast.stmt] = list(tree.body)
    while body:
        stmt = body.pop(0)
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = None
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        out[node.id] = None
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    out[alias.asname] = (alias.name, None)
                else:
                    head = alias.name.split(".")[0]
                    out.setdefault(head, (head, None))
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (stmt.level - 1)] if stmt.level > 1 else package
                base = ".".join([*package, *([stmt.module] if stmt.module else [])])
            for alias in stmt.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(stmt, (ast.If, ast.Try)):
            # ``if TYPE_CHECKING:`` and ``try: import x`` still define module-level names.
            body.extend(stmt.body)
            body.extend(getattr(stmt, "orelse", []))
            for handler in getattr(stmt, "handlers", []):
                body.extend(handler.body)
    return out


def index_tree(root: Path, exclude: Sequence[str] = ()) -> TreeIndex:
    """Index the code files under ``root`` (POSIX paths relative to it), leaving out ``exclude`` globs."""
    paths = []
    for file in root.rglob("*"):
        rel = file.relative_to(root).as_posix()
        if file.is_file() and rel.endswith(CODE_SUFFIXES) and not any(fnmatch.fnmatch(rel, g) for g in exclude):
            paths.append(rel)
    modules = _module_names(paths)
    module_of = {path: name for name, path in modules.items()}
    # Prefer the package-rooted name (``_pytest.fixtures``) over the path-shaped alias (``src._pytest.fixtures``).
    for name, path in modules.items():
        if len(name) < len(module_of[path]):
            module_of[path] = name
    qualnames: dict[str, set[str]] = defaultdict(set)
    attributes: dict[str, set[str]] = defaultdict(set)
    parameters: dict[str, set[str]] = defaultdict(set)
    top: dict[str, dict[str, tuple[str, str | None] | None]] = {}
    for path in sorted(paths):
        try:
            parsed = ast.parse((root / path).read_bytes())
        except (SyntaxError, ValueError):
            continue  # test data that is broken on purpose; its path still counts
        for node in ast.walk(parsed):
            if isinstance(node, ast.arguments):
                for arg in (*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg):
                    if arg is not None:
                        parameters[arg.arg].add(path)
        for names, found in ((qualnames, _definitions(parsed)), (attributes, _assigned(parsed))):
            for qualname in found:
                parts = qualname.split(".")
                for start in range(len(parts)):
                    names[".".join(parts[start:])].add(path)
        if path in module_of:
            top[path] = _top_names(parsed, module_of[path], path.rsplit("/", 1)[-1].startswith("__init__."))
    packages = frozenset(name.split(".")[0] for name, path in modules.items()
                         if path.rsplit("/", 1)[-1].startswith("__init__.") and "." not in name)
    return TreeIndex(frozenset(paths), modules, dict(qualnames), dict(attributes), dict(parameters),
                     top, packages)


@dataclass(frozen=True)
class Mention:
    """One piece of an answer that may point at code."""

    text: str
    kind: Literal["path", "chain"]
    whole: bool      # the whole inline-code span was this one name, so a plain word is still meant as code


def mentions(answer: str) -> list[Mention]:
    """Paths and dotted names an answer cites, in order; code inside fenced blocks is skipped."""
    out: list[Mention] = []
    pieces: list[tuple[str, bool]] = []
    last = 0
    for fence in _FENCE.finditer(answer):
        pieces.append((answer[last:fence.start()], False))
        pieces.append((fence.group(1), True))
        last = fence.end()
    pieces.append((answer[last:], False))
    for text, header in pieces:
        if header:
            out.extend(Mention(m.group(0), "path", False) for m in _PATH.finditer(text))
            continue
        spans = [(m.start(), m.end(), m.group(1)) for m in _INLINE.finditer(text)]
        position = 0
        for start, end, code in [*spans, (len(text), len(text), None)]:
            out.extend(_scan(text[position:start], inline=False))
            if code is not None:
                out.extend(_scan(code, inline=True))
            position = end
    return out


def _scan(text: str, inline: bool) -> Iterator[Mention]:
    stripped = text.strip().lstrip("@").removesuffix("()")
    for match in _PATH.finditer(text):
        yield Mention(match.group(0), "path", False)
    rest = _PATH.sub(" ", text)
    for match in _CHAIN.finditer(rest):
        chain = match.group(0)
        parts = chain.split(".")
        if parts[-1].lower() in _FILE_EXTENSIONS and len(parts) > 1:
            continue
        if not inline and not (any(distinctive(p) for p in parts) or len(parts) > 1):
            continue  # a plain word in prose is prose
        yield Mention(chain, "chain", inline and chain == stripped)


def cited_files(answer: str, index: TreeIndex) -> list[str]:
    """Tree files the answer cites, in order of first citation."""
    found: list[str] = []
    for mention in mentions(answer):
        path = (_path_file(mention.text, index) if mention.kind == "path"
                else _chain_file(mention.text.split("."), index, mention.whole))
        if path and path not in found:
            found.append(path)
    return found


def _path_file(token: str, index: TreeIndex) -> str | None:
    token = re.sub(r"^[a-z]+://[^/]+", "", token)  # a URL's host is not part of the tree
    if token.endswith(CODE_SUFFIXES):
        hit = index.resolve_path(token)
        if hit:
            return hit
        # A module that became a package since (``sphinx/ext/autodoc.py`` -> ``.../autodoc/__init__.py``).
        token = token.rsplit(".", 1)[0]
    parts = [p for p in token.split("/") if p not in ("", ".", "..")]
    # A directory named by path is its package (``sphinx/builders/html/``).
    for start in range(len(parts) - 1):
        if all(_IDENT.match(p) for p in parts[start:]):
            hit = index.module_path(".".join(parts[start:]))
            if hit:
                return hit
    return None


def _chain_file(parts: list[str], index: TreeIndex, whole: bool) -> str | None:
    while parts and parts[0] in _RECEIVERS:
        parts = parts[1:]
        whole = False
    if not parts or (parts[0] in _NOT_PROJECT and parts[0] not in index.packages):
        return None
    # A module path, possibly followed by a name inside it (``_pytest.fixtures.FixtureDef``).
    for k in range(len(parts), 0, -1):
        module = ".".join(parts[:k])
        if index.module_path(module) is None or (k == 1 and len(parts) == 1):
            continue
        if k == len(parts):
            return index.module_path(module)
        hit = index.resolve_name(module, parts[k])
        if hit:
            return hit
        if k > 1:
            return index.module_path(module)
        # The name is not visible in the package (``pkg.helper`` from some test data): read the
        # rest as a name on its own, which then has to be distinctive.
        parts, whole = parts[1:], False
        break
    # A definition: the longest tail ending at the last part (``Class.method``, ``var.method``),
    # then the longest head (``ExitCode.OK``: ``OK`` is an attribute, ``ExitCode`` the class).
    candidates = [parts[i:] for i in range(len(parts))] + [parts[:j] for j in range(len(parts) - 1, 0, -1)]
    for candidate in candidates:
        plain_word = False
        if len(candidate) == 1:
            name = candidate[0]
            if _DUNDER.match(name) or name in _NOT_PROJECT or name in _GENERIC or name in _stdlib_members():
                continue
            plain_word = not distinctive(name)
            if plain_word and not (whole and len(parts) == 1):
                continue  # a plain word counts only as the whole of a code span
        files = index.resolve_symbol(candidate)
        if not files:
            continue
        if len(files) > 1:
            return None
        # A plain word that some other file takes as a parameter (``metadata``, ``scope``) is
        # more likely that argument than the one function of the name.
        if plain_word and index.parameters.get(candidate[0], set()) - files:
            return None
        return next(iter(files))
    return None


def convert(rows: Iterable[dict[str, Any]], index: TreeIndex, repo: str) -> tuple[list[dict[str, Any]], int]:
    """Dataset lines for the rows whose answer cites at least one tree file; also the rows read.

    Ids are ``<repo>-<n>`` with ``n`` the row's 1-based place in the benchmark file, so a kept
    question can be traced back even after others were dropped.
    """
    out = []
    total = 0
    for n, row in enumerate(rows, start=1):
        total += 1
        gold = cited_files(str(row.get("answer", "")), index)
        question = str(row.get("question", "")).strip()
        if not gold or not question:
            continue
        category = row.get("category") or row.get("type") or "question"
        out.append({"id": f"{repo}-{n}", "question": question, "gold": [f"file:{p}" for p in gold],
                    "type": f"sweqa-{category}", "repo": repo})
    return out, total


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.realcode.sweqa", description=__doc__.split("\n")[0])
    parser.add_argument("--benchmark", type=Path, required=True, help="SWE-QA Benchmark/<repo>.jsonl")
    parser.add_argument("--tree", type=Path, required=True,
                        help="the release's unpacked tree (top directory stripped)")
    parser.add_argument("--repo", required=True, help="manifest name, used in ids and the repo field")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--manifest", type=Path, help="repos/<name>.json whose exclude globs the tree obeys")
    args = parser.parse_args(argv)
    exclude: list[str] = []
    if args.manifest:
        exclude = list(json.loads(args.manifest.read_text(encoding="utf-8")).get("exclude") or [])
    index = index_tree(args.tree, exclude)
    lines, total = convert(read_jsonl(args.benchmark), index, args.repo)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    print(f"{args.repo}: {len(lines)} of {total} questions kept", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Python oracle: definitions and certain calls of a source tree, read with the standard
library's ``ast`` (nothing shared with graphmem's tree-sitter extractor).

``python -m eval.realcode.oracles.python_ast ROOT`` prints the JSON object of
``eval/realcode/README.md``. A call is kept only when its target is certain: a function of the
same module, a name or module imported from a module of the tree, or ``self.m()`` / ``cls.m()``
on a method the enclosing class itself defines.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".tox", ".venv", "build", "dist"})


@dataclass(slots=True)
class Module:
    path: str
    name: str  # dotted module name
    is_package: bool
    tree: ast.Module
    source: str
    top: dict[str, str] = field(default_factory=dict)  # top-level function/class name -> qualname
    classes: dict[str, set[str]] = field(default_factory=dict)  # class qualname -> method names


def is_test(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (any(p in ("tests", "test", "testing") for p in parts[:-1]) or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py")


def module_names(path: str) -> list[str]:
    """Dotted names a file may be imported by: from the root and from a ``src/`` or ``lib/`` layout."""
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    names = [".".join(parts)] if parts else []
    if len(parts) > 1 and parts[0] in ("src", "lib"):
        names.append(".".join(parts[1:]))
    return names


def first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    para = doc.strip().split("\n\n", 1)[0]
    return " ".join(para.split())


def load(root: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root).as_posix()
        if any(part in SKIP_DIRS or part.startswith(".") for part in rel.split("/")[:-1]):
            continue
        try:
            source = file.read_text(encoding="utf-8")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(source, filename=rel)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        names = module_names(rel)
        if not names:
            continue
        mod = Module(rel, names[0], rel.endswith("__init__.py"), tree, source)
        for name in names:
            modules.setdefault(name, mod)
    return modules


class _Definitions(ast.NodeVisitor):
    def __init__(self, mod: Module) -> None:
        self.mod = mod
        self.stack: list[tuple[str, ast.AST]] = []
        self.out: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, ast.AST] = {}

    def _add(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
        qual = ".".join([name for name, _ in self.stack] + [node.name])
        parent = self.stack[-1][1] if self.stack else None
        if isinstance(node, ast.ClassDef):
            kind, signature = "class", f"class {node.name}"
            if node.bases:
                signature += "(" + ", ".join(ast.unparse(b) for b in node.bases) + ")"
        else:
            kind = "method" if isinstance(parent, ast.ClassDef) else "function"
            prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
            signature = f"{prefix} {node.name}({ast.unparse(node.args)})"
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        text = ast.get_source_segment(self.mod.source, node) or ""
        if qual not in self.out:  # overloads and redefinitions share one key; the first stands
            self.out[qual] = {
                "path": self.mod.path, "qualname": qual, "name": node.name, "kind": kind,
                "container": ".".join(n for n, _ in self.stack) if kind == "method" else None,
                "start_line": start, "end_line": node.end_lineno or node.lineno,
                "doc": first_paragraph(ast.get_docstring(node)), "signature": signature,
                "body_sha": hashlib.sha1(text.encode("utf-8")).hexdigest(), "test": is_test(self.mod.path)}
            self.nodes[qual] = node
        if not self.stack:
            self.mod.top.setdefault(node.name, qual)
        if isinstance(node, ast.ClassDef):
            self.mod.classes.setdefault(qual, set())
        elif isinstance(parent, ast.ClassDef):
            self.mod.classes.setdefault(".".join(n for n, _ in self.stack), set()).add(node.name)
        return qual

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._add(node)
        self.stack.append((node.name, node))
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _visit_def  # noqa: N815


def _resolve_from(mod: Module, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    base = mod.name.split(".")
    if not mod.is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(mod: Module, modules: dict[str, Module]) -> tuple[dict[str, str], dict[str, Module]]:
    """Top-level names bound by imports from the tree: name -> 'path::qualname', alias -> module."""
    names: dict[str, str] = {}
    mods: dict[str, Module] = {}
    for node in mod.tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = modules.get(alias.name)
                if target is not None and alias.asname:
                    mods[alias.asname] = target
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(mod, node)
            if base is None:
                continue
            for alias in node.names:
                local = alias.asname or alias.name
                sub = modules.get(f"{base}.{alias.name}")
                if sub is not None:
                    mods[local] = sub
                    continue
                src = modules.get(base)
                if src is not None and alias.name in src.top:
                    names[local] = f"{src.path}::{src.top[alias.name]}"
    return names, mods


def _calls(mod: Module, defs: _Definitions, modules: dict[str, Module],
           known: set[str]) -> set[tuple[str, str]]:
    imported, imported_mods = _imports(mod, modules)
    # A top-level name bound more than once (a def and an import, two defs) is not certain.
    bound: dict[str, int] = {}
    for node in mod.tree.body:
        targets: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            targets = [node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                targets += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
        for name in targets:
            bound[name] = bound.get(name, 0) + 1
    out: set[tuple[str, str]] = set()
    for qual, fn in defs.nodes.items():
        if isinstance(fn, ast.ClassDef):
            continue
        info = defs.out[qual]
        local_names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        local_names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        first_arg = fn.args.posonlyargs[0].arg if fn.args.posonlyargs else (fn.args.args[0].arg if fn.args.args else None)
        owner = info["container"]
        for node in _own_body(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            target = None
            if isinstance(f, ast.Name) and f.id not in local_names and bound.get(f.id, 0) == 1:
                if f.id in mod.top and mod.top[f.id] in defs.out and defs.out[mod.top[f.id]]["kind"] == "function":
                    target = f"{mod.path}::{mod.top[f.id]}"
                elif f.id in imported:
                    target = imported[f.id]
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                base = f.value.id
                if owner and base == first_arg and base in ("self", "cls") and f.attr in mod.classes.get(owner, set()):
                    target = f"{mod.path}::{owner}.{f.attr}"
                elif base in imported_mods and base not in local_names and bound.get(base, 0) == 1:
                    sub = imported_mods[base]
                    if f.attr in sub.top:
                        target = f"{sub.path}::{sub.top[f.attr]}"
            if target and target in known and not target.split("::")[1].split(".")[-1][:1].isupper():
                out.add((f"{mod.path}::{qual}", target))
    return out


def _own_body(fn: ast.AST) -> list[ast.AST]:
    """Nodes inside a function but not inside the definitions nested in it (those own their calls)."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if isinstance(node, ast.Lambda):
                continue
            todo.extend(node.decorator_list)
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def analyse(root: Path) -> dict[str, Any]:
    modules = load(root)
    unique = {id(m): m for m in modules.values()}
    per_mod = {}
    for mod in sorted(unique.values(), key=lambda m: m.path):
        visitor = _Definitions(mod)
        visitor.visit(mod.tree)
        per_mod[mod.path] = (mod, visitor)
    definitions = [d for _, v in per_mod.values() for d in v.out.values()]
    known = {f"{d['path']}::{d['qualname']}" for d in definitions}
    calls: set[tuple[str, str]] = set()
    for mod, visitor in per_mod.values():
        calls |= _calls(mod, visitor, modules, known)
    return {"language": "python",
            "definitions": sorted(definitions, key=lambda d: (d["path"], d["start_line"], d["qualname"])),
            "calls": [{"caller": a, "callee": b} for a, b in sorted(calls)]}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m eval.realcode.oracles.python_ast ROOT", file=sys.stderr)
        return 2
    json.dump(analyse(Path(argv[0])), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

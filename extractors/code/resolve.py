"""Phase two: the facts of every file -> graph nodes, relationships and chunks.

Resolution links names across files: imports to the files and symbols they name, base classes to
their definitions, call sites to the functions they call. Definitions are indexed once (by file,
module path, package and name), so each lookup is a few dictionary probes. A call is linked only
when the project defines its target; everything else stays on the caller as an unresolved name.
"""

from __future__ import annotations

import builtins
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from extractors.base import Extraction
from extractors.code.chunks import file_chunks, symbol_chunks
from extractors.code.facts import FileFacts, ImportFact, SymbolFact
from extractors.code.languages import FAMILY
from graphmem.model import CLASS_KINDS, Node, Provenance, Relationship, RelType, file_key, symbol_key

EXTRACTOR = "code"
EXTRACTOR_VERSION = "1"
MAX_UNRESOLVED_CALLS = 100
MAX_RESOLVE_DEPTH = 6

# How sure each way of resolving a name is.
CONFIDENCE = {
    "same_module": 0.95,
    "enclosing_scope": 0.95,
    "self_method": 0.95,
    "import": 0.9,
    "module_attribute": 0.9,
    "class_member": 0.9,
    "same_package": 0.9,
    "super_method": 0.9,
    "inherited_method": 0.85,
    "attribute_type": 0.8,
    "local_type": 0.8,
    "wildcard_import": 0.75,
    "return_type": 0.75,
    "unique_name": 0.4,
    # A Go type whose methods include an interface's, by name: it implements it (types are not compared).
    "method_set": 0.7,
}

_SELF_NAMES = {
    "python": frozenset({"self", "cls"}),
    "js": frozenset({"this"}),
    "java": frozenset({"this"}),
    "rust": frozenset({"self", "Self"}),
    "go": frozenset(),
}
_DROPPED_BARE_CALLS = {
    "python": frozenset(n for n in dir(builtins) if not n.startswith("_")) | {"super"},
    "go": frozenset(
        "append cap clear close complex copy delete imag len make max min new panic print println real recover".split()
    ),
    "js": frozenset(
        "require super parseInt parseFloat setTimeout setInterval clearTimeout Map Set WeakMap Date Error"
        " Promise RegExp URL Number String Boolean Symbol".split()
    ),
    "java": frozenset({"super", "this"}),
    "rust": frozenset({"Some", "Ok", "Err", "Box::new", "Vec::new", "String::from", "String::new"}),
}
_DROPPED_CALL_ROOTS = {"js": frozenset({"console", "JSON", "Math", "Object", "Array", "Promise"})}
# Method names too common to guess a target from the name alone.
_COMMON_METHOD_NAMES = frozenset(
    """get set put add run call apply bind then catch finally append extend insert remove pop push
    shift unshift clear copy update items keys values map filter reduce join split strip format
    read write open close load save send start stop init next close flush size length len equals
    hashCode toString String Error log info debug warn error emit on off handle process execute
    create delete find list parse render build reset sort count contains has exec fetch apply""".split()
)
_TYPE_WRAPPERS = frozenset(
    """Optional List Dict Set Tuple Sequence Iterable Iterator Mapping Union Type Final ClassVar
    Annotated Awaitable Coroutine Box Rc Arc RefCell Cell Mutex RwLock Vec Option Result Promise
    Array ReadonlyArray Partial Readonly list dict set tuple type""".split()
)
_CALL_RESULT_MEMBER = re.compile(r"^(?:new )?([A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*)\([^()]*\)(?:\.|::)([A-Za-z_$][\w$]*)$")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*")
_JS_EXTENSIONS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_ROOT_PREFIXES = ("", "src/")


@dataclass(frozen=True, slots=True)
class Target:
    """What a name resolves to: a file (``qualname`` empty), a Go package (``package_dir``), or a symbol."""

    path: str
    qualname: str = ""
    package_dir: str | None = None

    @property
    def is_symbol(self) -> bool:
        return bool(self.qualname)


@dataclass(slots=True)
class _Found:
    target: Target
    how: str
    confidence: float


@dataclass(slots=True)
class _Bindings:
    names: dict[str, _Found] = field(default_factory=dict)
    wildcards: list[_Found] = field(default_factory=list)
    # Names bound to something outside the project (a library): never guessed at.
    external: set[str] = field(default_factory=set)
    # file -> import edges: dst key -> (confidence, lines)
    edges: dict[str, tuple[float, set[int]]] = field(default_factory=dict)


class ProjectIndex:
    """Definitions of the whole project, indexed for fast name resolution."""

    def __init__(self, files: Mapping[str, FileFacts]) -> None:
        self.files = files
        self.symbols: dict[str, dict[str, SymbolFact]] = {
            path: {s.qualname: s for s in facts.symbols} for path, facts in files.items()
        }
        self.family = {path: FAMILY.get(facts.language, facts.language) for path, facts in files.items()}
        self._bindings: dict[str, _Bindings] = {}
        self._bases: dict[Target, list[Target]] = {}
        self._type_cache: dict[tuple[str, str], Target | None] = {}
        self._resolving: set[tuple[str, str]] = set()
        self._prefixes: dict[str, set[str]] = {}
        self._index_python()
        self._index_go()
        self._index_java()
        self._index_rust()
        self._index_npm()
        self._index_names()

    # --- indexes -------------------------------------------------------------------------------

    def _index_python(self) -> None:
        self.py_modules: dict[str, str] = {}
        py_paths = [p for p, fam in self.family.items() if fam == "python"]
        packages = {posixpath.dirname(p) for p in py_paths if p.endswith("/__init__.py")}
        for path in py_paths:
            parts = _python_module_parts(path)
            self.py_modules.setdefault(".".join(parts), path)
            # Also the name relative to the top of its package chain (src/ layouts, nested roots).
            directory = posixpath.dirname(path)
            depth = 0
            while directory and directory in packages:
                directory = posixpath.dirname(directory)
                depth += 1
            root_len = len(directory.split("/")) if directory else 0
            if root_len:
                rel = parts[root_len:]
                if rel:
                    self.py_modules.setdefault(".".join(rel), path)

    def _index_npm(self) -> None:
        # Package name -> (its folder, its entry points), longest name first: "preact/hooks" is
        # the hooks entry of "preact" unless a package is named so itself.
        found = [(facts.package, posixpath.dirname(path), facts.entries) for path, facts in self.files.items()
                 if facts.language == "npmpackage" and facts.package]
        self.npm_packages = sorted(found, key=lambda item: (-len(item[0]), item[1]))

    def npm_module(self, spec: str) -> str | None:
        """The source file a bare import of the project's own package names ("preact",
        "preact/hooks", "@acme/util/strings"): the entry its manifest gives, read back from built
        output to source ("./hooks/dist/hooks.mjs" is hooks/src/...), else the usual places of a
        package's source."""
        for name, root, entries in self.npm_packages:
            if spec != name and not spec.startswith(name + "/"):
                continue
            sub = spec[len(name) + 1:]
            stems: list[str] = []
            for target in entries.get("./" + sub if sub else ".", []):
                stems += _source_stems(posixpath.normpath(posixpath.join(root, target)))
            where = posixpath.join(root, sub) if sub else root
            stems += [posixpath.join(root, "src", sub) if sub else posixpath.join(root, "src", "index"),
                      posixpath.join(where, "src", "index"), where if sub else posixpath.join(root, "index")]
            for stem in dict.fromkeys(stems):
                for candidate in _js_candidates(stem):
                    if candidate in self.files and self.family.get(candidate) == "js" \
                            and self.files[candidate].language != "npmpackage":
                        return candidate
            return None
        return None

    def _index_go(self) -> None:
        self.go_dirs: dict[str, list[str]] = defaultdict(list)
        self.go_mods: list[tuple[str, str]] = []
        for path, facts in self.files.items():
            if facts.language == "go":
                self.go_dirs[posixpath.dirname(path)].append(path)
            elif facts.language == "gomod" and facts.package:
                self.go_mods.append((posixpath.dirname(path), facts.package))
        # A directory stands for the package its importers get: its first file is one of that
        # package, not of its external tests (``package toml_test`` in ``audit_test.go``), whose
        # name an import would otherwise bind ("toml.Marshal" then resolved to nothing).
        for paths in self.go_dirs.values():
            paths.sort(key=lambda p: (p.endswith("_test.go") or self.files[p].package.endswith("_test"), p))
        # Longest module prefix first, so nested modules win.
        self.go_dir_suffixes: dict[str, list[str]] = defaultdict(list)
        for directory in self.go_dirs:
            parts = directory.split("/") if directory else []
            for i in range(len(parts)):
                self.go_dir_suffixes["/".join(parts[i:])].append(directory)

    def _index_java(self) -> None:
        self.java_fqn: dict[str, Target] = {}
        self.java_packages: dict[str, dict[str, Target]] = defaultdict(dict)
        for path, facts in self.files.items():
            if facts.language != "java":
                continue
            for symbol in facts.symbols:
                if symbol.kind not in CLASS_KINDS:
                    continue
                target = Target(path, symbol.qualname)
                fqn = f"{facts.package}.{symbol.qualname}" if facts.package else symbol.qualname
                self.java_fqn.setdefault(fqn, target)
                if symbol.parent is None:
                    self.java_packages[facts.package].setdefault(symbol.name, target)

    def _index_rust(self) -> None:
        rust_paths = [p for p, fam in self.family.items() if fam == "rust"]
        roots = {
            posixpath.dirname(p) for p in rust_paths if posixpath.basename(p) in ("lib.rs", "main.rs")
        }
        self.rust_module_of: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.rust_files: dict[tuple[str, tuple[str, ...]], str] = {}
        for path in rust_paths:
            directory = posixpath.dirname(path)
            root = directory
            while root and root not in roots:
                root = posixpath.dirname(root)
            if root not in roots:
                root = directory
            rel = path[len(root) + 1 :] if root else path
            parts = rel[:-3].split("/")
            if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
                parts = parts[:-1]
            module = (root, tuple(parts))
            self.rust_module_of[path] = module
            self.rust_files.setdefault(module, path)

    def _index_names(self) -> None:
        self.by_qualname: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.callables_by_name: dict[tuple[str, str], list[Target]] = defaultdict(list)
        # Rust: `impl Trait for Type` recorded in any file of the crate.
        self.extra_bases: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        # Other names a module binds to its definitions (`export const persist = persistImpl`):
        # path -> alias -> the definition's qualname.
        self.aliases: dict[str, dict[str, str]] = defaultdict(dict)
        for path, facts in self.files.items():
            family = self.family[path]
            for symbol in facts.symbols:
                self.by_qualname[(family, symbol.qualname)].append(path)
                for alias in symbol.aliases:
                    self.aliases[path].setdefault(alias, symbol.qualname)
                if symbol.kind in ("function", "method"):
                    self.callables_by_name[(family, symbol.name)].append(Target(path, symbol.qualname))
            for type_name, base in facts.extra_bases:
                self.extra_bases[(family, type_name)].append((path, base))

    # --- helpers -------------------------------------------------------------------------------

    def symbol(self, target: Target) -> SymbolFact | None:
        return self.symbols.get(target.path, {}).get(target.qualname) if target.qualname else None

    def is_class(self, target: Target) -> bool:
        symbol = self.symbol(target)
        return symbol is not None and symbol.kind in CLASS_KINDS

    def _package_files(self, path: str) -> list[str]:
        """Files sharing a namespace with ``path`` without imports (Go package, Rust crate impls)."""
        family = self.family.get(path)
        if family == "go":
            package = self.files[path].package
            return [p for p in self.go_dirs.get(posixpath.dirname(path), []) if self.files[p].package == package]
        return [path]

    def member(self, owner: Target, name: str, depth: int = 0) -> tuple[Target, bool] | None:
        """``owner.name``: a nested definition, a method (also inherited), or a module attribute.

        Returns the target and whether it came from a base class.
        """
        if depth > MAX_RESOLVE_DEPTH:
            return None
        if owner.package_dir is not None:
            for path in self.go_dirs.get(owner.package_dir, []):
                if name in self.symbols.get(path, {}):
                    return Target(path, name), False
            return None
        qualname = f"{owner.qualname}.{name}" if owner.qualname else name
        if qualname in self.symbols.get(owner.path, {}):
            return Target(owner.path, qualname), False
        if not owner.qualname:
            return self._module_attribute(owner.path, name)
        family = self.family.get(owner.path)
        # Go methods and Rust impls may sit in other files of the package or crate.
        if family == "go":
            for path in self._package_files(owner.path):
                if qualname in self.symbols.get(path, {}):
                    return Target(path, qualname), False
        elif family == "rust":
            root = self.rust_module_of.get(owner.path, ("", ()))[0]
            for path in self.by_qualname.get((family, qualname), []):
                if self.rust_module_of.get(path, ("", ()))[0] == root:
                    return Target(path, qualname), False
        for base in self.bases(owner):
            found = self.member(base, name, depth + 1)
            if found is not None:
                return found[0], True
        return None

    def _module_attribute(self, path: str, name: str) -> tuple[Target, bool] | None:
        """A name a module offers besides its definitions: a submodule or a re-exported import."""
        if path.endswith("/__init__.py"):
            directory = posixpath.dirname(path)
            for candidate in (f"{directory}/{name}.py", f"{directory}/{name}/__init__.py"):
                if candidate in self.files:
                    return Target(candidate), False
        bound = self.bindings(path).names.get(name)
        if bound is not None:
            return bound.target, False
        return None

    def bases(self, owner: Target) -> list[Target]:
        cached = self._bases.get(owner)
        if cached is not None:
            return cached
        self._bases[owner] = []  # guards against cycles while resolving
        symbol = self.symbol(owner)
        found: list[Target] = []
        if symbol is not None:
            declared = [(owner.path, base) for base in symbol.bases]
            family = self.family[owner.path]
            declared += self.extra_bases.get((family, symbol.qualname), []) if family == "rust" else []
            for path, base in declared:
                target = self.resolve_type(path, base)
                if target is not None and target != owner and target not in found:
                    found.append(target)
        self._bases[owner] = found
        return found

    # --- imports -------------------------------------------------------------------------------

    def bindings(self, path: str) -> _Bindings:
        cached = self._bindings.get(path)
        if cached is not None:
            return cached
        result = _Bindings()
        self._bindings[path] = result  # re-exports may lead back here
        family = self.family[path]
        binder = {
            "python": self._bind_python,
            "js": self._bind_js,
            "go": self._bind_go,
            "java": self._bind_java,
            "rust": self._bind_rust,
        }.get(family)
        if binder is not None:
            for fact in self.files[path].imports:
                binder(path, fact, result)
        return result

    def _edge(self, result: _Bindings, target: Target, confidence: float, line: int) -> None:
        if target.package_dir is not None:
            keys = [file_key(p) for p in self.go_dirs.get(target.package_dir, []) if not p.endswith("_test.go")]
        elif target.qualname:
            keys = [symbol_key(target.path, target.qualname)]
        else:
            keys = [file_key(target.path)]
        for key in keys:
            old_conf, lines = result.edges.get(key, (0.0, set()))
            lines.add(line)
            result.edges[key] = (max(old_conf, confidence), lines)

    def _bind(self, result: _Bindings, name: str, target: Target, confidence: float, how: str = "import") -> None:
        if name and name not in result.names:
            result.names[name] = _Found(target, how, confidence)

    def _export(self, module: Target, name: str, depth: int = 0) -> _Found | None:
        """What ``name`` means when imported from ``module``: a definition or a re-export there."""
        found = self.member(module, name)
        if found is not None:
            return _Found(found[0], "import", 1.0)
        if not module.qualname and name in self.aliases.get(module.path, {}):
            return _Found(Target(module.path, self.aliases[module.path][name]), "import", 1.0)
        if depth < 3 and not module.qualname and module.package_dir is None:
            inner = self.bindings(module.path)
            again = inner.names.get(name)
            if again is not None:
                return _Found(again.target, "import", again.confidence)
            for wildcard in inner.wildcards:
                deeper = self._export(wildcard.target, name, depth + 1)
                if deeper is not None:
                    return deeper
        return None

    def python_module(self, path: str, module: str, level: int) -> tuple[str | None, float]:
        if level:
            base = posixpath.dirname(path).split("/") if posixpath.dirname(path) else []
            if level - 1 > len(base):
                return None, 0.0
            base = base[: len(base) - (level - 1)]
            parts = base + (module.split(".") if module else [])
            stem = "/".join(parts)
            for candidate in (f"{stem}.py", f"{stem}/__init__.py" if stem else "__init__.py", f"{stem}.pyi"):
                if candidate in self.files:
                    return candidate, 1.0
            return None, 0.0
        found = self.py_modules.get(module)
        return (found, 0.95) if found else (None, 0.0)

    def _bind_python(self, path: str, fact: ImportFact, result: _Bindings) -> None:
        if fact.kind != "from":
            module_path, conf = self.python_module(path, fact.module, 0)
            local = fact.alias or fact.module
            if module_path is None:
                result.external.add(local.split(".")[0])
                return
            self._edge(result, Target(module_path), conf, fact.line)
            self._bind(result, local, Target(module_path), conf)
            return
        module_path, conf = self.python_module(path, fact.module, fact.level)
        if fact.wildcard and module_path:
            self._edge(result, Target(module_path), conf, fact.line)
            result.wildcards.append(_Found(Target(module_path), "wildcard_import", conf))
            return
        for name, alias in fact.names:
            local = alias or name
            # `from pkg import sub` may name a submodule.
            sub_module = f"{fact.module}.{name}" if fact.module else name
            sub_path, sub_conf = self.python_module(path, sub_module, fact.level)
            if sub_path is not None and sub_path != path:
                self._edge(result, Target(sub_path), sub_conf, fact.line)
                self._bind(result, local, Target(sub_path), sub_conf)
                continue
            if module_path is None:
                result.external.add(local)
                continue
            found = self._export(Target(module_path), name)
            if found is not None:
                self._edge(result, found.target, conf * found.confidence, fact.line)
                self._bind(result, local, found.target, conf * found.confidence)
            else:
                self._edge(result, Target(module_path), conf, fact.line)

    def js_module(self, path: str, spec: str) -> tuple[str | None, float]:
        if spec.startswith("."):
            stem = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
            if stem.startswith(".."):
                return None, 0.0
            bases, conf = [stem], 1.0
        else:
            # Bare specifiers are packages: the project's own by its manifest's name, else another
            # one, unless the project maps them to its own tree.
            if own := self.npm_module(spec):
                return own, 0.9
            spec = spec[2:] if spec.startswith("@/") or spec.startswith("~/") else spec
            bases, conf = [prefix + spec for prefix in _ROOT_PREFIXES], 0.6
        for base in bases:
            for candidate in _js_candidates(base):
                if candidate in self.files and self.family.get(candidate) == "js":
                    return candidate, conf
        return None, 0.0

    def _bind_js(self, path: str, fact: ImportFact, result: _Bindings) -> None:
        module_path, conf = self.js_module(path, fact.module)
        if module_path is None:
            result.external.update(alias or name for name, alias in fact.names)
            if fact.alias:
                result.external.add(fact.alias)
            return
        module = Target(module_path)
        if fact.wildcard:
            result.wildcards.append(_Found(module, "wildcard_import", conf))
        if fact.alias or not fact.names:
            self._edge(result, module, conf, fact.line)
            self._bind(result, fact.alias, module, conf)
        for name, alias in fact.names:
            local = alias or name
            if name == "default":
                default = self.files[module_path].default_export
                found = self._export(module, default) if default else None
            else:
                found = self._export(module, name)
            if found is not None:
                self._edge(result, found.target, conf * found.confidence, fact.line)
                self._bind(result, local, found.target, conf * found.confidence)
            else:
                self._edge(result, module, conf, fact.line)
                if name == "default":
                    self._bind(result, local, module, conf)

    def go_package(self, import_path: str) -> tuple[str | None, float]:
        for mod_dir, module in self.go_mods:
            if import_path == module or import_path.startswith(module + "/"):
                rel = import_path[len(module) + 1 :]
                directory = posixpath.join(mod_dir, rel) if mod_dir else rel
                directory = directory.rstrip("/")
                if directory in self.go_dirs:
                    return directory, 1.0
        if import_path in self.go_dirs:
            return import_path, 0.8
        # Without go.mod: a remote-looking path whose tail matches a directory of the project.
        parts = import_path.split("/")
        if "." not in parts[0]:
            return None, 0.0
        for i in range(1, len(parts)):
            candidates = self.go_dir_suffixes.get("/".join(parts[i:]), [])
            if len(candidates) == 1:
                return candidates[0], 0.7 if len(parts) - i > 1 else 0.5
        return None, 0.0

    def _bind_go(self, path: str, fact: ImportFact, result: _Bindings) -> None:
        directory, conf = self.go_package(fact.module)
        default_name = fact.module.rsplit("/", 1)[-1]
        if directory is None:
            result.external.add(fact.alias or default_name)
            return
        target = Target(path=self.go_dirs[directory][0], package_dir=directory)
        self._edge(result, target, conf, fact.line)
        if fact.alias == ".":
            result.wildcards.append(_Found(target, "wildcard_import", conf))
        elif fact.alias != "_":
            declared = self.files[self.go_dirs[directory][0]].package
            self._bind(result, fact.alias or declared or default_name, target, conf)

    def _bind_java(self, path: str, fact: ImportFact, result: _Bindings) -> None:
        if fact.wildcard:
            classes = self.java_packages.get(fact.module)
            if classes:
                for name, target in classes.items():
                    result.names.setdefault(name, _Found(target, "wildcard_import", 0.85))
                return
            owner = self.java_fqn.get(fact.module)
            if owner is not None:  # static import of all members
                self._edge(result, owner, 0.9, fact.line)
                result.wildcards.append(_Found(owner, "wildcard_import", 0.85))
            return
        name = fact.module.rsplit(".", 1)[-1]
        target = self.java_fqn.get(fact.module)
        if target is None and "." in fact.module:
            owner = self.java_fqn.get(fact.module.rsplit(".", 1)[0])
            found = self.member(owner, name) if owner is not None else None
            target = found[0] if found is not None else None
        if target is None:
            result.external.add(name)
            return
        self._edge(result, target, 0.95, fact.line)
        self._bind(result, name, target, 0.95)

    def rust_path(self, path: str, segments: list[str]) -> tuple[Target, float] | None:
        """Resolve a Rust path (``crate::a::B``, ``super::f``, ``m::f``) from ``path``'s module."""
        root, current = self.rust_module_of.get(path, ("", ()))
        head, rest = segments[0], segments[1:]
        conf = 1.0
        if head == "crate":
            module = ()
        elif head == "self":
            module = current
        elif head == "super":
            module = current[:-1]
            while rest and rest[0] == "super":
                module, rest = module[:-1], rest[1:]
        elif (root, current + (head,)) in self.rust_files:
            module, rest = current + (head,), rest
        elif (root, (head,)) in self.rust_files:
            module, rest, conf = (head,), rest, 0.8
        else:
            return None
        file_path = self.rust_files.get((root, module))
        if file_path is None:
            return None
        target = Target(file_path)
        for i, segment in enumerate(rest):
            deeper = self.rust_files.get((root, module + (segment,))) if not target.qualname else None
            if deeper is not None:
                module, target = module + (segment,), Target(deeper)
                continue
            found = self.member(target, segment)
            if found is None:
                if not target.qualname:
                    # Maybe a name the module itself imports (`pub use`).
                    bound = self.bindings(target.path).names.get(segment)
                    if bound is not None and i == len(rest) - 1:
                        return bound.target, conf * bound.confidence
                return None
            target = found[0]
        return target, conf

    def _bind_rust(self, path: str, fact: ImportFact, result: _Bindings) -> None:
        segments = [s for s in fact.module.split("::") if s]
        if not segments:
            return
        found = self.rust_path(path, segments)
        local = fact.alias or segments[-1]
        if found is None:
            if segments[0] not in ("crate", "self", "super"):
                result.external.add(local)
            return
        target, conf = found
        self._edge(result, target, conf, fact.line)
        if fact.wildcard:
            result.wildcards.append(_Found(target, "wildcard_import", conf * 0.9))
        else:
            self._bind(result, local, target, conf)

    # --- names, types, calls -------------------------------------------------------------------

    def resolve_name(self, path: str, scope: str, name: str) -> _Found | None:
        """A bare name used inside ``scope`` (a qualname, or "" for module level) of ``path``."""
        symbols = self.symbols.get(path, {})
        family = self.family[path]
        prefix = scope
        while prefix:
            owner = symbols.get(prefix)
            qualname = f"{prefix}.{name}"
            # Class bodies are not enclosing scopes, except in Java where methods see members.
            if owner is not None and (owner.kind not in CLASS_KINDS or family == "java"):
                if qualname in symbols:
                    how = "self_method" if owner.kind in CLASS_KINDS else "enclosing_scope"
                    return _Found(Target(path, qualname), how, CONFIDENCE[how])
                if family == "java" and owner.kind in CLASS_KINDS:
                    inherited = self.member(Target(path, prefix), name)
                    if inherited is not None:
                        how = "inherited_method" if inherited[1] else "self_method"
                        return _Found(inherited[0], how, CONFIDENCE[how])
            prefix = prefix.rpartition(".")[0]
        if name in symbols:
            return _Found(Target(path, name), "same_module", CONFIDENCE["same_module"])
        if name in self.aliases.get(path, {}):
            return _Found(Target(path, self.aliases[path][name]), "same_module", CONFIDENCE["same_module"])
        bindings = self.bindings(path)
        bound = bindings.names.get(name)
        if bound is not None:
            how = bound.how if bound.how != "import" else "import"
            return _Found(bound.target, how, min(bound.confidence, CONFIDENCE.get(how, 0.9)))
        if family == "go":
            for other in self._package_files(path):
                if other != path and name in self.symbols.get(other, {}):
                    return _Found(Target(other, name), "same_package", CONFIDENCE["same_package"])
        elif family == "java":
            target = self.java_packages.get(self.files[path].package, {}).get(name)
            if target is not None:
                return _Found(target, "same_package", CONFIDENCE["same_package"])
        for wildcard in bindings.wildcards:
            found = self._export(wildcard.target, name) if not wildcard.target.qualname else None
            if found is None and (wildcard.target.qualname or wildcard.target.package_dir):
                member = self.member(wildcard.target, name)
                found = _Found(member[0], "import", 1.0) if member else None
            if found is not None:
                return _Found(found.target, "wildcard_import", wildcard.confidence * found.confidence)
        return None

    def resolve_type(self, path: str, type_text: str, self_class: Target | None = None) -> Target | None:
        """The class-like symbol a type annotation (or ``()callee``, a producing call) names."""
        key = (path, type_text)
        cacheable = self_class is None and "Self" not in type_text
        if cacheable and key in self._type_cache:
            return self._type_cache[key]
        if key in self._resolving:
            return None
        self._resolving.add(key)
        try:
            result = self._resolve_type(path, type_text, self_class)
        finally:
            self._resolving.discard(key)
        if cacheable:
            self._type_cache[key] = result
        return result

    def _resolve_type(self, path: str, type_text: str, self_class: Target | None) -> Target | None:
        if type_text.startswith("()"):
            found = self.resolve_callee(path, "", type_text[2:], {}, self_class)
            if found is None:
                return None
            target = found.target
            if self.is_class(target):
                return target
            symbol = self.symbol(target)
            if symbol is None or not symbol.returns:
                return None
            # A factory's declared return type, read where the factory is defined.
            owner = self.enclosing_class(target.path, target.qualname)
            return self.resolve_type(target.path, symbol.returns, owner)
        for candidate in _IDENT.findall(type_text):
            parts = [p for p in re.split(r"\.|::", candidate) if p]
            if not parts or candidate in ("typing", "mut", "dyn", "impl"):
                continue
            if parts == ["Self"]:
                return self_class
            nested = self._nested_type(self_class, parts) if self_class is not None else None
            if nested is not None:
                return nested
            found = self.resolve_parts(path, "", parts, {}, self_class)
            if found is not None and self.is_class(found.target):
                return found.target
            # A wrapper ("Optional[Foo]", "Vec<Foo>") stands for what it wraps, unless the project
            # defines a class of that name (commons-cli's ``Option``, a ``Result`` of its own).
            if parts[-1] in _TYPE_WRAPPERS:
                continue
            return None
        return None

    def _nested_type(self, owner: Target, parts: list[str]) -> Target | None:
        """A type named from inside ``owner`` by its simple name: a class nested in ``owner`` or
        in a class enclosing it (Java's ``Builder`` inside ``AbstractHelpFormatter``)."""
        symbols = self.symbols.get(owner.path, {})
        scope = owner.qualname
        while scope:
            qualname = ".".join([scope, *parts])
            symbol = symbols.get(qualname)
            if symbol is not None and symbol.kind in CLASS_KINDS:
                return Target(owner.path, qualname)
            scope = scope.rpartition(".")[0]
        return None

    def enclosing_class(self, path: str, scope: str) -> Target | None:
        symbols = self.symbols.get(path, {})
        prefix = scope.rpartition(".")[0] if scope in symbols else scope
        while prefix:
            symbol = symbols.get(prefix)
            if symbol is not None and symbol.kind in CLASS_KINDS:
                return Target(path, prefix)
            if symbol is None and self.family[path] in ("go", "rust") and "." not in prefix:
                # Methods of a type defined in another file of the package or crate.
                return self.resolve_type(path, prefix)
            prefix = prefix.rpartition(".")[0]
        return None

    def _functions(self, path: str, scope: str) -> Iterator[SymbolFact]:
        """The function-like symbols ``scope`` lies in, innermost (``scope`` itself) first."""
        symbols = self.symbols.get(path, {})
        prefix = scope
        while prefix:
            symbol = symbols.get(prefix)
            if symbol is not None and symbol.kind not in CLASS_KINDS:
                yield symbol
            prefix = prefix.rpartition(".")[0]

    def locals_for(self, path: str, scope: str) -> dict[str, str]:
        """Variable types visible in ``scope``: its own, enclosing functions', then module-level."""
        merged: dict[str, str] = {}
        for symbol in self._functions(path, scope):
            for name, type_text in symbol.locals.items():
                merged.setdefault(name, type_text)
        for name, type_text in self.files[path].module_vars.items():
            merged.setdefault(name, type_text)
        return merged

    def rebound_for(self, path: str, scope: str) -> dict[str, list[list[Any]]]:
        """The names bound more than once in ``scope`` or an enclosing function (the innermost
        function's bindings of a name), as ``SymbolFact.rebound`` holds them."""
        out: dict[str, list[list[Any]]] = {}
        for symbol in self._functions(path, scope):
            for name, bindings in symbol.rebound.items():
                out.setdefault(name, bindings)
        return out

    def resolve_callee(
        self,
        path: str,
        scope: str,
        callee: str,
        local_types: Mapping[str, str] | None = None,
        self_class: Target | None = None,
    ) -> _Found | None:
        text = callee
        if text.startswith("new "):
            text = text[4:]
        if text.startswith("super()."):
            text = "super." + text[len("super().") :]
        if "(" in text or "[" in text:
            return self._call_result_member(path, scope, text, local_types, self_class)
        parts = [p for p in re.split(r"\.|::", text) if p]
        if not parts:
            return None
        if local_types is None:
            local_types = self.locals_for(path, scope)
        found = self.resolve_parts(path, scope, parts, local_types, self_class)
        if found is not None and found.target.qualname:
            # A constructor named like its class (Java) stands for the class being built.
            owner, _, name = found.target.qualname.rpartition(".")
            if owner and owner.rpartition(".")[2] == name:
                found = _Found(Target(found.target.path, owner), found.how, found.confidence)
        return found

    def _call_result_member(
        self,
        path: str,
        scope: str,
        text: str,
        local_types: Mapping[str, str] | None,
        self_class: Target | None,
    ) -> _Found | None:
        """``make().method`` / ``new Foo().method``: a method on what a project call returns."""
        match = _CALL_RESULT_MEMBER.match(text)
        if match is None:
            return None
        produced = self.resolve_type(path, "()" + match.group(1), self_class or self.enclosing_class(path, scope))
        if produced is None:
            return None
        found = self.member(produced, match.group(2))
        if found is None:
            return None
        return _Found(found[0], "return_type", CONFIDENCE["return_type"])

    def resolve_parts(
        self,
        path: str,
        scope: str,
        parts: list[str],
        local_types: Mapping[str, str],
        self_class: Target | None = None,
    ) -> _Found | None:
        family = self.family[path]
        head = parts[0]
        if len(parts) == 1:
            return self.resolve_name(path, scope, head)
        start: _Found | None = None
        if head in _SELF_NAMES.get(family, ()) or (head == "super" and len(parts) > 1):
            owner = self_class or self.enclosing_class(path, scope)
            if owner is None and head == "this":
                owner = self._namespace(path, scope.rpartition(".")[0])
            if owner is None:
                return None
            if head == "super":
                for base in self.bases(owner):
                    found = self.member(base, parts[1])
                    if found is not None:
                        return self._walk(
                            _Found(found[0], "super_method", CONFIDENCE["super_method"]), parts[2:], path
                        )
                return None
            start = _Found(owner, "self_method", CONFIDENCE["self_method"])
        elif head in local_types:
            owner = self.resolve_type(path, local_types[head], self.enclosing_class(path, scope))
            if owner is None:
                return None
            start = _Found(owner, "local_type", CONFIDENCE["local_type"])
        elif family == "java" and self._java_field_owner(path, scope, head) is not None:
            # Java methods name their class's fields without `this.`.
            owner = self._java_field_owner(path, scope, head)
            start = _Found(owner, "self_method", CONFIDENCE["self_method"])
            return self._walk(start, parts, path)
        elif family == "rust" and head in ("crate", "super", "self"):
            found = self.rust_path(path, parts)
            if found is None:
                return None
            return _Found(found[0], "import", CONFIDENCE["import"] * found[1])
        else:
            bindings = self.bindings(path)
            # Python binds dotted module names (`import a.b`): take the longest bound prefix.
            for cut in range(len(parts) - 1, 1, -1):
                bound = bindings.names.get(".".join(parts[:cut]))
                if bound is not None:
                    conf = min(bound.confidence, CONFIDENCE["module_attribute"])
                    return self._walk(_Found(bound.target, "module_attribute", conf), parts[cut:], path)
            start = self.resolve_name(path, scope, head)
            if start is None:
                namespace = self._namespace(path, head)
                if namespace is None:
                    return None
                return self._walk(_Found(namespace, "class_member", CONFIDENCE["class_member"]), parts[1:], path)
            if not start.target.is_symbol or start.target.package_dir is not None:
                start = _Found(start.target, "module_attribute", min(start.confidence, CONFIDENCE["module_attribute"]))
            else:
                start = _Found(start.target, "class_member", min(start.confidence, CONFIDENCE["class_member"]))
        return self._walk(start, parts[1:], path)

    def _namespace(self, path: str, name: str) -> Target | None:
        """``name`` as the object a JavaScript module assigns its functions to (``res`` of
        ``res.send = function send() {}``): no symbol itself, but the prefix of some in the file."""
        if self.family[path] != "js" or not name:
            return None
        prefixes = self._prefixes.get(path)
        if prefixes is None:
            prefixes = self._prefixes[path] = {q.rpartition(".")[0] for q in self.symbols.get(path, {})}
        if name in self.symbols.get(path, {}) or name not in prefixes:
            return None
        return Target(path, name)

    def _java_field_owner(self, path: str, scope: str, name: str) -> Target | None:
        owner = self.enclosing_class(path, scope)
        if owner is None or self._field_type(owner, name) is None:
            return None
        return owner

    def _walk(self, found: _Found, rest: list[str], path: str) -> _Found | None:
        """Follow attribute names from a resolved start: members, then typed fields."""
        target, how, conf = found.target, found.how, found.confidence
        for i, name in enumerate(rest):
            member = self.member(target, name)
            if member is not None:
                target = member[0]
                if member[1] and how == "self_method":
                    how, conf = "inherited_method", min(conf, CONFIDENCE["inherited_method"])
                continue
            # Not a definition: maybe a field whose declared type is a project class.
            if i == len(rest) - 1:
                return None
            field_type = self._field_type(target, name)
            if field_type is None:
                return None
            target, how, conf = field_type, "attribute_type", min(conf, CONFIDENCE["attribute_type"])
        return _Found(target, how, conf)

    def _field_type(self, owner: Target, name: str, depth: int = 0) -> Target | None:
        symbol = self.symbol(owner)
        if symbol is None or depth > MAX_RESOLVE_DEPTH:
            return None
        type_text = symbol.fields.get(name)
        if type_text is not None:
            return self.resolve_type(owner.path, type_text, owner)
        if self.family.get(owner.path) == "go":
            # An embedded struct is a field named after its type: `f.basicWriter.flush()`.
            for base in self.bases(owner):
                if base.qualname.rpartition(".")[2] == name:
                    return base
        for base in self.bases(owner):
            found = self._field_type(base, name, depth + 1)
            if found is not None:
                return found
        return None

    def guess_by_name(
        self, path: str, scope: str, callee: str, local_types: Mapping[str, str]
    ) -> _Found | None:
        """Last resort for ``obj.method()`` on an untyped receiver: a method name defined once."""
        parts = [p for p in re.split(r"\.|::", callee) if p]
        if len(parts) < 2 or "(" in callee:
            return None
        head, name = parts[0], parts[-1]
        bindings = self.bindings(path)
        if head in bindings.external or head in bindings.names or head in local_types:
            return None  # a library object, or a typed value whose type is not ours
        if name in _COMMON_METHOD_NAMES or len(name) < 4:
            return None
        if head[:1].isupper() and len(parts) == 2:
            return None  # `Type.method` on a type we could not find: likely a library type
        candidates = self.callables_by_name.get((self.family[path], name), [])
        if len(candidates) != 1:
            return None
        return _Found(candidates[0], "unique_name", CONFIDENCE["unique_name"])


def locals_at(merged: dict[str, str], rebound: Mapping[str, list[list[Any]]], line: int) -> dict[str, str]:
    """``merged`` (``ProjectIndex.locals_for``) with each ``rebound`` name taking the type of its last
    binding in force at ``line``: made on an earlier line, and not the parameter of an anonymous
    function that ended before it."""
    out: dict[str, str] | None = None
    for name, bindings in rebound.items():
        before = [type_text for at, type_text, end in bindings if at < line and (not end or line <= end)]
        if before and before[-1] != merged.get(name):
            out = out if out is not None else dict(merged)
            out[name] = before[-1]
    return merged if out is None else out


def _python_module_parts(path: str) -> list[str]:
    stem = path[: -len(".pyi")] if path.endswith(".pyi") else path[: -len(".py")]
    parts = stem.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return parts


def _js_candidates(base: str) -> Iterable[str]:
    yield base
    stem, ext = posixpath.splitext(base)
    if ext in (".js", ".jsx", ".mjs", ".cjs"):
        # TypeScript sources import their siblings by the emitted .js name.
        for alt in (".ts", ".tsx", ".mts", ".cts"):
            yield stem + alt
    for ext in _JS_EXTENSIONS:
        yield base + ext
    for ext in _JS_EXTENSIONS:
        yield f"{base}/index{ext}"


# Folders of built output, and the extensions of JavaScript and TypeScript files and declarations.
_BUILT_DIRS = frozenset({"dist", "esm", "cjs", "lib", "build", "umd", "out"})
_SCRIPT_SUFFIX = re.compile(r"(?:\.d)?\.(?:[mc]?[jt]sx?)$")


def _source_stems(path: str) -> list[str]:
    """Where the source of a manifest's entry may be, without extension: the path itself, then
    with a folder of built output read as ``src`` or left out ("hooks/dist/hooks.mjs" ->
    "hooks/dist/hooks", "hooks/src/hooks", "hooks/hooks")."""
    stem = _SCRIPT_SUFFIX.sub("", path)
    parts = stem.split("/")
    out = [stem]
    for i, part in enumerate(parts[:-1]):
        if part in _BUILT_DIRS:
            out += ["/".join(parts[:i] + ["src"] + parts[i + 1:]), "/".join(parts[:i] + parts[i + 1:])]
            break
    return out


# --- graph building -----------------------------------------------------------------------------


def _trait_names(impls: list[tuple[str, str]]) -> list[str]:
    """The last names of the traits ``impl Trait for Type`` blocks name: ``Display`` of
    ``fmt::Display``, ``TryFrom`` of ``TryFrom<&str>``."""
    names = {text.split("<", 1)[0].rsplit("::", 1)[-1].strip() for _, text in impls}
    return sorted(name for name in names if name)


def build_graph(
    files: Mapping[str, FileFacts],
    *,
    extractor_version: str = EXTRACTOR_VERSION,
    commit: str | None = None,
) -> Extraction:
    """Nodes, relationships and chunks for a set of parsed files (keys are their paths)."""
    index = ProjectIndex(files)
    out = Extraction()

    def provenance(path: str, confidence: float = 1.0) -> Provenance:
        return Provenance(
            source_path=path,
            extractor=EXTRACTOR,
            extractor_version=extractor_version,
            source_commit=commit,
            confidence=round(float(confidence), 3),
        )

    go_std = go_std_interfaces(index)
    for path in sorted(files):
        facts = files[path]
        family = index.family[path]
        lines = facts.source.splitlines()
        file_props: dict = {
            "language": facts.language,
            "lines": facts.lines,
            "has_syntax_errors": facts.has_syntax_errors,
        }
        if facts.decode_errors:
            file_props["decode_errors"] = True
        if facts.package:
            file_props["package"] = facts.package
        if facts.docstring:
            file_props["docstring"] = facts.docstring
        fkey = file_key(path)
        out.nodes.append(Node(key=fkey, name=path, provenance=provenance(path), props=file_props))
        out.chunks.extend(file_chunks(facts, lines, provenance(path)))

        # Calls first, so each symbol node can carry its unresolved names.
        call_edges: dict[tuple[str, str], list] = {}
        unresolved: dict[str, set[str]] = defaultdict(set)
        symbols = index.symbols[path]
        locals_cache: dict[str, tuple[dict[str, str], dict[str, list[list[Any]]]]] = {}
        for call in facts.calls:
            caller = call.caller if call.caller in symbols else ""
            src = symbol_key(path, caller) if caller else fkey
            if caller not in locals_cache:
                locals_cache[caller] = (index.locals_for(path, caller), index.rebound_for(path, caller))
            merged, rebound = locals_cache[caller]
            local_types = locals_at(merged, rebound, call.line) if rebound else merged
            found = index.resolve_callee(path, caller, call.callee, local_types)
            if found is not None and not found.target.is_symbol:
                found = None  # a module is not callable
            if found is None:
                found = index.guess_by_name(path, caller, call.callee, local_types)
            if found is None:
                if not _dropped(family, call.callee):
                    unresolved[src].add(call.callee)
                continue
            dst = symbol_key(found.target.path, found.target.qualname)
            entry = call_edges.get((src, dst))
            if entry is None:
                call_edges[(src, dst)] = [found.confidence, found.how, {call.line}]
            else:
                if found.confidence > entry[0]:
                    entry[0], entry[1] = found.confidence, found.how
                entry[2].add(call.line)

        children: dict[str, list[SymbolFact]] = defaultdict(list)
        for symbol in facts.symbols:
            if symbol.parent:
                children[symbol.parent].append(symbol)
        for symbol in facts.symbols:
            key = symbol_key(path, symbol.qualname)
            props: dict = {
                "symbol_kind": symbol.kind,
                "language": facts.language,
                "qualname": symbol.qualname,
                "path": path,
                "signature": symbol.signature,
                "docstring": symbol.docstring,
                "start_line": symbol.start_line,
                "end_line": symbol.end_line,
            }
            if key in unresolved:
                props["unresolved_calls"] = sorted(unresolved[key])[:MAX_UNRESOLVED_CALLS]
            if symbol.aliases:
                props["aliases"] = list(symbol.aliases)  # other names the module gives it
            if traits := _trait_names(index.extra_bases.get((index.family[path], symbol.qualname), [])):
                # Rust: the traits a type implements anywhere in its crate, the standard library's
                # too (``impl Error for InvalidUri``): what sort of thing it is ("which errors ...").
                props["bases"] = traits
            elif satisfied := go_std.get(Target(path, symbol.qualname)):
                props["bases"] = satisfied  # Go: ``error`` for a type with ``Error() string``
            out.nodes.append(Node(key=key, name=symbol.qualname, provenance=provenance(path), props=props))
            parent = symbol_key(path, symbol.parent) if symbol.parent else fkey
            out.rels.append(Relationship(src=parent, type=RelType.CONTAINS, dst=key, provenance=provenance(path)))
            out.chunks.extend(symbol_chunks(facts, symbol, lines, provenance(path), children.get(symbol.qualname, [])))
            for base_text in symbol.bases:
                base = index.resolve_type(path, base_text)
                if base is None or (base.path, base.qualname) == (path, symbol.qualname):
                    continue
                out.rels.append(_inherits(key, base, path, base_text, provenance(path, 0.9)))
        for type_name, base_text in facts.extra_bases:
            owner = index.resolve_type(path, type_name)
            base = index.resolve_type(path, base_text)
            if owner is not None and base is not None and owner != base:
                out.rels.append(
                    _inherits(symbol_key(owner.path, owner.qualname), base, path, base_text, provenance(path, 0.9))
                )
        if fkey in unresolved:
            out.nodes[_file_node_index(out.nodes, fkey)].props["unresolved_calls"] = sorted(unresolved[fkey])[
                :MAX_UNRESOLVED_CALLS
            ]

        for dst, (conf, import_lines) in sorted(index.bindings(path).edges.items()):
            if dst == fkey:
                continue
            out.rels.append(
                Relationship(
                    src=fkey,
                    type=RelType.IMPORTS,
                    dst=dst,
                    provenance=provenance(path, conf),
                    props={"lines": sorted(import_lines)},
                )
            )
        for (src, dst), (conf, how, call_lines) in sorted(call_edges.items()):
            out.rels.append(
                Relationship(
                    src=src,
                    type=RelType.CALLS,
                    dst=dst,
                    provenance=provenance(path, conf),
                    props={"resolution": how, "lines": sorted(call_lines)},
                )
            )
    for owner, iface in go_implementations(index):
        rel = _inherits(symbol_key(owner.path, owner.qualname), iface, owner.path, iface.qualname,
                        provenance(owner.path, CONFIDENCE["method_set"]))
        rel.props["resolution"] = "method_set"
        out.rels.append(rel)
    return out


# Interfaces of Go's standard library that a type satisfies by one method of a fixed shape: the
# method's name, its parameters and results (spaces removed, parameter names dropped) and the
# interface. They say what sort of thing a type is: a type with ``Error() string`` is an error.
_GO_STD_INTERFACES: tuple[tuple[str, str, str], ...] = (
    ("Error", "()string", "error"),
    ("String", "()string", "Stringer"),
    ("ServeHTTP", "(http.ResponseWriter,*http.Request)", "Handler"),
    ("Read", "([]byte)(int,error)", "Reader"),
    ("Write", "([]byte)(int,error)", "Writer"),
    ("Close", "()error", "Closer"),
)
_GO_STD_METHOD = {iface: name for name, _, iface in _GO_STD_INTERFACES}  # interface -> its one method
_GO_METHOD = re.compile(r"func\s*\([^)]*\)\s*(\w+)\s*(.*)$", re.S)
_GO_PARAM_NAME = re.compile(r"(?<=[(,])\s*\w+\s+(?=[\w*\[.])")


def _go_shape(signature: str) -> tuple[str, str] | None:
    """A Go method's name and its shape: parameter and result types without names or spaces
    (``("Read", "([]byte)(int,error)")`` of ``func (r *R) Read(p []byte) (n int, err error)``)."""
    m = _GO_METHOD.match(signature.strip())
    if m is None:
        return None
    return m.group(1), re.sub(r"\s+", "", _GO_PARAM_NAME.sub("", m.group(2)))


def _go_definitions(index: ProjectIndex) -> Iterator[tuple[str, str, str, str, SymbolFact]]:
    """``(directory, package, path, qualified name, symbol)`` of every Go definition: a package is
    its directory's files of one package name, so a type's methods may lie in any of them."""
    for directory, paths in index.go_dirs.items():
        for path in paths:
            package = index.files[path].package
            for qual, symbol in index.symbols.get(path, {}).items():
                yield directory, package, path, qual, symbol


def go_std_interfaces(index: ProjectIndex) -> dict[Target, list[str]]:
    """The standard interfaces (``_GO_STD_INTERFACES``) each Go type of the project satisfies,
    through its methods in any file of its package."""
    wanted = {(name, shape): iface for name, shape, iface in _GO_STD_INTERFACES}
    found: dict[tuple[str, str, str], set[str]] = defaultdict(set)  # (dir, package, type) -> interfaces
    types: dict[tuple[str, str, str], list[Target]] = defaultdict(list)
    for directory, package, path, qual, symbol in _go_definitions(index):
        owner, dot, name = qual.partition(".")
        if dot and "." not in name and symbol.kind == "method":
            shape = _go_shape(symbol.signature or "")
            if shape is not None and (iface := wanted.get(shape)):
                found[(directory, package, owner)].add(iface)
        elif not dot and symbol.kind in ("struct", "type"):
            types[(directory, package, qual)].append(Target(path, qual))
    return {target: sorted(ifaces) for place, ifaces in found.items() for target in types.get(place, ())}


def go_implementations(index: ProjectIndex) -> list[tuple[Target, Target]]:
    """``(type, interface)`` for each Go type whose methods include every method of one of the
    project's interfaces (its own and those of the interfaces it embeds): Go never writes
    "implements", a type satisfies an interface by its method set. Methods are matched by name."""
    methods: dict[tuple[str, str, str], set[str]] = defaultdict(set)  # (dir, package, type) -> names
    types: list[tuple[tuple[str, str, str], Target]] = []
    interfaces: list[tuple[tuple[str, str, str], Target]] = []
    for directory, package, path, qual, symbol in _go_definitions(index):
        owner, dot, name = qual.partition(".")
        if dot and "." not in name and symbol.kind == "method":
            methods[(directory, package, owner)].add(name)
        elif not dot and symbol.kind == "interface":
            interfaces.append(((directory, package, qual), Target(path, qual)))
        elif not dot and symbol.kind in ("struct", "type"):
            types.append(((directory, package, qual), Target(path, qual)))
    where = {target: place for place, target in interfaces}

    def method_set(iface: Target, seen: frozenset[Target] = frozenset()) -> set[str] | None:
        """The interface's method names; None when it embeds one from outside the project whose
        methods are unknown (the standard ones of ``_GO_STD_INTERFACES`` are known: ``io.Writer``)."""
        bases = index.bases(iface)
        symbol = index.symbol(iface)
        if symbol is None or any(base not in where for base in bases):
            return None
        names = set(methods.get(where[iface], ()))
        if len(bases) < len(symbol.bases):
            resolved = {base.qualname for base in bases}
            for text in symbol.bases:
                last = text.rsplit(".", 1)[-1]
                if last in resolved:
                    continue
                if (method := _GO_STD_METHOD.get(last)) is None:
                    return None
                names.add(method)
        for base in bases:
            if base not in seen:
                inherited = method_set(base, seen | {iface})
                if inherited is None:
                    return None
                names |= inherited
        return names

    # Types by method name, so that an interface meets only the types that have its rarest method
    # (a large module holds thousands of each).
    having: dict[str, set[int]] = defaultdict(set)
    for i, (place, _) in enumerate(types):
        for name in methods.get(place, ()):
            having[name].add(i)
    out: list[tuple[Target, Target]] = []
    for _, iface in interfaces:
        names = method_set(iface)
        if not names:
            continue
        found: set[int] | None = None
        for name in sorted(names, key=lambda n: len(having.get(n, ()))):
            found = set(having.get(name, ())) if found is None else found & having.get(name, set())
            if not found:
                break
        out += [(types[i][1], iface) for i in sorted(found or ())]
    return out


def _inherits(src: str, base: Target, path: str, written: str, prov: Provenance) -> Relationship:
    return Relationship(
        src=src,
        type=RelType.INHERITS,
        dst=symbol_key(base.path, base.qualname),
        provenance=prov,
        props={"base": written},
    )


def _file_node_index(nodes: list[Node], key: str) -> int:
    for i in range(len(nodes) - 1, -1, -1):
        if nodes[i].key == key:
            return i
    raise KeyError(key)


def _dropped(family: str, callee: str) -> bool:
    if callee in _DROPPED_BARE_CALLS.get(family, ()):
        return True
    root = re.split(r"\.|::", callee, maxsplit=1)[0]
    return root in _DROPPED_CALL_ROOTS.get(family, ())

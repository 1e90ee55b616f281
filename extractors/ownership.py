"""Ownership: CODEOWNERS rules, services (declared or inferred), teams and their members.

* :class:`OwnershipRules` reads a CODEOWNERS file (GitHub syntax, GitLab sections tolerated) and
  answers ``owners_of(path)`` the way GitHub does: the last matching rule wins.
* :class:`ServiceMap` knows which service a path belongs to, from ``[services.*]`` in
  ``graphmem.toml`` or, without one, from the top-level folders that hold code.
* :func:`extract_ownership` turns both, plus ``[teams.*]``, into service, team and person nodes
  and ``OWNS``, ``MEMBER_OF``, ``CONTAINS`` and ``DEPENDS_ON`` relationships.

Owner keys: ``@org/team`` -> ``team:<team>``; an email -> ``person:<email>``; a ``@user`` handle
-> ``person:<handle>`` (lower case, with a ``handle`` prop) until an email for it is known.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from extractors.base import Extraction, Skipped, clean_reason
from extractors.policy import CONFIG_FILE, GlobRule, Policy, read_project_config
from graphmem.errors import ConfigError
from graphmem.model import (
    Node,
    Provenance,
    Relationship,
    RelType,
    file_key,
    person_key,
    project_from_path,
    service_key,
)

EXTRACTOR = "ownership"
VERSION = "1"

# GitHub looks for CODEOWNERS in this order and uses the first it finds.
CODEOWNERS_LOCATIONS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS", ".gitlab/CODEOWNERS")

CODE_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".go": "go", ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala",
    ".rs": "rust", ".rb": "ruby", ".php": "php", ".cs": "csharp", ".fs": "fsharp",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
    ".swift": "swift", ".m": "objective-c", ".ex": "elixir", ".exs": "elixir", ".erl": "erlang",
    ".clj": "clojure", ".lua": "lua", ".dart": "dart", ".vue": "javascript", ".svelte": "javascript",
}
# Top-level folders that are not services even when they hold code.
NON_SERVICE_DIRS = frozenset(
    {
        "docs", "doc", "documentation", "scripts", "script", "bin", "tests", "test", "testing",
        "spec", "specs", "e2e", "integration-tests", "examples", "example", "samples", "sample",
        "bench", "benchmarks", "benchmark", "tools", "tooling", "ci", "hack", "build", "dist",
        "vendor", "third_party", "third-party", "node_modules", "config", "configs", "deploy",
        "deployment", "deployments", "notebooks", "assets", "static", "fixtures", "migrations",
    }
)
# Top-level folders that hold one service per subfolder (monorepo layouts).
CONTAINER_DIRS = frozenset({"services", "apps", "packages", "components", "modules", "cmd", "microservices", "crates",
                            "libs"})
# A Go module's folders of its own library packages, beside its root package.
GO_OWN_DIRS = frozenset({"internal", "pkg"})
# Folders that hold a project's code without naming a part of it: ``src/`` layouts, Maven's
# ``src/main/java/``, ``lib/``.
LAYOUT_DIRS = frozenset({"src", "lib", "source", "sources", "main", "java", "kotlin", "scala"})
# The reversed domain that starts a Java-style package path (``org/apache/commons/cli/``).
DOMAIN_ROOTS = frozenset({"com", "org", "net", "io", "edu", "gov", "dev", "me", "co", "uk", "de", "fr", "nl"})

_EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+$")
_TEAM = re.compile(r"^@([\w.-]+)/([\w.-]+)$")
_USER = re.compile(r"^@([\w][\w.-]*)$")
_SECTION = re.compile(r"^\^?\[([^\]]+)\](?:\[\d+\])?\s*(.*)$")


# --- owners -------------------------------------------------------------------------------------


def owner_key(token: str) -> str | None:
    """The node key of a CODEOWNERS owner token, or None if it is not one."""
    token = token.strip()
    team = _TEAM.match(token)
    if team:
        return "team:" + team.group(2)
    if _EMAIL.match(token):
        return person_key(token)
    user = _USER.match(token)
    if user:
        return person_key(user.group(1))
    return None


def owner_node(key: str, token: str | None, prov: Provenance) -> Node:
    """A team or person node for an owner key (the token it was written as goes in props)."""
    name = key.partition(":")[2]
    props: dict[str, Any] = {}
    if key.startswith("team:"):
        if token and _TEAM.match(token):
            props["handle"] = token
            props["org"] = _TEAM.match(token).group(1)  # type: ignore[union-attr]
    elif "@" in name:
        props["email"] = name
    else:
        props["handle"] = name
    return Node(key, name, prov, props=props)


@dataclass(frozen=True, slots=True)
class OwnerRule:
    """One CODEOWNERS line: a pattern and its owners (an empty list means "no owners")."""

    pattern: str
    owners: tuple[str, ...]
    line: int
    glob: GlobRule
    descend: bool = True  # GitHub: "docs/*" covers docs' own files, not those in subfolders
    tokens: tuple[str, ...] = ()

    def matches(self, path: str, is_dir: bool = False) -> bool:
        if self.descend:
            return self.glob.matches_within(path, is_dir)
        return self.glob.matches(path, is_dir)


@dataclass(slots=True)
class OwnershipRules:
    """Parsed CODEOWNERS rules; :meth:`owners_of` applies them like GitHub (last match wins)."""

    rules: list[OwnerRule] = field(default_factory=list)
    source: str = "CODEOWNERS"
    problems: list[Skipped] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str, source: str = "CODEOWNERS") -> OwnershipRules:
        rules: list[OwnerRule] = []
        problems: list[Skipped] = []
        section_owners: tuple[str, ...] = ()
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = _strip_comment(raw).strip()
            if not line:
                continue
            section = _SECTION.match(line)
            if section and not line.startswith("[!") and " " not in section.group(1).strip("^"):
                # A GitLab section header; its owners are the default for the rules below it.
                section_owners = tuple(_split(section.group(2)))
                continue
            tokens = _split(line)
            pattern, owner_tokens = tokens[0], tokens[1:] or list(section_owners)
            if pattern.startswith("!"):
                problems.append(Skipped(f"{source}:{lineno}", "negated patterns are not supported in CODEOWNERS"))
                continue
            keys: list[str] = []
            good_tokens: list[str] = []
            bad_tokens: list[str] = []
            for tok in owner_tokens:
                key = owner_key(tok)
                if key is None:
                    bad_tokens.append(tok)
                elif key not in keys:
                    keys.append(key)
                    good_tokens.append(tok)
            if bad_tokens:
                problems.append(Skipped(f"{source}:{lineno}", _not_owners(bad_tokens)))
            try:
                glob = GlobRule.compile(pattern)
            except re.error as exc:
                problems.append(Skipped(f"{source}:{lineno}", f"bad pattern {_quote(pattern)}: {exc}"))
                continue
            descend = not (pattern.endswith("/*") and not pattern.endswith("/**"))
            rules.append(OwnerRule(pattern, tuple(keys), lineno, glob, descend, tuple(good_tokens)))
        return cls(rules, source, problems)

    @classmethod
    def load(cls, root: str | Path) -> OwnershipRules | None:
        """The repository's CODEOWNERS (first of :data:`CODEOWNERS_LOCATIONS`), or None."""
        for rel in CODEOWNERS_LOCATIONS:
            path = Path(root) / rel
            if path.is_file():
                text = path.read_bytes().decode("utf-8", errors="replace")
                return cls.parse(text, rel)
        return None

    def rule_for(self, path: str, is_dir: bool = False) -> OwnerRule | None:
        """The rule that decides ``path``'s owners: the last one that matches."""
        path = path.strip("/")
        for rule in reversed(self.rules):
            if rule.matches(path, is_dir):
                return rule
        return None

    def owners_of(self, path: str, is_dir: bool = False) -> list[str]:
        """Owner keys of a path (a folder when ``is_dir``); [] when unowned."""
        rule = self.rule_for(path, is_dir)
        return list(rule.owners) if rule else []

    def tokens(self) -> dict[str, str]:
        """Each owner key with the token first written for it."""
        out: dict[str, str] = {}
        for rule in self.rules:
            for key, tok in zip(rule.owners, rule.tokens, strict=True):
                out.setdefault(key, tok)
        return out


def _strip_comment(line: str) -> str:
    # "#" starts a comment at the line start or after whitespace; "\#" is a literal hash.
    match = re.search(r"(?:^|\s)(?<!\\)#", line)
    return line[: match.start()] if match else line


# How much of a rejected token a message quotes: enough to find it in the file.
_QUOTE_LIMIT = 40
# How many rejected tokens of one line a message names (one line may hold thousands).
_QUOTE_COUNT = 3


def _quote(token: str) -> str:
    """``token`` for a message: secrets redacted (a misplaced access token is not an owner, but
    must not reach logs either), clipped to :data:`_QUOTE_LIMIT` characters."""
    return repr(clean_reason(token, _QUOTE_LIMIT))


def _not_owners(tokens: list[str]) -> str:
    """One message for a line's tokens that are not owners: the first few, and how many more."""
    shown = ", ".join(_quote(t) for t in tokens[:_QUOTE_COUNT])
    more = len(tokens) - _QUOTE_COUNT
    return f"not an owner: {shown}" + (f" (and {more} more)" if more > 0 else "")


def _split(text: str) -> list[str]:
    return [t.replace("\\#", "#") for t in re.split(r"(?<!\\)\s+", text.strip()) if t]


# --- services -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Service:
    """A deployable unit and the folders that hold its code (each with a trailing "/")."""

    name: str
    paths: list[str]
    language: str | None = None
    description: str | None = None
    team: str | None = None
    depends_on: list[str] = field(default_factory=list)
    declared: bool = False  # from graphmem.toml rather than inferred

    @property
    def key(self) -> str:
        return service_key(self.name)

    @property
    def root(self) -> str:
        return self.paths[0] if self.paths else ""


class ServiceMap:
    """Which service a path belongs to: the one whose folder is the longest prefix of it."""

    def __init__(self, services: Iterable[Service] = ()) -> None:
        self.services: dict[str, Service] = {s.name: s for s in services}
        self._prefixes = sorted(
            ((p, s.name) for s in self.services.values() for p in s.paths),
            key=lambda item: len(item[0]),
            reverse=True,
        )

    def __len__(self) -> int:
        return len(self.services)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.services.values())

    def service_of(self, path: str) -> str | None:
        """The name of the service ``path`` lies in, or None."""
        path = path.replace("\\", "/")
        while path.startswith("./"):
            path = path[2:]
        for prefix, name in self._prefixes:
            if not prefix or path.startswith(prefix) or path + "/" == prefix:
                return name
        return None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ServiceMap:
        """Services from the ``[services.<name>]`` tables of a parsed ``graphmem.toml``."""
        table = config.get("services", {})
        if not isinstance(table, Mapping):
            raise ConfigError(f"{CONFIG_FILE}: [services] must be a table of [services.<name>] tables")
        services: list[Service] = []
        for name, spec in table.items():
            if not isinstance(spec, Mapping):
                raise ConfigError(f"{CONFIG_FILE}: [services.{name}] must be a table")
            paths = spec.get("paths", spec.get("path", [name]))
            if isinstance(paths, str):
                paths = [paths]
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise ConfigError(f"{CONFIG_FILE}: [services.{name}] paths must be a list of folders")
            depends = spec.get("depends_on", [])
            if isinstance(depends, str):
                depends = [depends]
            services.append(
                Service(
                    name=str(name),
                    paths=[_folder(p) for p in paths],
                    language=_opt_str(spec, "language", name),
                    description=_opt_str(spec, "description", name),
                    team=(_opt_str(spec, "team", name) or "").lstrip("@").split("/")[-1] or None,
                    depends_on=[str(d) for d in depends],
                    declared=True,
                )
            )
        return cls(services)

    @classmethod
    def infer(cls, files: Iterable[str], project: str | None = None) -> ServiceMap:
        """Services from the layout: each top-level code folder (or each subfolder of a
        ``services/``-style container) is one. Layout folders name no part of the project: a
        ``src/`` (or ``lib/``) of packages gives one service per package, one of modules is the
        project's own code, as are a Go module's root package, ``internal/`` and ``pkg/``; a Java-style
        package path (``com/acme/util/``) is one service named after its last folder. Go ignores
        folders starting with "_", and so does this. The project's own code (or a package path
        alone) is one service named ``project``."""
        tree = _CodeTree(files)
        found: dict[tuple[str, str], Counter[str]] = {}
        own: Counter[str] = Counter()
        own_paths: list[str] = []
        domains: list[tuple[str, ...]] = []

        def add(folder: tuple[str, ...], name: str, langs: Counter[str]) -> None:
            found.setdefault(("/".join(folder) + "/", name), Counter()).update(langs)

        def add_own(folder: tuple[str, ...], langs: Counter[str]) -> None:
            own.update(langs)
            own_paths.append("/".join(folder) + "/" if folder else "")

        def place(folder: tuple[str, ...]) -> None:
            """Services in a layout folder or a package path that starts at ``folder``."""
            folder = tree.descend(folder)
            if tree.in_domain(folder):
                add(folder, folder[-1], tree.languages(folder))
                domains.append(folder)
            elif tree.files.get(folder):
                add_own(folder, tree.languages(folder))  # a src/ of modules: the project's own code
            else:  # a src/ of packages
                for sub in sorted(tree.children(folder)):
                    if sub.startswith(".") or sub.lower() in NON_SERVICE_DIRS:
                        continue
                    if sub.lower() in LAYOUT_DIRS or sub.lower() in DOMAIN_ROOTS:
                        place(folder + (sub,))
                    else:
                        add(folder + (sub,), sub, tree.languages(folder + (sub,)))

        for top in sorted(tree.children(())):
            langs = tree.languages((top,))
            if top.startswith(".") or top.lower() in NON_SERVICE_DIRS or (top.startswith("_") and "go" in langs):
                continue
            if top in GO_OWN_DIRS and set(langs) == {"go"}:
                add_own((top,), langs)
            elif top.lower() in CONTAINER_DIRS:
                for sub in sorted(tree.children((top,))):
                    add((top, sub), sub, tree.languages((top, sub)))
            elif top.lower() in LAYOUT_DIRS or top.lower() in DOMAIN_ROOTS:
                place((top,))
            else:
                add((top,), top, langs)
        for folder, name in [item for item in found if item[1] == project]:
            # The package named after the project (``src/attrs/``) is its own code.
            own.update(found.pop((folder, name)))
            own_paths.append(folder)
        # Code at the root is the project's own in a Go module (its root package), or where
        # nothing else is; elsewhere it is tooling beside it (setup.py, conftest.py).
        root = tree.files.get(())
        if root and ("go" in root or own or not found):
            own.update(root)
            own_paths.append("")  # last: a service's first folder is its root
        if len(found) == 1 and not own and domains:
            # A package path alone is the project's own code (``org/apache/commons/cli/``).
            (folder, _), counts = found.popitem()
            own.update(counts)
            own_paths.append(folder)
        services = [Service(name, [folder], language=counts.most_common(1)[0][0])
                    for (folder, name), counts in sorted(found.items())]
        if own and project:
            services.append(Service(project, own_paths, language=own.most_common(1)[0][0]))
        return cls(_unique_names(services))


class _CodeTree:
    """The folders that hold code files, with each folder's files counted by language."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files: dict[tuple[str, ...], Counter[str]] = {}
        self._below: dict[tuple[str, ...], Counter[str]] = {}
        self._children: dict[tuple[str, ...], set[str]] = {}
        for path in files:
            pure = PurePosixPath(path)
            lang = CODE_EXTENSIONS.get(pure.suffix.lower())
            if lang is None:
                continue
            folder = pure.parts[:-1]
            self.files.setdefault(folder, Counter())[lang] += 1
            for i in range(len(folder) + 1):
                self._below.setdefault(folder[:i], Counter())[lang] += 1
                if i < len(folder):
                    self._children.setdefault(folder[:i], set()).add(folder[i])

    def children(self, folder: tuple[str, ...]) -> set[str]:
        return self._children.get(folder, set())

    def languages(self, folder: tuple[str, ...]) -> Counter[str]:
        """Code files at or below ``folder``, by language."""
        return self._below.get(folder, Counter())

    def descend(self, folder: tuple[str, ...]) -> tuple[str, ...]:
        """Down from ``folder`` while it holds no code of its own, only one folder, and names no
        part of the project (``src/main/java/org/apache/`` on to ``commons/cli/``)."""
        while not self.files.get(folder) and len(kids := self.children(folder)) == 1:
            if not (folder[-1].lower() in LAYOUT_DIRS or self.in_domain(folder)):
                break
            folder = folder + (next(iter(kids)),)
        return folder

    @staticmethod
    def in_domain(folder: tuple[str, ...]) -> bool:
        """Whether ``folder`` is a package path (its first folder after the layout ones is a
        reversed domain: ``src/main/java/com/google``)."""
        first = next((part for part in folder if part.lower() not in LAYOUT_DIRS), None)
        return first is not None and first.lower() in DOMAIN_ROOTS


def _unique_names(services: list[Service]) -> list[Service]:
    """Two inferred folders with one name (``apps/web``, ``packages/web``) get distinct names."""
    counts = Counter(s.name for s in services)
    for svc in services:
        if counts[svc.name] > 1:
            svc.name = svc.root.rstrip("/").replace("/", "-")
    return services


def _folder(path: str) -> str:
    path = path.replace("\\", "/").strip()
    while path.startswith("./"):
        path = path[2:]
    path = path.strip("/")
    return path + "/" if path and path != "." else ""


def _opt_str(spec: Mapping[str, Any], name: str, service: str) -> str | None:
    value = spec.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{CONFIG_FILE}: [services.{service}] {name} must be a string")
    return value


# --- teams --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Team:
    """A team declared in ``graphmem.toml`` (``[teams.<name>] members = [...]``)."""

    name: str
    members: list[str] = field(default_factory=list)
    description: str | None = None
    props: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return "team:" + self.name


def teams_from_config(config: Mapping[str, Any]) -> list[Team]:
    """Teams from the ``[teams.<name>]`` tables of a parsed ``graphmem.toml``."""
    table = config.get("teams", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{CONFIG_FILE}: [teams] must be a table of [teams.<name>] tables")
    teams: list[Team] = []
    for name, spec in table.items():
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{CONFIG_FILE}: [teams.{name}] must be a table")
        members = spec.get("members", [])
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise ConfigError(f"{CONFIG_FILE}: [teams.{name}] members must be a list of strings")
        extra = {
            k: v for k, v in spec.items() if k not in ("members", "description") and isinstance(v, str)
        }
        desc = spec.get("description")
        teams.append(Team(str(name).lstrip("@"), members, desc if isinstance(desc, str) else None, extra))
    return teams


# --- extraction ---------------------------------------------------------------------------------


def extract_ownership(
    root: str | Path,
    files: Iterable[str] | None = None,
    *,
    rules: OwnershipRules | None = None,
    services: ServiceMap | None = None,
    teams: list[Team] | None = None,
    source_commit: str | None = None,
) -> Extraction:
    """Ownership facts for a repository at ``root``.

    ``files`` are the relative paths being ingested (default: what :class:`Policy` accepts).
    CODEOWNERS, services and teams are read from ``root`` unless given.
    """
    out = Extraction()
    root = Path(root)
    file_list = sorted(set(files)) if files is not None else Policy().discover(root)[0]
    config: Mapping[str, Any] = {}
    if services is None or teams is None:
        try:
            config = read_project_config(root)
        except ConfigError as exc:
            out.skipped.append(Skipped(CONFIG_FILE, str(exc)))
    if services is None:
        try:
            services = ServiceMap.from_config(config) if config.get("services") else None
        except ConfigError as exc:
            out.skipped.append(Skipped(CONFIG_FILE, str(exc)))
            services = None
        if services is None:
            services = ServiceMap.infer(file_list, _project_name(root))
    if teams is None:
        try:
            teams = teams_from_config(config)
        except ConfigError as exc:
            out.skipped.append(Skipped(CONFIG_FILE, str(exc)))
            teams = []
    if rules is None:
        rules = OwnershipRules.load(root) or OwnershipRules(source="")
    out.skipped.extend(rules.problems)
    return build_ownership(file_list, rules, services, teams, source_commit=source_commit, out=out)


def build_ownership(
    files: Iterable[str],
    rules: OwnershipRules,
    services: ServiceMap,
    teams: Iterable[Team] = (),
    *,
    source_commit: str | None = None,
    out: Extraction | None = None,
) -> Extraction:
    """Turn parsed ownership inputs into graph facts (no file system access)."""
    out = out if out is not None else Extraction()
    nodes: dict[str, Node] = {}
    rels: dict[tuple[str, str, str], Relationship] = {}

    def prov(path: str, conf: float = 1.0) -> Provenance:
        return Provenance(path, EXTRACTOR, VERSION, source_commit=source_commit, confidence=conf)

    def add_rel(src: str, rtype: RelType, dst: str, source: str, conf: float = 1.0, line: int | None = None) -> None:
        # ``line``: the CODEOWNERS line that says it (its history dates the ownership).
        props = {"line": line} if line is not None else {}
        rels.setdefault((src, rtype.value, dst), Relationship(src, rtype, dst, prov(source, conf), props))

    tokens = rules.tokens()
    co_source = rules.source or "CODEOWNERS"

    def add_owner(key: str, source: str) -> None:
        if key not in nodes:
            nodes[key] = owner_node(key, tokens.get(key), prov(source))

    for team in teams:
        props: dict[str, Any] = dict(team.props)
        if team.description:
            props["description"] = team.description
        props["members"] = [m.strip().lower() for m in team.members]
        nodes[team.key] = Node(team.key, team.name, prov(CONFIG_FILE), props=props)
        for member in team.members:
            # Members are emails or @handles; a bare word is taken as a handle.
            key = owner_key(member)
            if key is None and member.strip() and " " not in member.strip():
                key = person_key(member)
            if key is None or not key.startswith("person:"):
                continue
            add_owner(key, CONFIG_FILE)
            add_rel(key, RelType.MEMBER_OF, team.key, CONFIG_FILE)

    service_owners: dict[str, set[str]] = {}
    for svc in services:
        source = CONFIG_FILE if svc.declared else (svc.root or ".")
        props = {
            "paths": svc.paths,
            "language": svc.language,
            "description": svc.description,
            "team": svc.team,
            "declared": svc.declared,
        }
        props = {k: v for k, v in props.items() if v not in (None, [], "")}
        nodes[svc.key] = Node(svc.key, svc.name, prov(source), props=props)
        if svc.team:
            team_key_ = "team:" + svc.team
            if team_key_ not in nodes:
                nodes[team_key_] = Node(team_key_, svc.team, prov(CONFIG_FILE))
            add_rel(team_key_, RelType.OWNS, svc.key, CONFIG_FILE)
        # CODEOWNERS owns the service when a rule covers its root folder.
        rule = rules.rule_for(svc.root.rstrip("/"), is_dir=True) if svc.root else None
        if rule is not None:
            for key in rule.owners:
                add_owner(key, co_source)
                add_rel(key, RelType.OWNS, svc.key, co_source, line=rule.line)
        service_owners[svc.name] = set(rule.owners) if rule else set()
        for dep in svc.depends_on:
            add_rel(svc.key, RelType.DEPENDS_ON, service_key(dep), CONFIG_FILE)

    for path in files:
        name = services.service_of(path)
        if name is not None:
            svc = services.services[name]
            add_rel(svc.key, RelType.CONTAINS, file_key(path), CONFIG_FILE if svc.declared else (svc.root or "."))
        file_rule = rules.rule_for(path)
        owners = list(file_rule.owners) if file_rule else []
        if not owners:
            continue
        if name is not None and set(owners) == service_owners.get(name):
            continue  # already said once, at the service
        for key in owners:
            add_owner(key, co_source)
            add_rel(key, RelType.OWNS, file_key(path), co_source, line=file_rule.line if file_rule else None)

    out.nodes.extend(nodes.values())
    out.rels.extend(rels.values())
    return out


def _project_name(root: Path) -> str | None:
    try:
        return project_from_path(str(root.resolve()))
    except Exception:  # noqa: BLE001 - a name is a nicety for single-service repositories
        return None


__all__ = [
    "CODEOWNERS_LOCATIONS",
    "CODE_EXTENSIONS",
    "CONTAINER_DIRS",
    "DOMAIN_ROOTS",
    "EXTRACTOR",
    "GO_OWN_DIRS",
    "LAYOUT_DIRS",
    "NON_SERVICE_DIRS",
    "OwnerRule",
    "OwnershipRules",
    "Service",
    "ServiceMap",
    "Team",
    "VERSION",
    "build_ownership",
    "extract_ownership",
    "owner_key",
    "owner_node",
    "teams_from_config",
]

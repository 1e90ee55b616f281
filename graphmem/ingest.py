"""The ingest pipeline behind ``graphmem ingest PATH``.

discover (policy) -> read and hash -> extract (code on both cores, decisions, incidents, ownership,
git history, the services/symbols/technologies commit messages and docstrings name) -> redact
secrets -> close what changed or vanished -> upsert -> record state. Deterministic throughout:
LLM extraction is a separate, optional stage after it (:mod:`graphmem.enrich`).

Incremental by content hash: a file whose hash is unchanged is not extracted again (parsed code is
also cached by hash). A changed or deleted file has its facts closed before the new ones are
written, so nothing it no longer says stays open. Git history is read from the last ingested
commit on.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from extractors import code
from extractors.base import Extraction, Skipped
from extractors.code.parse import MAX_QUERY_DEPTH
from extractors.decisions import extract_decision, is_decision_record
from extractors.docs import CHECKED_KINDS, DocContext, extract_document, is_document
from extractors.git import GitError, changed_paths_since, extract_history, head_commit, is_git_repo, root_commits
from extractors.incidents import extract_incident, is_incident_report
from extractors.ownership import ServiceMap, Team, extract_ownership, teams_from_config
from extractors.policy import SECRET_DIRS, SECRET_FILE_GLOBS, Policy, read_project_config
from extractors.prose_mentions import prose_mentions
from extractors.releases import SOURCE_PREFIX as RELEASE_SOURCE
from extractors.releases import TagRecord, list_tags, read_releases, releases_to_graph, tag_map
from extractors.secrets import FINGERPRINT as REDACTION_RULES
from extractors.secrets import redact
from extractors.text import Vocabulary
from extractors.validity import closing_times, date_from_history
from graphmem.errors import ConfigError, GraphmemError, IngestRefused
from graphmem.model import NodeKind, Provenance, Relationship, RelType, now_iso, service_key, symbol_parts
from graphmem.stores.base import INCOMPLETE, NAMES_STAMP, GraphStore, Keep, WriteSummary

Progress = Callable[[str, int, int], None]  # (stage, done, total)

# Parsing in worker processes pays off only past a few dozen files (process start-up, pickling).
PARALLEL_PARSE_MIN = 40
# An ingest that would close more than this share of a project's sources (and at least
# REMOVAL_GUARD_MIN of them), or all of them, is refused unless the removal is confirmed: it is far
# more often the wrong folder or project than a repository that really lost most of its files.
REMOVAL_GUARD_SHARE = 0.5
REMOVAL_GUARD_MIN = 10
# Project metadata: the code facts format its code was last extracted under.
FACTS_META = "code_facts_version"
# Project metadata: the tags releases were last read from (JSON: the head, tag -> commit, and the
# tags whose commit that head's history held).
RELEASES_META = "releases"


@dataclass(slots=True)
class IngestReport:
    """What one ingest did."""

    project: str
    root: str
    files: int = 0
    changed: int = 0
    deleted: int = 0
    unchanged: int = 0
    commits: int = 0
    releases: int = 0  # releases (git tags) written: new, moved, or shipping other commits than before
    redactions: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    written: WriteSummary = field(default_factory=WriteSummary)
    head: str | None = None
    seconds: float = 0.0
    index: dict[str, object] | None = None  # what the index sync after the ingest did
    enrichment: dict[str, object] | None = None  # what LLM enrichment after the ingest did (graphmem.enrich)
    replayed: int = 0  # earlier commits ingested before this one (a first ingest's replay)

    def fold_in(self, earlier: list[IngestReport]) -> None:
        """Count the replayed snapshots' work as this ingest's: writes, commits, redactions, time."""
        for r in earlier:
            self.written.add(r.written)
            self.commits += r.commits
            self.releases += r.releases
            self.redactions += r.redactions
            self.seconds += r.seconds
        self.replayed += len(earlier)

    def as_dict(self) -> dict[str, object]:
        return {
            "project": self.project, "root": self.root, "files": self.files, "changed": self.changed,
            "deleted": self.deleted, "unchanged": self.unchanged, "commits": self.commits,
            "releases": self.releases,
            "redactions": self.redactions, "head": self.head, "seconds": round(self.seconds, 2),
            "replayed": self.replayed,
            "written": {k: getattr(self.written, k) for k in self.written.__slots__},  # type: ignore[attr-defined]
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "index": self.index,
            "enrichment": self.enrichment,
        }


def _services_and_teams(
    config: dict, files: list[str], name: str, report: IngestReport
) -> tuple[ServiceMap, list[Team]]:
    """Services and teams from ``graphmem.toml``; services from top-level folders when it has none."""
    try:
        services = ServiceMap.from_config(config) if config.get("services") else None
    except ConfigError as exc:
        report.skipped.append(Skipped("graphmem.toml", f"[services] ignored: {exc}"))
        services = None
    try:
        teams = teams_from_config(config)
    except ConfigError as exc:
        report.skipped.append(Skipped("graphmem.toml", f"[teams] ignored: {exc}"))
        teams = []
    return services or ServiceMap.infer(files, name), teams


def _stale_service_sources(store: GraphStore, services: ServiceMap) -> list[str]:
    """The sources of the stored inferred services when the layout now gives others (a folder
    gone, services declared in ``graphmem.toml``): closing them closes those services and what they
    contained, and what the new map says again is kept."""
    stored = {(n.key, n.provenance.source_path) for n in store.iter_nodes([NodeKind.SERVICE])
              if n.valid_to is None and not n.props.get("declared")}
    now = {(svc.key, svc.root or ".") for svc in services if not svc.declared}
    return sorted({source for _, source in stored}) if stored != now else []


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    done = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer],
                          capture_output=True)
    return done.returncode == 0


def _reachable(repo: Path, head: str) -> set[str]:
    out = subprocess.run(["git", "-C", str(repo), "rev-list", head], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _redact_facts(value: Any) -> Any:
    """``value`` (a part of parsed facts) with secrets redacted in every string, line counts kept:
    symbols point at lines of the source."""
    if isinstance(value, str):
        return redact(value, keep_lines=True)[0]
    if isinstance(value, list):
        return [_redact_facts(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_facts(v) for k, v in value.items()}
    return value


def _parse(args: tuple[str, bytes]) -> tuple[dict, int]:
    """Parse one file into redacted facts, so its raw text goes nowhere (not into the facts cache,
    not between processes); also how many secrets its source held."""
    path, data = args
    facts = code.parse_file(path, data).to_dict()
    source, found = redact(facts.pop("source"), keep_lines=True)
    redacted = {name: _redact_facts(value) for name, value in facts.items()}
    redacted["source"] = source
    return redacted, found


def parse_pool(workers: int) -> ProcessPoolExecutor:
    """Processes that parse files. They come from a fork server, not from this process: a fork of a
    process with threads (a database driver's, an embedder's) can copy a lock another thread held,
    and the worker then waits on it for ever. The server imports the parser once, so a worker starts
    as fast as a fork."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["graphmem.ingest"])
    return ProcessPoolExecutor(max_workers=workers, mp_context=context)


class FactsCache:
    """Parsed code facts by content hash, so an unchanged file is never parsed twice.

    Holds redacted facts only. The folder is stamped with the redaction rules and the facts
    format it was written under; entries from before redaction, or from other rules, may hold what
    today's rules hide, and entries of another format lack what today's extraction records, so
    they are all dropped when the stamp differs.
    """

    FORMAT = f"redacted {REDACTION_RULES}; facts {code.FACTS_VERSION}"
    _ENTRY_DIR = re.compile(r"[0-9a-f]{2}")

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def open(cls, directory: Path) -> FactsCache:
        """The cache in ``directory``, emptied first if it was written under other rules."""
        stamp = directory / "FORMAT"
        try:
            current = stamp.read_text(encoding="utf-8").strip()
        except OSError:
            current = None
        if current != cls.FORMAT:
            if directory.is_dir():
                for child in directory.iterdir():
                    if child.is_dir() and cls._ENTRY_DIR.fullmatch(child.name):
                        shutil.rmtree(child, ignore_errors=True)
            directory.mkdir(parents=True, exist_ok=True)
            tmp = stamp.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(cls.FORMAT + "\n", encoding="utf-8")
            tmp.replace(stamp)
        return cls(directory)

    def _path(self, digest: str) -> Path:
        return self.directory / digest[:2] / f"{digest}.json"

    def get(self, digest: str) -> code.FileFacts | None:
        try:
            return code.FileFacts.from_dict(orjson.loads(self._path(digest).read_bytes()))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put(self, digest: str, facts: dict) -> None:
        """Store facts as :func:`_parse` returns them (redacted)."""
        path = self._path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(orjson.dumps(facts))
        tmp.replace(path)  # atomic: a reader never sees half a file


class StatCache:
    """Content hashes of one checkout's files by their stat signature (size, mtime, ctime, inode),
    as git's index keeps them: a file whose signature is unchanged need not be read again to know
    its hash. Local to the machine (a signature means nothing elsewhere), one JSON file per
    checkout under ``<cache>/stat/``.

    A file modified within :attr:`RACY_NS` of being recorded is not recorded: a second write in the
    same timestamp tick could keep size and mtime while changing the content.
    """

    RACY_NS = 2_000_000_000
    FORMAT = 1

    def __init__(self, path: Path, entries: dict[str, list[Any]]) -> None:
        self.path = path
        self.entries = entries
        self._dirty = False

    @classmethod
    def open(cls, cache_dir: str | Path, root: str | Path) -> StatCache:
        name = hashlib.blake2b(str(Path(root).resolve()).encode(), digest_size=12).hexdigest()
        path = Path(cache_dir) / "stat" / f"{name}.json"
        try:
            data = orjson.loads(path.read_bytes())
            entries = data["files"] if data.get("format") == cls.FORMAT else {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            entries = {}
        return cls(path, entries if isinstance(entries, dict) else {})

    @staticmethod
    def signature(st: os.stat_result) -> list[int]:
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]

    def lookup(self, path: str, st: os.stat_result) -> str | None:
        """The recorded hash of ``path`` if its signature is still ``st``'s."""
        entry = self.entries.get(path)
        if entry and len(entry) == 5 and entry[:4] == self.signature(st):
            return str(entry[4])
        return None

    def record(self, path: str, st: os.stat_result, digest: str) -> None:
        """Remember ``digest`` for ``path`` as of ``st`` (taken before the file was read)."""
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < self.RACY_NS:
            if self.entries.pop(path, None) is not None:
                self._dirty = True
            return
        entry = [*self.signature(st), digest]
        if self.entries.get(path) != entry:
            self.entries[path] = entry
            self._dirty = True

    def keep_only(self, paths: set[str]) -> None:
        gone = [p for p in self.entries if p not in paths]
        for p in gone:
            del self.entries[p]
        self._dirty = self._dirty or bool(gone)

    def save(self) -> None:
        """Write the cache if it changed (atomically; a failure only costs a re-read next time)."""
        if not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(orjson.dumps({"format": self.FORMAT, "files": self.entries}))
            tmp.replace(self.path)
            self._dirty = False
        except OSError:
            pass


def redact_extraction(ex: Extraction) -> int:
    """Replace secret-looking strings in every property and chunk text; return how many."""
    total = 0

    def clean(props: dict) -> None:
        nonlocal total
        for name, value in props.items():
            if isinstance(value, str) and value:
                new, n = redact(value)
                if n:
                    props[name], total = new, total + n
            elif isinstance(value, list) and value and isinstance(value[0], str):
                out = []
                for item in value:
                    new, n = redact(item)
                    out.append(new)
                    total += n
                props[name] = out

    for node in ex.nodes:
        clean(node.props)
        node.name, n = redact(node.name)
        total += n
    for rel in ex.rels:
        clean(rel.props)
    for chunk in ex.chunks:
        chunk.text, n = redact(chunk.text)
        total += n
    return total


def service_dependencies(code_graph: Extraction, services: ServiceMap) -> list[Relationship]:
    """DEPENDS_ON between services, from imports and calls that cross a service boundary.

    Each dependency is asserted by the file whose import or call shows it, so it closes when that
    file stops showing it.
    """

    def path_of(key: str) -> str | None:
        if key.startswith("file:"):
            return key[5:]
        if key.startswith("sym:"):
            return symbol_parts(key)[0]
        return None

    seen: dict[tuple[str, str, str], Relationship] = {}
    for rel in code_graph.rels:
        if rel.type not in (RelType.IMPORTS, RelType.CALLS):
            continue
        src_path, dst_path = path_of(rel.src), path_of(rel.dst)
        if src_path is None or dst_path is None:
            continue
        a, b = services.service_of(src_path), services.service_of(dst_path)
        if a and b and a != b:
            ident = (service_key(a), service_key(b), rel.provenance.source_path)
            if ident not in seen:
                seen[ident] = Relationship(
                    service_key(a), RelType.DEPENDS_ON, service_key(b),
                    Provenance(rel.provenance.source_path, "dependencies", "1", rel.provenance.source_commit,
                               min(1.0, rel.provenance.confidence)),
                    {"via": rel.type.value},
                )
    return list(seen.values())


def read_policy(root: Path) -> tuple[dict, Policy, list[Skipped]]:
    """The folder's ``graphmem.toml`` and the file policy it sets; a broken file is reported and
    ignored (defaults apply)."""
    problems: list[Skipped] = []
    try:
        config = read_project_config(root)
    except ConfigError as exc:
        problems.append(Skipped("graphmem.toml", f"ignored: {exc}"))
        config = {}
    try:
        policy = Policy.from_config(config)
    except ConfigError as exc:
        problems.append(Skipped("graphmem.toml", f"[ingest] ignored: {exc}"))
        policy = Policy()
    return config, policy, problems


def ingest(
    root: str | Path,
    store: GraphStore,
    *,
    cache_dir: str | Path,
    progress: Progress | None = None,
    workers: int = 2,
    force: bool = False,
) -> IngestReport:
    """Bring ``store`` up to date with the repository (or folder) at ``root``.

    Raises :class:`IngestRefused`, before writing anything, when the folder would close all or most
    of what the project holds, unless ``force``.
    """
    started = time.perf_counter()
    root = Path(root).expanduser().resolve()
    if not root.is_dir():
        raise GraphmemError(f"not a folder: {root}")
    report = IngestReport(project=store.project, root=str(root))
    note = progress or (lambda stage, done, total: None)

    config, policy, problems = read_policy(root)
    report.skipped += problems
    files, skipped = policy.discover(root)
    report.skipped += skipped
    report.files = len(files)
    head = head_commit(root) if is_git_repo(root) else None
    report.head = head
    # A repository is known by its root commits wherever it is checked out.
    identity = " ".join(root_commits(root)) if head else ""
    known = store.get_meta("repository")
    if known and identity and not set(known.split()) & set(identity.split()) and not force:
        raise IngestRefused(
            f"refused: {root} is another repository than the one project {store.project!r} was made from "
            f"(last ingested from {store.get_meta('root')}); nothing was changed. Choose another project "
            "(--project), or run again with --force to replace what the project holds.")

    # --- what changed ---
    hashes: dict[str, str] = {}
    contents: dict[str, bytes] = {}
    previous = store.source_states()
    # A project whose code was extracted under another facts format (what a parse records, how code
    # is cut into chunks) has every code file extracted again, once, as if it had changed.
    reextract = bool(previous) and store.get_meta(FACTS_META) != str(code.FACTS_VERSION)
    # Every file is read (the ingest trusts content, not timestamps); the signatures recorded on the
    # way let `graphmem.registry.verify` skip reading files that did not change since.
    stats = StatCache.open(cache_dir, root)
    for i, path in enumerate(files):
        try:
            st = os.stat(root / path)  # before reading: a write after it changes the signature
            data = (root / path).read_bytes()
        except OSError as exc:
            report.skipped.append(Skipped(path, f"unreadable: {exc.strerror or exc}"))
            continue
        hashes[path] = content_hash(data)
        stats.record(path, st, hashes[path])
        if previous.get(path) != hashes[path] or (reextract and code.supports(path)):
            contents[path] = data
        if i % 500 == 0:
            note("read", i, len(files))
    stats.keep_only(set(hashes))
    stats.save()
    changed = set(contents)
    deleted = {p for p in previous if p not in hashes}
    report.changed, report.deleted = len(changed), len(deleted)
    if previous and deleted and not force and (
            not hashes or (len(deleted) >= REMOVAL_GUARD_MIN and len(deleted) > REMOVAL_GUARD_SHARE * len(previous))):
        was = store.get_meta("root")
        raise IngestRefused(
            f"refused: ingesting {root} would close {len(deleted)} of the {len(previous)} files project "
            f"{store.project!r} holds" + (f" (last ingested from {was})" if was and was != str(root) else "")
            + "; nothing was changed. To ingest another folder, choose another project (--project); "
            "if the files were really removed, run again with --force.")
    report.unchanged = len(hashes) - len(changed)
    since = store.get_meta("last_commit")
    listed = list_tags(root) if head is not None else []
    tags = tag_map(listed)
    tag_state = orjson.loads(store.get_meta(RELEASES_META) or "{}")
    tags_stale = _tags_stale(tag_state, tags, head)
    if not changed and not deleted and (head is None or since == head) and not tags_stale \
            and not store.get_meta(INCOMPLETE):
        # The verification pass found nothing new: the graph is up to date.
        report.seconds = time.perf_counter() - started
        return report

    # --- code: parse what is new, reuse cached facts for the rest, resolve across the project ---
    cache = FactsCache.open(Path(cache_dir) / "facts")
    code_paths = [p for p in hashes if code.supports(p)]
    facts: dict[str, code.FileFacts] = {}
    to_parse: list[str] = []
    # Facts name their path, so the cache key covers path and content: identical files (empty
    # __init__.py files, say) must not evict each other.
    cache_keys = {p: content_hash(f"{p}\0{hashes[p]}".encode()) for p in code_paths}
    for path in code_paths:
        cached = cache.get(cache_keys[path])
        if cached is not None:
            facts[path] = cached
        else:
            to_parse.append(path)
    for path in to_parse:
        if path not in contents:  # unchanged, but parsed facts are not cached
            contents[path] = (root / path).read_bytes()
    jobs = [(p, contents[p]) for p in to_parse]
    if len(jobs) >= PARALLEL_PARSE_MIN and workers > 1:
        with parse_pool(workers) as pool:
            parsed = pool.map(_parse, jobs, chunksize=16)
            for i, ((path, _), (result, found)) in enumerate(zip(jobs, parsed)):
                cache.put(cache_keys[path], result)
                facts[path] = code.FileFacts.from_dict(result)
                report.redactions += found if path in changed else 0
                note("parse", i + 1, len(jobs))
    else:
        for i, job in enumerate(jobs):
            result, found = _parse(job)
            cache.put(cache_keys[job[0]], result)
            facts[job[0]] = code.FileFacts.from_dict(result)
            report.redactions += found if job[0] in changed else 0
            note("parse", i + 1, len(jobs))
    code_graph = code.build_graph(facts, commit=head)
    for f in facts.values():
        if f.has_syntax_errors:
            report.skipped.append(Skipped(f.path, "syntax errors: kept what parsed"))
        if f.too_deep:
            report.skipped.append(Skipped(f.path, f"nested more than {MAX_QUERY_DEPTH} levels deep (generated code?): "
                                                  "kept what lies above that depth"))
        if f.decode_errors and f.path in changed:
            report.skipped.append(Skipped(f.path, "not UTF-8: read in the encoding it declares, else Windows-1252"))

    # --- ownership and services (small: always rebuilt) ---
    services, teams = _services_and_teams(config, list(hashes), root.name, report)
    ownership = extract_ownership(root, list(hashes), services=services, teams=teams, source_commit=head)
    report.skipped += ownership.skipped
    # An inferred service named after the project is not looked for in prose: every docstring,
    # commit and document of a project may name it, and that relates them to nothing in particular.
    own_names = {root.name, store.project} - {svc.name for svc in services if svc.declared}
    vocabulary = Vocabulary.from_symbol_keys(
        [n.name for n in ownership.nodes if n.key.startswith("service:") and n.name not in own_names],
        [n.key for n in code_graph.nodes if n.key.startswith("sym:")],
        [n.name for n in ownership.nodes if n.key.startswith("team:")])

    # --- documents that changed ---
    docs = Extraction()
    for path in sorted(changed):
        extract = (extract_decision if is_decision_record(path)
                   else extract_incident if is_incident_report(path) else None)
        if extract is None:
            continue
        text = contents[path].decode("utf-8", errors="replace")
        docs.extend(extract(path, text, vocabulary=vocabulary, source_commit=head))
    report.skipped += docs.skipped

    # --- git history since the last ingested commit ---
    history = Extraction()
    rewritten: list[str] = []
    if head is not None:
        if since and since != head and not _is_ancestor(root, since, head):
            # History was rewritten (rebase, amend, reset): commits no longer reachable from HEAD
            # stop holding, with everything they asserted.
            reachable = _reachable(root, head)
            rewritten = [f"git:{n.key[7:]}" for n in store.iter_nodes([NodeKind.COMMIT])
                         if n.key[7:] not in reachable]
        if since != head:
            try:
                history = extract_history(root, since=since, parse=code.symbol_ranges)
            except GraphmemError:  # e.g. the last ingested commit was rewritten away
                history = extract_history(root, parse=code.symbol_ranges)
            report.commits = sum(1 for n in history.nodes if n.key.startswith("commit:"))

    # --- releases: read again when the tags changed (or a tag's commit joined the history) ---
    releases, retagged, new_tag_state = Extraction(), [], tag_state
    if tags_stale or (rewritten and tags):
        releases, retagged, new_tag_state = _releases(store, root, head, listed, tag_state, history,
                                                      rewritten=bool(rewritten))
        report.releases = len(releases.nodes)

    # --- documentation that changed: READMEs, guides, runbooks, conventions, linter settings ---
    documentation = Extraction()
    doc_paths = [p for p in sorted(changed) if is_document(p)]
    if doc_paths:
        # After the history: the people and tickets it names are what documents may mention.
        known = {n.key for n in store.iter_nodes(CHECKED_KINDS)}
        known |= {n.key for part in (ownership, docs, history) for n in part.nodes}
        context = DocContext.build(vocabulary, hashes, (n.key[5:] for n in code_graph.nodes
                                                        if n.key.startswith("file:")), known)
        for path in doc_paths:
            documentation.extend(extract_document(path, contents[path], context=context, source_commit=head))
        report.skipped += documentation.skipped

    # --- write: the new facts, then withdraw what changed or vanished sources no longer say ---
    code_keys_changed = {n.key for n in code_graph.nodes if n.provenance.source_path in changed}
    code_part = Extraction(
        nodes=[n for n in code_graph.nodes if n.provenance.source_path in changed],
        # Relationships from unchanged files into changed ones are asserted again: a symbol that
        # was removed and now is back had them closed along with it.
        rels=[r for r in code_graph.rels if r.provenance.source_path in changed or r.dst in code_keys_changed],
        chunks=[c for c in code_graph.chunks if c.provenance.source_path in changed],
    )
    dependencies = service_dependencies(code_graph, services)
    # Commit messages and docstrings name services, symbols and technologies as documents do.
    prose = prose_mentions(Extraction(nodes=code_part.nodes + history.nodes), vocabulary,
                           service_of=services.service_of)
    batch = (Extraction().extend(ownership).extend(code_part).extend(docs).extend(documentation)
             .extend(history).extend(releases).extend(prose))
    batch.rels += dependencies
    report.redactions += redact_extraction(batch)  # code was redacted when parsed: these are the rest
    # Facts start when the history says they began to hold, not at this ingest.
    date_from_history(batch, root, rev=head)
    # ... and stop when the commit that changed or removed their source was made (now, for work
    # not committed yet): the oldest first, so a fact two sources said closes with the later one.
    withdrawn = sorted(changed | deleted) + rewritten
    closings: dict[str, list[str]] = {}
    if withdrawn:  # a first ingest has nothing to close: no history to look up
        closings = closing_times(root, withdrawn, rev=head, uncommitted=_uncommitted(root, head)) \
            if previous else {now_iso(): withdrawn}
    if stale := _stale_service_sources(store, services):
        closings.setdefault(now_iso(), []).extend(stale)
    if retagged:  # what a rewritten, moved or deleted release said before and does not say again
        closings.setdefault(now_iso(), []).extend(retagged)
    # Progress in elements written, then in source paths withdrawn (a Neo4j write can take a while).
    upserted = len(batch.nodes) + len(batch.rels) + len(batch.chunks)
    total = upserted + sum(len(paths) for paths in closings.values())
    note("write", 0, total)
    with store.atomic():
        # Where the writes cannot go in together (Neo4j), readers see that they are under way, and a
        # killed ingest leaves the mark (and its sources still unrecorded, so the next one redoes them).
        store.set_meta({INCOMPLETE: now_iso()})
        # One upsert: the store writes the nodes first (services, teams and owners included: other
        # facts point at them), and knows which of them it created, so what points at those is
        # created without looking for it. Then what the changed and vanished sources no longer say
        # is withdrawn, leaving what they say again as is.
        report.written.add(store.upsert(batch.nodes, batch.rels, batch.chunks))
        note("write", upserted, total)
        if closings:
            keep = Keep.of(batch.nodes, batch.rels, batch.chunks)
            for when, paths in closings.items():
                report.written.add(store.close_sources(paths, at=when, keep=keep))
        note("write", total, total)
        store.set_source_states({**{p: hashes[p] for p in changed}, **{p: None for p in deleted}})
        store.set_meta({"last_commit": head, "last_ingested_at": now_iso(), NAMES_STAMP: now_iso(), "root": str(root),
                        INCOMPLETE: None, FACTS_META: str(code.FACTS_VERSION),
                        RELEASES_META: orjson.dumps(new_tag_state).decode() if new_tag_state else None,
                        "repository": identity or None})
    # One line per skipped path (a broken graphmem.toml is noticed by more than one reader).
    report.skipped = list({item.path: item for item in reversed(report.skipped)}.values())[::-1]
    report.seconds = time.perf_counter() - started
    return report



def _tags_stale(state: dict, tags: dict[str, str], head: str | None) -> bool:
    """Whether releases must be read again: the tags changed, or a tag whose commit the history did
    not hold yet may be in it now (another head)."""
    if head is None:
        return False
    if tags != state.get("tags", {}):
        return True
    return bool(set(tags) - set(state.get("shipped", ()))) and head != state.get("head")


def _releases(store: GraphStore, root: Path, head: str, listed: list[TagRecord], state: dict,
              history: Extraction, *, rewritten: bool = False) -> tuple[Extraction, list[str], dict]:
    """The release facts to write, the release sources to withdraw (what they do not say again),
    and the new tag state. Releases are written again from the oldest one that is new, moved or
    newly in the history on (a tag made for old commits takes them from later releases); all of
    them when a release was deleted, moved or left the history, or the history was rewritten."""
    facts = read_releases(root, rev=head, tags=listed)
    tags = tag_map(listed)
    before, shipped_before = state.get("tags", {}), set(state.get("shipped", ()))
    shipped = {r.tag for r in facts}
    gone = sorted(tag for tag in shipped_before if tag not in shipped or tags.get(tag) != before.get(tag))
    fresh = [i for i, r in enumerate(facts) if r.tag not in shipped_before or before.get(r.tag) != r.sha]
    start = 0 if gone or rewritten else (fresh[0] if fresh else len(facts))
    write = facts[start:]
    known: set[str] | None = None
    if write:
        known = {n.key for n in store.iter_nodes([NodeKind.COMMIT])}
        known |= {n.key for n in history.nodes if n.kind is NodeKind.COMMIT}
    part = releases_to_graph(write, known_commits=known)
    retagged = [RELEASE_SOURCE + tag for tag in gone]
    retagged += [RELEASE_SOURCE + r.tag for r in write if r.tag in shipped_before]
    return part, retagged, {"head": head, "tags": tags, "shipped": sorted(shipped)}


def _uncommitted(root: Path, head: str | None) -> set[str]:
    """Paths whose working-tree state differs from ``head`` (none without history: every path of a
    folder without history closes at the ingest anyway)."""
    if head is None:
        return set()
    try:
        changed, deleted, _ = changed_paths_since(root, head)
    except GitError:
        return set()
    return changed | deleted


# --- replaying history on a first ingest --------------------------------------------------------


def replay_points(root: str | Path, limit: int) -> list[str]:
    """Up to ``limit`` commits of ``HEAD``'s first-parent history before ``HEAD``, oldest first,
    spread evenly over it (the first commit always among them)."""
    if limit < 1 or not is_git_repo(root) or head_commit(root) is None:
        return []
    proc = subprocess.run(["git", "-C", str(root), "rev-list", "--first-parent", "--reverse", "HEAD"],
                          capture_output=True, text=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    shas = proc.stdout.split()[:-1] if proc.returncode == 0 else []
    if len(shas) <= limit:
        return shas
    step = (len(shas) - 1) / max(1, limit - 1)
    return list(dict.fromkeys(shas[round(i * step)] for i in range(limit)))


# Replay checkouts are made under the temporary folder as ``graphmem-replay-<pid>-<random>/tree``:
# the pid says whether the process that made one is still there to remove it.
_REPLAY_PREFIX = "graphmem-replay-"
_REPLAY_DIR = re.compile(re.escape(_REPLAY_PREFIX) + r"(?:(\d+)-)?[^/\\]*")


def _any_case(glob: str) -> str:
    """``glob`` matching letters in either case (the secret-file policy ignores case; git does not)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in glob)


def _sparse_patterns() -> str:
    """Sparse-checkout patterns (non-cone) that check out everything but what the file policy
    refuses to open as credentials: files named like one, and credentials folders. A folder named
    like a credentials file (``src/credentials/``) is checked out; its files are filtered by name."""
    lines = ["/*"]
    lines += [f"!{_any_case(g)}" for g in SECRET_FILE_GLOBS]
    lines += [f"{_any_case(g)}/" for g in SECRET_FILE_GLOBS]
    lines += [f"!{_any_case(d)}/" for d in sorted(SECRET_DIRS)]
    return "\n".join(lines) + "\n"


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, under another user
        return False
    return False


def remove_stale_checkouts(root: str | Path) -> list[str]:
    """Remove replay checkouts of ``root`` left by a process that is gone (killed with SIGKILL, a
    machine that went down): their folders may hold the repository's files, and git keeps them
    registered as worktrees. Checkouts of live processes are left alone. Returns the paths removed."""
    proc = subprocess.run(["git", "-C", str(root), "worktree", "list", "--porcelain"],
                          capture_output=True, text=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    if proc.returncode != 0:
        return []
    removed = []
    for line in proc.stdout.splitlines():
        if not line.startswith("worktree "):
            continue
        tree = Path(line[len("worktree "):])
        named = _REPLAY_DIR.fullmatch(tree.parent.name)
        if tree.name != "tree" or not named:
            continue
        # A checkout made before its name carried a pid is a leftover too: no live replay has one.
        if named.group(1) and not _process_gone(int(named.group(1))):
            continue
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", "--force", str(tree)],
                       capture_output=True)
        shutil.rmtree(tree.parent, ignore_errors=True)
        removed.append(str(tree))
    subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True)
    return removed


@contextmanager
def checked_out(root: str | Path, sha: str) -> Iterator[Path]:
    """A temporary detached worktree of ``root`` at ``sha`` (its history and blame work as in
    ``root``), removed afterwards. Files the policy never opens as credentials (``.env``,
    ``id_rsa``...) are not checked out: the copy would be one more place they sit on disk."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{_REPLAY_PREFIX}{os.getpid()}-"))
    tree = tmp / "tree"
    try:
        # --no-checkout: nothing is written until the sparse patterns are in place (and git runs
        # no post-checkout hook of the user's).
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--quiet", "--no-checkout", "--detach",
                        str(tree), sha], capture_output=True, text=True, check=True)
        where = subprocess.run(["git", "-C", str(tree), "rev-parse", "--git-path", "info/sparse-checkout"],
                               capture_output=True, text=True, check=True).stdout.strip()
        sparse = Path(where) if Path(where).is_absolute() else tree / where
        sparse.parent.mkdir(parents=True, exist_ok=True)
        sparse.write_text(_sparse_patterns(), encoding="utf-8")
        # Sparse for this one command, through -c: the user's repository configuration is not changed
        # (the skip-worktree bits it leaves in the worktree's own index keep diff and status clean).
        subprocess.run(["git", "-C", str(tree), "-c", "core.sparseCheckout=true", "-c", "core.sparseCheckoutCone=false",
                        "-c", "index.sparse=false", "read-tree", "-mu", sha],
                       capture_output=True, text=True, check=True)
        yield tree
    except subprocess.CalledProcessError as exc:
        raise GitError(f"cannot check out {sha[:12]} to replay it: {(exc.stderr or '').strip()[-200:]}") from None
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], capture_output=True)
        subprocess.run(["git", "-C", str(root), "worktree", "prune"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def terminate_unwinds() -> Iterator[None]:
    """While the body runs, SIGTERM raises ``SystemExit(143)`` as SIGINT raises KeyboardInterrupt,
    so ``finally`` blocks (the removal of a replay checkout) run on ``kill``, a CI timeout or a
    killed hook. Only in the main thread (the only one Python delivers signals to); the previous
    handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        # A second SIGTERM must not cut the clean-up the first one started short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def replay_history(root: str | Path, store: GraphStore, *, cache_dir: str | Path, points: int,
                   progress: Progress | None = None) -> list[IngestReport]:
    """Before a project's first ingest, ingest ``points`` earlier commits of ``root`` in order, so
    facts that no longer hold at ``HEAD`` (an ownership line replaced, a call removed, a file
    deleted) are in the graph with the interval they held: each step closes what the next one no
    longer says at the commit that changed it. Nothing happens once the project holds a graph."""
    if store.get_meta("last_commit") or store.source_states():
        return []
    shas = replay_points(root, points)
    if not shas:
        return []
    reports = []
    with terminate_unwinds():
        remove_stale_checkouts(root)
        for sha in shas:
            with checked_out(root, sha) as tree:
                # A snapshot may differ wholly from the one before (a rewrite): the removal guard is
                # for a user pointing at the wrong folder, not for history.
                reports.append(ingest(tree, store, cache_dir=cache_dir, progress=progress, force=True))
                StatCache.open(cache_dir, tree).path.unlink(missing_ok=True)
    return reports

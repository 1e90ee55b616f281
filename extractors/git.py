"""Git history -> graph facts: commits, authors, changed files and symbols, references.

History is read with one ``git log`` run whose output is machine-parsable: a marker plus
unit-separated header fields per commit, then ``--raw``/``--numstat`` entries separated by NULs
(``-z``: paths arrive unquoted), then the ``--unified=0`` patch, of which only hunk headers are
kept. Merges are diffed against their first parent. Everything is read as bytes and decoded with
replacement, so commits with non-UTF-8 messages or paths never stop an ingest.

Provenance: every fact from a commit has ``source_path = "git:<sha>"``. Each commit is thus its own
immutable source: incremental runs add sources and never touch earlier ones, and a pipeline that
replaces "all facts of a source" on re-extraction cannot close the facts of older commits (which a
single shared ``.git`` source would invite).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from extractors.base import Extraction, Skipped
from graphmem.errors import GraphmemError
from graphmem.model import (
    Chunk,
    Node,
    Provenance,
    Relationship,
    RelType,
    adr_key,
    commit_key,
    file_key,
    incident_key,
    person_key,
    symbol_key,
    ticket_key,
    to_iso,
)

EXTRACTOR = "git"
CHUNK_CHARS = 1000

SymbolRanges = list[tuple[str, int, int]]
SymbolsAt = Callable[[str, str], SymbolRanges]


class GitError(GraphmemError):
    """A git command failed, or git is not installed."""


# --- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hunk:
    """One ``--unified=0`` hunk: old-side and new-side start and length (1-based lines)."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int


@dataclass(slots=True)
class FileChange:
    """One file a commit changed, relative to its first parent.

    ``status`` is ``A``, ``M``, ``D`` or ``R`` (copies count as ``A``, type changes as ``M``);
    ``old_path`` is set for renames. ``insertions``/``deletions`` are ``None`` for binary files.
    """

    path: str
    status: str
    old_path: str | None = None
    similarity: int | None = None
    insertions: int | None = None
    deletions: int | None = None
    binary: bool = False
    old_blob: str | None = None
    new_blob: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


@dataclass(slots=True)
class CommitFacts:
    """What one commit says about itself."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    authored_at: str
    committer_name: str
    committer_email: str
    committed_at: str
    message: str
    trailers: tuple[tuple[str, str], ...] = ()
    files: list[FileChange] = field(default_factory=list)

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0].strip()

    @property
    def body(self) -> str:
        parts = self.message.split("\n", 1)
        return parts[1].strip() if len(parts) > 1 else ""

    @property
    def insertions(self) -> int | None:
        counts = [f.insertions for f in self.files if f.insertions is not None]
        return sum(counts) if counts or not self.files else None

    @property
    def deletions(self) -> int | None:
        counts = [f.deletions for f in self.files if f.deletions is not None]
        return sum(counts) if counts or not self.files else None

    def trailer_values(self, name: str) -> list[str]:
        """Values of the trailers called ``name`` (case-insensitive)."""
        low = name.lower()
        return [v for k, v in self.trailers if k.lower() == low]


# --- running git --------------------------------------------------------------------------------

# Settings that would change the shape of the output we parse, whatever the user's config says.
_GIT_OVERRIDES = (
    "-c", "core.quotePath=true",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "log.showSignature=false",
    "-c", "color.ui=never",
)


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GIT_DIR", None)  # the repo is chosen by ``-C``, not by the caller's environment
    env.pop("GIT_WORK_TREE", None)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_PAGER"] = "cat"
    # graphmem only reads: ``git status`` must not take index.lock, which would make a user's
    # concurrent commit fail (and fail our own read while theirs holds it).
    env["GIT_OPTIONAL_LOCKS"] = "0"
    return env


def _git(repo: Path | str, *args: str, check: bool = True, stdin: bytes | None = None) -> bytes:
    cmd = ["git", "-C", str(repo), *_GIT_OVERRIDES, *args]
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, env=_git_env())
    except FileNotFoundError as exc:
        raise GitError("git is not installed (the 'git' command was not found)") from exc
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed in {repo}: {err[-1] if err else proc.returncode}")
    return proc.stdout


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def is_git_repo(path: Path | str) -> bool:
    """Whether ``path`` is inside a git work tree."""
    if not Path(path).is_dir():
        return False
    try:
        out = _git(path, "rev-parse", "--is-inside-work-tree", check=False)
    except GitError:
        return False
    return out.strip() == b"true"


def _prefix(repo: Path | str) -> str:
    """Path of ``repo`` below the top of its work tree (``""`` at the top, else ending in ``/``)."""
    return _text(_git(repo, "rev-parse", "--show-prefix")).strip()


def _resolve(repo: Path | str, rev: str) -> str | None:
    out = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", rev + "^{commit}",
               check=False)
    sha = out.strip().decode("ascii", "replace")
    return sha if len(sha) == 40 else None


def head_commit(repo: Path | str) -> str | None:
    """Full sha of ``HEAD``, or ``None`` for a repository without commits (or no repository)."""
    if not is_git_repo(repo):
        return None
    return _resolve(repo, "HEAD")


def root_commits(repo: Path | str) -> list[str]:
    """The commits without parents that ``HEAD`` descends from: what identifies a repository
    wherever it is checked out (empty for a folder that is not a repository or has no commits)."""
    if head_commit(repo) is None:
        return []
    return sorted(_text(_git(repo, "rev-list", "--max-parents=0", "HEAD")).split())


def working_tree_dirty(repo: Path | str, *, include_untracked: bool = True) -> bool:
    """Whether tracked files differ from ``HEAD`` (or, by default, untracked files exist)."""
    args = ["status", "--porcelain", "-z", "--ignore-submodules=dirty"]
    args.append("--untracked-files=normal" if include_untracked else "--untracked-files=no")
    return bool(_git(repo, *args, "--", ".").strip(b"\0"))


def changed_paths_since(
    repo: Path | str, sha: str, *, rev: str | None = None, include_untracked: bool = True
) -> tuple[set[str], set[str], dict[str, str]]:
    """Paths that changed between commit ``sha`` and the working tree (or commit ``rev``).

    Returns ``(changed, deleted, renames)``: ``changed`` holds added and modified paths and the new
    path of every rename (its content may differ too), ``deleted`` holds deleted paths and the old
    path of every rename, ``renames`` maps old path to new path. So a caller that ignores
    ``renames`` still re-extracts and closes the right files. Untracked, not ignored files count
    as added when comparing with the working tree. Paths are relative to ``repo``.
    """
    args = ["diff", "-z", "--name-status", "-M", "--no-ext-diff", "--no-textconv", "--relative",
            "--ignore-submodules=all", sha]
    if rev is not None:
        args.append(rev)
    tokens = _git(repo, *args, "--", ".").split(b"\0")
    changed: set[str] = set()
    deleted: set[str] = set()
    renames: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        status = _text(tokens[i])
        i += 1
        if not status:
            continue
        if status[0] in "RC":
            old, new = _text(tokens[i]), _text(tokens[i + 1])
            i += 2
            changed.add(new)
            if status[0] == "R":
                deleted.add(old)
                renames[old] = new
        else:
            path = _text(tokens[i])
            i += 1
            (deleted if status[0] == "D" else changed).add(path)
    if rev is None and include_untracked:
        others = _git(repo, "ls-files", "-z", "--others", "--exclude-standard", "--", ".")
        changed.update(_text(p) for p in others.split(b"\0") if p)
    return changed, deleted, renames


# --- reading history ----------------------------------------------------------------------------

_MARK = b"\x1e\x1fGRAPHMEM-COMMIT\x1f"
_FORMAT = (
    "%x1e%x1fGRAPHMEM-COMMIT%x1f"
    "%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%cn%x1f%ce%x1f%ct%x1f"
    "%(trailers:only=true,unfold=true)%x1f%B%x1f"
)
_HEADER_FIELDS = 10
_HUNK_RE = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NUMSTAT_RE = re.compile(rb"^(\d+|-)\t(\d+|-)\t(.*)$", re.DOTALL)
_TRAILER_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*)\s*:\s*(.*)$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def read_history(repo: Path | str, *, since: str | None = None, rev: str = "HEAD") -> list[CommitFacts]:
    """Commits in ``since..rev`` (all of ``rev``'s history when ``since`` is ``None``), oldest first.

    Parents come before children (topological order). An empty repository, or a ``rev`` that does
    not name a commit yet (unborn ``HEAD``), gives ``[]``; an unknown ``since`` raises
    :class:`GitError` so the caller can fall back to a full read. When ``repo`` is a folder inside
    a larger work tree, only commits touching it are read and paths are relative to it.
    """
    repo = Path(repo)
    if not is_git_repo(repo):
        raise GitError(f"not a git repository: {repo}")
    tip = _resolve(repo, rev)
    if tip is None:
        return []
    spec = tip
    if since is not None:
        base = _resolve(repo, since)
        if base is None:
            raise GitError(f"unknown commit {since!r} in {repo}")
        spec = f"{base}..{tip}"
    args = [
        "log", "-z", f"--format={_FORMAT}", "--raw", "--numstat", "-p", "--unified=0", "-M",
        "--no-abbrev", "--root", "--diff-merges=first-parent", "--topo-order", "--reverse",
        "--no-ext-diff", "--no-textconv", "--no-color", "--src-prefix=a/", "--dst-prefix=b/",
        "--encoding=UTF-8", "--ignore-submodules=none",
    ]
    pathspec: list[str] = []
    if _prefix(repo):
        args.append("--relative")
        pathspec = ["--", "."]
    out = _git(repo, *args, spec, *pathspec)
    return [_parse_commit(part) for part in out.split(_MARK)[1:]]


def _parse_commit(part: bytes) -> CommitFacts:
    end = part.find(b"\x1f\0")
    header, rest = (part[:end], part[end + 2:]) if end >= 0 else (part.rstrip(b"\x1f\0\n"), b"")
    fields = header.split(b"\x1f", _HEADER_FIELDS - 1)
    fields += [b""] * (_HEADER_FIELDS - len(fields))
    sha, parents, an, ae, at, cn, ce, ct, trailers, message = (_text(f) for f in fields)
    facts = CommitFacts(
        sha=sha.strip(),
        parents=tuple(parents.split()),
        author_name=an.strip(),
        author_email=ae.strip(),
        authored_at=_epoch_iso(at),
        committer_name=cn.strip(),
        committer_email=ce.strip(),
        committed_at=_epoch_iso(ct),
        message=message.strip("\n"),
        trailers=tuple(_parse_trailers(trailers)),
    )
    facts.files = _parse_changes(rest)
    return facts


def _epoch_iso(text: str) -> str:
    try:
        return to_iso(datetime.fromtimestamp(int(text.strip()), timezone.utc))
    except (ValueError, OverflowError, OSError):
        return to_iso(datetime.fromtimestamp(0, timezone.utc))


def _parse_trailers(text: str) -> Iterable[tuple[str, str]]:
    for line in text.splitlines():
        match = _TRAILER_RE.match(line.strip())
        if match:
            yield match.group(1), match.group(2).strip()


def _parse_changes(rest: bytes) -> list[FileChange]:
    """The ``--raw``/``--numstat`` NUL-separated entries, then the patch for hunk headers."""
    rest = rest.lstrip(b"\n")
    if not rest:
        return []
    tokens = rest.split(b"\0")
    files: list[FileChange] = []
    by_path: dict[str, FileChange] = {}
    stats: list[tuple[bytes, bytes, str]] = []
    i = 0
    consumed = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        consumed += len(tok) + 1
        if not tok:
            break  # the empty entry between numstat and patch
        if tok.startswith(b":"):
            meta = tok[1:].split(b" ")
            old_blob, new_blob, status = _text(meta[2]), _text(meta[3]), _text(meta[4])
            letter = status[:1]
            if letter in "RC":
                old, new = _text(tokens[i]), _text(tokens[i + 1])
                consumed += len(tokens[i]) + len(tokens[i + 1]) + 2
                i += 2
                change = FileChange(
                    path=new,
                    status="R" if letter == "R" else "A",
                    old_path=old if letter == "R" else None,
                    similarity=int(status[1:]) if status[1:].isdigit() else None,
                )
            else:
                path = _text(tokens[i])
                consumed += len(tokens[i]) + 1
                i += 1
                change = FileChange(path=path, status=letter if letter in "AMD" else "M")
            change.old_blob = None if set(old_blob) == {"0"} else old_blob
            change.new_blob = None if set(new_blob) == {"0"} else new_blob
            files.append(change)
            by_path[change.path] = change
            continue
        match = _NUMSTAT_RE.match(tok)
        if match:
            added, removed, path = match.group(1), match.group(2), match.group(3)
            if not path:  # rename: old and new path follow as entries of their own
                consumed += len(tokens[i]) + len(tokens[i + 1]) + 2
                path = tokens[i + 1]
                i += 2
            stats.append((added, removed, _text(path)))
            continue
        # Anything else means the NUL-separated part ended without its blank entry.
        consumed -= len(tok) + 1
        break
    for added, removed, path in stats:
        change = by_path.get(path)
        if change is None:
            continue
        if added == b"-" or removed == b"-":
            change.binary = True
        else:
            change.insertions = (change.insertions or 0) + int(added)
            change.deletions = (change.deletions or 0) + int(removed)
    _attach_hunks(rest[consumed:], by_path)
    return files


def _attach_hunks(patch: bytes, by_path: dict[str, FileChange]) -> None:
    lines = patch.split(b"\n")
    old_path: str | None = None
    target: FileChange | None = None
    n = len(lines)
    i = 0
    while i < n:
        line = lines[i]
        i += 1
        if line.startswith(b"diff --git "):
            old_path, target = None, None
        elif line.startswith(b"--- "):
            old_path = _patch_path(line[4:])
        elif line.startswith(b"+++ "):
            new_path = _patch_path(line[4:])
            path = new_path if new_path is not None else old_path
            target = by_path.get(path) if path is not None else None
        elif line.startswith(b"@@ "):
            match = _HUNK_RE.match(line)
            if not match:
                continue
            old_start, old_len, new_start, new_len = (
                int(g) if g is not None else 1 for g in match.groups()
            )
            if target is not None:
                target.hunks.append(Hunk(old_start, old_len, new_start, new_len))
            # Skip the hunk body by count: its lines may themselves begin with "--- " or "@@ ".
            left = old_len + new_len
            while left > 0 and i < n:
                if not lines[i].startswith(b"\\"):
                    left -= 1
                i += 1
            while i < n and lines[i].startswith(b"\\"):
                i += 1


def _patch_path(raw: bytes) -> str | None:
    """Path from a ``---``/``+++`` line: ``None`` for /dev/null, prefix ``a/``/``b/`` removed."""
    if raw.endswith(b"\t"):  # git appends a tab to names that contain a space
        raw = raw[:-1]
    if raw == b"/dev/null":
        return None
    data = _unquote(raw)
    if data[:2] in (b"a/", b"b/"):
        data = data[2:]
    return _text(data)


def _unquote(raw: bytes) -> bytes:
    """Undo git's C-style quoting of a path (``"dir/\\303\\251t\\303\\251.txt"``)."""
    if len(raw) < 2 or not (raw.startswith(b'"') and raw.endswith(b'"')):
        return raw
    text = raw[1:-1].decode("latin-1")
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567" and i + 3 < len(text) + 1 and all(
                c in "01234567" for c in text[i + 1:i + 4]
            ):
                out.append(int(text[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out.append(ord(ch))
        i += 1
    return bytes(out)


# --- symbols at a commit ------------------------------------------------------------------------


class BlobSymbols:
    """``symbols_at(path, sha)`` backed by ``git cat-file``, parsing each blob once.

    Blob ids are resolved with a long-running ``git cat-file --batch-check`` and contents read with
    ``git cat-file --batch``, so thousands of lookups cost two processes. Results are cached by
    ``(blob id, path)``: the same content at the same path parses once however many commits keep
    it. A parser that raises, a missing path, a non-blob or a blob over ``max_bytes`` gives ``[]``.
    Call :meth:`close` (or use ``with``) to end the git processes.
    """

    def __init__(
        self,
        repo: Path | str,
        parse: Callable[[str, bytes], SymbolRanges],
        *,
        max_bytes: int = 2_000_000,
    ) -> None:
        self.repo = Path(repo)
        self.parse = parse
        self.max_bytes = max_bytes
        self._prefix: str | None = None
        self._check: subprocess.Popen[bytes] | None = None
        self._batch: subprocess.Popen[bytes] | None = None
        self._cache: dict[tuple[str, str], SymbolRanges] = {}
        self._lock = threading.Lock()
        self.parsed = 0  # how many blobs were actually parsed (for tests and progress)

    def _start(self, mode: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["git", "-C", str(self.repo), "cat-file", mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=_git_env(),
        )

    def _ask(self, proc: subprocess.Popen[bytes], spec: str) -> bytes:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(spec.encode("utf-8", "surrogateescape") + b"\n")
        proc.stdin.flush()
        return proc.stdout.readline()

    def blob_id(self, path: str, sha: str) -> str | None:
        """The blob at ``path`` in commit ``sha``, or ``None``."""
        if "\n" in path or not path:
            return None  # the batch protocol is line based
        if self._prefix is None:
            self._prefix = _prefix(self.repo)
        if self._check is None or self._check.poll() is not None:
            self._check = self._start("--batch-check")
        reply = self._ask(self._check, f"{sha}:{self._prefix}{path}").split()
        if len(reply) != 3 or reply[1] != b"blob":
            return None
        if int(reply[2]) > self.max_bytes:
            return None
        return reply[0].decode("ascii")

    def read_blob(self, blob: str) -> bytes | None:
        """The content of a blob."""
        if self._batch is None or self._batch.poll() is not None:
            self._batch = self._start("--batch")
        header = self._ask(self._batch, blob).split()
        if len(header) != 3 or header[1] != b"blob":
            return None
        assert self._batch.stdout is not None
        size = int(header[2])
        data = self._batch.stdout.read(size)
        self._batch.stdout.read(1)  # the newline after the content
        return data

    def __call__(self, path: str, sha: str) -> SymbolRanges:
        with self._lock:
            blob = self.blob_id(path, sha)
            if blob is None:
                return []
            cached = self._cache.get((blob, path))
            if cached is not None:
                return cached
            data = self.read_blob(blob)
            result: SymbolRanges = []
            if data is not None:
                self.parsed += 1
                try:
                    result = list(self.parse(path, data))
                except Exception:  # noqa: BLE001 - one unparsable old version must not stop an ingest
                    result = []
            self._cache[(blob, path)] = result
            return result

    def close(self) -> None:
        for proc in (self._check, self._batch):
            if proc is None:
                continue
            try:
                if proc.stdin:
                    proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
            finally:
                if proc.stdout:
                    proc.stdout.close()
        self._check = self._batch = None

    def __enter__(self) -> BlobSymbols:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def make_symbols_at(
    repo: Path | str, parse: Callable[[str, bytes], SymbolRanges], *, max_bytes: int = 2_000_000
) -> BlobSymbols:
    """A ``symbols_at(path, sha)`` for :func:`commits_to_graph` that runs ``parse(path, content)``
    on the file as it was in commit ``sha``; ``parse`` returns ``(qualname, start, end)`` triples,
    1-based inclusive lines."""
    return BlobSymbols(repo, parse, max_bytes=max_bytes)


# --- references in messages ---------------------------------------------------------------------

_ADR_REF = re.compile(r"(?<![\w/-])ADR[-_ ]?(\d{1,5})(?![\w-])", re.IGNORECASE)
_INC_REF = re.compile(r"(?<![\w/-])INC-(\d+)(?![\w-])", re.IGNORECASE)
_TICKET_REF = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9]{1,9})-(\d{1,7})(?![\w-])")
_ID = r"(?:ADR[-_ ]?\d+|[A-Za-z][A-Za-z0-9]{1,9}-\d+)"
_FIX_REF = re.compile(
    rf"\b(?:fix(?:e[sd])?|close[sd]?|resolve[sd]?)\b\s*:?\s*"
    rf"({_ID}(?:\s*(?:,|and|&)?\s*{_ID})*)",
    re.IGNORECASE,
)
_IMPL_REF = re.compile(
    rf"\bimplement(?:s|ed|ing)?\b\s*:?\s*({_ID}(?:\s*(?:,|and|&)?\s*{_ID})*)", re.IGNORECASE
)
# Upper-case "WORD-123" tokens that are names of standards or algorithms, not tickets.
_NOT_TICKETS = frozenset({
    "ADR", "INC", "UTF", "SHA", "ISO", "RFC", "CVE", "HTTP", "TLS", "SSL", "MD", "AES", "RSA",
    "PEP", "UUID", "IPV", "GPT", "ES", "ECMA", "WCAG", "OWASP", "CWE", "PR", "GH", "X", "TCP",
    "UDP", "HMAC", "CRC", "JSR", "JEP", "BASE", "LATIN", "WIN", "CP", "ASCII", "ANSI", "ARM",
    "X86", "AMD", "ED", "P", "NIST", "FIPS", "OAUTH", "H", "HTTP2", "COVID", "Q",
})


@dataclass(frozen=True, slots=True)
class Reference:
    """A key a commit message names, and how (``REFERENCES``, ``FIXES`` or ``IMPLEMENTS``)."""

    key: str
    type: RelType
    mention: str


def find_references(message: str) -> list[Reference]:
    """Decision records, incidents and tickets named in a commit message, in order of appearance.

    ``ADR-5``/``ADR 0005``/``adr-5`` -> ``adr:5``; ``INC-042`` -> ``incident:INC-042``; other
    ``KEY-123`` tokens with an upper-case project key -> ``ticket:KEY-123``. Incidents and tickets
    after ``Fixes``/``Closes``/``Resolves`` become ``FIXES``; decisions after ``Implements``
    become ``IMPLEMENTS``; everything else ``REFERENCES``.
    """
    found: dict[str, tuple[int, str, str]] = {}  # key -> (position, kind, mention)

    def add(pos: int, key: str, kind: str, mention: str) -> None:
        if key not in found or found[key][0] > pos:
            found[key] = (pos, kind, mention)

    for m in _ADR_REF.finditer(message):
        add(m.start(), adr_key(m.group(1)), "adr", m.group(0))
    for m in _INC_REF.finditer(message):
        ident = f"INC-{m.group(1)}"
        add(m.start(), incident_key(ident), "incident", m.group(0))
    for m in _TICKET_REF.finditer(message):
        if m.group(1) in _NOT_TICKETS or m.group(1).isdigit():
            continue
        add(m.start(), ticket_key(m.group(0)), "ticket", m.group(0))

    fixed = _keys_in(_FIX_REF, message)
    implemented = _keys_in(_IMPL_REF, message)
    refs: list[Reference] = []
    for key, (_, kind, mention) in sorted(found.items(), key=lambda kv: (kv[1][0], kv[0])):
        rel = RelType.REFERENCES
        if kind in ("incident", "ticket") and key in fixed:
            rel = RelType.FIXES
        elif kind == "adr" and key in implemented:
            rel = RelType.IMPLEMENTS
        refs.append(Reference(key, rel, mention))
    return refs


def _keys_in(pattern: re.Pattern[str], message: str) -> set[str]:
    keys: set[str] = set()
    for m in pattern.finditer(message):
        for ident in re.findall(_ID, m.group(1), flags=re.IGNORECASE):
            upper = ident.upper()
            if upper.startswith("ADR"):
                keys.add(adr_key(re.sub(r"^ADR[-_ ]?", "", upper)))
            elif upper.startswith("INC-"):
                keys.add(incident_key(upper))
            else:
                keys.add(ticket_key(upper))
    return keys


_COAUTHOR_RE = re.compile(r"^\s*(.*?)\s*<([^<>\s]+@[^<>\s]*)>\s*$")


def co_authors(commit: CommitFacts) -> list[tuple[str, str]]:
    """``(name, email)`` of every ``Co-authored-by:`` trailer."""
    out: list[tuple[str, str]] = []
    values = commit.trailer_values("Co-authored-by")
    if not values:  # git did not see a trailer block; accept the lines anywhere in the message
        values = re.findall(r"(?im)^co-authored-by:\s*(.+)$", commit.message)
    for value in values:
        m = _COAUTHOR_RE.match(value)
        if m:
            out.append((m.group(1) or m.group(2), m.group(2)))
    return out


# --- graph --------------------------------------------------------------------------------------


def _own_ranges(symbols: Sequence[tuple[str, int, int]]) -> list[tuple[str, list[tuple[int, int]]]]:
    """Each symbol with the line ranges that belong to it and not to a symbol nested inside it.

    A change inside a method then modifies the method, not its class; a change to the class's
    own lines (its header, attributes, docstring) modifies the class.
    """
    items = sorted(
        ((q, s, e) for q, s, e in symbols if q and s >= 1 and e >= s), key=lambda t: (t[1], -t[2], t[0])
    )
    children: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(items))}
    stack: list[int] = []
    for idx, (_, start, end) in enumerate(items):
        while stack and items[stack[-1]][2] < start:
            stack.pop()
        if stack:
            p_start, p_end = items[stack[-1]][1], items[stack[-1]][2]
            # Same range as the enclosing item (overloads, aliases): a sibling, not a child.
            if (p_start, p_end) != (start, end) and p_end >= end:
                children[stack[-1]].append((start, end))
        stack.append(idx)
    out: list[tuple[str, list[tuple[int, int]]]] = []
    for idx, (qual, start, end) in enumerate(items):
        ranges: list[tuple[int, int]] = []
        cursor = start
        for c_start, c_end in sorted(children[idx]):
            if c_start > cursor:
                ranges.append((cursor, c_start - 1))
            cursor = max(cursor, c_end + 1)
        if cursor <= end:
            ranges.append((cursor, end))
        if not ranges:  # entirely made of nested symbols: still its own extent
            ranges = [(start, end)]
        out.append((qual, ranges))
    return out


def touched_symbols(
    symbols: Sequence[tuple[str, int, int]], lines: Sequence[tuple[int, int]]
) -> dict[str, int]:
    """Symbols whose own lines intersect the 1-based inclusive ``lines`` ranges -> lines touched."""
    if not symbols or not lines:
        return {}
    hits: dict[str, int] = {}
    for qual, ranges in _own_ranges(symbols):
        count = 0
        for s, e in ranges:
            for ls, le in lines:
                lo, hi = max(s, ls), min(e, le)
                if lo <= hi:
                    count += hi - lo + 1
        if count:
            hits[qual] = hits.get(qual, 0) + count
    return hits


def _modified_symbols(
    change: FileChange, commit: CommitFacts, symbols_at: SymbolsAt
) -> dict[tuple[str, str], int]:
    """``(path, qualname) -> lines`` a file change touched; new side, old side for deletions."""
    out: dict[tuple[str, str], int] = {}
    parent = commit.parents[0] if commit.parents else None
    old_path = change.old_path or change.path
    if change.status == "D":
        if parent is None:
            return out
        lines = [(h.old_start, h.old_start + h.old_len - 1) for h in change.hunks if h.old_len]
        for qual, n in touched_symbols(symbols_at(old_path, parent), lines).items():
            out[(old_path, qual)] = n
        return out
    new_lines = [(h.new_start, h.new_start + h.new_len - 1) for h in change.hunks if h.new_len]
    if change.status == "A" and not change.hunks and not change.binary:
        new_lines = [(1, 1 << 30)]  # an empty-diff add (e.g. empty file) still creates its symbols
    new_symbols = symbols_at(change.path, commit.sha) if change.status != "A" or new_lines else []
    for qual, n in touched_symbols(new_symbols, new_lines).items():
        out[(change.path, qual)] = n
    if change.status == "A" or parent is None:
        return out
    # Removed lines are looked up in the parent's version: pure deletions count wherever they
    # fall, replaced lines only for symbols gone from the new version (deleted or renamed), so
    # an edited function is not counted twice under its old and new extent.
    pure = [(h.old_start, h.old_start + h.old_len - 1) for h in change.hunks if h.old_len and not h.new_len]
    mixed = [(h.old_start, h.old_start + h.old_len - 1) for h in change.hunks if h.old_len and h.new_len]
    if not pure and not mixed:
        return out
    old_symbols = symbols_at(old_path, parent)
    still_there = {q for q, _, _ in new_symbols} if change.path == old_path else set()
    hits = touched_symbols(old_symbols, pure)
    for qual, n in touched_symbols(old_symbols, mixed).items():
        if qual not in still_there:
            hits[qual] = hits.get(qual, 0) + n
    for qual, n in hits.items():
        key = (old_path, qual)
        out[key] = out.get(key, 0) + n
    return out


def _chunk_text(commit: CommitFacts) -> str:
    paths = [
        f"{f.status} {f.old_path} -> {f.path}" if f.old_path else f"{f.status} {f.path}"
        for f in commit.files
    ]
    text = commit.message.strip()
    if paths:
        text += "\n\nFiles:\n" + "\n".join(paths)
    if len(text) > CHUNK_CHARS:
        text = text[: CHUNK_CHARS - 3].rstrip() + "..."
    return text


def commits_to_graph(
    commits: Sequence[CommitFacts],
    *,
    symbols_at: SymbolsAt | None = None,
    known_keys: set[str] | None = None,
    extractor_version: str = "1",
) -> Extraction:
    """Graph facts for ``commits``: commit, person and ticket nodes; AUTHORED, PARENT, CHANGED,
    MODIFIED, REFERENCES, FIXES and IMPLEMENTS relationships; one chunk per commit.

    ``symbols_at(path, sha)`` gives the symbols of a file as of a commit; without it no MODIFIED
    relationships are made. With ``known_keys``, CHANGED and MODIFIED only go to file and symbol
    keys in it (and ``symbols_at`` is only asked about files with known symbols), and PARENT only to
    commits in ``commits`` or in ``known_keys``. Commit nodes and their relationships are valid
    from the commit time. The output is deterministic for the same input.
    """
    ex = Extraction()
    in_batch = {c.sha for c in commits}
    sym_paths: set[str] | None = None
    if known_keys is not None:
        sym_paths = {k[4:].partition("::")[0] for k in known_keys if k.startswith("sym:")}
    persons: dict[str, tuple[str, Provenance]] = {}
    tickets: dict[str, Provenance] = {}

    def prov(sha: str) -> Provenance:
        return Provenance(
            source_path=f"git:{sha}", extractor=EXTRACTOR, extractor_version=extractor_version,
            source_commit=sha,
        )

    for commit in commits:
        try:
            ckey = commit_key(commit.sha)
        except GraphmemError:
            ex.skipped.append(_skip(commit.sha, "not a full commit sha"))
            continue
        when = commit.committed_at
        props: dict = {
            "sha": commit.sha,
            "short_sha": commit.sha[:7],
            "message": commit.message,
            "subject": commit.subject,
            "author_name": commit.author_name,
            "author_email": commit.author_email.lower(),
            "authored_at": commit.authored_at,
            "committer_name": commit.committer_name,
            "committer_email": commit.committer_email.lower(),
            "committed_at": commit.committed_at,
            "parents": list(commit.parents),
            "is_merge": len(commit.parents) > 1,
            "files_changed": len(commit.files),
        }
        if commit.insertions is not None:
            props["insertions"] = commit.insertions
        if commit.deletions is not None:
            props["deletions"] = commit.deletions
        if commit.trailers:
            props["trailers"] = [f"{k}: {v}" for k, v in commit.trailers]
        ex.nodes.append(Node(ckey, commit.subject or commit.sha[:7], prov(commit.sha), props,
                             valid_from=when))

        def rel(src: str, rtype: RelType, dst: str, rprops: dict | None = None) -> None:
            ex.rels.append(Relationship(src, rtype, dst, prov(commit.sha), rprops or {},
                                        valid_from=when))

        # Authors and co-authors.
        seen_people: set[str] = set()
        people = [(commit.author_name, commit.author_email, "author")]
        people += [(n, e, "co-author") for n, e in co_authors(commit)]
        for name, email, role in people:
            email = email.strip().lower()
            if not email or email in seen_people:
                continue
            seen_people.add(email)
            pkey = person_key(email)
            persons[pkey] = (name.strip() or email, prov(commit.sha))  # latest name wins
            rel(pkey, RelType.AUTHORED, ckey, {"role": role})

        for parent in commit.parents:
            pkey = commit_key(parent)
            if known_keys is None or parent in in_batch or pkey in known_keys:
                rel(ckey, RelType.PARENT, pkey, {"first": parent == commit.parents[0]})

        for change in commit.files:
            fkey = file_key(change.path) if change.path else None
            if fkey and (known_keys is None or fkey in known_keys):
                cprops: dict = {"change_type": change.status}
                if change.old_path:
                    cprops["old_path"] = change.old_path
                if change.insertions is not None:
                    cprops["insertions"] = change.insertions
                    cprops["deletions"] = change.deletions
                if change.binary:
                    cprops["binary"] = True
                rel(ckey, RelType.CHANGED, fkey, cprops)
            if symbols_at is None or change.binary:
                continue
            if sym_paths is not None and change.path not in sym_paths and (
                change.old_path or change.path) not in sym_paths:
                continue
            touched = _modified_symbols(change, commit, symbols_at)
            for (path, qual), n in sorted(touched.items()):
                skey = symbol_key(path, qual)
                if known_keys is None or skey in known_keys:
                    rel(ckey, RelType.MODIFIED, skey, {"lines_changed": n, "change_type": change.status})

        for ref in find_references(commit.message):
            if ref.key.startswith("ticket:"):
                tickets.setdefault(ref.key, prov(commit.sha))
            rel(ckey, ref.type, ref.key, {"mention": ref.mention})

        ex.chunks.append(Chunk(ckey, 0, _chunk_text(commit), "commit", prov(commit.sha)))

    for pkey in sorted(persons):
        name, provenance = persons[pkey]
        ex.nodes.append(Node(pkey, name, provenance, {"email": pkey[len("person:"):]}))
    for tkey in sorted(tickets):
        ident = tkey[len("ticket:"):]
        ex.nodes.append(Node(tkey, ident, tickets[tkey], {"tracker_project": ident.rsplit("-", 1)[0]}))
    return ex


def _skip(sha: str, reason: str) -> Skipped:
    return Skipped(path=f"git:{sha}", reason=reason)


def extract_history(
    repo: Path | str,
    *,
    since: str | None = None,
    rev: str = "HEAD",
    parse: Callable[[str, bytes], SymbolRanges] | None = None,
    known_keys: set[str] | None = None,
    extractor_version: str = "1",
) -> Extraction:
    """:func:`read_history` then :func:`commits_to_graph`, with ``parse`` plugged in through
    :func:`make_symbols_at` when given."""
    commits = read_history(repo, since=since, rev=rev)
    if parse is None:
        return commits_to_graph(commits, known_keys=known_keys, extractor_version=extractor_version)
    with make_symbols_at(repo, parse) as symbols_at:
        return commits_to_graph(
            commits, symbols_at=symbols_at, known_keys=known_keys, extractor_version=extractor_version
        )


__all__ = [
    "BlobSymbols",
    "CommitFacts",
    "FileChange",
    "GitError",
    "Hunk",
    "Reference",
    "changed_paths_since",
    "co_authors",
    "commits_to_graph",
    "extract_history",
    "find_references",
    "head_commit",
    "is_git_repo",
    "make_symbols_at",
    "read_history",
    "root_commits",
    "touched_symbols",
    "working_tree_dirty",
]

"""When each fact began to hold, from the repository's history rather than from the ingest.

A first ingest of a repository with years of history must not make every fact start today: with
``--as-of`` the graph has to show the past. Each fact that does not carry its own start yet gets one:

- a decision record: the date it states, else the commit that added its file;
- an incident: when it started, else the commit that added its report;
- a symbol: the first commit that touched its lines, else the commit that added its file;
- a CODEOWNERS rule's ownership: the commit that last wrote that line (``git blame``);
- anything else: the commit that added the file it was read from, else the first commit that
  names it (a ticket in a commit message);
- a relationship: the latest of its own source's date and its two ends' dates (it cannot hold
  before both ends exist).

Files not committed yet keep no date here; the store then uses the ingest time. The ingest time
stays in each fact's provenance (``ingested_at``) either way.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from extractors.base import Extraction
from extractors.git import _git_env
from graphmem.errors import ModelError
from graphmem.model import RelType, now_iso, to_iso

# Past this many paths one pass over the whole history beats a path list on the command line.
_PATHSPEC_MAX = 200


def first_added(root: str | Path, paths: Iterable[str], *, rev: str = "HEAD") -> dict[str, str]:
    """For each path, the commit time (ISO, UTC) of the earliest commit reachable from ``rev``
    that added it; paths git does not know are left out."""
    return _path_dates(root, paths, rev, oldest_added=True)


def last_changed(root: str | Path, paths: Iterable[str], *, rev: str = "HEAD") -> dict[str, str]:
    """For each path, the commit time (ISO, UTC) of the latest commit reachable from ``rev`` that
    changed, added or deleted it; paths git does not know are left out."""
    return _path_dates(root, paths, rev, oldest_added=False)


def _path_dates(root: str | Path, paths: Iterable[str], rev: str, *, oldest_added: bool) -> dict[str, str]:
    """One ``git log`` pass: each path's first commit in the log's order (oldest adding commits
    first, or newest commits first)."""
    wanted = sorted(set(paths))
    if not wanted:
        return {}
    args = ["git", "-C", str(root), "-c", "core.quotePath=false", "log", "--no-renames", "--name-only", "-z",
            "--format=%x01%cI"]
    args += ["--reverse", "--diff-filter=A", rev] if oldest_added else [rev]
    if len(wanted) <= _PATHSPEC_MAX:
        args += ["--", *(f":(literal){p}" for p in wanted)]
    proc = subprocess.run(args, capture_output=True, env=_git_env())
    if proc.returncode != 0:
        return {}
    keep = set(wanted)
    dates: dict[str, str] = {}
    when = None
    for field in proc.stdout.decode("utf-8", "replace").split("\0"):
        field = field.strip("\n")
        if field.startswith("\x01"):
            head, _, field = field[1:].partition("\n")
            when = to_iso(head.strip())
            field = field.strip("\n")
        if field and when and field in keep and field not in dates:
            dates[field] = when
    return dates


def closing_times(root: str | Path, paths: Iterable[str], *, rev: str | None,
                  uncommitted: Iterable[str] = ()) -> dict[str, list[str]]:
    """When the facts of these changed or vanished source paths stopped holding, grouped by time
    (oldest first): the commit that last changed each path; ``uncommitted`` paths (the working tree
    differs from ``rev``), paths git does not know and folders without history: now."""
    now = now_iso()
    wanted = sorted(set(paths))
    dirty = set(uncommitted)
    dates = last_changed(root, (p for p in wanted if p not in dirty), rev=rev) if rev else {}
    groups: dict[str, list[str]] = {}
    for path in wanted:
        when = dates.get(path, now) if path not in dirty else now
        groups.setdefault(min(when, now), []).append(path)
    return dict(sorted(groups.items()))


def line_dates(root: str | Path, path: str, *, rev: str = "HEAD") -> dict[int, str]:
    """Line number -> commit time of the commit that last wrote the line (``git blame``)."""
    proc = subprocess.run(["git", "-C", str(root), "blame", "--line-porcelain", rev, "--", path],
                          capture_output=True, env=_git_env())
    if proc.returncode != 0:
        return {}
    out: dict[int, str] = {}
    line = 0
    for raw in proc.stdout.decode("utf-8", "replace").splitlines():
        parts = raw.split(" ")
        if len(parts) >= 3 and len(parts[0]) == 40 and parts[1].isdigit() and parts[2].isdigit():
            line = int(parts[2])
        elif raw.startswith("committer-time ") and line:
            out[line] = to_iso(datetime.fromtimestamp(int(raw.split(" ", 1)[1]), tz=timezone.utc))
    return out


def date_from_history(batch: Extraction, root: str | Path, *, rev: str | None) -> int:
    """Give every node and relationship of ``batch`` that has no ``valid_from`` the time it began
    to hold in the history of ``root`` (see the module docstring); returns how many were dated."""
    if rev is None:
        return 0
    latest = now_iso()
    sources = {n.provenance.source_path for n in batch.nodes} | {r.provenance.source_path for r in batch.rels}
    sources |= {n.key[5:] for n in batch.nodes if n.key.startswith("file:")}
    files = first_added(root, (s for s in sources if s and s != "."), rev=rev)

    first_touch: dict[str, str] = {}  # symbol -> first commit that touched its lines
    first_said: dict[str, str] = {}  # node -> first dated relationship (a commit's) that names it
    for rel in batch.rels:
        if rel.valid_from:
            if rel.type is RelType.MODIFIED and (rel.dst not in first_touch or rel.valid_from < first_touch[rel.dst]):
                first_touch[rel.dst] = rel.valid_from
            for end in (rel.src, rel.dst):
                if end not in first_said or rel.valid_from < first_said[end]:
                    first_said[end] = rel.valid_from

    def stated(value: object) -> str | None:
        if not isinstance(value, str) or not value.strip():
            return None
        try:
            when = to_iso(value)
        except ModelError:
            return None
        return when if when <= latest else None  # a date in the future is a typo or a plan

    dated = 0
    node_dates: dict[str, str] = {}
    for node in batch.nodes:
        if node.valid_from is None:
            key = node.key
            when = None
            if key.startswith("adr:"):
                when = stated(node.props.get("date"))
            elif key.startswith("incident:"):
                when = stated(node.props.get("started_at"))
            elif key.startswith("sym:"):
                when = first_touch.get(key)
            if when is None:
                when = files.get(key[5:] if key.startswith("file:") else node.provenance.source_path)
            if when is None:  # e.g. a ticket or person known from commits only
                when = first_said.get(key)
            if when is not None:
                node.valid_from = when
                dated += 1
        if node.valid_from is not None:
            node_dates[node.key] = node.valid_from

    blamed: dict[str, dict[int, str]] = {}
    for rel in batch.rels:
        if rel.valid_from is not None:
            continue
        source = rel.provenance.source_path
        own = None
        line = rel.props.get("line")
        if isinstance(line, int) and source:
            if source not in blamed:
                blamed[source] = line_dates(root, source, rev=rev)
            own = blamed[source].get(line)
        own = own or files.get(source)
        known = [d for d in (own, node_dates.get(rel.src), node_dates.get(rel.dst)) if d]
        if known:
            rel.valid_from = max(known)
            dated += 1
    return dated


__all__ = ["date_from_history", "first_added", "line_dates"]

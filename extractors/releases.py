"""Releases from git tags: which tag first shipped each commit.

A tag that points (perhaps through an annotated tag object) at a commit of ``HEAD``'s history is a
release. Each commit belongs to the first release that contains it: tags are taken in the order of
the commits they point at (oldest first; an annotated tag's own date does not count, since a tag can
be made long after its commit), and a release takes every commit it reaches that no earlier release
took. A commit that a later tag also contains was still first shipped by the earlier one.

:func:`read_releases` reads that from the repository with two git commands; :func:`releases_to_graph`
turns it into ``release:<tag>`` nodes, ``RELEASED_IN`` relationships from each commit to its first
release, and one chunk per release (its name, date, annotation and the subjects of its commits), so
"what changed in 2.1.0" and "which release removed X" have a node to land on. Every fact of a tag has
the source path ``git-tag:<tag>``, so the facts of a deleted or moved tag can be closed as a source.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from extractors.base import Extraction
from extractors.git import CHUNK_CHARS, EXTRACTOR, _epoch_iso, _git, _resolve, _text, is_git_repo
from graphmem.errors import GraphmemError
from graphmem.model import Chunk, Node, Provenance, Relationship, RelType, commit_key, release_key

SOURCE_PREFIX = "git-tag:"
# What a release's chunk lists of its commits: the first lines say what it is about, and a release of
# thousands of commits would not fit one chunk anyway.
SUBJECTS_IN_CHUNK = 40
_FIELD, _RECORD = "\x1f", "\x1e"
_REF_FORMAT = _FIELD.join(("%(refname:strip=2)", "%(objecttype)", "%(objectname)", "%(*objecttype)",
                           "%(*objectname)", "%(taggerdate:unix)", "%(contents:subject)", "%(contents:body)")) + _RECORD


@dataclass(frozen=True, slots=True)
class ReleaseFacts:
    """One release: a tag, the commit it points at and the commits it shipped first (newest first)."""

    tag: str
    sha: str
    released_at: str  # the annotated tag's date, else the commit's
    message: str  # the annotated tag's message ("" for a lightweight tag)
    commits: tuple[str, ...]
    subjects: tuple[str, ...] = ()  # the first line of each commit's message, as ``commits``


TagRecord = tuple[str, str, str, str]  # name, commit sha, tagger epoch or "", annotation


def tag_map(tags: Sequence[TagRecord]) -> dict[str, str]:
    """Tag name -> the commit it points at, from a :func:`list_tags` listing."""
    return {tag: sha for tag, sha, *_ in tags}


def list_tags(repo: Path | str) -> list[TagRecord]:
    """(name, commit sha, tagger epoch or "", annotation) of each tag that ends at a commit."""
    out = _text(_git(repo, "for-each-ref", f"--format={_REF_FORMAT}", "refs/tags"))
    tags = []
    for record in out.split(_RECORD):
        fields = record.lstrip("\n").split(_FIELD)
        if len(fields) != 8 or not fields[0]:
            continue
        name, kind, obj, peeled_kind, peeled, tagged, subject, body = fields
        if kind == "commit":
            tags.append((name, obj, "", ""))
        elif kind == "tag" and peeled_kind == "commit":  # an annotated tag of a commit
            message = subject.strip() + ("\n\n" + body.strip() if body.strip() else "")
            tags.append((name, peeled, tagged.strip(), message))
        # A tag of a tree, a blob or another tag is no release.
    return tags


def read_releases(repo: Path | str, *, rev: str = "HEAD", tags: Sequence[TagRecord] | None = None
                  ) -> list[ReleaseFacts]:
    """The releases in ``rev``'s history, oldest first (see the module docstring), from ``tags``
    (the repository's :func:`list_tags`, listed here when not given). A repository without tags,
    commits or git gives ``[]``."""
    repo = Path(repo)
    if not is_git_repo(repo) or _resolve(repo, rev) is None:
        return []
    tags = list_tags(repo) if tags is None else tags
    if not tags:
        return []
    parents: dict[str, tuple[str, ...]] = {}
    dated: dict[str, str] = {}
    subject: dict[str, str] = {}
    # Children before parents: of two tags on commits made in the same second, the ancestor's
    # (listed later) comes first.
    out = _text(_git(repo, "log", "-z", "--topo-order", f"--format=%H{_FIELD}%ct{_FIELD}%P{_FIELD}%s",
                     "--end-of-options", rev))
    for record in out.split("\0"):
        fields = record.strip("\n").split(_FIELD, 3)
        if len(fields) != 4:
            continue
        sha, epoch, ups, subject[sha] = fields
        parents[sha] = tuple(ups.split())
        dated[sha] = epoch
    place = {sha: i for i, sha in enumerate(parents)}
    shipped = [(int(dated[sha]), -place[sha], name, sha, tagged, message)
               for name, sha, tagged, message in tags if sha in parents]
    taken: set[str] = set()
    releases = []
    for epoch, _, name, sha, tagged, message in sorted(shipped):
        first: list[str] = []
        stack = [sha]
        while stack:  # every commit this tag reaches that no earlier release took
            here = stack.pop()
            if here in taken or here not in parents:
                continue
            taken.add(here)
            first.append(here)
            stack.extend(parents[here])
        first.sort(key=lambda c: (-int(dated[c]), c))
        releases.append(ReleaseFacts(name, sha, _epoch_iso(tagged or str(epoch)), message, tuple(first),
                                     tuple(subject[c] for c in first)))
    return releases


def releases_to_graph(releases: Sequence[ReleaseFacts], *, known_commits: Collection[str] | None = None,
                      extractor_version: str = "1") -> Extraction:
    """Nodes, ``RELEASED_IN`` relationships and chunks of ``releases``. With ``known_commits``
    (commit keys), relationships and the chunks' lists of changes hold only those (a graph of one
    folder of a larger repository holds the commits that touched it). Deterministic."""
    ex = Extraction()
    for release in releases:
        try:
            key = release_key(release.tag)
        except GraphmemError:
            continue
        prov = Provenance(source_path=SOURCE_PREFIX + release.tag, extractor=EXTRACTOR,
                          extractor_version=extractor_version, source_commit=release.sha)
        kept = [(c, s) for c, s in zip(release.commits, release.subjects or [""] * len(release.commits))
                if known_commits is None or commit_key(c) in known_commits]
        commits = [c for c, _ in kept]
        props = {"tag": release.tag, "sha": release.sha, "released_at": release.released_at,
                 "commits": len(commits), "annotated": bool(release.message)}
        if release.message:
            props["message"] = release.message
        ex.nodes.append(Node(key, release.tag, prov, props, valid_from=release.released_at))
        for sha in commits:
            ex.rels.append(Relationship(commit_key(sha), RelType.RELEASED_IN, key, prov, {},
                                        valid_from=release.released_at))
        ex.chunks.append(Chunk(key, 0, _chunk_text(release, [s for _, s in kept]), "release", prov))
    return ex


def _chunk_text(release: ReleaseFacts, subjects: Sequence[str]) -> str:
    """"Release 2.1.0 (2026-03-02)", the annotation, then how many commits and their subjects."""
    text = f"Release {release.tag} ({release.released_at[:10]})"
    if release.message:
        text += "\n" + release.message
    listed = [s.strip() for s in subjects if s.strip()][:SUBJECTS_IN_CHUNK]
    if subjects:
        text += f"\n\n{len(subjects)} commit{'s' if len(subjects) != 1 else ''}" + (":\n" if listed else "")
        text += "\n".join(f"- {s}" for s in listed)
    if len(text) > CHUNK_CHARS:
        text = text[: CHUNK_CHARS - 3].rstrip() + "..."
    return text


__all__ = ["SOURCE_PREFIX", "ReleaseFacts", "read_releases", "releases_to_graph", "tag_map"]

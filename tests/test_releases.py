"""Releases (git tags) in the graph: kept in step with the tags, and asked about."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphmem.api import Graphmem
from graphmem.config import Settings
from graphmem.ingest import ingest
from graphmem.model import NodeKind, RelType
from graphmem.retrieval.question import parse_question
from tests.extractors.git.git_testrepo import Repo
from tests.test_ingest import open_rels, planted_secrets


def _shipped(store: Any) -> dict[str, set[str]]:
    """Release key -> the commit shas it shipped first (open relationships)."""
    out: dict[str, set[str]] = {}
    for commit, release in open_rels(store, RelType.RELEASED_IN):
        out.setdefault(release, set()).add(commit.removeprefix("commit:"))
    return out


def _ledger(root: Path) -> tuple[Repo, list[str]]:
    repo = Repo(root)
    repo.write("ledger.py", "def post_entry(entry):\n    return entry\n\n\ndef void_entry(entry):\n    return None\n")
    shas = [repo.commit("Post and void ledger entries")]
    repo.write("ledger.py", "def post_entry(entry):\n    return entry\n\n\ndef void_entry(entry):\n    return entry\n")
    shas.append(repo.commit("Voiding returns the entry"))
    repo.write("ledger.py", "def post_entry(entry):\n    return entry\n")
    shas.append(repo.commit("Reverse entries by a new posting instead"))
    return repo, shas


@pytest.mark.parametrize("backend", ["embedded", "neo4j"])
def test_releases_follow_the_tags_from_one_ingest_to_the_next(backend: str, request: pytest.FixtureRequest,
                                                               tmp_path: Path) -> None:
    factory: Callable[[str], Any] = request.getfixturevalue(f"{backend}_store_factory")
    repo, shas = _ledger(tmp_path / "repo")
    repo.git("tag", "v1.0", shas[1])
    store = factory("ledger")
    store.ensure_schema()
    first = ingest(repo.root, store, cache_dir=tmp_path / "cache")
    assert first.releases == 1
    assert _shipped(store) == {"release:v1.0": set(shas[:2])}
    node = store.get_node("release:v1.0")
    assert node is not None and node.props["commits"] == 2 and node.valid_from is not None
    # The read that shows a commit hit's release.
    edges = store.incident_edges([f"commit:{shas[0]}"], rel_types=[RelType.RELEASED_IN.value], direction="out")
    assert [(e.origin, e.step.type, e.other) for e in edges] == [(f"commit:{shas[0]}", "RELEASED_IN", "release:v1.0")]

    # A tag made on the commit already ingested: nothing else changed, the next ingest still reads it.
    _, _, secret = next(p for p in planted_secrets() if p[0] == "github-token")
    repo.git("tag", "-a", "v1.1", "-m", f"Reversals replace voids\n\ntoken used: {secret}",
             env={"GIT_COMMITTER_NAME": "Rel", "GIT_COMMITTER_EMAIL": "rel@example.com",
                  "GIT_COMMITTER_DATE": f"@{repo.clock + 60} +0000"})
    second = ingest(repo.root, store, cache_dir=tmp_path / "cache")
    assert second.commits == 0 and second.releases == 1
    assert _shipped(store) == {"release:v1.0": set(shas[:2]), "release:v1.1": {shas[2]}}
    # The annotation is the release's text, and a secret in it never reaches the store.
    tagged = store.get_node("release:v1.1")
    assert tagged is not None and tagged.props["message"].startswith("Reversals replace voids")
    assert secret not in tagged.props["message"]
    assert all(secret not in c.text for c in store.iter_chunks())
    assert any(c.node_key == "release:v1.1" and "Reversals replace voids" in c.text for c in store.iter_chunks())

    # Nothing new: the ingest has nothing to do.
    assert ingest(repo.root, store, cache_dir=tmp_path / "cache").releases == 0

    # A deleted tag's release is closed; its commits were first shipped by the next one.
    repo.git("tag", "-d", "v1.0")
    ingest(repo.root, store, cache_dir=tmp_path / "cache")
    assert store.get_node("release:v1.0") is None or store.get_node("release:v1.0").valid_to is not None
    assert _shipped(store) == {"release:v1.1": set(shas)}
    assert store.counts().nodes.get(NodeKind.RELEASE.value) == 1


def test_which_release_is_answered_by_the_tag_that_shipped_the_change(tmp_path: Path, embedder: Any) -> None:
    repo, shas = _ledger(tmp_path / "repo")
    repo.git("tag", "v1.0", shas[0])
    repo.git("tag", "v2.0", shas[2])
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "ledger", embedder=embedder, reranker=None)
    try:
        gm.ingest(repo.root)
        answer = gm.query("Which release removed void_entry?", mode="hybrid", k=5)
        assert answer.analysis["answer_kinds"] == ["release", "commit"]
        assert answer.keys[0] == "release:v2.0"
        evidence = answer.results[0].evidence[0]
        assert evidence["rels"][-1] == {"src": f"commit:{shas[2]}", "type": "RELEASED_IN", "dst": "release:v2.0"}
        assert f"commit:{shas[2]}" in answer.keys[:3]
        # "What changed in v2.0?" asks for the changes: the release that holds them, then its commits.
        changed = gm.query("What changed in v2.0?", mode="hybrid", k=3)
        assert changed.analysis["answer_kinds"] == ["commit", "release"]
        assert set(changed.keys[:2]) == {"release:v2.0", f"commit:{shas[2]}"}
        # "The last release" is the newest tag.
        assert gm.query("What changed in the last release?", mode="hybrid", k=3).keys[0] == "release:v2.0"
        # A commit answering a question about the code shows the release that shipped it, in every mode.
        for mode in ("hybrid", "bm25"):
            history = gm.query("Which commit removed void_entry?", mode=mode, k=5)
            hit = next(h for h in history.results if h.key == f"commit:{shas[2]}")
            shipped = [e for e in hit.evidence if e["rels"][-1]["type"] == "RELEASED_IN"]
            assert [e["rels"] for e in shipped] == [[{"src": hit.key, "type": "RELEASED_IN", "dst": "release:v2.0"}]]
    finally:
        gm.close()


def test_a_release_question_asks_for_the_commit_where_no_tag_makes_releases(tmp_path: Path, embedder: Any) -> None:
    repo, shas = _ledger(tmp_path / "repo")
    assert parse_question("Which version removed void_entry?").answer_kinds == (NodeKind.RELEASE, NodeKind.COMMIT)
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "ledger", embedder=embedder, reranker=None)
    try:
        gm.ingest(repo.root)
        answer = gm.query("Which version removed void_entry?", mode="hybrid", k=5)
        assert answer.analysis["answer_kinds"] == ["commit"]
        assert answer.keys[0] == f"commit:{shas[2]}"
        assert not any(step["type"] == "RELEASED_IN" for e in answer.results[0].evidence for step in e["rels"])
    finally:
        gm.close()

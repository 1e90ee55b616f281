"""Releases read from a real repository's tags: which tag first shipped each commit."""

from __future__ import annotations

from pathlib import Path

from extractors.releases import SOURCE_PREFIX, list_tags, read_releases, releases_to_graph, tag_map
from graphmem.model import RelType
from tests.extractors.git.git_testrepo import Repo


def _tag(repo: Repo, *args: str, when: int | None = None) -> None:
    stamp = f"@{when or repo.clock} +0000"
    repo.git("tag", *args, env={"GIT_COMMITTER_NAME": "Rel Eng", "GIT_COMMITTER_EMAIL": "rel@example.com",
                                "GIT_COMMITTER_DATE": stamp})


def _history(tmp_path: Path) -> tuple[Repo, list[str]]:
    repo = Repo(tmp_path / "repo")
    shas = []
    for i in range(6):
        repo.write("lib.py", f"def f():\n    return {i}\n")
        shas.append(repo.commit(f"Change {i}"))
    return repo, shas


def test_each_commit_belongs_to_the_first_tag_that_contains_it(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    _tag(repo, "v1.0", shas[1])
    _tag(repo, "-a", "v2.0", "-m", "Second release\n\nFaster lookups.", shas[4], when=repo.clock + 86_400)
    # Made later for older commits: it still ships them first, before v1.0 (its commit is older).
    _tag(repo, "v0.9", shas[0], when=repo.clock + 2 * 86_400)
    # A branch the history does not hold is no release of it.
    repo.git("checkout", "-q", "-b", "side", shas[2])
    repo.write("side.py", "x = 1\n")
    side = repo.commit("Side work")
    _tag(repo, "side-1", side)
    repo.git("checkout", "-q", "main")

    releases = read_releases(repo.root)
    assert [r.tag for r in releases] == ["v0.9", "v1.0", "v2.0"]
    by_tag = {r.tag: r for r in releases}
    assert by_tag["v0.9"].commits == (shas[0],)
    assert by_tag["v1.0"].commits == (shas[1],)
    assert set(by_tag["v2.0"].commits) == {shas[2], shas[3], shas[4]}
    assert by_tag["v2.0"].commits[0] == shas[4]  # newest first
    assert by_tag["v2.0"].subjects[0] == "Change 4"
    # An annotated tag keeps its message and its own date; a lightweight one takes its commit's.
    assert by_tag["v2.0"].message == "Second release\n\nFaster lookups."
    assert by_tag["v2.0"].released_at > by_tag["v1.0"].released_at
    assert by_tag["v1.0"].message == ""
    assert tag_map(list_tags(repo.root))["side-1"] == side  # every tag is listed; only the history's ship
    assert shas[5] not in {c for r in releases for c in r.commits}  # not released yet


def test_release_facts_name_their_commits_and_stay_within_the_known_ones(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    _tag(repo, "-a", "v1.0", "-m", "First", shas[2])
    (release,) = read_releases(repo.root)

    ex = releases_to_graph([release])
    (node,) = ex.nodes
    assert node.key == "release:v1.0" and node.props["commits"] == 3 and node.props["message"] == "First"
    assert node.provenance.source_path == SOURCE_PREFIX + "v1.0"
    assert {(r.src, r.type, r.dst) for r in ex.rels} == {
        (f"commit:{sha}", RelType.RELEASED_IN, "release:v1.0") for sha in shas[:3]}
    assert all(r.valid_from == node.valid_from for r in ex.rels)
    (chunk,) = ex.chunks
    assert chunk.text.startswith("Release v1.0 (") and "3 commits:\n- Change 2\n- Change 1\n- Change 0" in chunk.text

    only = releases_to_graph([release], known_commits={f"commit:{shas[0]}"})
    assert [r.src for r in only.rels] == [f"commit:{shas[0]}"]
    assert only.nodes[0].props["commits"] == 1 and "Change 2" not in only.chunks[0].text


def test_a_repository_without_tags_or_commits_has_no_releases(tmp_path: Path) -> None:
    empty = Repo(tmp_path / "empty")
    assert read_releases(empty.root) == []
    repo, _ = _history(tmp_path)
    assert read_releases(repo.root) == []
    assert read_releases(tmp_path / "nowhere") == []

"""Facts start when the repository's history says they began to hold, not at the ingest."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from graphmem.api import Graphmem
from graphmem.config import Settings
from graphmem.model import to_iso


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def shifted(when: str, days: int) -> str:
    return to_iso(datetime.fromisoformat(when.replace("Z", "+00:00")) + timedelta(days=days))


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory, example_org: tuple) -> Any:
    home = tmp_path_factory.mktemp("validity")
    started = to_iso(datetime.now(timezone.utc))
    gm = Graphmem(Settings(store="embedded", home=home), "acme")
    gm.ingest(example_org[0], llm=False)
    yield gm, example_org[0], example_org[1], started
    gm.close()


def test_files_and_symbols_start_at_the_commit_that_added_them(acme: Any) -> None:
    gm, repo, facts, started = acme
    path = facts["adrs"]["adr:5"]["implemented_by"][0]["files"][1].removeprefix("file:")
    added = git(repo, "log", "--reverse", "--diff-filter=A", "--format=%cI", "--", path).split()[0]
    node = gm.store.get_node(f"file:{path}")
    assert node is not None and node.valid_from == to_iso(added)
    assert node.provenance.ingested_at is None or node.provenance.ingested_at >= started  # provenance: the ingest
    # a symbol starts no earlier than its file, and no later than the first commit that touched it
    symbols = [n for n in gm.store.iter_nodes() if n.key.startswith(f"sym:{path}::")]
    assert symbols and all(to_iso(added) <= n.valid_from < started for n in symbols)


def test_codeowners_ownership_starts_when_its_line_was_written(acme: Any) -> None:
    gm, repo, _, _ = acme
    owns = [r for r in gm.store.get_relationships(["service:billing"]) if r.type.value == "OWNS"]
    assert owns and all(isinstance(r.props.get("line"), int) for r in owns)
    rel = owns[0]
    blame = git(repo, "blame", "--line-porcelain", "-L", f"{rel.props['line']},+1", "HEAD", "--",
                rel.provenance.source_path)
    written = int(next(line.split()[1] for line in blame.splitlines() if line.startswith("committer-time ")))
    assert rel.valid_from == to_iso(datetime.fromtimestamp(written, tz=timezone.utc))
    before = [r for r in gm.store.get_relationships(["service:billing"], as_of=shifted(rel.valid_from, -1))
              if r.type.value == "OWNS"]
    after = [r for r in gm.store.get_relationships(["service:billing"], as_of=shifted(rel.valid_from, 1))
             if r.type.value == "OWNS"]
    assert not before and {r.src for r in after} == {r.src for r in owns}


def test_as_of_shows_the_past(acme: Any) -> None:
    gm, repo, facts, _ = acme
    first = git(repo, "log", "--reverse", "--format=%cI").split()[0]
    assert gm.query("Who owns billing?", as_of=shifted(first, -30)).results == []  # before the repository
    last = git(repo, "log", "-1", "--format=%cI").strip()
    owners = [h.key for h in gm.query("Who owns billing?", as_of=shifted(last, 1), k=5).results]
    assert "team:payments" in owners
    # a decision is absent before the date it states
    adr = gm.store.get_node("adr:5")
    assert adr is not None and adr.valid_from.startswith(str(adr.props["date"])[:10])
    hits = gm.query("Publish ledger entries through Kafka", as_of=shifted(adr.valid_from, -1), k=10).results
    assert "adr:5" not in [h.key for h in hits]
    assert "adr:5" in [h.key for h in gm.query("Publish ledger entries through Kafka", k=10).results]


def test_facts_close_at_the_commit_that_removed_them(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "geo.py").write_text("def distance(a, b):\n    return abs(a - b)\n\n\ndef bearing(a, b):\n    return 0\n")
    (repo / "units.py").write_text("def metres(x):\n    return x\n")
    (repo / "span.py").write_text("def span(a, b):\n    return abs(a - b)\n")
    env = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "A",
           "GIT_COMMITTER_EMAIL": "a@example.com"}

    def commit(message: str, when: str) -> None:
        git(repo, "add", "-A")
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True,
                       env={**env, "PATH": os.environ["PATH"], "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})

    commit("first", "2024-01-10T10:00:00+00:00")
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "geo")
    try:
        gm.ingest(repo, llm=False)
        assert gm.store.get_node("sym:geo.py::bearing").valid_to is None
        # Two commits later: bearing removed in March, units.py deleted in May; then an edit not committed.
        (repo / "geo.py").write_text("def distance(a, b):\n    return abs(a - b)\n")
        commit("drop bearing", "2024-03-05T09:00:00+00:00")
        (repo / "units.py").unlink()
        commit("drop units", "2024-05-20T12:00:00+00:00")
        (repo / "span.py").write_text("def width(a, b):\n    return abs(a - b)\n")
        before = to_iso(datetime.now(timezone.utc))
        gm.ingest(repo, llm=False)
        assert gm.store.get_node("sym:geo.py::bearing").valid_to == to_iso("2024-03-05T09:00:00+00:00")
        assert gm.store.get_node("sym:units.py::metres").valid_to == to_iso("2024-05-20T12:00:00+00:00")
        assert gm.store.get_node("file:units.py").valid_to == to_iso("2024-05-20T12:00:00+00:00")
        assert gm.store.get_node("sym:geo.py::distance").valid_to is None
        # span.py differs from the last commit: what it no longer says closes at the ingest
        assert gm.store.get_node("sym:span.py::span").valid_to >= before
        # so the past shows it: bearing in February, not in April
        feb = {r.dst for r in gm.store.get_relationships(["file:geo.py"], as_of="2024-02-01T00:00:00Z")}
        apr = {r.dst for r in gm.store.get_relationships(["file:geo.py"], as_of="2024-04-01T00:00:00Z")}
        assert "sym:geo.py::bearing" in feb and "sym:geo.py::bearing" not in apr
    finally:
        gm.close()


def test_an_inferred_service_whose_folder_is_gone_stops_holding(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for path in ("billing/charge.py", "ledger/post.py"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("def run():\n    return 1\n")
    git(repo, "init", "-q", "-b", "main")
    env = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "A",
           "GIT_COMMITTER_EMAIL": "a@example.com", "PATH": os.environ["PATH"]}

    def commit(message: str) -> None:
        git(repo, "add", "-A")
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True, env=env)

    commit("two services")
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "pay")
    try:
        gm.ingest(repo, llm=False)
        assert gm.store.get_node("service:ledger").valid_to is None
        (repo / "ledger" / "post.py").unlink()
        commit("ledger moves out")
        gm.ingest(repo, llm=False)
        assert gm.store.get_node("service:ledger").valid_to is not None
        assert gm.store.get_node("service:billing").valid_to is None
        contains = [r for r in gm.store.get_relationships(["service:billing"]) if r.type.value == "CONTAINS"]
        assert [r.dst for r in contains] == ["file:billing/charge.py"]
    finally:
        gm.close()


def test_prose_naming_the_project_mentions_no_service(tmp_path: Path) -> None:
    repo = tmp_path / "zorbo"
    (repo / "zorbo").mkdir(parents=True)
    (repo / "ledger").mkdir()
    (repo / "zorbo" / "charge.py").write_text(
        'def charge():\n    """Charge a card, then post the amount to the ledger."""\n    return 1\n')
    (repo / "ledger" / "post.py").write_text('def post():\n    """Post an entry."""\n    return 1\n')
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "zorbo: charge cards"], check=True,
                   env={"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "A",
                        "GIT_COMMITTER_EMAIL": "a@example.com", "PATH": os.environ["PATH"]})
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "zorbo")
    try:
        gm.ingest(repo, llm=False)
        assert gm.store.get_node("service:zorbo") is not None  # the project's own code
        mentions = {(r.src, r.dst) for r in gm.store.iter_rels() if r.type.value == "MENTIONS"}
        assert ("sym:zorbo/charge.py::charge", "service:ledger") in mentions
        assert not [src for src, dst in mentions if dst == "service:zorbo"]
    finally:
        gm.close()


def test_a_first_ingest_with_replay_keeps_two_years_of_history(tmp_path: Path) -> None:
    """Ownership, decisions in force and call edges as of four dates, on a first ingest."""
    repo = tmp_path / "repo"
    (repo / "billing").mkdir(parents=True)
    (repo / "docs" / "adr").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    env = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "A",
           "GIT_COMMITTER_EMAIL": "a@example.com", "PATH": os.environ["PATH"]}

    def commit(message: str, when: str, files: dict[str, str | None]) -> None:
        for name, text in files.items():
            if text is None:
                (repo / name).unlink()
            else:
                (repo / name).write_text(text)
        git(repo, "add", "-A")
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", message], check=True,
                       env={**env, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})

    adr1 = ("# 1. Bill synchronously\n\nDate: 2024-01-15\n\n## Status\n\nAccepted\n\n## Context\n\nBilling needs "
            "totals.\n\n## Decision\n\nCall the ledger over HTTP.\n\n## Consequences\n\nCoupling.\n")
    commit("billing starts", "2024-01-15T10:00:00+00:00", {
        "CODEOWNERS": "/billing/ @acme/payments\n",
        "billing/api.py": "def total(items):\n    return legacy_sum(items)\n\n\ndef legacy_sum(items):\n    return sum(items)\n",
        "docs/adr/0001-bill-synchronously.md": adr1})
    commit("payments hands billing to finance", "2024-09-02T10:00:00+00:00", {
        "CODEOWNERS": "/billing/ @acme/finance\n"})
    commit("total uses fast_sum", "2025-03-10T10:00:00+00:00", {
        "billing/api.py": "def total(items):\n    return fast_sum(items)\n\n\ndef fast_sum(items):\n    return sum(items)\n"})
    commit("ADR-2 supersedes ADR-1", "2025-11-20T10:00:00+00:00", {
        "docs/adr/0001-bill-synchronously.md": adr1.replace("Accepted", "Superseded by ADR-2"),
        "docs/adr/0002-bill-through-events.md": (
            "# 2. Bill through events\n\nDate: 2025-11-20\n\n## Status\n\nAccepted\n\nSupersedes ADR-1\n\n"
            "## Context\n\nCoupling hurt.\n\n## Decision\n\nPublish events.\n\n## Consequences\n\nLag.\n")})

    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "billing")
    try:
        report = gm.ingest(repo, llm=False)  # the default replay: nothing asked for
        # The report counts the replayed snapshots' work with HEAD's.
        assert report.replayed >= 2 and report.written.closed_nodes > 0

        def owners(day: str) -> set[str]:
            return {r.src for r in gm.store.get_relationships(["service:billing"], as_of=day)
                    if r.type.value == "OWNS"}

        def calls(day: str) -> set[str]:
            return {r.dst for r in gm.store.get_relationships(["sym:billing/api.py::total"], as_of=day)
                    if r.type.value == "CALLS" and r.src == "sym:billing/api.py::total"}

        def superseded(day: str) -> set[str]:
            return {r.dst for r in gm.store.get_relationships(["adr:2"], as_of=day) if r.type.value == "SUPERSEDES"}

        def decisions(day: str) -> set[str]:
            nodes = gm.store.get_nodes(["adr:1", "adr:2"])
            return {k for k, n in nodes.items()
                    if n.valid_from <= day and (n.valid_to is None or n.valid_to > day)} - superseded(day)

        days = ["2023-12-01T00:00:00Z", "2024-06-01T00:00:00Z", "2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"]
        assert [owners(d) for d in days] == [set(), {"team:payments"}, {"team:finance"}, {"team:finance"}]
        assert [calls(d) for d in days] == [set(), {"sym:billing/api.py::legacy_sum"},
                                            {"sym:billing/api.py::legacy_sum"}, {"sym:billing/api.py::fast_sum"}]
        assert [decisions(d) for d in days] == [set(), {"adr:1"}, {"adr:1"}, {"adr:2"}]
        assert not git(repo, "worktree", "list", "--porcelain").count("graphmem-replay")  # nothing left behind
    finally:
        gm.close()


def test_replay_is_on_by_default_and_set_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphmem.config import DEFAULT_REPLAY
    from graphmem.errors import ConfigError

    monkeypatch.delenv("GRAPHMEM_REPLAY", raising=False)
    assert Settings().replay == Settings.from_env().replay == DEFAULT_REPLAY > 0
    monkeypatch.setenv("GRAPHMEM_REPLAY", "0")
    assert Settings.from_env().replay == 0
    for bad in ("many", "-3", "1e9"):
        monkeypatch.setenv("GRAPHMEM_REPLAY", bad)
        with pytest.raises(ConfigError, match="GRAPHMEM_REPLAY|replay"):
            Settings.from_env()

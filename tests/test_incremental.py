"""Differential test: a history ingested step by step ends where a clean ingest of its last state does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphmem.ingest import ingest
from tests.test_ingest import git

def write(repo: Path, path: str, text: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def step_add(repo: Path) -> None:
    write(repo, "graphmem.toml", '[services.billing]\npaths = ["billing/"]\n[services.ledger]\npaths = ["ledger/"]\n')
    write(repo, "CODEOWNERS", "/billing/ @acme/payments\n/ledger/ @acme/core\n")
    write(repo, "ledger/store.py", 'def append(entry):\n    """Append an entry."""\n    return entry\n\n'
                                   'def balance():\n    return 0\n')
    write(repo, "billing/invoices.py", 'from ledger.store import append\n\n\ndef create(amount):\n'
                                       '    """Create an invoice."""\n    return append(amount)\n\n\n'
                                       'def cancel(invoice):\n    return None\n')
    write(repo, "docs/adr/0001-use-a-ledger.md", "# 1. Use a ledger\n\n## Status\n\nAccepted\n\n## Context\n\n"
                                               "billing calls ledger through `append`.\n\n## Decision\n\nYes.\n")
    commit(repo, "Start billing and ledger (ADR-1)")
    git(repo, "tag", "v1.0")


def step_edit(repo: Path) -> None:
    write(repo, "billing/invoices.py", 'from ledger.store import append, balance\n\n\ndef create(amount):\n'
                                       '    """Create an invoice."""\n    return append(amount)\n\n\n'
                                       'def total():\n    return balance()\n')
    commit(repo, "Replace cancel with total")
    git(repo, "tag", "-a", "v1.1", "-m", "Totals instead of cancelling")


def step_rename(repo: Path) -> None:
    git(repo, "mv", "billing/invoices.py", "billing/invoicing.py")
    commit(repo, "Rename the invoices module")


def step_delete(repo: Path) -> None:
    write(repo, "ledger/audit.py", "def audit():\n    return 1\n")
    commit(repo, "Add audit")
    git(repo, "tag", "v1.2-rc1")  # on a commit the rebase below takes out of the history
    (repo / "ledger" / "audit.py").unlink()
    commit(repo, "Remove audit again")


def step_rebase(repo: Path) -> None:
    # rewrite the last two commits into one: the old ones vanish from history
    git(repo, "reset", "-q", "--soft", "HEAD~2")
    write(repo, "ledger/store.py", (repo / "ledger/store.py").read_text() + "\n\ndef close():\n    return None\n")
    commit(repo, "Add close (squashed)")


STEPS = [step_add, step_edit, step_rename, step_delete, step_rebase]


def snapshot(store: Any) -> dict[str, set]:
    return {
        "nodes": {n.key for n in store.iter_nodes()},
        "rels": {r.ident for r in store.iter_rels()},
        "chunks": {(c.node_key, c.ordinal, c.text) for c in store.iter_chunks()},
    }


@pytest.mark.parametrize("backend", ["embedded", "neo4j"])
def test_step_by_step_equals_clean(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    factory: Callable[[str], Any] = request.getfixturevalue(f"{backend}_store_factory")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    stepwise = factory("stepwise")
    stepwise.ensure_schema()
    for step in STEPS:
        step(repo)
        ingest(repo, stepwise, cache_dir=tmp_path / "cache")
    clean = factory("clean")
    clean.ensure_schema()
    ingest(repo, clean, cache_dir=tmp_path / "cache-clean")

    got, want = snapshot(stepwise), snapshot(clean)
    for part in ("nodes", "rels", "chunks"):
        assert got[part] - want[part] == set(), f"{part} only in the step-by-step graph"
        assert want[part] - got[part] == set(), f"{part} only in the clean graph"
    assert "sym:billing/invoicing.py::total" in got["nodes"]
    assert "sym:billing/invoices.py::cancel" not in got["nodes"]
    # Releases: the tags of the history; a tag whose commit the rebase took out ships nothing.
    assert {k for k in got["nodes"] if k.startswith("release:")} == {"release:v1.0", "release:v1.1"}
    assert sum(1 for r in got["rels"] if r[1] == "RELEASED_IN") == 2


@pytest.mark.parametrize("backend", ["embedded", "neo4j"])
def test_a_project_extracted_under_another_facts_format_is_extracted_again_once(
        backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project ingested before a change to what extraction records (here: how code is cut into
    chunks) gets today's chunks for files that did not change, once, and keeps its facts' validity."""
    from extractors.code import chunks as chunking
    from graphmem.ingest import FACTS_META

    factory: Callable[[str], Any] = request.getfixturevalue(f"{backend}_store_factory")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    step_add(repo)
    older = factory("older")
    older.ensure_schema()
    real = chunking._collapsed_lines
    with monkeypatch.context() as patch:  # chunks as an older format cut them
        patch.setattr(chunking, "_collapsed_lines", lambda *args: [*real(*args), (1, "# older format")])
        ingest(repo, older, cache_dir=tmp_path / "cache")
    assert any("# older format" in c.text for c in older.iter_chunks())
    symbol = "sym:billing/invoices.py::create"
    began = older.get_node(symbol).valid_from
    older.set_meta({FACTS_META: "0"})

    again = ingest(repo, older, cache_dir=tmp_path / "cache")
    assert again.changed == 2  # the two code files; nothing else
    assert not any("# older format" in c.text for c in older.iter_chunks())
    assert older.get_node(symbol).valid_from == began and older.get_node(symbol).valid_to is None
    assert older.get_meta(FACTS_META) != "0"
    assert ingest(repo, older, cache_dir=tmp_path / "cache").changed == 0  # once

    clean = factory("clean")
    clean.ensure_schema()
    ingest(repo, clean, cache_dir=tmp_path / "cache-clean")
    got, want = snapshot(older), snapshot(clean)
    for part in ("nodes", "rels", "chunks"):
        assert got[part] == want[part], part

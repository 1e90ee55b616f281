"""End to end: the example organisation ingested into each store, checked against its ground truth."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphmem.ingest import ingest
from graphmem.model import RelType
from graphmem.stores.base import GraphStore


def git(repo: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@acme.dev", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@acme.dev", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def planted_secrets() -> list[tuple[str, str, str]]:
    """The secrets the redaction tests plant (kind, sentence template, secret), loaded from there."""
    import importlib.util

    path = Path(__file__).parent / "extractors" / "docs" / "test_docs_secrets.py"
    spec = importlib.util.spec_from_file_location("graphmem_planted_secrets", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.PLANTED


def open_rels(store: GraphStore, rel_type: RelType) -> set[tuple[str, str]]:
    return {(r.src, r.dst) for r in store.iter_rels() if r.type is rel_type}  # type: ignore[attr-defined]


class IngestContract:
    """Subclasses provide ``make_store(project)``."""

    @pytest.fixture
    def ingested(self, make_store: Callable[[str], Any], example_org: tuple[Path, dict], tmp_path: Path):
        repo, facts = example_org
        store = make_store("acme")
        store.ensure_schema()
        report = ingest(repo, store, cache_dir=tmp_path / "cache")
        return store, facts, report

    def test_the_graph_matches_the_ground_truth(self, ingested: tuple) -> None:
        store, facts, report = ingested
        assert report.commits == facts["commit_count"] == 34
        assert report.head == facts["head"].removeprefix("commit:")
        counts = store.counts()
        assert counts.nodes["service"] == len(facts["services"])
        assert counts.nodes["commit"] == 34 and counts.nodes["decision"] == len(facts["adrs"])
        assert counts.nodes["incident"] == len(facts["incidents"])
        deps = open_rels(store, RelType.DEPENDS_ON)
        assert deps == {(d["from"], d["to"]) for d in facts["dependencies"]}
        owns = open_rels(store, RelType.OWNS)
        for team, info in facts["teams"].items():
            assert {(team, s) for s in info["services"]} <= owns
        assert set(map(tuple, facts["supersedes"])) <= open_rels(store, RelType.SUPERSEDES)
        affected = open_rels(store, RelType.AFFECTED)
        caused = open_rels(store, RelType.CAUSED_BY)
        for key, inc in facts["incidents"].items():
            assert store.get_node(inc["failing_symbol"]) is not None
            assert {(key, c) for c in inc["caused_by"]} <= caused
            assert any(src == key for src, _ in affected)
        modified = open_rels(store, RelType.MODIFIED)
        found = sum(1 for c, syms in facts["commit_symbols"].items() for s in syms if (c, s) in modified)
        total = sum(len(s) for s in facts["commit_symbols"].values())
        assert found / total >= 0.9, f"{found}/{total} commit->symbol changes found"

    def test_every_element_carries_provenance_and_chunks_their_node(self, ingested: tuple) -> None:
        store, _, _ = ingested
        for node in store.iter_nodes():
            p = node.provenance
            assert p.source_path and p.extractor and p.extractor_version and p.ingested_at, node.key
            assert 0 < p.confidence <= 1 and node.valid_from
        for rel in store.iter_rels():
            assert rel.provenance.source_path and rel.provenance.extractor, rel.ident
        chunks = list(store.iter_chunks())
        assert chunks and store.get_nodes({c.node_key for c in chunks}).keys() == {c.node_key for c in chunks}
        handler = "sym:services/billing/api/handlers.py::InvoiceHandler.post"
        text = " ".join(c.text for c in store.get_chunks([handler]))
        assert "services/billing/api/handlers.py" in text and "InvoiceHandler.post" in text

    def test_reingesting_unchanged_changes_nothing(self, ingested: tuple, example_org: tuple, tmp_path: Path) -> None:
        store, _, _ = ingested
        before = store.counts().as_dict()
        report = ingest(example_org[0], store, cache_dir=tmp_path / "cache")
        assert (report.changed, report.deleted, report.commits) == (0, 0, 0)
        assert report.written.closed_nodes == 0 and report.written.closed_rels == 0
        assert store.counts().as_dict() == before

    def test_edits_and_deletions_close_what_no_longer_holds(
        self, make_store: Callable[[str], Any], example_org: tuple, tmp_path: Path
    ) -> None:
        repo = tmp_path / "acme"
        shutil.copytree(example_org[0], repo, symlinks=True)
        store = make_store("edits")
        store.ensure_schema()
        ingest(repo, store, cache_dir=tmp_path / "cache")
        handlers = repo / "services/billing/api/handlers.py"
        source = handlers.read_text()
        assert "def health" in source or "class " in source
        # a new function appears, and a whole file goes away
        handlers.write_text(source + "\n\ndef added_later(x):\n    return x\n")
        gone = sorted(p for p in (repo / "libs").rglob("*.py") if p.name != "__init__.py")[0]
        gone_rel = gone.relative_to(repo).as_posix()
        gone.unlink()
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "Add a helper, drop a module")
        report = ingest(repo, store, cache_dir=tmp_path / "cache")
        assert report.changed == 1 and report.deleted == 1 and report.commits == 1
        assert store.get_node("sym:services/billing/api/handlers.py::added_later").is_open
        assert store.get_node("sym:services/billing/api/handlers.py::InvoiceHandler.post").is_open
        dropped = store.get_node(f"file:{gone_rel}")
        assert dropped is not None and not dropped.is_open
        assert not [c for c in store.iter_chunks() if c.provenance.source_path == gone_rel]

    def test_secrets_never_reach_the_store(
        self, make_store: Callable[[str], Any], example_org: tuple, tmp_path: Path
    ) -> None:
        repo = tmp_path / "acme"
        shutil.copytree(example_org[0], repo, symlinks=True)
        planted = {
            "aws": "AKIAIOSFODNN7EXAMPLE",
            "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
            "url": "postgres://app:Sup3rS3cretPw@db.internal:5432/billing",
        }
        (repo / "services/billing/settings.py").write_text(
            '"""Settings."""\n'
            f'AWS_KEY = "{planted["aws"]}"\n'
            f'def connect():\n    """Connect with {planted["url"]}."""\n    token = "{planted["github"]}"\n'
            "    return token\n")
        (repo / ".env").write_text("SECRET_IN_ENV=do-not-read-me-123\n")
        (repo / "deploy.pem").write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n")
        # every kind of secret the redaction tests plant, in code, a decision record, an incident and
        # a commit message
        PLANTED = planted_secrets()

        lines = [template.format(secret) for _, template, secret in PLANTED]
        (repo / "services/billing/notes.py").write_text(
            '"""Operational notes."""\n\n\ndef notes():\n    """' + " ".join(lines[:12]).replace('"', "'")
            + '"""\n    return 1\n' + "".join(f"# {line}\n" for line in lines))
        (repo / "docs/adr/0042-rotate-keys.md").write_text(
            "# 42. Rotate keys\n\n## Status\n\nAccepted\n\n## Context\n\n" + "\n\n".join(lines) + "\n")
        (repo / "docs/incidents/INC-077.md").write_text(
            "---\nid: INC-077\ntitle: Leaked keys\nseverity: sev1\n---\n\n## Summary\n\n" + "\n".join(lines) + "\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "Notes\n\n" + "\n".join(lines[:20]))
        store = make_store("secrets")
        store.ensure_schema()
        report = ingest(repo, store, cache_dir=tmp_path / "cache")
        assert report.redactions >= len(PLANTED)
        assert {".env", "deploy.pem"} <= {s.path for s in report.skipped}
        dump = json.dumps([[n.key, n.name, n.props] for n in store.iter_nodes()]
                          + [c.text for c in store.iter_chunks()] + [r.props for r in store.iter_rels()])
        secrets = [*planted.values(), "Sup3rS3cretPw", "do-not-read-me-123", "MIIEow",
                   *(secret for _, _, secret in PLANTED)]
        assert len(secrets) >= 30
        for value in secrets:
            assert value not in dump, value
        assert store.get_node("adr:42") is not None and store.get_node("incident:INC-077") is not None
        assert store.get_node("sym:services/billing/settings.py::connect") is not None


class TestIngestEmbedded(IngestContract):
    @pytest.fixture
    def make_store(self, embedded_store_factory: Callable[[str], Any]) -> Callable[[str], Any]:
        return embedded_store_factory


@pytest.mark.neo4j
class TestIngestNeo4j(IngestContract):
    @pytest.fixture
    def make_store(self, neo4j_store_factory: Callable[[str], Any]) -> Callable[[str], Any]:
        return neo4j_store_factory


def test_parse_workers_are_not_forks_of_the_ingesting_process(tmp_path: Path) -> None:
    """A fork copies the locks other threads hold (a driver's, an embedder's), so a worker forked
    from a busy process can wait for ever; the workers come from a fork server instead, and a
    parallel ingest through them parses every file."""
    import os

    from graphmem.ingest import PARALLEL_PARSE_MIN, parse_pool
    from graphmem.stores.embedded import EmbeddedStore

    with parse_pool(2) as pool:
        assert pool.submit(os.getppid).result(timeout=60) != os.getpid()
    repo = tmp_path / "many"
    (repo / "pkg").mkdir(parents=True)
    count = PARALLEL_PARSE_MIN + 5
    for i in range(count):
        (repo / "pkg" / f"m{i}.py").write_text(f"def f{i}(x):\n    return g{i}(x)\n\n\ndef g{i}(x):\n    return x\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "many modules")
    store = EmbeddedStore(tmp_path / "home", "many")
    ingest(repo, store, cache_dir=tmp_path / "cache", workers=2)
    keys = {n.key for n in store.iter_nodes()}
    calls = {(r.src, r.dst) for r in store.iter_rels() if r.type is RelType.CALLS}
    store.close()
    assert all(f"sym:pkg/m{i}.py::f{i}" in keys for i in range(count))
    assert all((f"sym:pkg/m{i}.py::f{i}", f"sym:pkg/m{i}.py::g{i}") in calls for i in range(count))

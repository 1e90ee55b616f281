"""The example organisation: deterministic, and what the git extractor reads from it is right."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from git_testrepo import parse_python

from extractors.git import commits_to_graph, make_symbols_at, read_history
from graphmem.model import RelType, check_node, check_relationship

SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "make_example_org.py"
NOW = "2025-06-01"


def make(out: Path, now: str = NOW) -> dict:
    subprocess.run([sys.executable, str(SCRIPT), str(out), "--now", now], check=True,
                   capture_output=True)
    return json.loads((out / "facts.json").read_text())


@pytest.fixture(scope="module")
def org(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("org")
    return out / "acme", make(out)


def test_same_now_same_shas(org: tuple[Path, dict], tmp_path: Path) -> None:
    repo, facts = org
    again = make(tmp_path / "again")
    assert again == facts
    log = lambda r: subprocess.run(["git", "-C", str(r), "log", "--all", "--format=%H"],  # noqa: E731
                                   capture_output=True, text=True, check=True).stdout
    assert log(repo) == log(tmp_path / "again" / "acme")
    other = make(tmp_path / "other", now="2025-07-01")
    assert other["head"] != facts["head"]


def test_refuses_existing_dir_without_force(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").write_text("")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "x")], capture_output=True, text=True)
    assert proc.returncode == 2 and "--force" in proc.stderr
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "x"), "--force", "--now", NOW],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and (tmp_path / "x" / "acme" / ".git").is_dir()


def test_facts_are_consistent(org: tuple[Path, dict]) -> None:
    repo, facts = org
    assert 25 <= facts["commit_count"] <= 40
    assert len({s["language"] for s in facts["services"].values()}) >= 3
    assert facts["latest_incident"] == "incident:INC-042"
    latest = facts["incidents"]["incident:INC-042"]
    assert "2025-05-01" < latest["started_at"] < "2025-06-01"
    assert all(v["started_at"] < "2025-05-01" for k, v in facts["incidents"].items() if k != "incident:INC-042")
    assert latest["failing_symbol"] == "sym:services/billing/api/handlers.py::InvoiceHandler.post"
    assert facts["adrs"]["adr:3"]["superseded_by"] == "adr:5"
    for adr in facts["adrs"].values():
        assert (repo / adr["path"]).is_file()
    impl = facts["adrs"]["adr:5"]["implemented_by"]
    assert len({f for entry in impl for f in entry["files"]}) >= 2
    for inc in facts["incidents"].values():
        text = (repo / inc["path"]).read_text()
        for sha in inc["caused_by"] + inc["resolved_by"]:
            assert sha.startswith("commit:") and sha[7:] in text


def test_extractor_reads_the_org(org: tuple[Path, dict]) -> None:
    repo, facts = org
    commits = read_history(repo)
    assert len(commits) == facts["commit_count"]
    assert f"commit:{commits[-1].sha}" == facts["head"]
    with make_symbols_at(repo, parse_python) as symbols_at:
        ex = commits_to_graph(commits, symbols_at=symbols_at)
    for node in ex.nodes:
        check_node(node)
    for rel in ex.rels:
        check_relationship(rel)
    rels = {(r.src, r.type, r.dst) for r in ex.rels}
    c = {label: f"commit:{sha}" for label, sha in facts["commits"].items()}
    assert (c["adr5_billing"], RelType.IMPLEMENTS, "adr:5") in rels
    assert (c["adr5_ledger"], RelType.IMPLEMENTS, "adr:5") in rels
    assert (c["drop_sync_ledger"], RelType.REFERENCES, "adr:5") in rels
    assert (c["adr5"], RelType.REFERENCES, "adr:3") in rels
    for key, inc in facts["incidents"].items():
        for fix in inc["resolved_by"]:
            assert (fix, RelType.FIXES, key) in rels
    assert (c["inc042_cause"], RelType.REFERENCES, "ticket:PAY-31") in rels
    assert (c["inc042_cause"], RelType.MODIFIED, facts["incidents"]["incident:INC-042"]["failing_symbol"]) in rels
    assert ("person:carla@acme.dev", RelType.AUTHORED, c["gateway_idem"]) in rels
    assert (c["adr5_merge"], RelType.PARENT, c["adr5_ledger"]) in rels
    # Every Python symbol the history changes on purpose is found through hunks and blobs.
    modified = {(r.src, r.dst) for r in ex.rels if r.type == RelType.MODIFIED}
    for commit, symbols in facts["commit_symbols"].items():
        for sym in symbols:
            if sym.partition("::")[0].endswith(".py"):
                assert (commit, sym) in modified, (commit, sym)

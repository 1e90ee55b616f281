"""The synthetic organisation generator: deterministic, questions well formed, and readable by graphmem.

The ingest check compares the graph graphmem builds with the facts the generator constructed, so it
tests that the generator writes what the extractors read; gold labels never come from graphmem.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from eval.synthetic import KINDS, Org, generate, main, questions, write_questions
from graphmem.model import (
    RelType,
    adr_key,
    commit_key,
    incident_key,
    person_key,
    symbol_key,
    symbol_parts,
)

NOW = "2026-06-01"


def make(out: Path, seed: int = 0, size: str | int = "small") -> tuple[Org, list[dict]]:
    org = generate(out, seed=seed, size=size, now=NOW)
    items = questions(org, seed=seed)
    write_questions(out / "questions.jsonl", items)
    return org, items


def canonical(key: str) -> str:
    """The key as graphmem's own key functions spell it."""
    prefix, _, rest = key.partition(":")
    if prefix == "sym":
        return symbol_key(*symbol_parts(key))
    make_key = {"commit": commit_key, "person": person_key, "adr": adr_key, "incident": incident_key}.get(prefix)
    return make_key(rest) if make_key else key


def fingerprint(repo: Path) -> tuple[str, str]:
    """A hash over every file of the working tree, and the history's shas, authors, dates, subjects."""
    digest = hashlib.sha256()
    for path in sorted(p for p in repo.rglob("*") if p.is_file() and ".git" not in p.relative_to(repo).parts):
        digest.update(path.relative_to(repo).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%H%n%an%n%ad%n%s", "--date=iso-strict"],
                         capture_output=True, text=True, check=True).stdout
    return digest.hexdigest(), log


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Org, list[dict]]:
    out = tmp_path_factory.mktemp("synthetic")
    org, items = make(out)
    return out, org, items


def test_same_seed_same_bytes(small: tuple[Path, Org, list[dict]], tmp_path: Path) -> None:
    out, org, _ = small
    again, _ = make(tmp_path / "again")
    assert fingerprint(out / org.repo_dir) == fingerprint(tmp_path / "again" / again.repo_dir)
    assert (out / "questions.jsonl").read_bytes() == (tmp_path / "again" / "questions.jsonl").read_bytes()
    assert (out / "facts.json").read_bytes() == (tmp_path / "again" / "facts.json").read_bytes()
    assert Org.from_json((out / "facts.json").read_text()) == org


def test_another_seed_another_org(small: tuple[Path, Org, list[dict]], tmp_path: Path) -> None:
    out, org, items = small
    other, other_items = make(tmp_path / "other", seed=10)  # same org name, different everything else
    assert other.name == org.name
    tree, log = fingerprint(tmp_path / "other" / other.repo_dir)
    assert tree != fingerprint(out / org.repo_dir)[0] and log != fingerprint(out / org.repo_dir)[1]
    assert [q["gold"] for q in other_items] != [q["gold"] for q in items]


def test_the_organisation_has_what_it_promises(small: tuple[Path, Org, list[dict]]) -> None:
    out, org, _ = small
    repo = out / org.repo_dir
    assert len({s["language"] for s in org.services.values()}) == 4
    assert org.dependencies and all(f"service:{b}" != a for a, b in org.dependencies)
    assert any(a["supersedes"] for a in org.adrs.values())
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert len(org.commits) >= 80 and org.head == f"commit:{head.stdout.strip()}"
    for key in org.files:
        assert (repo / key[5:]).is_file(), key
    for inc in org.incidents.values():
        text = (repo / inc["path"]).read_text()
        assert all(c[7:] in text for c in inc["caused_by"] + inc["resolved_by"])
        assert org.symbols[inc["failing_symbol"]]["qualname"] in text
    authors = {c["author"] for c in org.commits.values()}
    assert authors <= set(org.people)


def test_default_size_is_big_enough(tmp_path: Path) -> None:
    org, items = make(tmp_path, size="default")
    assert 10 <= len(org.services) <= 20 and len(org.commits) >= 200
    assert 40 <= len(org.adrs) + len(org.incidents) <= 80 and 200 <= len(org.symbols) <= 600
    assert len(items) >= 300


def test_questions_are_well_formed(small: tuple[Path, Org, list[dict]]) -> None:
    out, org, items = small
    lines = (out / "questions.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == items
    assert len({q["id"] for q in items}) == len(items)
    kinds = Counter(q["type"] for q in items)
    assert len(kinds) >= 8 and set(kinds) <= set(KINDS)
    assert {q["hops"] for q in items} == {1, 2, 3}
    assert len({q["question"] for q in items}) >= 0.9 * len(items)
    known = (set(org.symbols) | set(org.services) | set(org.teams) | set(org.people) | set(org.adrs)
             | set(org.incidents) | set(org.commits))
    for q in items:
        assert set(q) == {"id", "question", "gold", "hops", "type"}
        assert 1 <= len(q["gold"]) <= 10 and len(set(q["gold"])) == len(q["gold"]), q
        for key in q["gold"]:
            assert key in known, key
            assert canonical(key) == key
            prefix, _, rest = key.partition(":")
            if prefix == "sym":
                assert re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?", symbol_parts(key)[1]), key
            elif prefix in ("service", "team"):
                assert re.fullmatch(r"[a-z][a-z0-9-]*", rest), key
    # Some questions name functions, others only describe them.
    asked = " ".join(q["question"] for q in items if q["type"] in ("callers", "callees"))
    assert "`" in asked and "the function that" in asked


def test_graphmem_reads_the_constructed_facts(small: tuple[Path, Org, list[dict]], tmp_path: Path) -> None:
    from graphmem.ingest import ingest
    from graphmem.stores.embedded import EmbeddedStore

    out, org, items = small
    store = EmbeddedStore(tmp_path / "home", "org")
    store.ensure_schema()
    report = ingest(out / org.repo_dir, store, cache_dir=tmp_path / "cache")
    assert report.commits == len(org.commits)
    rels: dict[RelType, set[tuple[str, str]]] = {}
    for rel in store.iter_rels():
        rels.setdefault(rel.type, set()).add((rel.src, rel.dst))
    incidents = org.incidents.values()
    expected = {
        RelType.CALLS: [tuple(c) for c in org.calls],
        RelType.DEPENDS_ON: [(a, f"service:{b}" if not b.startswith("service:") else b) for a, b in org.dependencies],
        RelType.CAUSED_BY: [(i["key"], c) for i in incidents for c in i["caused_by"]],
        RelType.RESOLVED_BY: [(i["key"], c) for i in incidents for c in i["resolved_by"]],
        RelType.AFFECTED: [(i["key"], s) for i in incidents for s in i["services"]],
        RelType.MENTIONS: [(i["key"], i["failing_symbol"]) for i in incidents],
        RelType.FIXES: [(c, i["key"]) for i in incidents for c in i["resolved_by"]],
        RelType.SUPERSEDES: [tuple(s) for s in org.supersedes],
        RelType.IMPLEMENTS: [(c, k) for k, a in org.adrs.items() for c in a["implemented_by"]],
        RelType.OWNS: [(s["team"], k) for k, s in org.services.items()],
        RelType.MEMBER_OF: [(m, t) for t, team in org.teams.items() for m in team["members"]],
        RelType.MODIFIED: [(c, s) for c, commit in org.commits.items() for s in commit["symbols"]],
    }
    coverage = {}
    for rtype, facts in expected.items():
        assert facts, rtype
        coverage[rtype.value] = sum(1 for f in facts if f in rels.get(rtype, set())) / len(facts)
    assert all(v >= 0.95 for v in coverage.values()), coverage
    gold = sorted({k for q in items for k in q["gold"]})
    found = store.get_nodes(gold)
    assert len(found) / len(gold) >= 0.99, sorted(set(gold) - set(found))[:5]
    # "Who last changed X": the newest commit graphmem sees modifying X is the one the generator made.
    by_symbol: dict[str, list[str]] = {}
    for commit, sym in rels[RelType.MODIFIED]:
        by_symbol.setdefault(sym, []).append(commit)
    agree = total = 0
    for key, sym in org.symbols.items():
        if sym["commits"]:
            total += 1
            newest = max(by_symbol.get(key, []), key=lambda c: org.commits[c]["date"], default=None)
            agree += org.commits.get(newest, {}).get("author") == org.commits[sym["commits"][-1]]["author"]
    assert agree / total >= 0.95
    store.close()


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main([str(out), "--size", "4", "--seed", "3", "--now", NOW]) == 0
    facts = json.loads((out / "facts.json").read_text())
    assert (out / facts["repo_dir"] / ".git").is_dir() and (out / "questions.jsonl").stat().st_size > 0
    assert main([str(out), "--size", "4"]) == 2 and "--force" in capsys.readouterr().err
    assert main([str(out), "--size", "4", "--seed", "3", "--now", NOW, "--force"]) == 0
    assert main([str(tmp_path / "x"), "--size", "huge"]) == 2

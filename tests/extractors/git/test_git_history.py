"""The git extractor against real repositories built in temporary folders."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from git_testrepo import Repo, parse_python

from extractors.git import (
    GitError,
    changed_paths_since,
    commits_to_graph,
    extract_history,
    find_references,
    head_commit,
    is_git_repo,
    make_symbols_at,
    read_history,
    touched_symbols,
    working_tree_dirty,
)
from extractors.code import symbol_ranges
from graphmem.model import RelType, check_node, check_relationship

SERVICE_V1 = '''\
"""Invoices."""


class InvoiceHandler:
    """Handles invoice requests."""

    def get(self, ident):
        return {"id": ident}

    def post(self, body):
        total = body["amount"]
        return {"total": total}


def helper(x):
    return x + 1


def unused(y):
    return y * 2
'''

# post() body changed (lines 12-13), unused() removed (pure deletion), new function added.
SERVICE_V2 = '''\
"""Invoices."""


class InvoiceHandler:
    """Handles invoice requests."""

    def get(self, ident):
        return {"id": ident}

    def post(self, body):
        total = body["amount"] * 100
        return {"total": total, "currency": "EUR"}


def helper(x):
    return x + 1


def added(z):
    return z
'''


def rels_of(ex, rtype: RelType, src: str | None = None) -> list:
    return [r for r in ex.rels if r.type == rtype and (src is None or r.src == src)]


def targets(ex, rtype: RelType, src: str) -> set[str]:
    return {r.dst for r in rels_of(ex, rtype, src)}


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


def test_empty_repo_and_non_repo(tmp_path: Path, repo: Repo) -> None:
    assert is_git_repo(repo.root)
    assert read_history(repo.root) == []
    assert head_commit(repo.root) is None
    assert len(commits_to_graph([])) == 0
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not is_git_repo(plain)
    assert head_commit(plain) is None
    with pytest.raises(GitError):
        read_history(plain)


def test_commits_parents_authors_and_chunks(repo: Repo) -> None:
    repo.write("a.txt", "one\n")
    c1 = repo.commit("First commit\n\nWith a body.\n")
    repo.write("a.txt", "one\ntwo\n")
    c2 = repo.commit("Second", name="Bo Chen", email="Bo@Example.com")
    commits = read_history(repo.root)
    assert [c.sha for c in commits] == [c1, c2]
    first, second = commits
    assert first.parents == () and second.parents == (c1,)
    assert first.subject == "First commit" and first.body == "With a body."
    assert second.author_name == "Bo Chen" and second.author_email == "Bo@Example.com"
    assert first.authored_at < second.authored_at
    assert first.authored_at.endswith("Z") and len(first.authored_at) == len("2023-11-14T23:13:20.000000Z")
    assert head_commit(repo.root) == c2

    ex = commits_to_graph(commits)
    for node in ex.nodes:
        check_node(node)
    for rel in ex.rels:
        check_relationship(rel)
    nodes = {n.key: n for n in ex.nodes}
    node = nodes[f"commit:{c2}"]
    assert node.name == "Second"
    assert node.props["short_sha"] == c2[:7]
    assert node.props["files_changed"] == 1
    assert node.props["insertions"] == 1 and node.props["deletions"] == 0
    assert node.provenance.source_path == f"git:{c2}" and node.provenance.source_commit == c2
    assert node.provenance.extractor == "git"
    assert nodes["person:bo@example.com"].name == "Bo Chen"
    assert targets(ex, RelType.AUTHORED, "person:bo@example.com") == {f"commit:{c2}"}
    assert targets(ex, RelType.PARENT, f"commit:{c2}") == {f"commit:{c1}"}
    assert targets(ex, RelType.CHANGED, f"commit:{c1}") == {"file:a.txt"}
    chunk = next(c for c in ex.chunks if c.node_key == f"commit:{c1}")
    assert chunk.kind == "commit" and "First commit" in chunk.text and "a.txt" in chunk.text


def test_merge_uses_first_parent_diff(repo: Repo) -> None:
    repo.write("base.txt", "base\n")
    root = repo.commit("base")
    repo.git("checkout", "-q", "-b", "side")
    repo.write("side.txt", "side\n")
    side = repo.commit("side work")
    repo.git("checkout", "-q", "main")
    repo.write("main.txt", "main\n")
    main = repo.commit("main work")
    repo.git("-c", "user.name=M", "-c", "user.email=m@example.com", "merge", "-q", "--no-ff",
             "--no-edit", "side")
    merge = repo.git("rev-parse", "HEAD")
    commits = {c.sha: c for c in read_history(repo.root)}
    assert set(commits) == {root, side, main, merge}
    assert commits[merge].parents == (main, side)
    assert [f.path for f in commits[merge].files] == ["side.txt"]  # what the merge brought in
    ex = commits_to_graph(list(commits.values()))
    assert targets(ex, RelType.PARENT, f"commit:{merge}") == {f"commit:{main}", f"commit:{side}"}
    assert ex.nodes[[n.key for n in ex.nodes].index(f"commit:{merge}")].props["is_merge"] is True


def test_renames_deletions_and_binary(repo: Repo) -> None:
    body = "".join(f"line {i}\n" for i in range(30))
    repo.write("old/name.py", body)
    repo.write("gone.txt", "bye\n")
    repo.commit("add")
    (repo.root / "old/name.py").unlink()
    repo.write("new/name.py", body + "one more\n")
    (repo.root / "gone.txt").unlink()
    repo.write("blob.bin", bytes(range(256)))
    repo.write("with space.txt", "x\n")
    sha = repo.commit("move things")
    commit = read_history(repo.root)[-1]
    by_path = {f.path: f for f in commit.files}
    assert by_path["new/name.py"].status == "R" and by_path["new/name.py"].old_path == "old/name.py"
    assert by_path["new/name.py"].hunks[0].new_start == 31
    assert by_path["gone.txt"].status == "D"
    assert by_path["blob.bin"].binary and by_path["blob.bin"].insertions is None
    assert by_path["with space.txt"].hunks[0].new_len == 1
    ex = commits_to_graph([commit])
    changed = {r.dst: r.props for r in rels_of(ex, RelType.CHANGED)}
    assert changed["file:new/name.py"] == {
        "change_type": "R", "old_path": "old/name.py", "insertions": 1, "deletions": 0,
    }
    assert changed["file:gone.txt"]["change_type"] == "D"
    assert changed["file:blob.bin"] == {"change_type": "A", "binary": True}
    assert f"commit:{sha}" in {r.src for r in rels_of(ex, RelType.CHANGED)}


def test_hunks_map_to_symbols_at_each_commit(repo: Repo) -> None:
    repo.write("billing/api/handlers.py", SERVICE_V1)
    c1 = repo.commit("add handlers")
    repo.write("billing/api/handlers.py", SERVICE_V2)
    c2 = repo.commit("change post, drop unused, add added")
    (repo.root / "billing/api/handlers.py").unlink()
    c3 = repo.commit("remove handlers")
    commits = read_history(repo.root)
    path = "billing/api/handlers.py"
    with make_symbols_at(repo.root, parse_python) as symbols_at:
        assert symbols_at(path, c1)[0] == ("InvoiceHandler", 4, 12)
        assert symbols_at(path, c3) == []
        ex = commits_to_graph(commits, symbols_at=symbols_at)
        parsed = symbols_at.parsed
        commits_to_graph(commits, symbols_at=symbols_at)
        assert symbols_at.parsed == parsed  # blobs are parsed once
    sym = f"sym:{path}::"
    assert targets(ex, RelType.MODIFIED, f"commit:{c1}") == {
        sym + q for q in ("InvoiceHandler", "InvoiceHandler.get", "InvoiceHandler.post", "helper", "unused")
    }
    # The method, not its class; the deleted function from the old side; the new one.
    assert targets(ex, RelType.MODIFIED, f"commit:{c2}") == {
        sym + "InvoiceHandler.post", sym + "unused", sym + "added",
    }
    assert targets(ex, RelType.MODIFIED, f"commit:{c3}") == {
        sym + q for q in ("InvoiceHandler", "InvoiceHandler.get", "InvoiceHandler.post", "helper", "added")
    }


def test_touched_symbols_prefers_innermost() -> None:
    symbols = [("C", 1, 20), ("C.m", 5, 10), ("C.m.inner", 7, 8), ("f", 22, 30)]
    assert touched_symbols(symbols, [(8, 8)]) == {"C.m.inner": 1}
    assert touched_symbols(symbols, [(2, 2)]) == {"C": 1}
    assert touched_symbols(symbols, [(9, 23)]) == {"C.m": 2, "C": 10, "f": 2}
    assert touched_symbols(symbols, [(21, 21)]) == {}


def test_a_change_to_a_second_definition_modifies_the_method_not_its_class() -> None:
    """A property's setter (or an overload) shares its getter's key: editing it changes that
    symbol, as the getter's own lines would."""
    source = (b"class Box:\n    @property\n    def size(self):\n        return self._size\n\n"
              b"    @size.setter\n    def size(self, value):\n        self._size = value\n")
    symbols = symbol_ranges("box.py", source)
    assert ("Box.size", 6, 8) in symbols
    assert touched_symbols(symbols, [(8, 8)]) == {"Box.size": 1}


def test_known_keys_limit_changed_and_modified(repo: Repo) -> None:
    repo.write("svc/a.py", SERVICE_V1)
    repo.write("svc/b.py", "def b():\n    return 1\n")
    sha = repo.commit("two files")
    known = {"file:svc/a.py", "sym:svc/a.py::helper"}
    with make_symbols_at(repo.root, parse_python) as symbols_at:
        ex = commits_to_graph(read_history(repo.root), symbols_at=symbols_at, known_keys=known)
    assert targets(ex, RelType.CHANGED, f"commit:{sha}") == {"file:svc/a.py"}
    assert targets(ex, RelType.MODIFIED, f"commit:{sha}") == {"sym:svc/a.py::helper"}


def test_references_in_messages() -> None:
    refs = {r.key: r.type for r in find_references(
        "Implement ADR-5: move ledger to Kafka (PAY-123)\n\n"
        "Also see adr 0003 and ADR-0004, JIRA-77. Encoded as UTF-8, hashed with SHA-256.\n\n"
        "Fixes: INC-042\nCloses PAY-124\nRefs: OPS-9"
    )}
    assert refs == {
        "adr:5": RelType.IMPLEMENTS,
        "adr:3": RelType.REFERENCES,
        "adr:4": RelType.REFERENCES,
        "ticket:PAY-123": RelType.REFERENCES,
        "ticket:JIRA-77": RelType.REFERENCES,
        "incident:INC-042": RelType.FIXES,
        "ticket:PAY-124": RelType.FIXES,
        "ticket:OPS-9": RelType.REFERENCES,
    }
    assert {r.key for r in find_references("Fix INC-7 and PAY-1, see ADR 2")} == {
        "incident:INC-7", "ticket:PAY-1", "adr:2",
    }
    assert find_references("no refs here; inc-042 is lower case on purpose? mp3-4") != []
    assert find_references("bump pyarrow-15, X-1 header") == []


def test_trailers_co_authors_and_tickets(repo: Repo) -> None:
    repo.write("x.txt", "x\n")
    sha = repo.commit(
        "Retry invoice posting (PAY-12)\n\nImplements ADR-0005.\n\n"
        "Fixes: INC-042\nRefs: JIRA-77\nCo-authored-by: Bo Chen <bo@example.com>\n"
        "Co-authored-by: Ana Lima <ana@example.com>\n"
    )
    commit = read_history(repo.root)[0]
    assert ("Fixes", "INC-042") in commit.trailers
    assert commit.trailer_values("co-authored-by") == [
        "Bo Chen <bo@example.com>", "Ana Lima <ana@example.com>",
    ]
    ex = commits_to_graph([commit])
    ckey = f"commit:{sha}"
    assert targets(ex, RelType.FIXES, ckey) == {"incident:INC-042"}
    assert targets(ex, RelType.IMPLEMENTS, ckey) == {"adr:5"}
    assert targets(ex, RelType.REFERENCES, ckey) == {"ticket:PAY-12", "ticket:JIRA-77"}
    authored = {r.src: r.props["role"] for r in rels_of(ex, RelType.AUTHORED)}
    assert authored == {"person:ana@example.com": "author", "person:bo@example.com": "co-author"}
    keys = {n.key for n in ex.nodes}
    assert {"ticket:PAY-12", "ticket:JIRA-77", "person:bo@example.com"} <= keys
    for rel in ex.rels:
        check_relationship(rel)


def test_non_utf8_message_and_path(repo: Repo) -> None:
    repo.write("caf\xe9.txt", "x\n")
    repo.commit("placeholder")
    # git commit would re-code a Latin-1 message; write the raw commit object to keep its bytes.
    tree = repo.git("rev-parse", "HEAD^{tree}")
    raw = (
        f"tree {tree}\nauthor Ana <ana@example.com> 1700000000 +0000\n"
        "committer Ana <ana@example.com> 1700000000 +0000\n\n"
    ).encode() + b"Caf\xe9 cr\xe8me (latin-1 bytes)\n\nFixes INC-9\n"
    sha = repo.git("hash-object", "-t", "commit", "-w", "--stdin", input=raw)
    repo.git("update-ref", "refs/heads/main", sha)
    commit = read_history(repo.root)[0]
    assert commit.sha == sha
    assert commit.subject.startswith("Caf") and "\ufffd" in commit.subject
    assert [f.path for f in commit.files] == ["caf\xe9.txt"]
    ex = commits_to_graph([commit])
    assert targets(ex, RelType.FIXES, f"commit:{sha}") == {"incident:INC-9"}


def test_since_and_incremental_helpers(repo: Repo) -> None:
    repo.write("a.txt", "a\n")
    repo.write("b.txt", "b\n")
    repo.write("c.txt", "c\n")
    c1 = repo.commit("one")
    assert not working_tree_dirty(repo.root)
    repo.write("a.txt", "a2\n")
    repo.git("mv", "b.txt", "bb.txt")
    (repo.root / "c.txt").unlink()
    c2 = repo.commit("two")
    assert [c.sha for c in read_history(repo.root, since=c1)] == [c2]
    assert read_history(repo.root, since=c2) == []
    with pytest.raises(GitError):
        read_history(repo.root, since="0" * 40)
    changed, deleted, renames = changed_paths_since(repo.root, c1)
    assert changed == {"a.txt", "bb.txt"} and deleted == {"b.txt", "c.txt"}
    assert renames == {"b.txt": "bb.txt"}
    repo.write("new.txt", "n\n")
    assert working_tree_dirty(repo.root)
    assert not working_tree_dirty(repo.root, include_untracked=False)
    changed, _, _ = changed_paths_since(repo.root, c2)
    assert changed == {"new.txt"}
    assert changed_paths_since(repo.root, c1, rev=c2)[0] == {"a.txt", "bb.txt"}


def test_subfolder_paths_are_relative(repo: Repo) -> None:
    repo.write("outside.txt", "o\n")
    repo.write("proj/inside.py", "def f():\n    return 1\n")
    sha = repo.commit("both")
    repo.write("outside.txt", "o2\n")
    repo.commit("outside only")
    commits = read_history(repo.root / "proj")
    assert [c.sha for c in commits] == [sha]
    assert [f.path for f in commits[0].files] == ["inside.py"]
    ex = extract_history(repo.root / "proj", parse=parse_python)
    assert targets(ex, RelType.MODIFIED, f"commit:{sha}") == {"sym:inside.py::f"}


def test_deterministic(repo: Repo) -> None:
    repo.write("m.py", SERVICE_V1)
    repo.commit("a ADR-1 PAY-1", email="z@example.com")
    repo.write("m.py", SERVICE_V2)
    repo.commit("b Co-authored-by: X <x@example.com>\n\nFixes INC-1")

    def dump() -> list:
        ex = extract_history(repo.root, parse=parse_python)
        return [repr(e) for e in (*ex.nodes, *ex.rels, *ex.chunks)]

    assert dump() == dump()


def test_two_thousand_commits_read_fast(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "big")
    stream = []
    for i in range(2000):
        msg = f"Change {i} PAY-{i}\n".encode()
        content = "".join(f"def f{k}():\n    return {i if k == i % 20 else k}\n" for k in range(20))
        data = content.encode()
        stream.append(
            f"commit refs/heads/main\nmark :{i + 1}\n"
            f"author A <a{i % 5}@example.com> {1_600_000_000 + i * 60} +0000\n"
            f"committer A <a@example.com> {1_600_000_000 + i * 60} +0000\n".encode()
            + f"data {len(msg)}\n".encode() + msg
            + (f"from :{i}\n".encode() if i else b"")
            + f"M 100644 inline src/m{i % 10}.py\ndata {len(data)}\n".encode() + data + b"\n"
        )
    repo.git("fast-import", "--quiet", input=b"".join(stream))
    start = time.perf_counter()
    commits = read_history(repo.root, rev="main")
    elapsed = time.perf_counter() - start
    assert len(commits) == 2000
    assert elapsed < 5, elapsed
    ex = commits_to_graph(commits)
    assert len([n for n in ex.nodes if n.key.startswith("commit:")]) == 2000

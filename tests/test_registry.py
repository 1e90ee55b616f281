"""The codebase registry (graphmem.registry): per-file verdicts against the working tree on both
stores, per-file summaries (deterministic, or an LLM's through tests/llm_double.py) that go stale
with the file and are written anew, the lazy bootstrap of a never-ingested repository through the
command line and the MCP service, a task's closure, and pending memories in search on request."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphmem import memory
from graphmem.api import Graphmem
from graphmem.config import LLMSettings, Settings
from graphmem.context import ContextTools, SessionContext
from graphmem.errors import GraphmemError
from graphmem.ingest import StatCache, ingest
from graphmem.mcp_server import Service
from graphmem.registry import Verdict, file_summary, verify
from tests.llm_double import ChatDouble, Reply

GIT_ENV = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@demo.dev", "GIT_COMMITTER_NAME": "Dev",
           "GIT_COMMITTER_EMAIL": "dev@demo.dev"}
BILLING = '''"""Invoices and their totals (ledger password = hunter2-Zq9xx)."""


class Invoice:
    """An invoice of one customer.

    Lines are added one by one."""

    def total(self) -> int:
        """Sum of the lines."""
        return 0

    def add_line(self, amount: int) -> None:
        pass


def compute_tax(amount: int) -> int:
    """Tax due on an amount, in cents."""
    return amount // 5
'''
FILES = {
    "pkg/__init__.py": "",
    "pkg/billing.py": BILLING,
    "pkg/util.py": '"""Small helpers."""\n\n\ndef clamp(x: int) -> int:\n    """Keep x within 0-100."""\n'
                   "    return max(0, min(100, x))\n",
    "README.md": "# Demo\n\nBilling demo: invoices and the tax due on them.\n",
}
QUESTION = "How is the tax due on an amount computed?"
TAX = "sym:pkg/billing.py::compute_tax"
PENDING = "Tax on an amount is rounded down to whole cents"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def make_repo(path: Path) -> Path:
    """A small git repository: a package of three modules and a README, in one commit."""
    for name, text in FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path.parent, "init", "-q", path.name)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "Demo")
    return path


def graphmem(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRAPHMEM_HOME": "", "GRAPHMEM_PROJECT": "", "GRAPHMEM_STORE": ""}
    return subprocess.run([sys.executable, "-m", "graphmem.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


@pytest.fixture(params=["embedded", "neo4j"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh project on each store."""
    if request.param == "neo4j":
        yield request.getfixturevalue("neo4j_store_factory")("registry")
        return
    from graphmem.stores.embedded import EmbeddedStore

    made = EmbeddedStore(tmp_path / "home", "demo")
    yield made
    made.close()


# --- verify -------------------------------------------------------------------------------------


def test_verify_gives_every_path_its_verdict(store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The files were written a moment ago: record their signatures at once, as for an older checkout.
    monkeypatch.setattr(StatCache, "RACY_NS", 0)
    repo = make_repo(tmp_path / "demo")
    cache = tmp_path / "cache"
    ingest(repo, store, cache_dir=cache)
    first = verify(store, repo, cache_dir=cache)
    assert first.up_to_date and first.counts() == {"match": 4, "changed": 0, "missing": 0, "new": 0}
    assert first.read == 0  # the ingest recorded every signature: nothing is read again

    (repo / "pkg" / "util.py").write_text(FILES["pkg/util.py"] + "\n\ndef more() -> int:\n    return 1\n")
    (repo / "README.md").unlink()
    (repo / "pkg" / "fresh.py").write_text("def fresh() -> int:\n    return 2\n")
    (repo / ".env").write_text("TOKEN=abc\n")  # never read by an ingest: no verdict either
    report = verify(store, repo, cache_dir=cache)
    assert report.verdicts == {"pkg/__init__.py": Verdict.MATCH, "pkg/billing.py": Verdict.MATCH,
                               "pkg/util.py": Verdict.CHANGED, "README.md": Verdict.MISSING,
                               "pkg/fresh.py": Verdict.NEW}
    assert report.read == 1  # only the file whose signature changed was hashed
    assert "1 changed, 1 missing, 1 new" in report.summary_line()
    listed = report.as_dict()["files"]
    assert {f["path"] for f in listed} == {"pkg/util.py", "README.md", "pkg/fresh.py"}

    # Same size, mtime put back: the inode change time still gives the edit away.
    billing = repo / "pkg" / "billing.py"
    st = billing.stat()
    billing.write_text(BILLING.replace("Sum of", "Sun of"))
    os.utime(billing, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert billing.stat().st_size == st.st_size and billing.stat().st_mtime_ns == st.st_mtime_ns
    assert verify(store, repo, cache_dir=cache).verdicts["pkg/billing.py"] is Verdict.CHANGED
    # Written back as it was: read again (its signature moved) and found to match.
    (repo / "pkg" / "util.py").write_text(FILES["pkg/util.py"])
    again = verify(store, repo, cache_dir=cache)
    assert again.verdicts["pkg/util.py"] is Verdict.MATCH and again.read >= 1

    only = verify(store, repo, cache_dir=cache, paths=["pkg"])
    assert set(only.verdicts) == {"pkg/__init__.py", "pkg/billing.py", "pkg/util.py", "pkg/fresh.py"}
    with pytest.raises(Exception, match="relative to the repository root"):
        verify(store, repo, cache_dir=cache, paths=["../elsewhere"])

    ingest(repo, store, cache_dir=cache)
    final = verify(store, repo, cache_dir=cache)
    assert final.up_to_date and final.counts()["match"] == 4 and final.read == 0


def test_a_file_written_within_the_racy_window_is_not_trusted_by_its_signature(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    cache = StatCache.open(tmp_path / "cache", tmp_path)
    st = os.stat(path)
    cache.record("a.py", st, "first")
    assert cache.lookup("a.py", st) is None  # a second write in the same tick would keep size and mtime
    monkeypatch.setattr(StatCache, "RACY_NS", 0)
    cache.record("a.py", st, "first")
    cache.save()
    reopened = StatCache.open(tmp_path / "cache", tmp_path)
    assert reopened.lookup("a.py", st) == "first"
    path.write_text("x = 22\n")
    assert reopened.lookup("a.py", os.stat(path)) is None
    assert StatCache.open(tmp_path / "cache", tmp_path / "elsewhere").lookup("a.py", st) is None


# --- summaries ----------------------------------------------------------------------------------


def test_a_summary_is_kept_per_content_and_written_anew_when_the_file_changed(store: Any, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "demo")
    cache = tmp_path / "cache"
    ingest(repo, store, cache_dir=cache)
    first = file_summary(store, "pkg/billing.py", root=repo, cache_dir=cache)
    assert first.regenerated and not first.replaced_stale and not first.stale and first.method == "deterministic"
    text = first.text
    assert text.splitlines()[0] == "pkg/billing.py (python, 19 lines, service pkg)"
    assert "Module: Invoices and their totals" in text
    assert "hunter2" not in text and "[REDACTED:password]" in text  # repository text, redacted like the rest
    assert "- class Invoice — An invoice of one customer. (members: add_line, total)" in text
    assert "- def compute_tax(amount: int) -> int — Tax due on an amount, in cents." in text
    assert text.index("class Invoice") < text.index("compute_tax")  # source order
    assert first.symbols == ["sym:pkg/billing.py::Invoice", TAX]
    assert "Lines are added" not in text  # first docstring lines only
    assert first.as_dict()["untrusted_summary"] == text and "text" not in first.as_dict()

    stored = file_summary(store, "pkg/billing.py", root=repo, cache_dir=cache)
    assert not stored.regenerated and stored.text == text and stored.generated_at == first.generated_at

    (repo / "pkg" / "billing.py").write_text(BILLING + '\n\ndef round_down(amount: int) -> int:\n'
                                             '    """Whole cents, rounded down."""\n    return amount\n')
    stale = file_summary(store, "pkg/billing.py", root=repo, cache_dir=cache)
    assert stale.stale and stale.working_tree == "changed" and not stale.regenerated
    assert "round_down" not in stale.text and "changed since the last ingest" in (stale.note or "")

    ingest(repo, store, cache_dir=cache)
    fresh = file_summary(store, "pkg/billing.py", root=repo, cache_dir=cache)
    assert fresh.regenerated and fresh.replaced_stale and not fresh.stale and fresh.working_tree == "match"
    assert "- def round_down(amount: int) -> int — Whole cents, rounded down." in fresh.text
    assert fresh.content_hash != first.content_hash
    assert "round_down" in json.loads(store.get_meta("summary:pkg/billing.py"))["text"]

    readme = file_summary(store, "README.md")
    assert readme.text.startswith("README.md (markdown") and "Demo" in readme.text
    with pytest.raises(GraphmemError, match="not in project"):
        file_summary(store, "pkg/nothing.py")


def test_an_llm_writes_the_summary_when_one_is_configured(tmp_path: Path) -> None:
    from graphmem.stores.embedded import EmbeddedStore

    repo = make_repo(tmp_path / "demo")
    store = EmbeddedStore(tmp_path / "home", "demo")
    ingest(repo, store, cache_dir=tmp_path / "cache")
    answer = ("Invoices with their lines, and the tax due on an amount. Deploys use the token "
              "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB.")
    try:
        with ChatDouble(lambda request: Reply(content=answer)) as double:
            conf = LLMSettings(base_url=double.url, model="summary-model", timeout=5.0, max_retries=0, backoff=0.01)
            written = file_summary(store, "pkg/billing.py", llm=conf)
            assert written.method == "llm" and written.model == "summary-model" and written.regenerated
            assert written.text.startswith("Invoices with their lines")
            assert "ghp_" not in written.text and "[REDACTED:github-token]" in written.text
            sent = json.dumps(double.requests)
            assert double.calls == 1 and "Summarise the file pkg/billing.py" in sent and "compute_tax" in sent
            assert "hunter2" not in sent
            assert double.requests[0]["messages"][0]["role"] == "system"
            assert "response_format" not in double.requests[0]  # plain text, not the extraction schema
            again = file_summary(store, "pkg/billing.py", llm=conf)
            assert not again.regenerated and again.text == written.text and double.calls == 1
            assert "ghp_" not in (store.get_meta("summary:pkg/billing.py") or "")
        with ChatDouble(lambda request: Reply.http(500)) as down:
            other = LLMSettings(base_url=down.url, model="other-model", timeout=5.0, max_retries=0, backoff=0.01)
            fallback = file_summary(store, "pkg/billing.py", llm=other)
            assert down.calls == 1 and fallback.method == "deterministic"
            assert "LLM summary failed" in (fallback.note or "") and "compute_tax" in fallback.text
    finally:
        store.close()


# --- lazy bootstrap -----------------------------------------------------------------------------


def test_query_ingests_the_repository_it_is_asked_in_when_its_project_was_never_ingested(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "work" / "demo")
    out = graphmem("query", QUESTION, "--mode", "bm25", "-k", "3", "--json", cwd=repo / "pkg")
    assert out.returncode == 0, out.stderr
    assert "project demo holds nothing yet: ingesting" in out.stderr and "ingested 4 files" in out.stderr
    assert re.search(r"graphmem: parse \d+/\d+", out.stderr)  # progress, on stderr only
    assert TAX in [h["key"] for h in json.loads(out.stdout)["results"]]
    home = repo / ".graphmem"  # the repository's own home, found from any folder inside it
    assert json.loads((home / "projects.json").read_text()) == {str(repo.resolve()): "demo"}
    assert git(repo, "status", "--porcelain") == ""  # the home ignores itself: `git add -A` leaves it out

    # A project that is not this repository's is never created by a question.
    wrong = graphmem("--project", "demo2", "query", QUESTION, cwd=repo)
    assert wrong.returncode == 1 and "'demo2' holds nothing" in wrong.stderr and "ingesting" not in wrong.stderr
    assert not (home / "demo2").exists()

    # Pending memories only when asked, after the ranked results, marked pending and untrusted.
    with Graphmem(Settings(store="embedded", home=home), "demo") as gm:
        assert memory.update_memory(gm.store, "tax/rounding", PENDING, "agent", "decision").status == "pending"
    asked = graphmem("query", "tax amount rounded", "--mode", "bm25", "-k", "3", "--json", "--include-pending",
                     cwd=repo)
    assert asked.returncode == 0, asked.stderr
    assert "ingesting" not in asked.stderr  # the project exists now
    results = json.loads(asked.stdout)["results"]
    pending = [r for r in results if r.get("pending")]
    assert [p["key"] for p in pending] == ["memory:tax/rounding@v1"]
    assert pending[0]["trusted"] is False and pending[0]["rank"] == len(results) and PENDING in pending[0]["text"]
    assert all("pending" not in r for r in results[:-1])
    plain = graphmem("query", "tax amount rounded", "--mode", "bm25", "-k", "3", cwd=repo)
    assert plain.returncode == 0 and "tax/rounding" not in plain.stdout

    (repo / "pkg" / "util.py").write_text(FILES["pkg/util.py"] + "\n# edited\n")
    checked = graphmem("context", "verify", "--json", cwd=repo)
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert report["counts"] == {"match": 3, "changed": 1, "missing": 0, "new": 0}
    assert report["files"] == [{"path": "pkg/util.py", "verdict": "changed"}]
    summary = graphmem("context", "summary", "pkg/billing.py", cwd=repo)
    assert summary.returncode == 0 and "compute_tax" in summary.stdout and "regenerated" in summary.stderr
    assert "stored" in graphmem("context", "summary", "pkg/billing.py", cwd=repo).stderr


def test_a_home_graphmem_makes_ignores_itself_but_a_folder_of_the_users_is_left_alone(tmp_path: Path) -> None:
    from graphmem.config import prepare_home

    made = prepare_home(tmp_path / "a" / "home")  # new: graphmem's own
    assert (made / ".gitignore").read_text().splitlines()[-1] == "*"
    old_home = tmp_path / "repo" / ".graphmem"  # made by an earlier version, without one
    old_home.mkdir(parents=True)
    prepare_home(old_home)
    assert (old_home / ".gitignore").is_file()
    (old_home / ".gitignore").write_text("cache/\n")  # the owner's own choice stays
    prepare_home(old_home)
    assert (old_home / ".gitignore").read_text() == "cache/\n"
    theirs = tmp_path / "graphs"  # --home naming a folder that exists already, perhaps kept in git
    theirs.mkdir()
    prepare_home(theirs)
    assert not (theirs / ".gitignore").exists()


def test_no_bootstrap_keeps_the_error_and_creates_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "demo")
    out = graphmem("query", QUESTION, "--no-bootstrap", cwd=repo)
    assert out.returncode == 1 and "holds nothing" in out.stderr and "Traceback" not in out.stderr
    assert not (repo / ".graphmem").exists()


def test_the_mcp_service_ingests_its_repository_before_the_first_answer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path / "demo")
    told: list[Path] = []
    service = Service(Settings(store="embedded", home=tmp_path / "home"), "demo", bootstrap_root=repo,
                      on_bootstrap=told.append)
    try:
        first = service.search(QUESTION, mode="bm25", k=3)
        assert first["bootstrap"]["files"] == 4 and told == [repo.resolve()]
        assert TAX in [h["key"] for h in first["results"]]
        assert "holds nothing yet: ingesting" in capsys.readouterr().err
        assert "bootstrap" not in service.search(QUESTION, mode="bm25", k=3) and len(told) == 1

        memory.update_memory(service.graphmem().store, "tax/rounding", PENDING, "agent", "decision")
        plain = service.search("tax amount rounded", mode="bm25", k=3)
        assert not [h for h in plain["results"] if h.get("pending")]
        asked = service.search("tax amount rounded", mode="bm25", k=3, include_pending=True)
        pending = [h for h in asked["results"] if h.get("pending")]
        assert len(pending) == 1 and pending[0]["trusted"] is False and pending[0]["agent_written"] is True
        assert "text" not in pending[0] and PENDING in pending[0]["untrusted_text"]
        symbols = service.search("tax amount rounded", mode="bm25", k=3, include_pending=True, kinds=["symbol"])
        assert symbols["results"] and not [h for h in symbols["results"] if h.get("pending")]

        tools = ContextTools(service)
        checked = tools.verify()
        assert checked["up_to_date"] and checked["counts"]["match"] == 4 and checked["content_notice"]
        summary = tools.get_file_summary("pkg/billing.py")
        assert "compute_tax" in summary["untrusted_summary"] and summary["working_tree"] == "match"
    finally:
        service.close()

    idle = Service(Settings(store="embedded", home=tmp_path / "other-home"), "demo")  # no repository to bootstrap
    try:
        answer = idle.search(QUESTION, mode="bm25", k=3)
        assert answer["results"] == [] and "bootstrap" not in answer
        assert idle.graphmem().store.counts().total_nodes == 0
    finally:
        idle.close()


# --- the task's closure -------------------------------------------------------------------------


def test_closing_a_task_brings_the_paths_it_touched_up_to_date(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "demo")
    (repo / "pkg" / "util.py").write_text(FILES["pkg/util.py"] + "\n# before the task\n")
    git(repo, "commit", "-qam", "Before the task")
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "demo")
    try:
        gm.ingest(repo, index=False)
        ctx = SessionContext(gm)
        ctx.set_task("Round tax down", keys=[TAX])
        assert ctx.get_task()["start_head"] == git(repo, "rev-parse", "HEAD").strip()  # type: ignore[index]
        assert "round_down" not in ctx.file_summary("pkg/billing.py").text

        # The session: a commit, then uncommitted work (a new file, a deleted one).
        (repo / "pkg" / "billing.py").write_text(BILLING + '\n\ndef round_down(amount: int) -> int:\n'
                                                 '    """Whole cents, rounded down."""\n    return amount\n')
        git(repo, "commit", "-qam", "Round tax down")
        (repo / "pkg" / "rounding.py").write_text('"""Rounding rules."""\n\n\ndef cents(x: float) -> int:\n'
                                                  "    return int(x)\n")
        git(repo, "rm", "-q", "README.md")
        briefing = ctx.load_context(2000, mark_seen=False)
        assert "files against the working tree: 2 match, 1 changed, 1 missing, 1 new" in briefing.markdown
        assert briefing.files == {"match": 2, "changed": 1, "missing": 1, "new": 1}

        out = ctx.save_context(status="done", note="tax rounded down",
                               ingest_fn=lambda root: gm.ingest(root, index=False))
        closure = out["closure"]
        touched = ["README.md", "pkg/billing.py", "pkg/rounding.py"]  # util.py changed before the task began
        assert closure["touched"] == touched and closure["touched_from"] == "diff since the task's start"
        assert closure["updated"] == touched and closure["differ"] == {}
        assert closure["summaries"] == ["pkg/billing.py", "pkg/rounding.py"]
        after = ctx.file_summary("pkg/billing.py")
        assert not after.regenerated and "round_down" in after.text  # written by the closure
        assert ctx.verify().up_to_date and out["task"]["status"] == "done"

        # Without an ingest the closure reports what still differs and updates nothing.
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "Rounding rules")
        ctx.set_task("Tidy rounding")
        (repo / "pkg" / "rounding.py").write_text('"""Rounding rules, changed."""\n')
        kept = ctx.save_context(ingest=False)["closure"]
        assert kept["touched"] == ["pkg/rounding.py"] and kept["updated"] == []
        assert kept["differ"] == {"pkg/rounding.py": "changed"}
    finally:
        gm.close()


def test_a_project_whose_checkout_moved_away_verifies_as_an_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "demo")
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "demo")
    try:
        gm.ingest(repo, index=False)
        shutil.rmtree(repo)
        with pytest.raises(GraphmemError, match="does not exist"):
            SessionContext(gm).verify()
    finally:
        gm.close()

"""Agent sessions in the graph (graphmem.sessions): transcripts of Claude Code, Codex and the generic
JSONL become session nodes linked to the files, symbols, commits and decisions they touched, with a
searchable digest; cursors make a second run write nothing and an appended transcript read only its
new lines; raw bodies stay within their budget; a hook never fails the agent.

Runs on the embedded store and on Neo4j (a real server; see tests/conftest.py); the one double is
the local HTTP server standing in for an LLM (tests/llm_double.py)."""

from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from graphmem.api import Graphmem
from graphmem.config import LLMSettings, Settings
from graphmem.mcp_server import Service
from graphmem.model import NodeKind
from graphmem.retrieval.config import preset
from graphmem.sessions.capture import SessionIngest, sessions_status
from graphmem.sessions.graph import EXTRACTOR, session_errors
from graphmem.sessions.retention import RetentionConfig
from tests.llm_double import ChatDouble, Reply
from tests.test_sessions_capture import CLAUDE, CODEX, FIXTURES, GENERIC, PLANTED

HANDLER = "sym:services/billing/api/handlers.py::InvoiceHandler.post"
APPEND_BATCH = "sym:services/ledger/internal/store/store.go::Store.AppendBatch"
CLAUDE_KEY = f"session:claude-code:{CLAUDE.stem}"
CODEX_KEY = "session:codex:5d2f8b61-7a3c-4e9d-b2f1-0c4a6e8d1f37"
NOW = datetime(2026, 6, 10, tzinfo=timezone.utc)  # the fixtures' sessions ended days before
ROOMY = RetentionConfig(soft_bytes=10 * 2**20, hard_bytes=20 * 2**20, max_age_days=90)


@pytest.fixture(params=["embedded", "neo4j"])
def gm(request: pytest.FixtureRequest, template_home: Path, tmp_path: Path) -> Iterator[Graphmem]:
    """A Graphmem over the ingested example organisation, on each store, without sessions."""
    if request.param == "neo4j":
        g = request.getfixturevalue("neo4j_acme")
        yield g
        sources = {n.provenance.source_path for n in g.store.iter_nodes([NodeKind.SESSION], include_closed=True)}
        g.store.remove_sources(sorted(sources))  # the next test starts without sessions
        g.sync_indexes()
        return
    home = tmp_path / "home"
    shutil.copytree(template_home, home)
    g = Graphmem(Settings(store="embedded", home=home), "acme")
    yield g
    g.close()


def ingest(gm: Graphmem, folder: Path, paths: list[Path] | None, **kw: Any) -> Any:
    kw.setdefault("retention", ROOMY)
    return SessionIngest(gm, folder=folder, now=NOW, llm=kw.pop("llm", False), **kw).run(paths)


def touched(gm: Graphmem, key: str) -> dict[str, list[str]]:
    return {r.dst: list(r.props["how"]) for r in gm.store.get_relationships([key])
            if r.src == key and r.type.value == "TOUCHED"}


def snapshot(gm: Graphmem) -> dict[str, Any]:
    """What a write would change: counts, each session's ingestion time and its chunk and links."""
    store = gm.store
    sessions = list(store.iter_nodes([NodeKind.SESSION], include_closed=True))
    keys = [n.key for n in sessions]
    return {"counts": store.counts().as_dict(),
            "nodes": sorted((n.key, n.provenance.ingested_at, n.valid_to) for n in sessions),
            "chunks": sorted((c.id, c.text) for c in store.get_chunks(keys)),
            "rels": sorted((r.ident, r.provenance.ingested_at) for r in store.get_relationships(keys))}


def test_sessions_become_nodes_linked_to_what_they_touched(gm: Graphmem, tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    report = ingest(gm, folder, [FIXTURES])
    assert (report.files_seen, report.files_read, len(report.sessions)) == (3, 3, 4)
    assert any("not UTF-8" in p for p in report.problems) and any("incomplete" in p for p in report.problems)
    claude = gm.store.get_node(CLAUDE_KEY)
    assert claude is not None and claude.kind is NodeKind.SESSION
    p = claude.props
    assert (p["flavour"], p["branch"], p["outcome"], p["prompts"], p["commits"]) == (
        "claude-code", "fix-invoice-retry", "committed", 1, ["3f2a9c1"])
    assert p["started"] == "2026-05-31T14:00:01.000000Z" and p["digest_source"] == "deterministic"
    assert p["agent_written"] is True and p["task"].startswith("Retries of POST /v1/invoices")
    assert claude.provenance.extractor == EXTRACTOR and claude.provenance.source_path.endswith(
        f"{CLAUDE.name}#{CLAUDE.stem}")
    links = touched(gm, CLAUDE_KEY)
    assert links["file:services/billing/api/handlers.py"] == ["read", "edited"]
    assert set(links[HANDLER]) == {"edited", "mentioned"} and links["adr:6"] == ["mentioned"]
    assert not any(k.startswith("sym:") and k != HANDLER for k in links)  # `.get(` in the edit is no edit of get
    codex = touched(gm, CODEX_KEY)
    assert codex["file:services/ledger/internal/store/store.go"] == ["edited"] and "edited" in codex[APPEND_BATCH]
    # One error, three sessions, two agent flavours, one fingerprint: what a pattern detector groups on.
    nodes = gm.store.get_nodes([CLAUDE_KEY, CODEX_KEY, "session:generic:aider-0529"])
    shared = set.intersection(*(set(n.props["error_fingerprints"]) for n in nodes.values()))
    assert len(shared) == 1 and nodes["session:generic:aider-0529"].props["unresolved_fingerprints"] == list(shared)
    (fixed,) = session_errors(nodes[CODEX_KEY])  # the fix outlives the raw body
    assert fixed["fingerprint"] in shared and fixed["resolved"]
    assert "docker compose up -d postgres" in fixed["fix_commands"]
    (chunk,) = gm.store.get_chunks([CLAUDE_KEY])
    assert "InvoiceHandler.post" in chunk.text and "Gotchas:" in chunk.text and chunk.kind == "session"
    # No planted secret reached the graph, the raw bodies, the cursors or the logs.
    stored = json.dumps([(n.props, n.name) for n in gm.store.iter_nodes([NodeKind.SESSION])])
    stored += json.dumps([c.text for c in gm.store.get_chunks([n.key for n in nodes.values()])])
    stored += "".join(f.read_text(encoding="utf-8") for f in folder.rglob("*") if f.is_file() and f.name != "lock")
    assert not any(secret in stored for secret in PLANTED) and "[REDACTED:" in stored


def test_a_second_run_writes_nothing_and_appended_lines_are_read_alone(gm: Graphmem, tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    work = tmp_path / "transcripts"
    shutil.copytree(FIXTURES, work)
    ingest(gm, folder, [work])
    before = snapshot(gm)
    raw_before = {f.name: f.read_bytes() for f in (folder / "raw").iterdir()}
    again = ingest(gm, folder, [work])
    assert (again.files_unchanged, again.files_read, again.bytes_read, again.sessions) == (3, 0, 0, [])
    assert snapshot(gm) == before
    assert {f.name: f.read_bytes() for f in (folder / "raw").iterdir()} == raw_before

    # The agent finishes its cut-off line and goes on: only the new bytes are read.
    transcript = work / CLAUDE.relative_to(FIXTURES)
    size = transcript.stat().st_size
    consumed = transcript.read_bytes().rindex(b"\n") + 1
    more = 'se?"}]}}\n' + json.dumps({
        "type": "user", "uuid": "u-200", "isSidechain": False, "sessionId": CLAUDE.stem, "cwd": "/home/dev/acme",
        "timestamp": "2026-05-31T14:07:00.000Z",
        "message": {"role": "user", "content": "Also run the ledger tests, they touch Store.AppendBatch."}}) + "\n" \
        + json.dumps({"type": "assistant", "uuid": "a-201", "isSidechain": False, "sessionId": CLAUDE.stem,
                      "timestamp": "2026-05-31T14:07:05.000Z", "message": {"role": "assistant", "content": [
                          {"type": "tool_use", "id": "toolu_20", "name": "Bash",
                           "input": {"command": "go test ./services/ledger/..."}}]}}) + "\n" \
        + json.dumps({"type": "user", "uuid": "u-202", "isSidechain": False, "sessionId": CLAUDE.stem,
                      "timestamp": "2026-05-31T14:07:30.000Z", "message": {"role": "user", "content": [
                          {"type": "tool_result", "tool_use_id": "toolu_20", "is_error": True,
                           "content": "store_test.go:88: AppendBatch(600 entries) = ErrBatchTooLarge"}]}}) + "\n"
    with transcript.open("a", encoding="utf-8") as handle:
        handle.write(more)
    grown = ingest(gm, folder, [work])
    assert grown.sessions == [CLAUDE_KEY] and grown.files_unchanged == 2
    assert grown.bytes_read == size - consumed + len(more.encode()) < transcript.stat().st_size
    node = gm.store.get_node(CLAUDE_KEY)
    assert node is not None and node.props["prompts"] == 2 and node.props["errors"] == 2
    assert node.props["ended"] == "2026-05-31T14:07:30.000000Z" and node.props["outcome"] == "failed"
    assert "mentioned" in touched(gm, CLAUDE_KEY)[APPEND_BATCH]
    assert touched(gm, CLAUDE_KEY)[HANDLER]  # what the earlier lines said still holds

    # A rewritten transcript (the prefix changed) is read again from the start, and what it no longer
    # says is withdrawn.
    lines = [ln for ln in CLAUDE.read_bytes().split(b"\n") if b"toolu_4" not in ln and b"Idempotency" not in ln]
    transcript.write_bytes(b"\n".join(lines[:-1]) + b"\n")
    rewritten = ingest(gm, folder, [work])
    assert rewritten.sessions == [CLAUDE_KEY] and rewritten.bytes_read == transcript.stat().st_size
    assert HANDLER not in touched(gm, CLAUDE_KEY) and "edited" not in touched(gm, CLAUDE_KEY).get(
        "file:services/billing/api/handlers.py", [])


def test_which_sessions_touched_a_symbol_is_a_search_and_a_graph_question(gm: Graphmem, tmp_path: Path) -> None:
    # Asked before any session exists, so this process's name catalog holds none; writing sessions
    # (no ingest) must move the catalog's stamp, or the question below stays a question about code.
    gm.query("which agent sessions touched InvoiceHandler.post?", mode="hybrid", k=3)
    ingest(gm, tmp_path / "sessions", [FIXTURES])
    assert gm.retriever.graph_for(preset("hybrid")).catalog.by_kind.get(NodeKind.SESSION)
    for mode in ("bm25", "hybrid"):
        keys = gm.query("which agent sessions touched InvoiceHandler.post?", mode=mode, k=10).keys
        # The question asks for sessions: the one that edited the method comes first.
        assert keys[0] == CLAUDE_KEY, (mode, keys)
        only = gm.query("which agent sessions touched InvoiceHandler.post?", mode=mode, k=3, kinds=["session"]).keys
        assert only[0] == CLAUDE_KEY, (mode, only)
    service = Service(gm.settings, gm.project)
    service._gm = gm
    answer = service.search("which agent sessions touched InvoiceHandler.post?", mode="bm25", k=3, kinds=["session"])
    hit = answer["results"][0]
    assert hit["key"] == CLAUDE_KEY and hit["agent_written"] is True and "InvoiceHandler.post" in hit["untrusted_text"]
    hits = gm.store.neighbors(HANDLER, rel_types=["TOUCHED"], direction="in")
    assert [h.node.key for h in hits] == [CLAUDE_KEY]
    if gm.settings.store == "neo4j":
        result = gm.cypher("MATCH (s:Session)-[t:TOUCHED]->(x {key: $key}) "
                           "RETURN s.key AS session, t.how AS how, s.outcome AS outcome ORDER BY session",
                           {"key": APPEND_BATCH})
        rows = result.records()
        assert [r["session"] for r in rows] == [CODEX_KEY]
        assert "edited" in rows[0]["how"] and rows[0]["outcome"] == "changed"


def test_short_shas_from_git_commit_output_link_the_commit(gm: Graphmem, tmp_path: Path) -> None:
    sha = sorted(n.key for n in gm.store.iter_nodes([NodeKind.COMMIT]))[0][len("commit:"):]
    log = tmp_path / "runs" / "run.jsonl"
    log.parent.mkdir()
    log.write_text("\n".join(json.dumps(r) for r in [
        {"session": "bot-1", "kind": "prompt", "text": "Commit the ledger fix", "time": "2026-06-01T09:00:00Z"},
        {"session": "bot-1", "kind": "tool", "tool": "shell", "call_id": "c", "command": "git commit -am 'fix'"},
        {"session": "bot-1", "kind": "result", "call_id": "c", "text": f"[main {sha[:8]}] fix\n 1 file changed"},
    ]) + "\n")
    ingest(gm, tmp_path / "sessions", [log])
    links = touched(gm, "session:generic:bot-1")
    assert links[f"commit:{sha}"] == ["committed"] and links["service:ledger"] == ["mentioned"]


def test_llm_digests_and_a_fallback_that_never_loses_a_session(template_home: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(template_home, home)
    answer = {"task": "Stop duplicate invoices on retries.", "approach": "Reused the idempotency key.",
              "outcome": "Committed the fix.", "gotchas": ["Start Postgres before the billing tests."],
              "decisions": ["The key stays in the header."]}
    with ChatDouble(lambda request: Reply(content=json.dumps(answer))) as double:
        llm = LLMSettings(base_url=double.url, model="digest-model", max_retries=0, backoff=0.01)
        with Graphmem(Settings(store="embedded", home=home, llm=llm), "acme") as gm:
            report = ingest(gm, tmp_path / "sessions", [CLAUDE], llm=True)
            assert report.digests == {"llm": 1}
            node = gm.store.get_node(CLAUDE_KEY)
            assert node is not None and node.props["digest_source"] == "llm"
            assert node.props["gotchas"] == ["Start Postgres before the billing tests."]
            assert "Stop duplicate invoices" in gm.store.get_chunks([CLAUDE_KEY])[0].text
            sent = json.dumps(double.requests)
            assert double.calls == 1 and "InvoiceHandler.post" in sent and not any(s in sent for s in PLANTED)

            double.responder = lambda request: Reply.malformed()
            report = ingest(gm, tmp_path / "sessions", [GENERIC], llm=True)
            assert report.digests == {"fallback": 2} and len(report.sessions) == 2
            node = gm.store.get_node("session:generic:aider-0529")
            assert node is not None and node.props["digest_source"] == "deterministic"
            assert "LLM digest failed" in node.props["digest_note"] and gm.store.get_chunks([node.key])
            raw = sessions_status(gm, ROOMY, folder=tmp_path / "sessions")["raw"]
            assert raw["bodies"] == 3 and raw["undigested"] == []


def test_retention_through_ingest_and_the_status_report(gm: Graphmem, tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    tight = RetentionConfig(soft_bytes=1, hard_bytes=2**20, max_age_days=90)
    report = ingest(gm, folder, [FIXTURES], retention=tight)
    # Every session was digested before its body went: soft-cap evictions, no overflow.
    assert sorted(e["key"] for e in report.evicted) == sorted(report.sessions)
    assert {e["reason"] for e in report.evicted} == {"soft_cap"} and not report.as_dict()["overflows"]
    assert all(gm.store.get_chunks([k]) for k in report.sessions)
    status = sessions_status(gm, tight, folder=folder)
    assert status["sessions"] == 4 and status["by_flavour"] == {"claude-code": 1, "codex": 1, "generic": 2}
    assert status["raw"]["bytes"] == 0 and status["evicted"]["by_reason"] == {"soft_cap": 4}
    assert status["caps"] == tight.as_dict() and status["transcripts_tracked"] == 3
    # The transcripts grew after their bodies went: they are read whole again, not from the cursor.
    work = tmp_path / "t"
    shutil.copytree(FIXTURES, work)
    path = work / CLAUDE.relative_to(FIXTURES)
    ingest(gm, folder, [path], retention=tight)
    with path.open("ab") as handle:
        handle.write(b'se?"}]}}\n')
    grown = ingest(gm, folder, [path], retention=tight)
    assert grown.bytes_read == path.stat().st_size and grown.sessions == [CLAUDE_KEY]


def test_the_hook_never_fails_the_agent_and_the_commands_report(template_home: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from graphmem.cli import cli, main

    home = tmp_path / "home"
    shutil.copytree(template_home, home)
    monkeypatch.setenv("GRAPHMEM_SESSIONS_MAX_AGE_DAYS", "100000")
    runner = CliRunner()
    base = ["--home", str(home), "--project", "acme", "sessions"]
    hook = {"session_id": CLAUDE.stem, "transcript_path": str(CLAUDE), "cwd": "/home/dev/acme",
            "hook_event_name": "Stop", "stop_hook_active": False}
    done = runner.invoke(cli, [*base, "ingest", "--hook"], input=json.dumps(hook))
    assert done.exit_code == 0, done.output
    with Graphmem(Settings(store="embedded", home=home), "acme") as gm:
        assert gm.store.get_node(CLAUDE_KEY) is not None
    for stdin, args in ((json.dumps({**hook, "transcript_path": str(tmp_path / "gone.jsonl")}), base),
                        ("{not json", base),
                        (json.dumps(hook), ["--home", str(tmp_path / "empty"), "--project", "acme", "sessions"])):
        result = runner.invoke(cli, [*args, "ingest", "--hook"], input=stdin)
        assert result.exit_code == 0 and result.exception is None
    # Behind another run holding the project's lock, the hook gives up after a while, still exit 0.
    monkeypatch.setattr("graphmem.sessions.cli.HOOK_LOCK_WAIT_S", 0.3)
    with (home / "acme" / "sessions" / "lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        busy = runner.invoke(cli, [*base, "ingest", "--hook"],
                             input=json.dumps({**hook, "transcript_path": str(CODEX)}))
    assert busy.exit_code == 0 and "another sessions ingest is running" in busy.stderr
    # Codex's notify passes its JSON as the last argument, without a transcript: the default folders are read.
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    notified = runner.invoke(cli, [*base, "ingest", "--hook", json.dumps({"type": "agent-turn-complete"})])
    assert notified.exit_code == 0 and notified.exception is None
    status = runner.invoke(cli, [*base, "status", "--json"])
    data = json.loads(status.stdout)
    assert status.exit_code == 0 and data["sessions"] == 1 and data["raw"]["bodies"] == 1
    text = runner.invoke(cli, [*base, "status"])
    assert text.exit_code == 0 and "1 sessions (claude-code 1)" in text.stdout and "evicted: 0" in text.stdout
    assert main(["--home", str(home), "--project", "acme", "sessions", "ingest", str(tmp_path / "nope")]) == 1
    assert main(["--home", str(home), "--project", "acme", "sessions", "ingest", "--soft-cap", "9GB",
                 "--hard-cap", "1GB", str(CODEX)]) == 1


def test_default_folders_keep_the_sessions_of_this_project(template_home: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    shutil.copytree(template_home, home)
    user = tmp_path / "user"
    with Graphmem(Settings(store="embedded", home=home), "acme") as gm:
        root = gm.store.get_meta("root")
        assert root
        inside = user / ".claude" / "projects" / root.replace("/", "-") / "0a0a0a0a-1111-4222-8333-444455556666.jsonl"
        inside.parent.mkdir(parents=True)
        inside.write_bytes(CLAUDE.read_bytes().replace(b"/home/dev/acme", root.encode()))
        rollout = user / ".codex" / "sessions" / CODEX.relative_to(FIXTURES / "codex")
        rollout.parent.mkdir(parents=True)
        shutil.copy(CODEX, rollout)  # worked in /home/dev/acme: another checkout, not this project
        monkeypatch.setenv("HOME", str(user))
        monkeypatch.delenv("CODEX_HOME", raising=False)
        monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
        report = ingest(gm, tmp_path / "sessions", None)
        assert report.sessions == ["session:claude-code:0a0a0a0a-1111-4222-8333-444455556666"]
        assert report.outside_root == [CODEX_KEY] and gm.store.get_node(CODEX_KEY) is None
        assert report.files_read == 1  # the other project's rollout was only peeked at
        assert "edited" in touched(gm, report.sessions[0])[HANDLER]
        again = ingest(gm, tmp_path / "sessions", None)
        assert (again.files_unchanged, again.sessions, again.outside_root) == (2, [], [])

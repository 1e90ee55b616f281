"""Agent session transcripts read into normalised events (graphmem.sessions.adapters, .events,
.digest) and raw bodies kept within a byte budget (.retention): no graph store involved here;
tests/test_sessions.py covers the graph on both stores.

The fixtures under tests/fixtures/sessions are written in the real shapes of Claude Code
transcripts, Codex CLI rollouts and the documented generic JSONL, with malformed, non-UTF-8 and
truncated lines and planted secrets."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from graphmem.errors import ConfigError
from graphmem.sessions.adapters import detect_flavour, parse
from graphmem.sessions.digest import Outcome, deterministic_digest, session_facts
from graphmem.sessions.events import EventKind, Flavour, error_fingerprint, error_signature, make_event
from graphmem.sessions.retention import EvictionReason, RawStore, RetentionConfig, parse_size

FIXTURES = Path(__file__).parent / "fixtures" / "sessions"
CLAUDE = FIXTURES / "claude" / "-home-dev-acme" / "7c1e9a52-3b4d-4f6e-9a10-2c3d4e5f6a7b.jsonl"
CODEX = (FIXTURES / "codex" / "2026" / "05" / "30"
         / "rollout-2026-05-30T09-12-44-5d2f8b61-7a3c-4e9d-b2f1-0c4a6e8d1f37.jsonl")
GENERIC = FIXTURES / "generic" / "agent-runs.jsonl"
PLANTED = ("Zq9-hunter2x", "AKIAIOSFODNN7EXAMPLE", "sk_live_51HqLyjWDarjtT1zdp7dcXYZab12")


def only_session(path: Path, flavour: Flavour) -> tuple[str, list]:
    batch = parse(path, flavour)
    assert len(batch.events) == 1
    return next(iter(batch.events.items()))


def test_each_format_is_recognised_and_bad_lines_are_named_and_skipped() -> None:
    assert detect_flavour(CLAUDE) is Flavour.CLAUDE_CODE
    assert detect_flavour(CODEX) is Flavour.CODEX
    assert detect_flavour(GENERIC) is Flavour.GENERIC
    claude = parse(CLAUDE, Flavour.CLAUDE_CODE)
    assert any("line 9 is not valid JSON" in p for p in claude.problems)
    assert any("line 10 is not UTF-8" in p for p in claude.problems)
    # The cut-off last line is left for the next run: the cursor stops where it begins.
    assert any("last line" in p and "incomplete" in p for p in claude.problems)
    assert claude.end == CLAUDE.read_bytes().rindex(b"\n") + 1 < CLAUDE.stat().st_size
    codex = parse(CODEX, Flavour.CODEX)
    assert any("not valid JSON" in p for p in codex.problems) and codex.end < CODEX.stat().st_size
    generic = parse(GENERIC, Flavour.GENERIC)
    assert any("unknown kind 'teleport'" in p for p in generic.problems)
    assert generic.end == GENERIC.stat().st_size and set(generic.events) == {"aider-0529", "ci-bot-17"}


def test_an_overlong_line_is_skipped_and_reading_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphmem.sessions import adapters

    monkeypatch.setattr(adapters, "MAX_LINE_BYTES", 2000)
    log = tmp_path / "big.jsonl"
    lines = [{"session": "s", "kind": "prompt", "text": "first"}, {"session": "s", "kind": "reply", "text": "y" * 5000},
             {"session": "s", "kind": "reply", "text": "after the big one"}]
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    batch = parse(log, Flavour.GENERIC)
    assert [e.text for e in batch.events["s"]] == ["first", "after the big one"]
    assert any("line 2" in p and "longer than" in p for p in batch.problems) and batch.end == log.stat().st_size


def test_binary_and_foreign_files_are_not_transcripts(tmp_path: Path) -> None:
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(bytes(range(256)) * 40)
    foreign = tmp_path / "other.jsonl"
    foreign.write_text("\n".join(json.dumps({"id": i, "value": "x"}) for i in range(30)) + "\n")
    assert detect_flavour(binary) is None and detect_flavour(foreign) is None


def test_claude_code_blocks_become_prompts_tools_results_and_commits() -> None:
    sid, events = only_session(CLAUDE, Flavour.CLAUDE_CODE)
    assert sid == CLAUDE.stem
    kinds = [e.kind for e in events]
    prompts = [e for e in events if e.kind is EventKind.PROMPT]
    # The sub-agent's prompt is a sidechain; the latin-1 line never became a prompt.
    assert [p.sidechain for p in prompts] == [False, True] and "InvoiceHandler.post" in prompts[0].text
    assert EventKind.SUMMARY in kinds and kinds[0] is EventKind.SUMMARY
    tools = {e.call_id: e for e in events if e.kind is EventKind.TOOL}
    assert tools["toolu_1"].files_read == ["/home/dev/acme/services/billing/api/handlers.py"]
    assert tools["toolu_4"].files_edited == ["/home/dev/acme/services/billing/api/handlers.py"]
    assert "def post" in tools["toolu_4"].text
    results = {e.call_id: e for e in events if e.kind is EventKind.RESULT}
    assert results["toolu_2"].ok is False and "OperationalError" in results["toolu_2"].error
    assert results["toolu_7"].ok is True
    assert [e.commit for e in events if e.kind is EventKind.COMMIT] == ["3f2a9c1"]
    meta = [e.meta for e in events if e.kind is EventKind.META]
    assert meta[0]["cwd"] == "/home/dev/acme" and meta[0]["branch"] == "fix-invoice-retry"
    # What a credentials file held is never kept, whatever it looks like.
    assert results["toolu_8"].text.startswith("[withheld")


def test_codex_calls_are_joined_by_call_id_and_event_messages_do_not_duplicate() -> None:
    sid, events = only_session(CODEX, Flavour.CODEX)
    assert sid == "5d2f8b61-7a3c-4e9d-b2f1-0c4a6e8d1f37"
    prompts = [e.text for e in events if e.kind is EventKind.PROMPT]
    assert len(prompts) == 1 and prompts[0].startswith("Store.AppendBatch")  # no environment_context, no echo
    calls = {e.call_id: e for e in events if e.kind is EventKind.TOOL}
    assert calls["call_1"].command == "pytest services/billing -q"
    assert calls["call_3"].files_edited == ["services/ledger/internal/store/store.go"]
    results = {e.call_id: e for e in events if e.kind is EventKind.RESULT}
    assert results["call_1"].ok is False and results["call_2"].ok is True and results["call_5"].ok is True
    assert results["call_4"].text.startswith("[withheld")  # `cat .env`
    meta = [e.meta for e in events if e.kind is EventKind.META][0]
    assert meta["branch"] == "ledger-batch" and meta["head"].startswith("9b1d4c0e")


def test_planted_secrets_never_survive_normalisation() -> None:
    for path, flavour in ((CLAUDE, Flavour.CLAUDE_CODE), (CODEX, Flavour.CODEX), (GENERIC, Flavour.GENERIC)):
        assert any(s.encode() in path.read_bytes() for s in PLANTED)  # the fixture does plant one
        stored = json.dumps([e.as_dict() for evs in parse(path, flavour).events.values() for e in evs])
        assert not any(s in stored for s in PLANTED), path.name
    assert "[REDACTED:" in json.dumps([e.as_dict() for e in parse(CLAUDE, Flavour.CLAUDE_CODE).events[CLAUDE.stem]])


def test_what_a_credentials_file_held_is_withheld_whichever_tool_read_it(tmp_path: Path) -> None:
    from graphmem.sessions.adapters import reads_secret_file

    def reads(command: str) -> bool:
        return reads_secret_file(make_event(EventKind.TOOL, command=command))

    assert reads("cat .env") and reads("head -n 3 config/prod.pem") and reads("grep DB_ services/.env")
    assert not reads("cat README.md") and not reads("pytest -q") and not reads("tail -f logs/app.log")
    claude = tmp_path / "c0ffee00-0000-4000-8000-000000000001.jsonl"
    records = [
        {"type": "assistant", "sessionId": "c", "timestamp": "2026-06-01T10:00:00Z", "message": {
            "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                              "input": {"command": "cat services/billing/.env"}}]}},
        {"type": "user", "sessionId": "c", "timestamp": "2026-06-01T10:00:01Z", "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ADMIN_PASS=plainwords"}]}},
    ]
    claude.write_text("".join(json.dumps(r) + "\n" for r in records))
    generic = tmp_path / "g.jsonl"
    generic.write_text("".join(json.dumps(r) + "\n" for r in [
        {"session": "g", "kind": "tool", "tool": "shell", "call_id": "x", "command": "grep ADMIN .env"},
        {"session": "g", "kind": "result", "call_id": "x", "text": "ADMIN_PASS=plainwords"}]))
    for path, flavour in ((claude, Flavour.CLAUDE_CODE), (generic, Flavour.GENERIC)):
        stored = json.dumps([e.as_dict() for evs in parse(path, flavour).events.values() for e in evs])
        assert "plainwords" not in stored and "[withheld" in stored, flavour


def test_huge_outputs_keep_a_bounded_redacted_excerpt_and_the_error_at_their_end() -> None:
    from graphmem.sessions.events import ERROR_CHARS, OUTPUT_CHARS

    output = "x" * 500_000 + "\nexport AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nValueError: bad batch 42\n"
    event = make_event(EventKind.RESULT, ok=False, text=output, error=output)
    assert len(event.text) <= OUTPUT_CHARS and len(event.error) <= ERROR_CHARS
    assert event.error.endswith("ValueError: bad batch 42") and event.signature == "ValueError: bad batch <n>"
    assert "AKIA" not in event.error and "[REDACTED:" in event.error


def test_the_same_error_gets_one_fingerprint_across_sessions_and_agents() -> None:
    found = {}
    for path, flavour in ((CLAUDE, Flavour.CLAUDE_CODE), (CODEX, Flavour.CODEX), (GENERIC, Flavour.GENERIC)):
        for sid, events in parse(path, flavour).events.items():
            found[sid] = {e.fingerprint for e in events if e.kind is EventKind.RESULT and e.ok is False}
    shared = found[CLAUDE.stem] & found["5d2f8b61-7a3c-4e9d-b2f1-0c4a6e8d1f37"] & found["aider-0529"]
    assert len(shared) == 1  # other host, port, paths, line numbers, traceback shape: still one error
    assert found["ci-bot-17"] and not found["ci-bot-17"] & shared
    a = "Traceback (most recent call last):\n  File \"/tmp/a/x.py\", line 12, in f\nKeyError: 'invoice_17'"
    b = "Traceback (most recent call last):\n  File \"/srv/b/y.py\", line 907, in g\nKeyError: 'invoice_2291'"
    assert error_fingerprint(a) == error_fingerprint(b) and error_signature(a) == "KeyError: <str>"
    assert error_fingerprint(a) != error_fingerprint("ValueError: 'invoice_17'")
    assert error_signature("fatal: bad object 3f2a9c1e77 in /home/u/acme/.git") == "fatal: bad object <hex> in <path>"
    event = make_event(EventKind.RESULT, ok=False, error="KeyError: 'invoice_9'")
    assert event.fingerprint == error_fingerprint(a) and event.signature == "KeyError: <str>"


def test_facts_find_what_got_a_session_past_an_error() -> None:
    sid, events = only_session(CLAUDE, Flavour.CLAUDE_CODE)
    facts = session_facts(Flavour.CLAUDE_CODE, sid, events)
    assert (facts.prompts, facts.outcome, facts.commits) == (1, Outcome.COMMITTED, ["3f2a9c1"])
    assert facts.started == "2026-05-31T14:00:01.000Z" and facts.ended == "2026-05-31T14:05:10.000Z"
    (err,) = facts.errors
    assert err.resolved and "docker compose up -d postgres" in err.fix_commands
    assert err.fix_files == ["/home/dev/acme/services/billing/api/handlers.py"]
    digest = deterministic_digest(facts)
    assert digest.task.startswith("Retries of POST /v1/invoices") and "edited services/billing/api/handlers.py" \
        in digest.files
    assert digest.gotchas and "OperationalError" in digest.gotchas[0] and "docker compose" in digest.gotchas[0]
    assert any("Idempotency-Key in the request header" in d for d in digest.decisions)
    assert deterministic_digest(session_facts(Flavour.CLAUDE_CODE, sid, events)) == digest  # deterministic
    generic = parse(GENERIC, Flavour.GENERIC).events
    failed = session_facts(Flavour.GENERIC, "ci-bot-17", generic["ci-bot-17"])
    assert failed.outcome is Outcome.FAILED and not failed.errors[0].resolved
    changed = session_facts(Flavour.GENERIC, "aider-0529", generic["aider-0529"])
    assert changed.outcome is Outcome.CHANGED and changed.agent == "aider"


# --- retention ----------------------------------------------------------------------------------


def test_retention_caps_are_validated_and_read_from_the_environment() -> None:
    assert parse_size("64MiB", "x") == 64 * 2**20 and parse_size("2k", "x") == 2048
    with pytest.raises(ConfigError, match="size"):
        parse_size("lots", "the soft cap")
    with pytest.raises(ConfigError, match="above the hard cap"):
        RetentionConfig(soft_bytes=2000, hard_bytes=1000)
    with pytest.raises(ConfigError, match="positive"):
        RetentionConfig(soft_bytes=0)
    env = {"GRAPHMEM_SESSIONS_SOFT_CAP": "1KB", "GRAPHMEM_SESSIONS_HARD_CAP": "4KB",
           "GRAPHMEM_SESSIONS_MAX_AGE_DAYS": "7"}
    assert RetentionConfig.from_env(env=env) == RetentionConfig(1024, 4096, 7.0)
    assert RetentionConfig.from_env(hard="8KB", env=env).hard_bytes == 8192  # the option wins
    with pytest.raises(ConfigError, match="MAX_AGE"):
        RetentionConfig.from_env(env={"GRAPHMEM_SESSIONS_MAX_AGE_DAYS": "soon"})
    with pytest.raises(AttributeError):
        RetentionConfig().soft_bytes = 1  # type: ignore[misc]


def test_past_the_soft_and_hard_caps_no_body_goes_before_its_digest_unless_reported(tmp_path: Path) -> None:
    body = [make_event(EventKind.PROMPT, text="x" * 900)]  # about 1 KB a session
    size = len(json.dumps(body[0].as_dict())) + 1
    raw = RawStore(tmp_path / "raw", RetentionConfig(soft_bytes=3 * size, hard_bytes=4 * size, max_age_days=30))
    now = datetime(2026, 6, 10, tzinfo=timezone.utc)
    # Ten sessions, one a day; the even ones were digested, the odd ones not (their digest failed).
    for day in range(1, 11):
        key = f"session:generic:s{day:02d}"
        raw.write(key, body, append=False, ended=f"2026-06-{day:02d}T12:00:00.000000Z")
        if day % 2 == 0:
            raw.mark_digested(key)
    gone = raw.enforce(now)
    by_reason: dict[EvictionReason, list[str]] = {}
    for e in gone:
        by_reason.setdefault(e.reason, []).append(e.key)
    # Soft cap: every digested body goes, oldest first, before any undigested one is touched...
    assert by_reason[EvictionReason.SOFT_CAP] == [f"session:generic:s{d:02d}" for d in (2, 4, 6, 8, 10)]
    # ...and the hard cap then takes the oldest undigested ones, each reported as an overflow.
    assert by_reason[EvictionReason.HARD_CAP_OVERFLOW] == ["session:generic:s01"]
    assert all(e.digested for e in gone if e.reason is not EvictionReason.HARD_CAP_OVERFLOW)
    assert not any(e.digested for e in gone if e.reason is EvictionReason.HARD_CAP_OVERFLOW)
    assert raw.used() <= 4 * size and sorted(raw.index) == [f"session:generic:s{d:02d}" for d in (3, 5, 7, 9)]
    assert all(raw.read(k) == body for k in raw.index)
    log = raw.evictions()
    assert [e["key"] for e in log] == [e.key for e in gone]
    assert [e["key"] for e in log if e["overflow"]] == ["session:generic:s01"]
    # Reopened from disk, the store still knows what it holds; old digested bodies age out.
    raw.mark_digested("session:generic:s03")
    again = RawStore(tmp_path / "raw", RetentionConfig(soft_bytes=100 * size, hard_bytes=100 * size, max_age_days=5))
    aged = again.enforce(now)
    assert [(e.key, e.reason) for e in aged] == [("session:generic:s03", EvictionReason.MAX_AGE)]
    assert "session:generic:s05" in again.index  # older than max age too, but undigested: kept

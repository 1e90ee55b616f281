"""Transcript adapters: Claude Code, Codex CLI and a generic JSONL, read into :class:`Event` lists.

All three formats are JSON Lines. :func:`read_lines` reads a file from a byte offset and yields the
records it can use; a line that is not UTF-8, not JSON or not an object is skipped with a message
naming its line, and a last line without its newline is left unread (an agent may be writing it):
the cursor stops before it, so the next run reads it whole.

**Claude Code** (``~/.claude/projects/<project>/<session>.jsonl``): records of type ``user``,
``assistant`` and ``summary`` (others, such as ``system`` or ``file-history-snapshot``, are
ignored), each with ``sessionId``, ``cwd``, ``gitBranch``, ``timestamp``, ``uuid``/``parentUuid``
and ``isSidechain``; ``message.content`` is a string or a list of ``text``, ``tool_use`` and
``tool_result`` blocks (``is_error`` marks a failed call).

**Codex CLI** (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``): ``{timestamp, type, payload}``
records: ``session_meta`` (id, cwd, git), ``turn_context`` (cwd, model), ``response_item``
(``message``, ``function_call``/``custom_tool_call`` and their ``*_output`` joined by ``call_id``),
``event_msg`` (ignored: it repeats the response items for the terminal).

**Generic** (any other agent): one JSON object a line::

    {"session": "run-42", "time": "2026-06-01T10:00:00Z", "kind": "prompt", "text": "Fix the retry bug"}
    {"session": "run-42", "kind": "tool", "tool": "shell", "call_id": "c1", "command": "pytest -q"}
    {"session": "run-42", "kind": "result", "call_id": "c1", "ok": false, "error": "AssertionError: ..."}
    {"session": "run-42", "kind": "tool", "tool": "edit", "edited": ["billing/api.py"], "files": ["billing/x.py"]}
    {"session": "run-42", "kind": "meta", "cwd": "/home/ana/acme", "branch": "fix-retry", "agent": "aider"}

``kind`` is one of prompt, reply, tool, result, commit, summary, meta; ``files`` are files read,
``edited`` files changed, ``commit`` a sha, ``exit_code`` (non-zero) or ``error`` mark a failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extractors.policy import secret_reason
from graphmem.sessions.events import Event, EventKind, Flavour, make_event

MAX_LINE_BYTES = 16 * 1024 * 1024  # a line longer than this (an embedded image, a dump) is skipped
WITHHELD = "[withheld: read from a credentials file]"


@dataclass(slots=True)
class Batch:
    """What one read of a file produced: events per session id, the new cursor offset, problems."""

    events: dict[str, list[Event]] = field(default_factory=dict)
    end: int = 0
    lines: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, session: str, event: Event) -> None:
        self.events.setdefault(session, []).append(event)


def read_lines(path: Path, start: int, problems: list[str]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """``(line number counted from ``start``, end offset, record)`` for each usable line from ``start``.

    Problems are appended to ``problems``; the last end offset yielded is where a next read begins
    (a partial last line is never yielded, and skipped lines still move the offset on).
    """
    with path.open("rb") as handle:
        handle.seek(start)
        offset = start
        number = 0
        after = f" after byte {start:,}" if start else ""
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if not raw.endswith(b"\n"):
                if len(raw) > MAX_LINE_BYTES:
                    problems.append(f"{path.name}: line {number}{after} is longer than "
                                    f"{MAX_LINE_BYTES:,} bytes: skipped")
                    rest = handle.readline()
                    while rest and not rest.endswith(b"\n"):
                        rest = handle.readline()
                    offset = handle.tell()
                    if not rest:
                        return
                    yield number, offset, {}
                    continue
                problems.append(f"{path.name}: the last line (from byte {offset:,}) is incomplete: "
                                "left for the next run")
                return
            offset += len(raw)
            line = raw.strip()
            if not line:
                continue
            try:
                record = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError:
                problems.append(f"{path.name}: line {number}{after} is not UTF-8: skipped")
                yield number, offset, {}
                continue
            except ValueError:
                problems.append(f"{path.name}: line {number}{after} is not valid JSON: skipped")
                yield number, offset, {}
                continue
            if not isinstance(record, dict):
                problems.append(f"{path.name}: line {number}{after} is not a JSON object: skipped")
                record = {}
            yield number, offset, record


def detect_flavour(path: Path) -> Flavour | None:
    """The format of a transcript, from its first usable record (None: not a transcript we read)."""
    problems: list[str] = []
    try:
        for n, _, record in read_lines(path, 0, problems):
            if not record:
                if n > 20:
                    return None
                continue
            if "payload" in record and record.get("type") in ("session_meta", "response_item", "event_msg",
                                                               "turn_context", "compacted"):
                return Flavour.CODEX
            if "sessionId" in record or record.get("type") in ("summary", "file-history-snapshot") \
                    or isinstance(record.get("message"), dict):
                return Flavour.CLAUDE_CODE
            if "session" in record and "kind" in record:
                return Flavour.GENERIC
            if n > 20:
                return None
    except OSError:
        return None
    return None


def peek_setting(path: Path, flavour: Flavour, lines: int = 50) -> tuple[str | None, str | None]:
    """``(working folder, session id)`` from the first records of a one-session transcript, without
    reading the rest: enough to leave out a session of another project cheaply."""
    problems: list[str] = []
    sid = path.stem if flavour is Flavour.CLAUDE_CODE else None
    for n, _, record in read_lines(path, 0, problems):
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
        if flavour is Flavour.CODEX and record.get("type") == "session_meta" and isinstance(payload.get("id"), str):
            sid = payload["id"]
        cwd = record.get("cwd") if flavour is Flavour.CLAUDE_CODE else payload.get("cwd")
        if isinstance(cwd, str) and cwd:
            return cwd, sid or CodexParser(path).session
        if n >= lines:
            break
    return None, sid


# --- what tools did -----------------------------------------------------------------------------

_COMMIT_LINE = re.compile(r"^\[(?P<branch>[^\]\s]+)(?: \(root-commit\))? (?P<sha>[0-9a-f]{7,40})\] ", re.MULTILINE)
_PATCH_FILE = re.compile(r"^\*\*\* (?P<op>Add|Update|Delete) File: (?P<path>.+?)\s*$", re.MULTILINE)
_EXIT_CODE = re.compile(r"(?:^|\n)\s*(?:Exit code|Process exited with code|exit status)[: ]+(-?\d+)", re.IGNORECASE)

_READ_TOOLS = {"read": "file_path", "notebookread": "notebook_path", "view": "path", "read_file": "path"}
_EDIT_TOOLS = {"edit": "file_path", "multiedit": "file_path", "write": "file_path",
               "notebookedit": "notebook_path", "write_file": "path", "edit_file": "path"}


def commits_in(output: str) -> list[str]:
    """Shas that ``git commit`` printed (``[main 3f2a9c1] subject``)."""
    return [m.group("sha") for m in _COMMIT_LINE.finditer(output)]


def patch_files(patch: str) -> list[str]:
    """Files an ``apply_patch`` body adds, updates or deletes."""
    return [m.group("path") for m in _PATCH_FILE.finditer(patch)]


# A command that prints a file: what it prints is the file.
_PRINTS_FILE = re.compile(r"\b(?:cat|less|more|head|tail|bat|type|strings|xxd|base64|grep|rg|awk|sed|sort|diff)\b"
                          r"([^|;&<>]*)")


def reads_secret_file(event: Event) -> bool:
    """Whether a tool call reads a credentials file (``Read .env``, ``cat ~/.ssh/id_rsa``): its
    output is then withheld whatever it looks like, since redaction only catches what looks secret."""
    if any(secret_reason(p) for p in event.files_read):
        return True
    return any(secret_reason(word.strip("'\"")) for m in _PRINTS_FILE.finditer(event.command)
               for word in m.group(1).split() if not word.startswith("-"))


def _text_of(content: Any) -> str:
    """Text of a message or tool result: a string, or a list of text / output_text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return ""


def _tool_event(name: str, args: dict[str, Any], *, time: str | None, call_id: str,
                sidechain: bool = False) -> Event:
    """A tool call: which files it reads or edits and which command it runs, whatever the agent."""
    low = name.lower()
    read: list[str] = []
    edited: list[str] = []
    command = ""
    text = ""
    if low in _READ_TOOLS and isinstance(args.get(_READ_TOOLS[low]), str):
        read.append(args[_READ_TOOLS[low]])
    elif low in _EDIT_TOOLS and isinstance(args.get(_EDIT_TOOLS[low]), str):
        edited.append(args[_EDIT_TOOLS[low]])
        edits = args.get("edits") if isinstance(args.get("edits"), list) else [args]
        text = "\n".join(str(e.get(k, "")) for e in edits if isinstance(e, dict)
                         for k in ("old_string", "new_string", "content") if e.get(k))
    elif low == "apply_patch":
        patch = args.get("input") or args.get("patch") or ""
        edited += patch_files(str(patch))
        text = str(patch)
    cmd = args.get("command", args.get("cmd"))
    if isinstance(cmd, list):  # Codex shell: ["bash", "-lc", "pytest -q"]
        cmd = cmd[-1] if len(cmd) >= 2 and str(cmd[-2]) in ("-lc", "-c") else " ".join(str(c) for c in cmd)
    if isinstance(cmd, str) and cmd.strip():
        command = cmd
        if "*** Begin Patch" in cmd:
            edited += patch_files(cmd)
    return make_event(EventKind.TOOL, time=time, tool=name, call_id=call_id, command=command, files_read=read,
                      files_edited=edited, text=text, sidechain=sidechain)


def _result_event(output: str, *, time: str | None, call_id: str, failed: bool, sidechain: bool = False,
                  secret_file: bool = False) -> list[Event]:
    """A tool result and, when its output shows ``git commit`` made commits, a commit event each."""
    body = WITHHELD if secret_file else output
    events = [make_event(EventKind.RESULT, time=time, call_id=call_id, ok=not failed, text=body,
                         error=body if failed else "", sidechain=sidechain)]
    if not failed and not secret_file:
        events += [make_event(EventKind.COMMIT, time=time, call_id=call_id, commit=sha, sidechain=sidechain)
                   for sha in commits_in(output)]
    return events


# --- Claude Code --------------------------------------------------------------------------------


class ClaudeCodeParser:
    """Claude Code transcripts. One file is one session, named as Claude Code names the file (its
    ``sessionId``; a sub-agent's file under ``subagents/`` gets its own name)."""

    flavour = Flavour.CLAUDE_CODE
    _SKIP_PROMPT = ("<command-name>", "<local-command-stdout>", "<command-message>", "Caveat:",
                    "[Request interrupted", "This session is being continued from a previous conversation")

    def __init__(self, path: Path, session: str | None = None) -> None:
        self.session = session or path.stem
        self.path = path
        self._secret_calls: set[str] = set()
        self._meta: dict[str, str] = {}

    def feed(self, record: dict[str, Any], batch: Batch) -> None:
        kind = record.get("type")
        if kind not in ("user", "assistant", "summary"):
            return
        time = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
        side = bool(record.get("isSidechain"))
        meta = {k: str(record[src]) for k, src in (("cwd", "cwd"), ("branch", "gitBranch"), ("version", "version"))
                if isinstance(record.get(src), str) and record.get(src)}
        if meta and any(self._meta.get(k) != v for k, v in meta.items()):
            self._meta.update(meta)
            batch.add(self.session, make_event(EventKind.META, time=time, meta=meta))
        if kind == "summary":
            if isinstance(record.get("summary"), str):
                batch.add(self.session, make_event(EventKind.SUMMARY, time=time, text=record["summary"]))
            return
        message = record.get("message")
        if not isinstance(message, dict):
            return
        content = message.get("content")
        if kind == "user":
            if record.get("isMeta") or record.get("isCompactSummary"):
                return
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            for block in blocks:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_result":
                    call = str(block.get("tool_use_id") or "")
                    for ev in _result_event(_text_of(block.get("content")), time=time, call_id=call,
                                            failed=bool(block.get("is_error")), sidechain=side,
                                            secret_file=call in self._secret_calls):
                        batch.add(self.session, ev)
                elif block.get("type") == "text" and isinstance(block.get("text"), str):
                    text = block["text"].strip()
                    if text and not text.startswith(self._SKIP_PROMPT):
                        batch.add(self.session, make_event(EventKind.PROMPT, time=time, text=text, sidechain=side))
            return
        if isinstance(message.get("model"), str) and self._meta.get("model") != message["model"]:
            self._meta["model"] = message["model"]
            batch.add(self.session, make_event(EventKind.META, time=time, meta={"model": message["model"]}))
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                batch.add(self.session, make_event(EventKind.REPLY, time=time, text=block["text"], sidechain=side))
            elif block.get("type") == "tool_use":
                args = block.get("input") if isinstance(block.get("input"), dict) else {}
                event = _tool_event(str(block.get("name") or "tool"), args, time=time,
                                    call_id=str(block.get("id") or ""), sidechain=side)
                if reads_secret_file(event):
                    self._secret_calls.add(event.call_id)
                batch.add(self.session, event)


# --- Codex CLI ----------------------------------------------------------------------------------


def _codex_output(raw: Any) -> tuple[str, bool]:
    """The text of a Codex tool output and whether it failed.

    Older rollouts wrap it as ``{"output": ..., "metadata": {"exit_code": N}}`` (a JSON string);
    newer ones print ``Exit code: N`` before the output; apply_patch reports ``success``.
    """
    failed = False
    if isinstance(raw, dict):
        body: Any = raw
    elif isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw
    else:
        body = raw
    if isinstance(body, dict):
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        code = meta.get("exit_code", body.get("exit_code"))
        failed = (isinstance(code, int) and code != 0) or body.get("success") is False
        text = _text_of(body.get("output", body.get("content", "")))
    else:
        text = _text_of(body)
    match = _EXIT_CODE.search(text[:400])
    if match and int(match.group(1)) != 0:
        failed = True
    return text, failed


class CodexParser:
    """Codex CLI rollouts. One file is one session (``session_meta.id``, else the file's uuid)."""

    flavour = Flavour.CODEX
    _SKIP_PROMPT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<turn_aborted>")
    _UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)

    def __init__(self, path: Path, session: str | None = None) -> None:
        self.path = path
        ids = self._UUID.findall(path.name)
        self.session = session or (ids[-1] if ids else None)
        self._secret_calls: set[str] = set()

    def feed(self, record: dict[str, Any], batch: Batch) -> None:
        kind, payload = record.get("type"), record.get("payload")
        if not isinstance(payload, dict):
            return
        time = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
        if kind == "session_meta":
            if isinstance(payload.get("id"), str) and payload["id"]:
                self.session = self.session or payload["id"]
            git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
            meta = {"cwd": payload.get("cwd"), "version": payload.get("cli_version"),
                    "branch": git.get("branch"), "head": git.get("commit_hash"), "agent": payload.get("originator")}
            batch.add(self._sid(), make_event(EventKind.META, time=time, meta=meta))
            return
        if kind == "turn_context":
            batch.add(self._sid(), make_event(EventKind.META, time=time, meta={"cwd": payload.get("cwd"),
                                                                              "model": payload.get("model")}))
            return
        if kind != "response_item":
            return
        item = payload.get("type")
        call = str(payload.get("call_id") or payload.get("id") or "")
        if item == "message":
            text = _text_of(payload.get("content")).strip()
            role = payload.get("role")
            if not text or (role == "user" and text.startswith(self._SKIP_PROMPT)):
                return
            if role in ("user", "assistant"):
                batch.add(self._sid(), make_event(EventKind.PROMPT if role == "user" else EventKind.REPLY,
                                                  time=time, text=text))
        elif item in ("function_call", "custom_tool_call", "local_shell_call"):
            args: Any = payload.get("arguments", payload.get("input", payload.get("action")))
            if isinstance(args, str):
                try:
                    parsed = json.loads(args)
                except ValueError:
                    parsed = None
                args = parsed if isinstance(parsed, dict) else {"input": args}
            name = str(payload.get("name") or ("shell" if item == "local_shell_call" else "tool"))
            event = _tool_event(name, args if isinstance(args, dict) else {}, time=time, call_id=call)
            if reads_secret_file(event):
                self._secret_calls.add(call)
            batch.add(self._sid(), event)
        elif item in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            text, failed = _codex_output(payload.get("output"))
            for ev in _result_event(text, time=time, call_id=call, failed=failed,
                                    secret_file=call in self._secret_calls):
                batch.add(self._sid(), ev)

    def _sid(self) -> str:
        if self.session is None:
            self.session = self.path.stem
        return self.session


# --- generic ------------------------------------------------------------------------------------


class GenericParser:
    """The documented generic JSONL: one event a line, several sessions per file allowed."""

    flavour = Flavour.GENERIC

    def __init__(self, path: Path, session: str | None = None) -> None:
        self.path = path
        self.session = session
        self._secret_calls: set[str] = set()

    def feed(self, record: dict[str, Any], batch: Batch) -> None:
        sid = record.get("session")
        if not isinstance(sid, (str, int)) or not str(sid).strip():
            batch.problems.append(f"{self.path.name}: a record without a session: skipped")
            return
        try:
            kind = EventKind(str(record.get("kind", "")).strip().lower())
        except ValueError:
            batch.problems.append(f"{self.path.name}: unknown kind {str(record.get('kind'))[:40]!r}: skipped")
            return
        time = record.get("time") if isinstance(record.get("time"), str) else None

        def paths(name: str) -> list[str]:
            value = record.get(name)
            return [str(v) for v in value if isinstance(v, str)] if isinstance(value, list) else (
                [value] if isinstance(value, str) and value else [])

        code = record.get("exit_code")
        failed = record.get("ok") is False or bool(record.get("error")) or (isinstance(code, int) and code != 0)
        common = {"time": time, "call_id": str(record.get("call_id") or ""), "sidechain": bool(record.get("sidechain"))}
        if kind is EventKind.META:
            meta = {k: record.get(k) for k in ("cwd", "branch", "agent", "model", "version", "head", "outcome")}
            event = make_event(kind, time=time, meta={k: str(v) for k, v in meta.items() if isinstance(v, (str, int))})
        elif kind is EventKind.RESULT:
            text = str(record.get("text") or record.get("output") or "")
            error = str(record.get("error") or "") or (text if failed else "")
            if common["call_id"] and common["call_id"] in self._secret_calls:
                text, error = WITHHELD, WITHHELD if failed else ""
            result = make_event(kind, ok=not failed, text=text, error=error, **common)  # type: ignore[arg-type]
            batch.add(str(sid), result)
            if not failed:
                for sha in commits_in(text):
                    batch.add(str(sid), make_event(EventKind.COMMIT, commit=sha, **common))  # type: ignore[arg-type]
            return
        elif kind is EventKind.TOOL:
            event = make_event(kind, tool=record.get("tool") or "tool", command=record.get("command") or "",
                               files_read=paths("files"), files_edited=paths("edited"), text=record.get("text") or "",
                               **common)
            if reads_secret_file(event):
                self._secret_calls.add(event.call_id)
        elif kind is EventKind.COMMIT:
            sha = str(record.get("commit") or "").strip().lower()
            if not re.fullmatch(r"[0-9a-f]{7,40}", sha):
                batch.problems.append(f"{self.path.name}: a commit event without a sha: skipped")
                return
            event = make_event(kind, commit=sha, **common)
        else:
            event = make_event(kind, text=record.get("text") or "", **common)
        batch.add(str(sid), event)


PARSERS = {Flavour.CLAUDE_CODE: ClaudeCodeParser, Flavour.CODEX: CodexParser, Flavour.GENERIC: GenericParser}


def parse(path: Path, flavour: Flavour, start: int = 0, session: str | None = None) -> Batch:
    """Read ``path`` from byte ``start`` into events per session; ``session`` names the session of
    a one-session format when reading on from a cursor."""
    batch = Batch(end=start)
    parser = PARSERS[flavour](path, session)
    for _, end, record in read_lines(path, start, batch.problems):
        batch.end = end
        batch.lines += 1
        if record:
            parser.feed(record, batch)
    return batch


__all__ = ["Batch", "PARSERS", "commits_in", "detect_flavour", "parse", "patch_files", "read_lines"]

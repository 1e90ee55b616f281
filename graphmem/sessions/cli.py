"""``graphmem sessions ingest|status``: capture agent sessions, show what is held and what went."""

from __future__ import annotations

import io
import json
import select
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from graphmem.errors import GraphmemError

HOOK_INPUT_BYTES = 1 << 20  # a hook's JSON on stdin is small; more is not a hook's
HOOK_INPUT_WAIT_S = 2.0
HOOK_LOCK_WAIT_S = 10.0  # a hook behind a long manual run gives up; that run or the next reads the transcript


def _retention(soft_cap: str | None, hard_cap: str | None, max_age_days: float | None) -> Any:
    from graphmem.sessions.retention import RetentionConfig

    return RetentionConfig.from_env(soft=soft_cap, hard=hard_cap, max_age_days=max_age_days)


def _cap_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--max-age-days", type=click.FloatRange(0, None, min_open=True), default=None,
                        help="Raw bodies of digested sessions older than this go (default: "
                             "$GRAPHMEM_SESSIONS_MAX_AGE_DAYS or 90).")(func)
    func = click.option("--hard-cap", default=None, metavar="SIZE",
                        help="Past this, even undigested raw bodies go, reported as overflows (default: "
                             "$GRAPHMEM_SESSIONS_HARD_CAP or 1GiB).")(func)
    return click.option("--soft-cap", default=None, metavar="SIZE",
                        help="Past this, digested raw bodies go, oldest first (default: "
                             "$GRAPHMEM_SESSIONS_SOFT_CAP or 256MiB).")(func)


def _stdin_ready(timeout: float = HOOK_INPUT_WAIT_S) -> bool:
    """Whether stdin has input (or its end) within ``timeout``: a caller that leaves stdin open and
    writes nothing must not hang the agent waiting on the hook."""
    try:
        fd = sys.stdin.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return True  # not a file descriptor (a test runner's buffer): reading cannot block
    return bool(select.select([fd], [], [], timeout)[0])


def _hook_input(args: tuple[str, ...]) -> tuple[list[Path] | None, str | None]:
    """The transcript a hook names: Claude Code sends JSON with ``transcript_path`` on stdin; Codex's
    ``notify`` passes its JSON as the last argument (without a path: the default folders are read)."""
    raw = next((a for a in reversed(args) if a.lstrip().startswith("{")), None)
    if raw is None and not sys.stdin.isatty() and _stdin_ready():
        raw = sys.stdin.read(HOOK_INPUT_BYTES)
    paths = [Path(a) for a in args if not a.lstrip().startswith("{")]
    if not raw or not raw.strip():
        return paths or None, None
    try:
        data = json.loads(raw)
    except ValueError:
        return paths or None, "the hook input is not JSON: reading the default folders"
    transcript = data.get("transcript_path") if isinstance(data, dict) else None
    if isinstance(transcript, str) and transcript.strip():
        paths.append(Path(transcript).expanduser())
    return paths or None, None


def sessions_cli(pass_context: Callable[[Any], Any], json_option: Callable[[Any], Any]) -> click.Group:
    """The ``graphmem sessions`` group; ``pass_context`` and ``json_option`` are the CLI's shared decorators."""

    @click.group("sessions")
    def group() -> None:
        """Coding agents' sessions (Claude Code, Codex, generic JSONL): captured, digested, kept within a budget."""

    @group.command("ingest")
    @click.argument("paths", nargs=-1)
    @click.option("--hook", is_flag=True,
                  help="Run from an agent's hook: read the hook's JSON (transcript_path) from stdin; "
                       "never fail the agent (problems go to stderr, exit status 0).")
    @click.option("--llm/--no-llm", "llm", default=None,
                  help="Have the configured LLM write the digests (default: when GRAPHMEM_LLM_BASE_URL is set); "
                       "any failure falls back to the deterministic digest.")
    @_cap_options
    @json_option
    @pass_context
    def ingest(ctx: Any, paths: tuple[str, ...], hook: bool, llm: bool | None, soft_cap: str | None,
               hard_cap: str | None, max_age_days: float | None, as_json: bool) -> None:
        """Capture agent sessions from PATHS (transcript files or folders); without PATHS, the Claude Code
        and Codex folders of the current user, keeping sessions that worked inside the project's root."""
        if hook:
            try:
                chosen, note = _hook_input(paths)
                if note:
                    click.echo(f"graphmem sessions: {note}", err=True)
                report = _run(ctx, chosen, llm, soft_cap, hard_cap, max_age_days, lock_timeout=HOOK_LOCK_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - a hook must never fail the agent it runs for
                click.echo(f"graphmem sessions: {type(exc).__name__}: {str(exc)[:300]}", err=True)
                return
            for problem in report.problems[:20]:
                click.echo(f"graphmem sessions: {problem}", err=True)
            return
        for path in paths:
            if not Path(path).expanduser().exists():
                raise GraphmemError(f"no such file or folder: {path}")
        report = _run(ctx, [Path(p) for p in paths] or None, llm, soft_cap, hard_cap, max_age_days)
        data = report.as_dict()
        if as_json:
            click.echo(json.dumps(data, indent=2))
            return
        for problem in report.problems:
            click.echo(f"warning: {problem}", err=True)
        click.echo(f"{report.files_seen} transcripts ({report.files_unchanged} unchanged, {report.files_read} read, "
                   f"{report.bytes_read:,} bytes); {len(report.sessions)} sessions written"
                   + (f", {len(report.outside_root)} outside the project root left out" if report.outside_root else ""))
        for e in report.evicted:
            click.echo(f"evicted {e['key']} ({e['bytes']:,} bytes, {e['reason']})"
                       + (" OVERFLOW: its raw body went before a digest existed" if e["overflow"] else ""))

    def _run(ctx: Any, paths: list[Path] | None, llm: bool | None, soft_cap: str | None, hard_cap: str | None,
             max_age_days: float | None, lock_timeout: float | None = None) -> Any:
        from graphmem.sessions.capture import SessionIngest

        retention = _retention(soft_cap, hard_cap, max_age_days)
        gm = ctx.graphmem(ctx.existing_project())
        try:
            return SessionIngest(gm, retention=retention, llm=llm).run(paths, lock_timeout=lock_timeout)
        finally:
            gm.close()

    @group.command("status")
    @_cap_options
    @json_option
    @pass_context
    def status(ctx: Any, soft_cap: str | None, hard_cap: str | None, max_age_days: float | None,
               as_json: bool) -> None:
        """Sessions captured, raw bytes held against the caps, and what was evicted."""
        from graphmem.sessions.capture import sessions_status

        retention = _retention(soft_cap, hard_cap, max_age_days)
        gm = ctx.graphmem(ctx.existing_project())
        try:
            data = sessions_status(gm, retention)
        finally:
            gm.close()
        if as_json:
            click.echo(json.dumps(data, indent=2))
            return
        raw, caps, ev = data["raw"], data["caps"], data["evicted"]
        flavours = ", ".join(f"{k} {v}" for k, v in sorted(data["by_flavour"].items())) or "none"
        click.echo(f"{data['sessions']} sessions ({flavours}); {data['transcripts_tracked']} transcripts tracked")
        click.echo(f"raw bodies: {raw['bodies']} holding {raw['bytes']:,} bytes ({len(raw['undigested'])} undigested); "
                   f"soft cap {caps['soft_bytes']:,} ({raw['soft_cap_used']:.0%}), hard cap {caps['hard_bytes']:,} "
                   f"({raw['hard_cap_used']:.0%}), max age {caps['max_age_days']:g} days")
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(ev["by_reason"].items())) or "nothing"
        click.echo(f"evicted: {ev['total']} ({ev['bytes']:,} bytes): {reasons}")
        for e in ev["overflows"]:
            click.echo(f"  OVERFLOW {e['at']} {e['key']} ({e['bytes']:,} bytes): dropped before its digest existed")

    return group


__all__ = ["sessions_cli"]

"""``graphmem patterns detect|review|approve|reject|propose``: recurring errors of agent sessions,
reviewed by a person, proposed for CLAUDE.md and AGENTS.md as diffs a person applies."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from graphmem.errors import GraphmemError


def _bar(promote: str | None, distribute: str | None, max_patterns: int | None) -> Any:
    from graphmem.sessions.patterns import EvidenceBar

    return EvidenceBar.from_env(promote=promote, distribute=distribute, max_patterns=max_patterns)


def _bar_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--max-patterns", type=click.IntRange(1, None), default=None,
                        help="Most patterns the catalog holds (default: $GRAPHMEM_PATTERNS_MAX or 200).")(func)
    func = click.option("--distribute", default=None, metavar="O,S,F",
                        help="Occurrences, sessions, flavours an approved pattern needs to be proposed "
                             "(default: $GRAPHMEM_PATTERNS_DISTRIBUTE or 5,4,2).")(func)
    return click.option("--promote", default=None, metavar="O,S,F",
                        help="Occurrences, sessions, flavours a recurring error needs to become a candidate "
                             "(default: $GRAPHMEM_PATTERNS_PROMOTE or 3,2,1).")(func)


def _one_line(text: Any, limit: int) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _show(p: dict[str, Any]) -> None:
    ev = p["evidence"]
    flavours = ", ".join(f"{k} {v}" for k, v in ev["flavours"].items())
    cross = " cross-flavour" if ev["cross_flavour"] else ""
    ready = "meets the distribute floor" if p["meets"]["distribute"] else "below the distribute floor"
    click.echo(f"{p['id']} v{p['version']} [{p['status']}]{cross}: {ev['occurrences']} occurrences in "
               f"{ev['sessions']} sessions ({flavours}), {str(ev['first_seen'])[:10]} to "
               f"{str(ev['last_seen'])[:10]}; {ready}")
    click.echo(f"    error: {_one_line(p['untrusted_signature'], 160)}")
    fix = p.get("fix")
    click.echo(f"    fix:   {_one_line(fix['untrusted_step'], 120)} (worked in {fix['worked']} of "
               f"{fix['resolved_sessions']} sessions that got past it)" if fix else "    fix:   none recorded")
    review = p.get("review") or {}
    if review.get("by"):
        click.echo(f"    reviewed by {review['by']} at {review.get('at')}"
                   + (f": {_one_line(review.get('reason'), 120)}" if review.get("reason") else ""))


def patterns_cli(pass_context: Callable[[Any], Any], json_option: Callable[[Any], Any]) -> click.Group:
    """The ``graphmem patterns`` group; ``pass_context`` and ``json_option`` are the CLI's shared decorators."""

    def catalog(ctx: Any, bar: Any = None) -> Any:
        from graphmem.sessions.patterns import PatternCatalog, patterns_dir

        return PatternCatalog(patterns_dir(ctx.settings, ctx.existing_project()), bar)

    def reviewer(by: str | None, verb: str) -> str:
        name = by or os.environ.get("GRAPHMEM_REVIEWER")
        if not name:  # what goes into every agent's instructions is vouched for by a named person
            raise GraphmemError(f"say who {verb}: --by NAME (or set GRAPHMEM_REVIEWER)")
        return name

    @click.group("patterns")
    def group() -> None:
        """Recurring errors across agent sessions: detected, reviewed by a person, proposed for the agents' files."""

    @group.command("detect")
    @_bar_options
    @json_option
    @pass_context
    def detect_(ctx: Any, promote: str | None, distribute: str | None, max_patterns: int | None,
                as_json: bool) -> None:
        """Find recurring error fingerprints and fixes across the captured sessions; add or update candidates."""
        from graphmem.sessions.patterns import detect

        bar = _bar(promote, distribute, max_patterns)
        gm = ctx.graphmem(ctx.existing_project())
        try:
            report = detect(gm, bar, folder=catalog(ctx, bar).dir)
        finally:
            gm.close()
        if as_json:
            click.echo(json.dumps(report.as_dict(), indent=2))
            return
        for problem in report.problems:
            click.echo(f"warning: {problem}", err=True)
        click.echo(f"{report.sessions} sessions with errors, {report.fingerprints} error fingerprints; "
                   f"{len(report.added)} new candidates, {len(report.updated)} patterns updated, "
                   f"{report.below_floor} recurring errors below the promote floor ({bar.promote})")
        for pid, fps in sorted(report.merged.items()):
            click.echo(f"merged into {pid} (near-duplicates): {', '.join(fps)}")
        for p in report.patterns:
            if p["id"] in report.added or p["id"] in report.updated:
                _show(p)

    @group.command("review")
    @click.option("--all", "show_all", is_flag=True, help="Also approved and rejected patterns.")
    @_bar_options
    @json_option
    @pass_context
    def review(ctx: Any, show_all: bool, promote: str | None, distribute: str | None, max_patterns: int | None,
               as_json: bool) -> None:
        """Candidate patterns with their evidence, waiting for a person."""
        from graphmem.sessions.patterns import PatternStatus

        items = catalog(ctx, _bar(promote, distribute, max_patterns)).patterns(
            None if show_all else {PatternStatus.CANDIDATE})
        if as_json:
            click.echo(json.dumps({"patterns": items}, indent=2))
            return
        for p in items:
            _show(p)
        click.echo(f"{len(items)} listed; `graphmem patterns approve ID --by NAME` or "
                   "`graphmem patterns reject ID --by NAME --reason TEXT`", err=True)

    def decide(ctx: Any, pid: str, status: str, by: str | None, reason: str | None, as_json: bool) -> None:
        from graphmem.sessions.patterns import PatternStatus

        chosen = PatternStatus(status)
        verb = "approves" if chosen is PatternStatus.APPROVED else "rejects"
        p = catalog(ctx).review(pid, chosen, reviewer(by, verb), reason)
        if as_json:
            click.echo(json.dumps(p, indent=2))
            return
        _show(p)
        if chosen is PatternStatus.APPROVED:
            click.echo("`graphmem patterns propose` writes the CLAUDE.md and AGENTS.md proposals", err=True)

    @group.command("approve")
    @click.argument("pattern_id")
    @click.option("--by", default=None, help="Who approves (default: $GRAPHMEM_REVIEWER).")
    @json_option
    @pass_context
    def approve_(ctx: Any, pattern_id: str, by: str | None, as_json: bool) -> None:
        """Approve pattern PATTERN_ID: it may be proposed for CLAUDE.md and AGENTS.md."""
        decide(ctx, pattern_id, "approved", by, None, as_json)

    @group.command("reject")
    @click.argument("pattern_id")
    @click.option("--reason", required=True, help="Why it is turned down.")
    @click.option("--by", default=None, help="Who rejects (default: $GRAPHMEM_REVIEWER).")
    @json_option
    @pass_context
    def reject_(ctx: Any, pattern_id: str, reason: str, by: str | None, as_json: bool) -> None:
        """Turn down pattern PATTERN_ID; it is kept, with the reason, and never proposed."""
        decide(ctx, pattern_id, "rejected", by, reason, as_json)

    @group.command("propose")
    @click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="The repository whose CLAUDE.md and AGENTS.md are read (default: the project's root).")
    @_bar_options
    @json_option
    @pass_context
    def propose_(ctx: Any, repo: Path | None, promote: str | None, distribute: str | None,
                 max_patterns: int | None, as_json: bool) -> None:
        """Write proposed CLAUDE.md and AGENTS.md and their diffs from the approved patterns; the repository is
        only read."""
        from graphmem.sessions.proposals import propose

        if repo is None:
            gm = ctx.graphmem(ctx.existing_project())
            try:
                root = gm.store.get_meta("root")
            finally:
                gm.close()
            if not root:
                raise GraphmemError("the project has no repository root on record: give --repo PATH")
            repo = Path(root)
        result = propose(catalog(ctx, _bar(promote, distribute, max_patterns)), repo)
        if as_json:
            click.echo(json.dumps(result, indent=2))
            return
        for note in result["linked"]:
            click.echo(note, err=True)
        for held in result["held_back"]:
            click.echo(f"held back: {held['id']}: {held['why']}", err=True)
        if not result["files"]:
            click.echo("nothing to propose: no approved pattern meets the distribute floor "
                       "(`graphmem patterns review --all`)")
            return
        click.echo(f"{len(result['patterns'])} approved patterns proposed for {result['repository']} "
                   "(nothing there was changed):")
        for f in result["files"]:
            state = "" if f["changed"] else " (no change: the file already says this)"
            click.echo(f"  {f['name']}: {f['proposal']}{state}\n    diff: {f['diff']}")
        if result["apply"]:
            click.echo("to apply, after reading the diffs:")
            for command in result["apply"]:
                click.echo(f"  {command}")
            click.echo("  (or copy a proposed file over the repository's)")

    return group


__all__ = ["patterns_cli"]

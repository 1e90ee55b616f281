"""The ``graphmem`` command line: a thin layer over the library.

Every :class:`~graphmem.errors.GraphmemError` becomes one line on stderr and exit status 1; no
traceback reaches the user.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from graphmem import __version__
from graphmem.config import STORES, Settings
from graphmem.errors import GraphmemError
from graphmem.model import project_from_path

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    """What the global options decided; commands open the store through it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def project(self, default_path: str | Path | None = None) -> str:
        """``--project``, else ``GRAPHMEM_PROJECT``, else the last project used in this home,
        else the name of ``default_path`` (or of the working directory)."""
        if self.settings.project:
            return self.settings.project
        remembered = self.settings.home / "last-project"
        if default_path is None and remembered.is_file():
            return remembered.read_text(encoding="utf-8").strip()
        return project_from_path(str(Path(default_path or Path.cwd()).resolve()))

    def remember(self, project: str) -> None:
        """Record ``project`` as the default for later commands using this home."""
        self.settings.home.mkdir(parents=True, exist_ok=True)
        (self.settings.home / "last-project").write_text(project + "\n", encoding="utf-8")

    def store(self, project: str | None = None) -> Any:
        from graphmem.stores import open_store

        return open_store(self.settings, project or self.project())


pass_context = click.make_pass_decorator(Context)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(func)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", type=click.Choice(STORES), default=None,
              help="Graph store (default: $GRAPHMEM_STORE or embedded).")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Embedded store directory (default: $GRAPHMEM_HOME or ./.graphmem).")
@click.option("--project", default=None, help="Project name (default: the ingested folder's name).")
@click.version_option(__version__, prog_name="graphmem")
@click.pass_context
def cli(ctx: click.Context, store: str | None, home: Path | None, project: str | None) -> None:
    """graphmem: code, decisions, incidents and commits in one knowledge graph."""
    ctx.obj = Context(Settings.from_env(store=store, home=home, project=project))


@cli.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@json_option
@pass_context
def ingest(ctx: Context, path: Path, as_json: bool) -> None:
    """Ingest a repository or folder: code, git history, decisions, incidents, ownership."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from graphmem.ingest import ingest as run_ingest

    project = ctx.project(path)
    store = ctx.store(project)
    console = Console(stderr=True)
    try:
        with Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), console=console,
                      transient=True, disable=as_json or not console.is_terminal) as bar:
            tasks: dict[str, int] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done, total=total)

            report = run_ingest(path, store, cache_dir=ctx.settings.home / "cache", progress=progress)
        ctx.remember(project)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    w = report.written
    click.echo(f"ingested {report.root} into project {project} ({ctx.settings.store} store) "
               f"in {report.seconds:.1f} s")
    click.echo(f"  files: {report.files} ({report.changed} changed, {report.deleted} deleted, "
               f"{report.unchanged} unchanged); commits read: {report.commits}")
    click.echo(f"  written: {w.nodes} nodes, {w.rels} relationships, {w.chunks} chunks; "
               f"closed: {w.closed_nodes} nodes, {w.closed_rels} relationships")
    if w.missing_endpoints:
        click.echo(f"  relationships to nodes not in the graph (left out): {w.missing_endpoints}")
    if report.redactions:
        click.echo(f"  secrets redacted: {report.redactions}")
    # Tool folders (.git, node_modules...) are skipped by design: counted, not listed.
    routine = [s for s in report.skipped if s.reason.startswith("excluded folder")]
    for item in report.skipped:
        if item not in routine:
            click.echo(f"  skipped {item.path}: {item.reason}", err=True)
    if routine:
        click.echo(f"  excluded tool and build folders: {len(routine)}", err=True)


@cli.command()
@json_option
@pass_context
def status(ctx: Context, as_json: bool) -> None:
    """Show what the graph holds: nodes by kind, relationships by type, chunks, last commit."""
    project = ctx.project()
    store = ctx.store(project)
    try:
        counts = store.counts()
        report: dict[str, Any] = {
            "project": project,
            "store": ctx.settings.store,
            **counts.as_dict(),
            "last_ingested_commit": store.get_meta("last_commit"),
            "last_ingested_at": store.get_meta("last_ingested_at"),
            "root": store.get_meta("root"),
        }
    finally:
        store.close()
    report["freshness"] = _freshness(report["root"], report["last_ingested_commit"])
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
        return
    click.echo(f"project {project} ({ctx.settings.store} store)")
    click.echo(f"  nodes: {report['total_nodes']}  relationships: {report['total_rels']}  "
               f"chunks: {report['chunks']}  closed: {report['closed_nodes']} nodes, {report['closed_rels']} rels")
    for kind, n in report["nodes"].items():
        click.echo(f"    {kind:<10} {n}")
    for typ, n in report["rels"].items():
        click.echo(f"    {typ:<12} {n}")
    click.echo(f"  last ingested commit: {report['last_ingested_commit'] or '-'}")
    fresh = report["freshness"]
    if fresh.get("head"):
        state = "up to date" if fresh["up_to_date"] else (
            "behind HEAD" if fresh["head"] != report["last_ingested_commit"] else "behind the working tree")
        click.echo(f"  repository {report['root']}: HEAD {fresh['head'][:12]}, graph {state}")


def _freshness(root: str | None, last_commit: str | None) -> dict[str, Any]:
    """Whether the graph is behind the repository it was ingested from (HEAD or working tree)."""
    from extractors.git import head_commit, is_git_repo, working_tree_dirty

    if not root or not Path(root).is_dir() or not is_git_repo(root):
        return {"head": None, "up_to_date": None, "dirty": None}
    head = head_commit(root)
    dirty = working_tree_dirty(root)
    return {"head": head, "dirty": dirty, "up_to_date": head == last_commit and not dirty}


@cli.group()
def hooks() -> None:
    """Git hooks that bring the graph up to date after commit, merge and rewrite."""


@hooks.command("install")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path), default=".")
@click.option("--force", is_flag=True, help="Replace existing hooks that are not graphmem's.")
@pass_context
def hooks_install(ctx: Context, path: Path, force: bool) -> None:
    """Install post-commit, post-merge and post-rewrite hooks in the repository at PATH."""
    from graphmem import hooks as git_hooks

    project = ctx.project(path)
    written = git_hooks.install(path, git_hooks.global_options(ctx.settings.store, ctx.settings.home, project),
                                force=force)
    for hook in written:
        click.echo(f"installed {hook}")
    click.echo(f"each runs `graphmem ingest` in the background (project {project}); "
               "log: <git dir>/graphmem-hook.log")


@hooks.command("uninstall")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path), default=".")
def hooks_uninstall(path: Path) -> None:
    """Remove graphmem's hooks from the repository at PATH (other hooks are left alone)."""
    from graphmem import hooks as git_hooks

    for hook in git_hooks.uninstall(path):
        click.echo(f"removed {hook}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    # The driver logs each retried transaction (say, a deadlock it resolves) as a warning; the
    # command line reports only what fails.
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    try:
        cli.main(args=argv, prog_name="graphmem", standalone_mode=False)
    except GraphmemError as exc:
        click.echo(f"graphmem: error: {exc}", err=True)
        return 1
    except click.exceptions.Abort:
        click.echo("graphmem: aborted", err=True)
        return 130
    except click.ClickException as exc:  # usage errors too: one line, no usage dump
        click.echo(f"graphmem: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("graphmem: interrupted", err=True)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

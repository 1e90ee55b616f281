"""The ``graphmem`` command line: a thin layer over the library.

Every :class:`~graphmem.errors.GraphmemError` becomes one line on stderr and exit status 1; no
traceback reaches the user.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from graphmem import __version__
from graphmem.config import INDEX_MODES, LLM_SOURCE_KINDS, STORES, Settings, prepare_home
from graphmem.errors import GraphmemError
from graphmem.model import NodeKind, check_project, parse_day, project_from_path
from graphmem.retrieval.config import DEFAULT_MODE, PRESETS

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    """What the global options decided; commands open the store through it."""

    def __init__(self, settings: Settings, *, home_given: bool = False) -> None:
        self.settings = settings
        self.home_given = home_given  # --home or GRAPHMEM_HOME, rather than the default
        # Whether project() last chose by the home's last-project record alone (neither --project
        # nor the folder named it): commands that read then say which project, see announce().
        self.chose_last_used = False

    def project(self, default_path: str | Path | None = None) -> str:
        """``--project``, else ``GRAPHMEM_PROJECT``, else (for a command that names no folder) the
        project last ingested from the folder the command runs in or one above it, else the last
        project used in this home, else the name of ``default_path`` (or, for a command that names no
        folder, of the git repository the command runs in, else of the working directory)."""
        self.chose_last_used = False
        if self.settings.project:
            return self.settings.project
        if default_path is None:
            here = Path.cwd().resolve()
            roots = self._registry()
            for folder in (here, *here.parents):
                if str(folder) in roots:
                    return roots[str(folder)]
            remembered = self.settings.home / "last-project"
            if remembered.is_file():
                self.chose_last_used = True
                return remembered.read_text(encoding="utf-8").strip()
            from graphmem.registry import repository_root

            root = repository_root(here)
            if root is not None:  # anywhere inside a repository, the repository's project
                return self.project_for_root(root)
        return project_from_path(str(Path(default_path or Path.cwd()).resolve()))

    def project_for_root(self, root: Path) -> str:
        """The project of the folder ``root``: the one it was ingested into, else its name."""
        return self._registry().get(str(root.resolve())) or project_from_path(str(root.resolve()))

    def bootstrap_root(self, project: str) -> Path | None:
        """The repository a never-ingested ``project`` may be ingested from on first use: the git
        repository the command runs in, when ``project`` is that repository's project (so a
        mistyped --project is an error, never a silent new project)."""
        from graphmem.registry import repository_root

        root = repository_root()
        return root if root is not None and self.project_for_root(root) == project else None

    def reader(self, project: str, *, bootstrap: bool = False, question: tuple[str, str] | None = None) -> Any:
        """A ``Graphmem`` on ``project`` holding a graph. A project that holds nothing is an error
        naming the projects there, unless ``bootstrap`` and :meth:`bootstrap_root` finds its
        repository: that is ingested first, with progress on stderr. ``question`` (text, mode):
        the one question the command will ask, whose graph and models start loading at once."""
        if self.settings.store != "embedded" or (self.settings.home / project / "graph.sqlite").is_file():
            gm = self.graphmem(project)
            if question is not None:
                gm.prepare_for(*question)
            try:
                if gm.store.has_nodes():
                    return gm
            except BaseException:
                gm.close()
                raise
            gm.close()
        root = self.bootstrap_root(project) if bootstrap else None
        if root is None:
            raise GraphmemError(self.nothing_ingested(project))
        from graphmem.config import HOME_DIR
        from graphmem.registry import StderrProgress

        if not self.home_given and not self.settings.home.exists():
            # The repository's own home, which later commands find from any folder inside it.
            self.settings.home = root / HOME_DIR
        progress = StderrProgress()
        progress.say(f"project {project} holds nothing yet: ingesting {root} first "
                     "(--no-bootstrap refuses instead)")
        gm = self.graphmem(project)
        started = time.perf_counter()
        try:
            report = gm.ingest(root, progress=progress, llm=False)  # enrichment would delay the answer
        except BaseException:
            gm.close()
            raise
        self.remember(project, root)
        progress.say(f"ingested {report.files} files and {report.commits} commits in "
                     f"{time.perf_counter() - started:.1f} s"
                     + ("; `graphmem enrich` adds LLM enrichment" if self.settings.llm.configured else ""))
        return gm

    def _registry(self) -> dict[str, str]:
        """Folder ingested -> project, as :meth:`remember` recorded them in this home."""
        try:
            data = json.loads((self.settings.home / "projects.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def existing_project(self) -> str:
        """The project a reading command works on; an error naming the projects there if it was
        never ingested (reading commands never create an empty project)."""
        project = check_project(self.project())
        if self.settings.store == "embedded" and not (self.settings.home / project / "graph.sqlite").is_file():
            raise GraphmemError(self.nothing_ingested(project))
        return project

    def announce(self, project: str) -> None:
        """Name ``project`` in one line on stderr when only the home's last-project chose it: from a
        folder no project was ingested from, the last project used may be another organisation's or
        an evaluation's, and its answers or writes must not pass for this folder's."""
        if self.chose_last_used:
            click.echo(f"project: {project} (the last one used; --project NAME chooses another)", err=True)

    def nothing_ingested(self, project: str) -> str:
        """Why a project has nothing to show, and what to do about it."""
        if self.settings.store == "embedded":
            home = self.settings.home
            known = sorted(p.parent.name for p in home.glob("*/graph.sqlite")) if home.is_dir() else []
            where = f"in {home.resolve()}" + (f" (projects there: {', '.join(known)})" if known
                                               else " (nothing has been ingested there)")
        else:
            where = f"in Neo4j at {self.settings.neo4j.uri}"
        return (f"project {project!r} holds nothing {where}: run `graphmem ingest PATH` first, "
                "or choose another --home or --project")

    def remember(self, project: str, root: str | Path | None = None) -> None:
        """Record ``project`` as the default for later commands using this home, and as the
        project of the folder ``root`` (and of every folder inside it). Only for the user's own
        ingests (``ingest``, a bootstrap): an evaluation's import must never become the default."""
        home = prepare_home(self.settings.home)
        (home / "last-project").write_text(project + "\n", encoding="utf-8")
        if root is not None:
            roots = self._registry()
            roots[str(Path(root).resolve())] = project
            tmp = home / f"projects.json.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(roots, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, home / "projects.json")

    def store(self, project: str | None = None) -> Any:
        from graphmem.stores import open_store

        return open_store(self.settings, project or self.project())

    def graphmem(self, project: str | None = None) -> Any:
        from graphmem.api import Graphmem

        return Graphmem(self.settings, project or self.project())


_pass_obj = click.make_pass_decorator(Context)


def pass_context(func: F) -> F:
    """Pass the :class:`Context`; ``--store``, ``--home`` and ``--project`` are also accepted after
    the command name (``graphmem ingest PATH --project NAME``), where they win over the global ones."""

    @functools.wraps(func)
    def wrapper(ctx: Context, *args: Any, store: str | None = None, home: Path | None = None,
                project: str | None = None, **kwargs: Any) -> Any:
        if store or home or project:
            ctx.home_given = ctx.home_given or home is not None
            ctx.settings.store = store or ctx.settings.store
            ctx.settings.home = Path(home).expanduser() if home else ctx.settings.home
            ctx.settings.project = project or ctx.settings.project
        return func(ctx, *args, **kwargs)

    wrapped = _pass_obj(wrapper)
    for option in reversed(_LOCATION_OPTIONS):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[return-value]


_LOCATION_OPTIONS = (
    click.option("--store", type=click.Choice(STORES), default=None, help="Graph store (overrides the global option)."),
    click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="Embedded store directory (overrides the global option)."),
    click.option("--project", default=None, help="Project name (overrides the global option)."),
)


@contextmanager
def progress_sink(quiet: bool = False, *, every: float = 10.0) -> Iterator[Callable[[str, int, int], None]]:
    """Where a long command reports ``(stage, done, total)``: bars on a terminal; elsewhere (a git
    hook's log, CI) a plain line per stage at most every ``every`` seconds, so a slow ingest is
    never silent; nothing with ``quiet`` (JSON output)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    if quiet:
        yield lambda stage, done, total: None
    elif not console.is_terminal:
        from graphmem.registry import StderrProgress

        yield StderrProgress(every=every)
    else:
        with Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), console=console,
                      transient=True) as bar:
            tasks: dict[str, int] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done, total=total)

            yield progress


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(func)


class _Commands(click.Group):
    """graphmem's commands. ``memory``, ``context``, ``sessions`` and ``patterns`` are defined beside
    their libraries and imported when one of them runs or the commands are listed: every other
    command starts without them (a tenth of a second on a slow machine)."""

    AGENT_COMMANDS = {"memory": ("graphmem.memory", "memory_cli"), "context": ("graphmem.context", "context_cli"),
                      "sessions": ("graphmem.sessions.cli", "sessions_cli"),
                      "patterns": ("graphmem.sessions.patterns_cli", "patterns_cli")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.AGENT_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.AGENT_COMMANDS:
            import importlib

            module, factory = self.AGENT_COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module), factory)(pass_context, json_option), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", type=click.Choice(STORES), default=None,
              help="Graph store (default: $GRAPHMEM_STORE or embedded).")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Embedded store directory (default: $GRAPHMEM_HOME, else the nearest .graphmem in the "
                   "working folder or above it, as git finds .git, else ./.graphmem).")
@click.option("--project", default=None,
              help="Project name (default: $GRAPHMEM_PROJECT; for ingest, the folder's name; for other commands, "
                   "the project ingested from the working folder or one above it, else the last one used, else "
                   "the name of the git repository you are in).")
@click.option("--index", type=click.Choice(INDEX_MODES), default=None,
              help="Where BM25 and vectors are served from: local files, or Neo4j's own indexes "
                   "(neo4j store only; default: $GRAPHMEM_INDEX or local).")
@click.version_option(__version__, prog_name="graphmem")
@click.pass_context
def cli(ctx: click.Context, store: str | None, home: Path | None, project: str | None, index: str | None) -> None:
    """graphmem: code, decisions, incidents and commits in one knowledge graph."""
    ctx.obj = Context(Settings.from_env(store=store, home=home, project=project, index=index),
                      home_given=home is not None or bool(os.environ.get("GRAPHMEM_HOME")))


@cli.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--llm/--no-llm", "llm", default=None,
              help="Enrich the graph with an LLM after ingesting (default: when GRAPHMEM_LLM_BASE_URL is set).")
@click.option("--force", is_flag=True,
              help="Go on even if the folder is another repository than the project's, or would close most of "
                   "what the project holds (files really removed).")
@click.option("--replay", type=click.IntRange(0, 10_000), default=None,
              help="On a project's first ingest, first ingest up to N earlier commits (oldest first, spread over "
                   "the history), so ownership lines, calls and files that no longer exist keep their history "
                   "for --as-of; 0 reads HEAD alone. [default: GRAPHMEM_REPLAY, else 12]")
@json_option
@pass_context
def ingest(ctx: Context, path: Path, llm: bool | None, force: bool, replay: int | None, as_json: bool) -> None:
    """Ingest a repository or folder: code, git history, decisions, incidents, ownership."""
    use_llm = ctx.settings.llm.configured if llm is None else llm
    if use_llm:
        ctx.settings.llm.require()  # before any work: --llm without an endpoint is a usage error
    project = ctx.project(path)
    gm = ctx.graphmem(project)
    try:
        with progress_sink(as_json) as progress:
            started = time.perf_counter()
            report = gm.ingest(path, progress=progress, llm=False, force=force, replay=replay)
            if use_llm:  # the deterministic graph is written and usable; enrichment comes on top
                if not as_json:
                    click.echo(f"graph written; enriching with {ctx.settings.llm.model} "
                               "(interrupt at will: `graphmem enrich` resumes)", err=True)
                report.enrichment = gm.enrich(progress=progress).as_dict()
        ctx.remember(project, path)
        elapsed = time.perf_counter() - started
        held = gm.store.counts() if not as_json else None
    finally:
        gm.close()
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    w = report.written
    click.echo(f"ingested {report.root} into project {project} ({ctx.settings.store} store) "
               f"in {elapsed:.1f} s (graph {report.seconds:.1f} s)")
    if report.replayed:
        # The snapshot counts are the last pass's, after the history replay wrote most of the graph.
        click.echo(f"  history: {report.replayed} earlier commits replayed first; commits read: {report.commits}")
        click.echo(f"  files: {report.files} ({report.changed} changed, {report.deleted} deleted, "
                   f"{report.unchanged} unchanged since the last replayed commit)")
    else:
        click.echo(f"  files: {report.files} ({report.changed} changed, {report.deleted} deleted, "
                   f"{report.unchanged} unchanged); commits read: {report.commits}"
                   + (f"; releases (git tags) written: {report.releases}" if report.releases else ""))
    if held is not None:
        click.echo(f"  the graph holds {held.total_nodes} nodes, {held.total_rels} relationships, {held.chunks} chunks")
    click.echo(f"  written by this ingest{' (each replayed commit counted)' if report.replayed else ''}: "
               f"{w.nodes} nodes, {w.rels} relationships, {w.chunks} chunks; "
               f"closed: {w.closed_nodes} nodes, {w.closed_rels} relationships")
    if w.missing_endpoints:
        click.echo(f"  relationships left out because an end is not in the graph: {w.missing_endpoints} "
                   "(ownership and history of files that have no node, such as docs and configs, and of "
                   "symbols since removed)")
    if report.redactions:
        click.echo(f"  secrets redacted: {report.redactions}")
    if report.index:
        ix = report.index
        click.echo(f"  indexes: {ix['added']} chunks added, {ix['updated']} updated, {ix['removed']} removed; "
                   f"{ix['embedded']} embedded, {ix['from_cache']} vectors from cache ({ix['seconds']:.1f} s)")
    # Tool folders (.git, node_modules...) are skipped by design: counted, not listed.
    routine = [s for s in report.skipped if s.reason.startswith("excluded folder")]
    for item in report.skipped:
        if item not in routine:
            click.echo(f"  skipped {item.path}: {item.reason}", err=True)
    if routine:
        click.echo(f"  excluded tool and build folders: {len(routine)}")
    if report.enrichment:
        _echo_enrichment(report.enrichment)


@cli.command()
@click.option("--retry-failed", is_flag=True, help="Also ask again about texts whose answers stayed invalid before.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(list(LLM_SOURCE_KINDS)),
              help="Only texts of this kind (repeatable; default: all).")
@click.option("--limit", type=click.IntRange(1, None), default=None, help="Send at most N texts to the endpoint.")
@json_option
@pass_context
def enrich(ctx: Context, retry_failed: bool, kinds: tuple[str, ...], limit: int | None, as_json: bool) -> None:
    """Enrich the graph with entities and relationships an LLM finds in its texts (resumable)."""
    ctx.settings.llm.require()
    gm = ctx.graphmem()
    try:
        with progress_sink(as_json) as progress:
            report = gm.enrich(retry_failed=retry_failed, kinds=list(kinds) or None, limit=limit,
                               progress=progress)
    finally:
        gm.close()
    result = report.as_dict()
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        _echo_enrichment(result)
    if not report.complete:
        raise GraphmemError(f"{len(report.not_enriched)} of {report.units} texts not enriched"
                            + (f" ({report.stopped})" if report.stopped else "")
                            + "; run `graphmem enrich` again to resume")


def _echo_enrichment(e: dict[str, Any]) -> None:
    """The summary lines of an enrichment report (``EnrichReport.as_dict()``)."""
    w, u = e["written"], e["usage"]
    click.echo(f"  llm enrichment ({e['model']}, prompt v{e['prompt_version']}): {e['enriched']} texts enriched "
               f"({e['called']} asked, {e['from_cache']} from cache), {e['up_to_date']} up to date, of {e['units']}")
    click.echo(f"    written: {w['entities']} entities, {w['mentions']} mentions ({w['linked']} of existing nodes), "
               f"{w['related']} relationships; not in the text (dropped): {w['dropped_entities']} entities, "
               f"{w['dropped_relations']} relationships")
    if u.get("requests"):
        click.echo(f"    tokens: {u['total_tokens']} ({u['prompt_tokens']} prompt, {u['completion_tokens']} "
                   f"completion) in {u['requests']} requests")
    if e["not_enriched"]:
        click.echo(f"  not enriched: {e['not_enriched']} texts (`graphmem enrich` resumes)", err=True)
        for reason, n in e["not_enriched_reasons"].items():
            click.echo(f"    {n} x {reason}", err=True)
        listed = e["not_enriched_sources"]
        for item in listed[:10]:
            click.echo(f"    {item['source']} ({item['path']})", err=True)
        if len(listed) > 10:
            click.echo(f"    ... and {len(listed) - 10} more (--json lists them all)", err=True)


@cli.command()
@json_option
@pass_context
def status(ctx: Context, as_json: bool) -> None:
    """Show what the graph holds: nodes by kind, relationships by type, chunks, last commit."""
    project = ctx.existing_project()
    gm = ctx.graphmem(project)
    try:
        report = gm.status()
    finally:
        gm.close()
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
    ix = report["indexes"]
    state = "consistent" if ix["ok"] else f"INCONSISTENT ({_index_problems(ix)}); run `graphmem doctor --repair`"
    click.echo(f"  indexes: {ix['vectors']} vectors, {ix['bm25']} BM25 documents for {ix['chunks']} chunks: {state}")
    click.echo(f"  last ingested commit: {report['last_ingested_commit'] or '-'}")
    if report.get("ingest_incomplete"):
        click.echo(f"  INCOMPLETE: an ingest has been writing since {report['ingest_incomplete']} or was "
                   "interrupted; the next `graphmem ingest` completes it")
    fresh = report["freshness"]
    if fresh.get("head"):
        state = "up to date" if fresh["up_to_date"] else (
            "behind HEAD" if fresh["head"] != report["last_ingested_commit"] else "behind the working tree")
        click.echo(f"  repository {report['root']}: HEAD {fresh['head'][:12]}, graph {state}")
    rr = report["reranker"]
    if rr["source"]:
        click.echo(f"  reranker: {rr['source']} model ({rr['path']})")
    else:
        click.echo("  reranker: none yet, " + ("the general model is being built (scripts/build-reranker --status)"
                                               if rr["building"] else "hybrid-rerank answers in fused order; "
                                               "scripts/build-reranker builds the general model"))


def _index_problems(ix: dict[str, Any]) -> str:
    if ix.get("error"):
        return str(ix["error"])
    parts = [f"{ix[name]} {name.replace('_', ' ')}" for name in
             ("missing_vectors", "extra_vectors", "stale_vectors", "missing_bm25", "extra_bm25") if ix[name]]
    return ", ".join(parts)


@cli.command()
@click.option("--repair", is_flag=True, help="Rebuild whatever in the indexes differs from the graph.")
@json_option
@pass_context
def doctor(ctx: Context, repair: bool, as_json: bool) -> None:
    """Check that the vector and BM25 indexes hold exactly the graph's chunks; --repair fixes them."""
    gm = ctx.graphmem(ctx.existing_project())
    try:
        result = gm.doctor(repair=repair)
    finally:
        gm.close()
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
    else:
        ix = result["indexes"]
        if ix["ok"]:
            click.echo(f"indexes consistent: {ix['vectors']} vectors and {ix['bm25']} BM25 documents "
                       f"for {ix['chunks']} chunks")
        else:
            click.echo(f"indexes inconsistent: {_index_problems(ix)}")
            if result["repaired"]:
                r = result["repaired"]
                click.echo(f"repaired: {r['added']} added, {r['updated']} updated, {r['removed']} removed "
                           f"({r['embedded']} embedded, {r['from_cache']} from cache); now "
                           + ("consistent" if result["after"]["ok"] else _index_problems(result["after"])))
    final = result.get("after") or result["indexes"]
    if not final["ok"]:
        raise GraphmemError("the indexes could not be repaired" if repair
                            else "the indexes differ from the graph: run `graphmem doctor --repair`")


@cli.command()
@click.argument("text")
@click.option("--mode", type=click.Choice(list(PRESETS)), default=DEFAULT_MODE, show_default=True,
              help="Retrievers and fusion preset.")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Results to return.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice([k.value for k in NodeKind]),
              help="Only results of this node kind (repeatable).")
@click.option("--path", "path_prefix", default=None, help="Only results from source paths with this prefix.")
@click.option("--now", default=None, help="Reference date for 'last month' and the like (YYYY-MM-DD).")
@click.option("--as-of", "as_of", default=None, help="Walk the graph as it was at this date (YYYY-MM-DD).")
@click.option("--include-pending", is_flag=True,
              help="Also memories waiting for a person's review whose words match (after the ranked results, "
                   "marked pending and untrusted).")
@click.option("--bootstrap/--no-bootstrap", default=True, show_default=True,
              help="When the project of the git repository you are in was never ingested, ingest it first.")
@json_option
@pass_context
def query(ctx: Context, text: str, mode: str, k: int, kinds: tuple[str, ...], path_prefix: str | None,
          now: str | None, as_of: str | None, include_pending: bool, bootstrap: bool, as_json: bool) -> None:
    """Answer a question with ranked nodes, their passages and the graph paths behind them."""
    from graphmem.model import to_iso

    project = check_project(ctx.project())
    when = parse_day(as_of, "--as-of")
    day = parse_day(now, "--now")
    gm = ctx.reader(project, bootstrap=bootstrap, question=(text, mode))
    ctx.announce(project)
    try:
        answer = gm.query(text, mode=mode, k=k, kinds=list(kinds) or None, path_prefix=path_prefix,
                          now=day, as_of=to_iso(when) if when else None)
        pending: list[dict[str, Any]] = []
        if include_pending:  # the memory module (and pydantic) is imported only for this
            from graphmem.memory import pending_hits

            pending = pending_hits(gm.store, text, limit=k, kinds=list(kinds) or None, path_prefix=path_prefix,
                                   first_rank=len(answer.results) + 1)
    finally:
        gm.close()
    if as_json:
        out = answer.as_dict()
        out["results"] += pending
        click.echo(json.dumps(out, indent=2))
        return
    if not answer.results and not pending:
        click.echo("no results")
    for hit in answer.results:
        src = hit.source
        where = src["path"] or ""
        if src.get("start_line"):
            where += f":{src['start_line']}-{src['end_line']}"
        ranks = " ".join(f"{name}#{rank}" for name, rank in hit.retrievers.items() if rank)
        click.echo(f"{hit.rank:>2}. {hit.key}  [{hit.kind}]  score {hit.score:.4f}  ({ranks or 'fused'})")
        first = hit.text.strip().splitlines()[0] if hit.text.strip() else ""
        if hit.name and hit.name not in hit.key and hit.name != first:
            click.echo(f"    {hit.name}")
        if first:
            click.echo(f"    {first[:150]}")
        if where:
            click.echo(f"    source: {where}")
        for path in hit.evidence[:2]:
            click.echo(f"    path: {path['text']}")
    for item in pending:
        click.echo(f"{item['rank']:>2}. {item['key']}  [memory, PENDING review, untrusted]  "
                   f"words matched {item['score']:.2f}")
        click.echo(f"    {' '.join(item['text'].split())[:150]}")
    for note in answer.notes:
        click.echo(f"note: {note}", err=True)
    t = answer.timings_ms
    click.echo("timings (ms): " + ", ".join(f"{name} {t[name]:.1f}" for name in t), err=True)


@cli.command()
@click.argument("query", required=False)
@click.option("--saved", default=None, metavar="NAME", help="Run a saved query from cypher/saved/ (see --list).")
@click.option("--list", "list_saved", is_flag=True, help="List the saved queries, what they answer and their parameters.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A query parameter (repeatable); numbers, true/false, null and JSON lists are converted.")
@click.option("--limit", type=click.IntRange(1, None), default=1000, show_default=True, help="Rows to read at most.")
@click.option("--timeout", type=click.FloatRange(0, None, min_open=True), default=30.0, show_default=True,
              help="Seconds before Neo4j stops the query.")
@json_option
@pass_context
def cypher(ctx: Context, query: str | None, saved: str | None, list_saved: bool, params: tuple[str, ...],
           limit: int, timeout: float, as_json: bool) -> None:
    """Run a read-only Cypher query, or a saved one, on the Neo4j store ($project is the project)."""
    from graphmem import readonly

    if list_saved:
        if query or saved:
            raise GraphmemError("--list takes no query and no --saved")
        _print_saved(readonly.saved_queries(), as_json)
        return
    if (query is None) == (saved is None):
        raise GraphmemError("give a Cypher QUERY or --saved NAME (graphmem cypher --list shows the saved ones)")
    values: dict[str, Any] = {}
    for item in params:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise GraphmemError(f"--param takes NAME=VALUE, not {item!r}")
        if name in values:
            raise GraphmemError(f"--param {name} is given twice")
        # Saved queries convert text by the type of each parameter's default; raw queries by its look.
        values[name] = value if saved else readonly.parse_value(value)
    gm = ctx.graphmem()
    try:
        result = gm.cypher(query, values, saved=saved, row_limit=limit, timeout_s=timeout)
    finally:
        gm.close()
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
        return
    _print_table(result.columns, result.rows)
    more = f", truncated at --limit {limit}" if result.truncated else ""
    click.echo(f"{len(result.rows)} row{'s' * (len(result.rows) != 1)}{more} in {result.elapsed_ms:.0f} ms", err=True)


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _print_table(columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped: do not squeeze keys into 80 columns
        console = Console(width=240)
    table = Table(*columns, show_lines=False, highlight=False)
    for row in rows:
        table.add_row(*(_cell(v) for v in row))
    console.print(table)


def _print_saved(queries: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"queries": [
            {"name": q.name, "description": q.description,
             "params": [{"name": p.name, "description": p.description, "default": p.default,
                         "required": p.required} for p in q.params]}
            for q in queries.values()]}, indent=2))
        return
    import textwrap

    for q in queries.values():
        click.echo(q.name)
        click.echo(textwrap.fill(" ".join(q.description.split()), 100, initial_indent="    ",
                                 subsequent_indent="    "))
        for p in q.params:
            default = "required" if p.required else f"default {'null' if p.default is None else p.default}"
            click.echo(f"    --param {p.name}: {p.description} ({default})")
    click.echo(f"{len(queries)} saved queries; run one with `graphmem --store neo4j cypher --saved NAME "
               "--param NAME=VALUE`", err=True)


@cli.group("eval")
def eval_group() -> None:
    """Score the retrieval modes on a question set (SPEC.md JSON Lines)."""


def _eval_source() -> None:
    """Make ``eval`` importable: the harness lives in the source tree beside the package, not in
    the installed wheel."""
    source = Path(__file__).resolve().parents[1]
    if not (source / "eval" / "runner.py").is_file():
        raise GraphmemError("graphmem eval needs a source checkout of graphmem (eval/ is not installed)")
    if str(source) not in sys.path:
        sys.path.insert(0, str(source))


@eval_group.command("run")
@click.option("--dataset", required=True,
              help="Questions, one JSON object a line: id, question, gold keys, hops, type; or a public "
                   "multi-hop set by name (musique, 2wiki, hotpotqa), imported with its passages first.")
@click.option("--corpus", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Ingest this folder first (into --project, default: its name).")
@click.option("--graph", "graph", type=click.Choice(["rules", "openie", "none"]), default="rules", show_default=True,
              help="Named dataset: the entity graph over its passages (openie: MuSiQue's GPT-3.5 triples).")
@click.option("--data", "data_root", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              envvar="GRAPHMEM_DATASETS",
              help="Named dataset: the folder holding the public sets, each in its own subfolder as published "
                   "(musique_train_sample/, 2wikimultihopqa/, hotpotqa_train_sample/) "
                   "[default: $GRAPHMEM_DATASETS, else ../shared/datasets beside this checkout].")
@click.option("--split", "split", type=click.Choice(["all", "dev", "test"]), default="all", show_default=True,
              help="Named dataset: score only this half of its questions (by a hash of the question id; "
                   "fusion trains on MuSiQue's dev half).")
@click.option("--modes", default="bm25,vector,graph,hybrid,hybrid-rerank", show_default=True,
              help="Comma-separated modes to score.")
@click.option("-k", "k", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option("--now", default=None, help="Reference date for relative time in questions (YYYY-MM-DD).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Also score a swept recipe: a JSON or TOML file of settings ({section: {setting: value}}) "
                   "applied to its 'mode' (default hybrid), named by its 'name' (default the file's stem).")
@click.option("--baselines/--no-baselines", default=True, show_default=True,
              help="Also score the plain baselines (bm25s, dense and their RRF over one unit per node).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write report.json (every metric, breakdowns, intervals), report.md and plots here.")
@json_option
@pass_context
def eval_run(ctx: Context, dataset: str, corpus: Path | None, graph: str, data_root: Path | None, split: str,
             modes: str, k: int, now: str | None, config_file: Path | None, baselines: bool, out: Path | None,
             as_json: bool) -> None:
    """Run every mode (and the plain baselines) over the questions and report Recall@2/5/10, MRR,
    nDCG@10 and latency."""
    _eval_source()
    from eval import datasets as public
    from eval.runner import load_questions, run, spec_summary

    from graphmem.retrieval.config import load_recipe

    wanted: list[Any] = [m.strip() for m in modes.split(",") if m.strip()]
    for mode in wanted:
        if mode not in PRESETS:
            raise GraphmemError(f"unknown mode {mode!r}: choose from {', '.join(PRESETS)}")
    if config_file is not None:
        wanted.append(load_recipe(config_file))
    named = dataset in public.NAMES and not Path(dataset).is_file()
    if not named and not Path(dataset).is_file():
        raise GraphmemError(f"--dataset {dataset!r} is neither a questions file nor one of {', '.join(public.NAMES)}")
    if not named and split != "all":
        raise GraphmemError(f"--split is for the named datasets ({', '.join(public.NAMES)})")
    if named:
        root = data_root or public.DEFAULT_ROOT
        problem = public.missing_files(dataset, root, None if graph == "none" else graph)
        if problem:
            raise GraphmemError(f"cannot load {dataset}: {problem}; --data DIR (or GRAPHMEM_DATASETS) names "
                                "the folder that holds them")
        try:
            ds = public.load(dataset, root)
        except (OSError, ValueError) as exc:
            raise GraphmemError(f"cannot load {dataset}: {exc}") from None
        questions = public.split_questions(ds.questions, split)
        label = dataset if split == "all" else f"{dataset} ({split})"
        # One project per dataset and graph, so two graphs are never mixed in one project.
        project = ctx.settings.project or f"{dataset}-{graph}"
    else:
        questions, label = load_questions(dataset), Path(dataset).name
        # Without --corpus the questions are asked of a project ingested before.
        project = ctx.project(corpus) if corpus else ctx.existing_project()
    gm = ctx.graphmem(project)
    if not named and corpus is None and not gm.store.has_nodes():
        gm.close()
        raise GraphmemError(ctx.nothing_ingested(project))
    # Progress on stderr, also with --json (stdout stays the report): a run takes minutes.
    with progress_sink(every=5.0) as progress:
        try:
            if named:
                click.echo(f"graphmem: importing {label}: {len(ds.passages)} passages into project {project}",
                           err=True)
                try:
                    public.import_corpus(gm, ds, graph=None if graph == "none" else graph, root=root, sync=False)
                except ValueError as exc:
                    raise GraphmemError(str(exc)) from None
                gm.sync_indexes(progress=progress)
            elif corpus is not None:
                gm.ingest(corpus, progress=progress)
            # Neither import is remembered (no last-project, no folder record): an evaluation's project
            # must not become what a later plain `graphmem query` or `memory` command reads.
            extra = {}
            if baselines:
                from eval.plain import PlainBaselines

                extra = PlainBaselines(gm).searchers()
            report = run(gm, questions, wanted, k=k, now=parse_day(now, "--now"), dataset=label, baselines=extra,
                         progress=lambda mode, done, total: progress(f"eval {mode}", done, total))
        finally:
            gm.close()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
        from eval.report import write_markdown, write_plots

        written = [write_markdown(report, out / "report.md"), *write_plots(report, out)]
        if not as_json:
            click.echo(f"wrote {out / 'report.json'}, " + ", ".join(w.name for w in written), err=True)
    if as_json:
        click.echo(json.dumps(spec_summary(report), indent=2))
        return
    click.echo(f"{report['dataset']}: {report['questions']} questions")
    click.echo(f"{'mode':<14}{'R@2':>7}{'R@5':>7}{'R@10':>7}{'MRR':>7}{'nDCG@10':>9}{'allR@5':>8}{'p50 ms':>9}"
               f"{'p95 ms':>9}")
    for mode, m in report["modes"].items():
        click.echo(f"{mode:<14}{m['recall@2']:>7.3f}{m['recall@5']:>7.3f}{m['recall@10']:>7.3f}{m['mrr']:>7.3f}"
                   f"{m['ndcg@10']:>9.3f}{m['all_recall@5']:>8.3f}{m['p50_ms']:>9.1f}{m['p95_ms']:>9.1f}")


@eval_group.command("compare")
@click.argument("baseline", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("candidate", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tolerance", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              help="A quality metric regresses when it drops by more than this.")
@json_option
def eval_compare(baseline: Path, candidate: Path, tolerance: float, as_json: bool) -> None:
    """Compare two report.json files (A = BASELINE, B = CANDIDATE); exit 1 when anything regressed."""
    _eval_source()
    from eval.report import compare, format_compare, mismatch

    reports = []
    for path in (baseline, candidate):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise GraphmemError(f"{path}: not a JSON report ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("modes"), dict):
            raise GraphmemError(f"{path}: not an eval report (no 'modes'; use the report.json of `eval run --out`)")
        reports.append(data)
    for reason in mismatch(reports[0], reports[1]):  # compared all the same, but the figures may not mean much
        click.echo(f"graphmem: warning: {reason}", err=True)
    result = compare(reports[0], reports[1], tolerance=tolerance)
    click.echo(json.dumps(result, indent=2) if as_json else format_compare(result))
    if result["regressed"]:
        raise SystemExit(1)


@cli.group()
def reranker() -> None:
    """The cross-encoder that reorders hybrid results (trained on the project's own graph)."""


@reranker.command("train")
@click.option("--budget", type=click.FloatRange(10, None), default=600.0, show_default=True,
              help="Seconds of training at most (mining and evaluation come on top).")
@click.option("--max-pairs", type=click.IntRange(50, None), default=4000, show_default=True,
              help="Training triples at most.")
@json_option
@pass_context
def reranker_train(ctx: Context, budget: float, max_pairs: int, as_json: bool) -> None:
    """Fine-tune a cross-encoder from the packaged MiniLM on questions mined from the graph."""
    from rich.console import Console

    gm = ctx.graphmem()
    console = Console(stderr=True)
    try:
        with console.status("training the reranker", spinner="dots") if console.is_terminal and not as_json \
                else _nothing():
            report = gm.train_reranker(time_budget=budget, max_pairs=max_pairs)
    finally:
        gm.close()
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, default=str))
        return
    ev = report.evaluation
    click.echo(f"trained on {report.pairs} triples ({report.steps} steps, {report.seconds:.0f} s); saved in "
               f"{report.out_dir}")
    if ev:
        click.echo(f"{ev.get('questions', 0)} held-out questions: MRR@10 {ev.get('fused_mrr@10', 0):.3f} fused, "
                   f"{ev.get('rerank_mrr@10', 0):.3f} reranked; Recall@5 {ev.get('fused_recall@5', 0):.3f} fused, "
                   f"{ev.get('rerank_recall@5', 0):.3f} reranked")
    click.echo("hybrid-rerank will use it" + ("" if report.helps else
                                              " only for question kinds where it beat the fused order "
                                              "(overall it did not)"))


@reranker.command("build-general")
@click.option("--budget", type=click.FloatRange(10, None), default=1500.0, show_default=True,
              help="Seconds of training at most (reading the installed packages comes on top).")
@click.option("--threads", type=click.IntRange(1, None), default=None, help="Torch threads (default: all cores).")
@click.option("--base-model", type=click.Path(exists=True, file_okay=False), default=None,
              help="A local BERT model folder to start from (default: the packaged all-MiniLM-L6-v2).")
@click.option("--frozen-layers", type=click.IntRange(0, None), default=None,
              help="Lower encoder layers kept as they are (default 3).")
@click.option("--lora-rank", type=click.IntRange(0, None), default=None,
              help="Rank of the low-rank updates kept as an adapter (default 8; 0 trains the upper layers whole).")
@click.option("--adapter-out", type=click.Path(dir_okay=False), default=None,
              help="Also write the adapter here (how the one shipped with graphmem is made).")
@json_option
def reranker_build_general(budget: float, threads: int | None, base_model: str | None, frozen_layers: int | None,
                           lora_rank: int | None, adapter_out: str | None, as_json: bool) -> None:
    """Train the machine's general cross-encoder from the installed Python packages' docstrings and code;
    hybrid-rerank uses it for projects without a reranker of their own (instead of the shipped one)."""
    from graphmem.retrieval.general_reranker import LORA_RANK, build_general_reranker

    meta = build_general_reranker(time_budget=budget, threads=threads, base_model=base_model,
                                  frozen_layers=frozen_layers,
                                  lora_rank=LORA_RANK if lora_rank is None else lora_rank, adapter_out=adapter_out)
    if as_json:
        click.echo(json.dumps(meta, indent=2))
        return
    click.echo(f"trained on {meta['groups_trained']} of {meta['groups']} questions from {meta['packages']} packages "
               f"({meta['steps']} steps, {meta['train_seconds']:.0f} s); saved in {meta['out_dir']}")


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@cli.command()
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio for an agent that starts the server; http (streamable HTTP) for a long-running one.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="HTTP: port (default 8765).")
@click.option("--ingest-root", "ingest_roots", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder under which the `ingest` tool may read (repeatable; also GRAPHMEM_INGEST_ROOTS). "
                   "Without one, `ingest` is refused.")
@click.option("--allowed-host", "allowed_hosts", multiple=True,
              help="HTTP: Host header values to accept, e.g. graphmem:8765 (DNS-rebinding protection; "
                   "loopback hosts are protected by default).")
@click.option("--bootstrap/--no-bootstrap", default=True, show_default=True,
              help="When search is asked about a project that was never ingested, ingest its repository first: "
                   "the git repository the server runs in, or an ingest root that is a repository, whose "
                   "project is the server's.")
@pass_context
def serve(ctx: Context, transport: str, host: str, port: int | None, ingest_roots: tuple[Path, ...],
          allowed_hosts: tuple[str, ...], bootstrap: bool) -> None:
    """Run the MCP server for agents (tools: search, explain, get_node, neighbors, cypher, ingest, status, and
    the memory, session and registry tools)."""
    from graphmem.config import HOME_DIR
    from graphmem.mcp_server import DEFAULT_PORT, default_ingest_roots
    from graphmem.mcp_server import serve as run_server

    project = ctx.project()
    roots = list(ingest_roots) or default_ingest_roots()
    root = None
    if bootstrap:
        root = ctx.bootstrap_root(project) or next(
            (r.resolve() for r in roots if (r / ".git").exists() and ctx.project_for_root(r) == project), None)
        if root is not None and not ctx.home_given and not ctx.settings.home.exists():
            ctx.settings.home = root / HOME_DIR
    if transport == "http":
        click.echo(f"graphmem: MCP server for project {project} ({ctx.settings.store} store) on "
                   f"http://{host}:{port or DEFAULT_PORT}/mcp", err=True)
    run_server(ctx.settings, project, transport=transport, host=host, port=port or DEFAULT_PORT,
               ingest_roots=roots, allowed_hosts=allowed_hosts, bootstrap_root=root,
               on_bootstrap=lambda folder: ctx.remember(project, folder))


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

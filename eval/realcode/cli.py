"""``python -m eval.realcode build|questions|run``.

- ``build [--only NAME ...]``: assemble the repositories from their registry archives and run the
  oracles (see ``build.py``);
- ``questions [--only NAME ...]``: write ``questions/<name>.jsonl`` from the oracle facts;
- ``run --split dev|test|all [--modes ...] [--only NAME ...] [--out DIR]``: ingest each repository
  into its own project and score graphmem's modes and the plain baselines, per repository, per
  language, per question type and overall.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval.metrics import mean, question_metrics
from eval.realcode import build as builder
from eval.realcode.questions import generate

QUESTIONS = Path(__file__).resolve().parent / "questions"
SWEQA = Path(__file__).resolve().parent / "sweqa"
DEFAULT_MODES = "bm25,vector,graph,rrf,hybrid"
SUMMARY = ("recall@2", "recall@5", "mrr", "mrr_exact")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_build(args: argparse.Namespace) -> int:
    for manifest in builder.manifests(args.only):
        started = time.perf_counter()
        out = builder.build(manifest)
        _log(f"built {manifest.name}: {len(manifest.releases)} releases, facts in {out} "
             f"({time.perf_counter() - started:.0f} s)")
    return 0


def cmd_questions(args: argparse.Namespace) -> int:
    QUESTIONS.mkdir(exist_ok=True)
    for manifest in builder.manifests(args.only):
        facts = builder.home() / "facts" / f"{manifest.name}.json"
        if not facts.exists():
            _log(f"{manifest.name}: no facts yet (run build first); skipped")
            continue
        qs = generate(json.loads(facts.read_text(encoding="utf-8")))
        path = QUESTIONS / f"{manifest.name}.jsonl"
        path.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
        counts: dict[str, int] = defaultdict(int)
        for q in qs:
            counts[q["type"]] += 1
        _log(f"{manifest.name}: {len(qs)} questions ({', '.join(f'{t} {n}' for t, n in sorted(counts.items()))})")
    return 0


def questions_for(name: str) -> list[dict[str, Any]]:
    """The repository's generated questions plus its SWE-QA questions, if any."""
    out: list[dict[str, Any]] = []
    for folder in (QUESTIONS, SWEQA):
        path = folder / f"{name}.jsonl"
        if path.exists():
            out += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return out


def ingested(split: str, only: list[str] | None, home: Path) -> Iterator[tuple[builder.Manifest, Any, list[dict[str, Any]]]]:
    """Each built repository of ``split`` ("all": every one) brought up to date in its own project
    under ``home``, with its questions; the caller closes the ``Graphmem``."""
    from graphmem.api import Graphmem

    for manifest in builder.manifests(only):
        if split != "all" and manifest.split != split:
            continue
        repo = builder.home() / "repos" / manifest.name
        qs = questions_for(manifest.name)
        if not repo.is_dir() or not qs:
            _log(f"{manifest.name}: not built or no questions; skipped")
            continue
        gm = Graphmem.open(manifest.name, home=home)
        started = time.perf_counter()
        try:
            gm.ingest(repo)
        except BaseException:
            gm.close()
            raise
        _log(f"{manifest.name}: ingested in {time.perf_counter() - started:.0f} s; {len(qs)} questions")
        yield manifest, gm, qs


def cmd_run(args: argparse.Namespace) -> int:
    from eval.plain import PlainBaselines
    from eval.runner import run
    modes: list[Any] = [m for m in args.modes.split(",") if m]
    for path in args.config or ():
        from graphmem.retrieval.config import load_recipe

        modes.append(load_recipe(path))
    home = Path(args.home) if args.home else builder.home() / "graphmem-home"
    per_repo: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []  # one per (mode, question), across repositories
    for manifest, gm, qs in ingested(args.split, args.only, home):
        try:
            extra = PlainBaselines(gm).searchers() if not args.no_baselines else {}
            report = run(gm, qs, modes, dataset=manifest.name, baselines=extra)
        finally:
            gm.close()
        gold = {q["id"]: q for q in qs}
        mine = [{"mode": mode, "id": item["id"], "repo": manifest.name, "language": manifest.language,
                 "split": manifest.split, "type": gold[item["id"]].get("type", "-"),
                 "metrics": question_metrics(item["keys"], gold[item["id"]]["gold"]), "keys": item["keys"]}
                for mode, items in report["per_question"].items() for item in items]
        rows += mine
        per_repo[manifest.name] = {"language": manifest.language, "split": manifest.split,
                                   "questions": len(qs), "modes": aggregate(mine)["overall"]}
        _log(_table(per_repo[manifest.name]["modes"], f"{manifest.name} ({manifest.language}, {manifest.split})"))
    summary = aggregate(rows)
    out = {"split": args.split, "repos": per_repo, **summary,
           "per_question": [{k: r[k] for k in ("mode", "id", "type", "keys")} | {"mrr": r["metrics"]["mrr"]}
                            for r in rows]}
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "realcode.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(_table(summary["overall"], f"all ({args.split})"))
    for group in ("by_language", "by_type"):
        for name, table in summary[group].items():
            print(_table(table, f"{group[3:]}: {name}"))
    return 0


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over questions: overall, by language and by type, per mode."""
    def table(selected: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
        by_mode: dict[str, list[dict[str, float]]] = defaultdict(list)
        for r in selected:
            by_mode[r["mode"]].append(r["metrics"])
        return {mode: {"n": len(ms), **{m: round(mean([x[m] for x in ms]), 4) for m in SUMMARY}}
                for mode, ms in by_mode.items()}

    out: dict[str, Any] = {"overall": table(rows), "by_language": {}, "by_type": {}}
    for field, key in (("language", "by_language"), ("type", "by_type")):
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            groups[r[field]].append(r)
        out[key] = {g: table(v) for g, v in sorted(groups.items())}
    return out


def _table(modes: dict[str, dict[str, float]], title: str) -> str:
    lines = [title, f"  {'mode':<14}{'n':>5}{'R@2':>7}{'R@5':>7}{'MRR':>7}{'eMRR':>7}"]
    for mode, m in modes.items():
        n = int(m.get("n", 0))
        lines.append(f"  {mode:<14}{n:>5}{m['recall@2']:>7.3f}{m['recall@5']:>7.3f}{m['mrr']:>7.3f}"
                     f"{m['mrr_exact']:>7.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.realcode")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "questions", "run"):
        p = sub.add_parser(name)
        p.add_argument("--only", nargs="*", default=None, help="repository names (default: all)")
        if name == "run":
            p.add_argument("--split", choices=["dev", "test", "all"], default="dev")
            p.add_argument("--modes", default=DEFAULT_MODES)
            p.add_argument("--home", default=None, help="graphmem home for the ingested repositories")
            p.add_argument("--out", default=None, help="write realcode.json here")
            p.add_argument("--no-baselines", action="store_true")
            p.add_argument("--config", action="append", help="also score a swept recipe (JSON or TOML settings file)")
    args = parser.parse_args(argv)
    try:
        return {"build": cmd_build, "questions": cmd_questions, "run": cmd_run}[args.command](args)
    except builder.BuildError as exc:
        _log(f"error: {exc}")
        return 1

"""The command line: real subprocesses, one-line errors, JSON output."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[1]


def graphmem(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphmem.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd or REPO, timeout=300)


def test_ingest_then_status_on_the_embedded_store(tmp_path: Path, example_org: tuple) -> None:
    home = tmp_path / "home"
    out = graphmem("--home", str(home), "ingest", str(example_org[0]))
    assert out.returncode == 0, out.stderr
    assert "ingested" in out.stdout and "project acme" in out.stdout
    status = graphmem("--home", str(home), "status", "--json")  # the project is remembered
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["project"] == "acme" and report["nodes"]["service"] == 4
    assert report["last_ingested_commit"] == example_org[1]["head"].removeprefix("commit:")
    # The first ingest replays history: it says what the graph holds, not only what the passes wrote.
    holds = re.search(r"the graph holds (\d+) nodes, (\d+) relationships, (\d+) chunks", out.stdout)
    assert holds and [int(x) for x in holds.groups()] == [report["total_nodes"], report["total_rels"],
                                                          report["chunks"]], out.stdout
    assert "earlier commits replayed first" in out.stdout
    again = graphmem("--home", str(home), "ingest", str(example_org[0]), "--json")
    assert json.loads(again.stdout)["changed"] == 0


def test_ingest_without_a_terminal_reports_progress_as_lines(tmp_path: Path, example_org: tuple) -> None:
    # What a git hook's log or CI sees: no bars, but each stage's progress as plain lines on stderr.
    out = graphmem("--home", str(tmp_path / "home"), "ingest", str(example_org[0]))
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("graphmem: ")]
    stages = {line.split()[1] for line in lines}
    assert len(stages) >= 2, out.stderr
    for line in lines:
        done, total = line.split()[-1].split("/")
        assert int(done) <= int(total)
    assert "\x1b[" not in out.stderr  # no terminal escape codes in a log
    quiet = graphmem("--home", str(tmp_path / "home2"), "ingest", str(example_org[0]), "--json")
    assert not [line for line in quiet.stderr.splitlines() if line.startswith("graphmem: ")]


def test_status_says_when_the_graph_is_behind_the_repository(tmp_path: Path, example_org: tuple) -> None:
    import shutil

    repo = tmp_path / "acme"
    shutil.copytree(example_org[0], repo, symlinks=True)
    home = str(tmp_path / "home")
    assert graphmem("--home", home, "ingest", str(repo)).returncode == 0

    def freshness() -> dict:
        return json.loads(graphmem("--home", home, "status", "--json").stdout)["freshness"]

    assert freshness()["up_to_date"] is True
    (repo / "services" / "billing" / "new_module.py").write_text("def f():\n    return 1\n")
    assert freshness() == {**freshness(), "up_to_date": False, "dirty": True}
    out = graphmem("--home", home, "status")
    assert "behind the working tree" in out.stdout


def test_query_doctor_and_status_on_the_example(tmp_path: Path, example_org: tuple) -> None:
    home = str(tmp_path / "home")
    assert graphmem("--home", home, "ingest", str(example_org[0])).returncode == 0
    out = graphmem("--home", home, "query", "Which commit caused INC-042?", "--mode", "hybrid", "-k", "3",
                   "--now", "2026-06-01", "--json")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["query"] == "Which commit caused INC-042?" and answer["mode"] == "hybrid"
    assert [r["rank"] for r in answer["results"]] == [1, 2, 3]
    assert answer["results"][0]["key"] in example_org[1]["incidents"]["incident:INC-042"]["caused_by"]
    assert answer["results"][0]["evidence"][0]["rels"][0]["type"] == "CAUSED_BY"
    assert set(answer["timings_ms"]) >= {"bm25", "vector", "graph", "fusion", "rerank", "total"}
    text = graphmem("--home", home, "query", "Which commit caused INC-042?", "--now", "2026-06-01", "-k", "2")
    assert text.returncode == 0 and " 1. commit:" in text.stdout and "path: incident:INC-042 -CAUSED_BY->" in text.stdout
    status = json.loads(graphmem("--home", home, "status", "--json").stdout)
    assert status["indexes"]["ok"] and status["indexes"]["vectors"] == status["chunks"]
    (tmp_path / "home" / "acme" / "index" / "bm25.npz").unlink()
    broken = graphmem("--home", home, "doctor")
    assert broken.returncode == 1 and "missing bm25" in broken.stdout
    fixed = graphmem("--home", home, "doctor", "--repair")
    assert fixed.returncode == 0 and "now consistent" in fixed.stdout, fixed.stdout + fixed.stderr
    bad = graphmem("--home", home, "query", "x", "--mode", "magic")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr


@pytest.mark.parametrize("args, message", [
    (["--project", "../escape", "status"], "invalid project name"),
    (["--store", "neo4j", "status"], "cannot reach Neo4j"),
    (["ingest", "/no/such/folder"], "does not exist"),
])
def test_errors_are_one_line_without_traceback(tmp_path: Path, args: list[str], message: str) -> None:
    out = graphmem("--home", str(tmp_path), *args, env={"NEO4J_URI": "bolt://127.0.0.1:9"})
    assert out.returncode != 0
    assert message in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 2


def test_every_command_is_documented_in_the_readme() -> None:
    from graphmem.cli import cli

    readme = (REPO / "README.md").read_text()
    names = cli.list_commands(click.Context(cli))
    assert {"query", "memory", "context", "sessions", "patterns"} <= set(names)
    for name in names:
        assert f"graphmem {name}" in readme or f"graphmem --store neo4j {name}" in readme, name


def test_the_help_gives_the_readmes_rules_for_home_and_project() -> None:
    out = graphmem("--help")
    assert out.returncode == 0, out.stderr
    text, readme = " ".join(out.stdout.split()), " ".join((REPO / "README.md").read_text().split())
    # --home is searched for upward, as git finds .git; ./.graphmem is only the last resort.
    assert "the nearest .graphmem in the working folder or above it, as git finds .git, else ./.graphmem" in text
    assert "the nearest `.graphmem` in the working folder or above it, as git finds `.git`, else `./.graphmem`" \
        in readme
    rule = ("the project ingested from {} or one above it, else the last one used, else the name of the git "
            "repository you are in")
    assert rule.format("the working folder") in text and rule.format("the folder you are in") in readme
    assert "$GRAPHMEM_PROJECT" in text and "`GRAPHMEM_PROJECT`" in readme


def test_the_readme_gives_the_install_size_bootstrap_announces() -> None:
    said = re.search(r"about (\d+) MB to download", (REPO / "scripts" / "bootstrap").read_text())
    assert said, "scripts/bootstrap no longer announces its download size"
    readme = " ".join((REPO / "README.md").read_text().split())
    install = readme[readme.index("`scripts/bootstrap` (which `scripts/demo` runs) installs graphmem"):][:400]
    assert f"about {said[1]} MB to download" in install, install
    assert "about 1 GB" in install and "0.8 GB" not in install  # a fresh .venv measured 964 MB


def test_the_readmes_cypher_commands_name_the_neo4j_store() -> None:
    # `graphmem cypher` refuses the default (embedded) store: a command copied from the README must run.
    lines = [line.strip() for line in (REPO / "README.md").read_text().splitlines()]
    commands = [line for line in lines if line.startswith("graphmem ") and " cypher " in f"{line} "]
    assert len(commands) >= 5
    assert not [line for line in commands if "--store neo4j" not in line]


def test_the_readmes_mcp_tables_name_each_tools_arguments(tmp_path: Path) -> None:
    import asyncio

    from mcp import Client

    from graphmem.config import Settings
    from graphmem.mcp_server import Service, build_server

    async def schemas() -> dict[str, dict]:
        service = Service(Settings(store="embedded", home=tmp_path / "home"), "demo")
        async with Client(build_server(service)) as client:
            return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    rows = {}
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith("| `"):
            for name in line.split("|")[1].replace("`", " ").replace("/", " ").split():
                rows.setdefault(name, line)
    tools = asyncio.run(schemas())
    own = {"search", "explain", "get_node", "neighbors", "cypher", "ingest", "status"}  # mcp_server.py's
    assert own <= set(tools)
    for name, schema in tools.items():
        assert name in rows, f"the README's MCP tables leave out {name}"
        cells = rows[name].split("|")
        named = set(re.findall(r"`([a-z_]+)`", "|".join(cells[2:])))
        bold = set(re.findall(r"\*\*`([a-z_]+)`\*\*", "|".join(cells[2:])))
        required = set(schema.get("required", []))
        assert required <= bold, (name, required - bold)  # required arguments, marked as such
        if name in own:  # one row each, with every argument
            assert set(schema.get("properties", {})) <= named, (name, set(schema["properties"]) - named)
            assert bold == required, (name, bold ^ required)


def test_the_readmes_layout_lists_every_script_and_the_notebooks() -> None:
    readme = (REPO / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    scripts = next(line for line in layout.splitlines() if line.startswith("| `scripts/` |"))
    for path in sorted((REPO / "scripts").iterdir()):
        assert f"`{path.name}{'/' if path.is_dir() else ''}`" in scripts, path.name
    if (REPO / "notebooks").is_dir():
        assert "\n| `notebooks/` |" in layout


def test_reading_a_project_that_was_never_ingested_is_an_error(tmp_path: Path, example_org: tuple) -> None:
    home = tmp_path / "home"
    for args in (("query", "Which commit caused INC-042?"), ("status",), ("doctor",)):
        out = graphmem("--home", str(home), *args, cwd=tmp_path)
        assert out.returncode == 1 and "nothing has been ingested there" in out.stderr, out.stderr
    assert graphmem("--home", str(home), "ingest", str(example_org[0])).returncode == 0
    out = graphmem("--home", str(home), "--project", "acne", "query", "billing", cwd=tmp_path)
    assert out.returncode == 1 and "projects there: acme" in out.stderr
    out = graphmem("--home", str(home), "status", "--project", "acne", cwd=tmp_path)
    assert out.returncode == 1 and "'acne'" in out.stderr
    assert not (home / "acne").exists()  # reading never creates an empty project


def test_commands_find_the_home_and_project_from_any_folder_inside_the_repository(
        tmp_path: Path, example_org: tuple) -> None:
    import shutil

    work = tmp_path / "work"
    repo = work / "acme"
    shutil.copytree(example_org[0], repo, symlinks=True)
    other = work / "other"
    other.mkdir()
    (other / "tool.py").write_text("def other_tool():\n    return 1\n")
    env = {"GRAPHMEM_HOME": "", "GRAPHMEM_PROJECT": ""}
    # ingest from the workspace root: the home is ./.graphmem there; the last project is "other"
    assert graphmem("ingest", "acme", cwd=work, env=env).returncode == 0
    assert graphmem("ingest", "other", cwd=work, env=env).returncode == 0
    inside = repo / "services" / "billing"
    out = graphmem("query", "Which commit caused INC-042?", "--json", cwd=inside, env=env)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["results"][0]["key"] in example_org[1]["incidents"]["incident:INC-042"]["caused_by"]
    status = json.loads(graphmem("status", "--json", cwd=inside, env=env).stdout)
    assert status["project"] == "acme"
    assert json.loads(graphmem("status", "--json", cwd=other, env=env).stdout)["project"] == "other"


def test_a_split_is_for_the_named_datasets_only(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "1", "question": "what parses dates?", "gold": ["sym:a"]}) + "\n")
    out = graphmem("--home", str(tmp_path / "home"), "eval", "run", "--dataset", str(questions), "--split", "test")
    assert out.returncode != 0 and "--split is for the named datasets" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1  # one line, no traceback


# --- first hour: evaluations and the last project used --------------------------------------------

# A MuSiQue-shaped set of three passages and two questions, laid out as `eval run --data` expects.
TINY_MUSIQUE = {
    "corpus": [
        {"title": "Harbour Museum", "text": "The Harbour Museum was founded by the shipwright Ada Lind in 1901."},
        {"title": "Ada Lind", "text": "Ada Lind was born in the fishing town of Kessel and built schooners."},
        {"title": "Kessel", "text": "Kessel is a fishing town on the northern coast, known for its lighthouse."},
    ],
    "questions": [
        {"id": "2hop__1_2", "question": "Where was the founder of the Harbour Museum born?",
         "paragraphs": [{"title": "Harbour Museum", "is_supporting": True},
                        {"title": "Ada Lind", "is_supporting": True}],
         "question_decomposition": [{}, {}]},
        {"id": "2hop__3_4", "question": "What is the birthplace of the shipwright Ada Lind known for?",
         "paragraphs": [{"title": "Ada Lind", "is_supporting": True}, {"title": "Kessel", "is_supporting": True}],
         "question_decomposition": [{}, {}]},
    ],
}


@pytest.fixture(scope="module")
def tiny_datasets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A datasets folder holding a tiny MuSiQue sample in the public sample's layout."""
    root = tmp_path_factory.mktemp("datasets")
    folder = root / "musique_train_sample"
    folder.mkdir()
    texts = {p["title"]: p["text"] for p in TINY_MUSIQUE["corpus"]}
    (folder / "musique_train_corpus.json").write_text(json.dumps(TINY_MUSIQUE["corpus"]))
    questions = [{**q, "paragraphs": [{**para, "paragraph_text": texts[para["title"]]} for para in q["paragraphs"]]}
                 for q in TINY_MUSIQUE["questions"]]
    (folder / "musique_train.json").write_text(json.dumps(questions))
    return root


def test_an_evaluation_leaves_the_last_project_alone_and_a_fallback_is_named(
        tmp_path: Path, template_home: Path, tiny_datasets: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(template_home, home)
    (home / "last-project").write_text("acme\n")  # as `graphmem ingest` of the example leaves it
    out = graphmem("--home", str(home), "eval", "run", "--dataset", "musique", "--data", str(tiny_datasets),
                   "--graph", "none", "--modes", "bm25", "--no-baselines", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "musique: 2 questions" in out.stdout and (home / "musique-none" / "graph.sqlite").is_file()
    assert (home / "last-project").read_text() == "acme\n"
    assert not (home / "projects.json").exists()

    # From a folder no project was ingested from, the last project used answers: the reader is told.
    notice = "project: acme (the last one used"
    asked = graphmem("--home", str(home), "query", "Which commit caused INC-042?", "--mode", "bm25", "-k", "2",
                     cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    assert asked.stderr.splitlines()[0].startswith(notice) and " 1. " in asked.stdout
    listed = graphmem("--home", str(home), "memory", "list", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stderr.splitlines()[0].startswith(notice), listed.stderr
    as_json = graphmem("--home", str(home), "query", "INC-042", "--mode", "bm25", "-k", "1", "--json", cwd=tmp_path)
    assert set(json.loads(as_json.stdout)) == set(json.loads(graphmem(
        "--home", str(home), "--project", "acme", "query", "INC-042", "--mode", "bm25", "-k", "1", "--json",
        cwd=tmp_path).stdout))  # the JSON answer keeps its shape
    named = graphmem("--home", str(home), "--project", "acme", "query", "INC-042", "--mode", "bm25", "-k", "1",
                     cwd=tmp_path)
    assert named.returncode == 0 and "the last one used" not in named.stderr


def test_eval_run_on_a_project_never_ingested_says_so_and_creates_nothing(tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "Who owns billing?", "gold": ["team:payments"]}) + "\n")
    home = tmp_path / "home"
    out = graphmem("--home", str(home), "eval", "run", "--dataset", str(questions), "--project", "acme",
                   "--modes", "bm25", cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "project 'acme' holds nothing" in out.stderr and "graphmem ingest PATH" in out.stderr, out.stderr
    assert not (home / "acme").exists()


def test_eval_run_says_where_the_datasets_go_and_reports_progress(tmp_path: Path, tiny_datasets: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, env in (([ "--data", str(empty)], {}), ([], {"GRAPHMEM_DATASETS": str(empty)})):
        out = graphmem("--home", str(tmp_path / "home"), "eval", "run", "--dataset", "musique", *args, env=env)
        assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        for needle in (str(empty), "musique_train_sample/musique_train_corpus.json",
                       "musique_train_sample/musique_train.json", "--data DIR", "GRAPHMEM_DATASETS"):
            assert needle in out.stderr, (needle, out.stderr)

    out = graphmem("--home", str(tmp_path / "home"), "eval", "run", "--dataset", "musique", "--graph", "none",
                   "--modes", "bm25", "--json", env={"GRAPHMEM_DATASETS": str(tiny_datasets)}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["questions"] == 2  # stdout is the summary alone
    assert "graphmem: importing musique: 3 passages into project musique-none" in out.stderr
    for mode in ("bm25", "plain-bm25"):  # each mode's progress ends with its last question
        assert f"graphmem: eval {mode} 2/2" in out.stderr, out.stderr

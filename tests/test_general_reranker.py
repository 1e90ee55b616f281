"""The machine's general reranker: training groups read from installed code, a tiny real training run,
and ``load_reranker`` falling back to it for a project without its own model.

Uses the real packaged MiniLM weights; the source packages are written into a temporary folder so the
test reads a known, small tree instead of the whole standard library.
"""

from __future__ import annotations

import ast
import math
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from graphmem.retrieval import general_reranker
from graphmem.retrieval.config import RerankConfig
from graphmem.retrieval.general_reranker import (
    GENERAL_NAME,
    build_general_reranker,
    general_reranker_dir,
    harvest,
    strip_docstrings,
)
from graphmem.retrieval.rerank import META_FILE, CrossEncoderReranker, load_reranker

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

LEDGER = '''
"""Ledger helpers."""


def post_entry(ledger, entry):
    """Book one entry in the ledger and return its identifier."""
    ledger.append(entry)
    return len(ledger) - 1


def void_entry(ledger, index):
    """Mark an entry of the ledger as void without removing it."""
    ledger[index] = None
    return index


def balance(ledger):
    """Sum the amounts of every entry that is not void."""
    return sum(e["amount"] for e in ledger if e is not None)


class Account:
    """An account holding entries in a ledger of its own."""

    def __init__(self):
        self.ledger = []

    def deposit(self, amount):
        """Add a positive amount to the account as a new entry."""
        return post_entry(self.ledger, {"amount": amount})

    def only_doc(self):
        """Return nothing at all, this body is only a docstring."""
'''

NETWORK = f'''
def fetch_page(url, retries=3):
    """Download a web page and retry on connection errors."""
    token = "{SECRET}"
    for attempt in range(retries):
        try:
            return open_url(url, token)
        except ConnectionError:
            continue


def parse_header(line):
    """Split one HTTP header line into its name and value."""
    name, _, value = line.partition(":")
    return name.strip().lower(), value.strip()


def open_url(url, token):
    """Open a connection to a server and read the whole response body."""
    return url + token


def quote_path(path):
    """Escape the characters of a URL path that a server would misread."""
    return path.replace(" ", "%20").replace("#", "%23")


def cookie_jar(headers):
    """Collect the cookies a server set in its response headers."""
    return [value for name, value in headers if name == "set-cookie"]
'''


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    for package, source in (("ledgerlib", LEDGER), ("netlib", NETWORK), ("attr", LEDGER)):
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
        (root / package / "core.py").write_text(textwrap.dedent(source))
    (root / "netlib" / "tests").mkdir()
    test_file = root / "netlib" / "tests" / "test_core.py"
    test_file.write_text('def test_x():\n    """Check that x works well enough."""\n')
    (root / "netlib" / "broken.py").write_bytes(b"def f(:\n  \xff\xfe")
    return root


@pytest.fixture(scope="module")
def groups(tree: Path) -> list[Any]:
    return harvest([tree], seed=0, keep_docs=0.0)


def test_strip_docstrings_keeps_code_valid_and_maps_qualnames() -> None:
    stripped, docs = strip_docstrings(textwrap.dedent(LEDGER))
    ast.parse(stripped)  # a body that was only a docstring became `pass`
    assert "Book one entry" not in stripped and "Ledger helpers." in stripped  # the module docstring stays
    assert docs["Account.deposit"] == ("Add a positive amount to the account as a new entry.", "function")
    assert docs["Account"][1] == "class"
    assert "def only_doc(self):\n        pass" in stripped


def test_harvest_reads_docstrings_into_questions_over_code_without_them(groups: list[Any]) -> None:
    assert {g.package for g in groups} == {"ledgerlib", "netlib"}  # attr is an evaluation package; tests skipped
    assert len(groups) >= 8
    for g in groups:
        assert len(g.negatives) == 3 and g.positive not in g.negatives
        assert all(p.split("/", 1)[0] == g.package for p in (g.positive, *g.negatives))
        for text in (g.positive, *g.negatives):
            assert text.split("\n", 1)[0].endswith(", python)")  # ingest's symbol passage header
            assert '"""' not in text
        assert SECRET not in g.positive + "".join(g.negatives)
    deposit = next(g for g in groups if "::Account.deposit (method" in g.positive)
    assert "positive amount" in deposit.query and "positive amount" not in deposit.positive
    assert not any("test_core" in g.positive for g in groups)


def test_harvest_is_deterministic(tree: Path, groups: list[Any]) -> None:
    assert harvest([tree], seed=0, keep_docs=0.0) == groups
    assert harvest([tree], seed=3) == harvest([tree], seed=3)


def test_harvest_keeps_docstrings_in_the_share_of_files_asked() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(40):  # one package, forty one-symbol files: the share is a share of files
            (root / "ledgerlib").mkdir(exist_ok=True)
            (root / "ledgerlib" / f"m{i}.py").write_text(textwrap.dedent(f'''
                def post_entry_{i}(ledger, entry):
                    """Book entry number {i} in the ledger and return its position in the list."""
                    ledger.append(entry)
                    return len(ledger) - 1
                '''))
        kept = [g for g in harvest([root], seed=0, keep_docs=1.0)]
        assert kept and all('"""Book entry number' in g.positive for g in kept)
        mixed = harvest([root], seed=0, keep_docs=0.5)
        with_docs = sum('"""' in g.positive for g in mixed)
        assert 0 < with_docs < len(mixed)  # some files as written, some stripped


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, groups: list[Any]) -> dict[str, Any]:
    cache = tmp_path_factory.mktemp("models")
    meta = build_general_reranker(general_reranker_dir(cache), groups=groups, time_budget=60, batch_size=2,
                                  threads=2)
    return {"cache": cache, "meta": meta}


def test_build_trains_and_saves_the_model_atomically(built: dict[str, Any], groups: list[Any]) -> None:
    meta, out = built["meta"], Path(built["meta"]["out_dir"])
    assert out.name == GENERAL_NAME and (out / META_FILE).is_file() and (out / "config.json").is_file()
    assert meta["groups"] == len(groups) and meta["steps"] == len(groups) // 2
    assert math.isfinite(meta["first_loss"]) and math.isfinite(meta["last_loss"])
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_too_few_groups_is_a_clear_error(tmp_path: Path, groups: list[Any]) -> None:
    from graphmem.errors import ModelError

    with pytest.raises(ModelError, match="too few"):
        build_general_reranker(tmp_path / "m", groups=groups[:1], batch_size=2)
    assert not (tmp_path / "m").exists()


def test_load_reranker_falls_back_to_the_general_model(built: dict[str, Any], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHMEM_RERANKER", raising=False)
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(general_reranker, "SHIPPED_ADAPTER", tmp_path / "absent.npz")
    assert load_reranker(tmp_path, "acme") is None
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(built["cache"]))
    rr = load_reranker(tmp_path, "acme")
    assert isinstance(rr, CrossEncoderReranker) and rr.path == Path(built["meta"]["out_dir"]).resolve()
    cfg = RerankConfig()
    assert rr.prior_weight == cfg.general_prior_weight
    # Reorders only the answer kinds the configuration names.
    assert rr.helps_for([]) == ("any" in cfg.general_answer_kinds)
    assert rr.helps_for(["commit"]) == ("commit" in cfg.general_answer_kinds)
    texts = ["def post_entry(ledger, entry):\n    ledger.append(entry)", "def parse_header(line): ...", "x"]
    logits, scores = rr.logits("which function books an entry", texts), rr.score("which function books an entry", texts)
    assert all(math.isfinite(x) for x in logits)
    for i, (lg, sc) in enumerate(zip(logits, scores)):
        assert sc == pytest.approx(lg - cfg.general_prior_weight * math.log2(1 + i), abs=1e-5)
    # A recipe's RerankConfig (what `eval run --config` sweeps) overrides the weight and the kinds.
    swept = RerankConfig(general_prior_weight=4.0, general_answer_kinds=("commit",))
    for i, (lg, sc) in enumerate(zip(logits, rr.score("which function books an entry", texts, swept))):
        assert sc == pytest.approx(lg - 4.0 * math.log2(1 + i), abs=1e-5)
    assert rr.helps_for(["commit"], swept) and not rr.helps_for([], swept)
    # A question that asks for a relationship keeps its fused order unless the recipe allows it.
    assert rr.helps_for([]) and not rr.helps_for([], relational=True)
    assert rr.helps_for([], RerankConfig(general_relational=True), relational=True)
    # ... and so does a question ranked over the passage entity layer (prose, not code).
    assert not rr.helps_for([], passages=True)
    assert rr.helps_for([], RerankConfig(general_passages=True), passages=True)
    # ... but not those of a model that is not the general one (its own evaluation decides).
    own = CrossEncoderReranker(rr.path, prior_weight=0.5)
    assert own.score("which function books an entry", texts, swept)[1] == pytest.approx(
        own.logits("which function books an entry", texts)[1] - 0.5, abs=1e-5)


def test_status_reports_the_build_and_a_process_picks_up_the_model_once_built(
        built: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    from graphmem import api
    from graphmem.api import Graphmem

    monkeypatch.delenv("GRAPHMEM_RERANKER", raising=False)
    monkeypatch.setattr(general_reranker, "SHIPPED_ADAPTER", tmp_path / "absent.npz")  # a build of its own only
    empty = tmp_path / "models"
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(empty))
    with Graphmem.open("acme", home=tmp_path / "home") as gm:
        assert gm.status()["reranker"] == {"source": None, "building": False}
        assert gm.reranker is None
        # scripts/build-reranker holds this lock while it builds.
        empty.mkdir()
        with open(empty / f".{GENERAL_NAME}.lock", "wb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            assert gm.status()["reranker"] == {"source": None, "building": True}
        assert gm.status()["reranker"]["building"] is False
        retriever = gm.retriever
        assert retriever.reranker is None
        # The build finishes while the process runs: the next look, once the interval has passed, finds it.
        monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(built["cache"]))
        assert gm.reranker is None  # looked less than the interval ago
        monkeypatch.setattr(api, "RERANKER_RECHECK_SECONDS", 0.0)
        assert gm.retriever is retriever and isinstance(retriever.reranker, CrossEncoderReranker)
        assert gm.status()["reranker"] == {"source": "general", "path": str(general_reranker_dir(built["cache"]))}


SKIPPED = "results are in fused order"  # the note of a question the reranker leaves in fused order


def _journal(tmp_path: Path) -> Path:
    """A small ledger package: two functions and a class with a method, each documented."""
    corpus = tmp_path / "ledger"
    corpus.mkdir()
    (corpus / "entries.py").write_text(textwrap.dedent('''
        def post_entry(ledger, entry):
            """Book one entry into the ledger."""
            ledger.append(entry)

        def close_period(ledger):
            """Sum the entries of a period and start a new one."""
            post_entry(ledger, sum(ledger))
            return []

        class Journal:
            """Entries in the order they came."""

            def reverse_entry(self, entry):
                """Book the opposite of an entry."""
                return -entry
    '''), encoding="utf-8")
    return corpus


def test_the_engine_applies_the_general_rerankers_gates(built: dict[str, Any], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from graphmem.api import Graphmem

    monkeypatch.delenv("GRAPHMEM_RERANKER", raising=False)
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(built["cache"]))
    corpus = _journal(tmp_path)
    with Graphmem.open("ledger", home=tmp_path / "home") as gm:
        gm.ingest(corpus, llm=False)
        # A question asking for a relationship keeps the fused order: the order of plain `hybrid`.
        asked = gm.query("Which functions call post_entry?", mode="hybrid-rerank")
        assert any(SKIPPED in n for n in asked.notes)
        assert asked.keys == gm.query("Which functions call post_entry?", mode="hybrid").keys
        reranker = gm.retriever.reranker
        assert reranker is not None and not reranker.backend  # never loaded for a question it does not reorder
        described = gm.query("Where is the code that books an entry into the ledger?", mode="hybrid-rerank")
        assert described.results and not any(SKIPPED in n for n in described.notes)
        assert reranker.backend  # loaded beside the search, then used
        # The type holding a method the question names is the answer: the text alone cannot say so.
        holder = gm.query("Which class has the `reverse_entry` method?", mode="hybrid-rerank", k=3)
        assert any(SKIPPED in n for n in holder.notes)
        assert holder.keys[:2] == ["sym:entries.py::Journal", "sym:entries.py::Journal.reverse_entry"], holder.keys


def test_the_general_reranker_reads_code_ranked_over_the_entity_layer_but_not_prose(
        built: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphmem.api import Graphmem
    from graphmem.model import NodeKind, kind_of
    from graphmem.retrieval.config import preset

    monkeypatch.delenv("GRAPHMEM_RERANKER", raising=False)
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(built["cache"]))
    corpus = _journal(tmp_path)
    # The documentation names technologies: their entities make an entity layer over the project.
    (corpus / "README.md").write_text("# Ledger\n\nThe ledger keeps its entries in PostgreSQL and publishes each "
                                      "closed period to Kafka.\n", encoding="utf-8")
    code = "Where is the code that books an entry into the ledger?"
    with Graphmem.open("ledger", home=tmp_path / "home") as gm:
        gm.ingest(corpus, llm=False)
        cands = gm.retriever.candidates(code, preset("hybrid-rerank"))
        assert cands.graph is not None and cands.graph.layer  # ranked over the entity layer ...
        described = gm.query(code, mode="hybrid-rerank")
        # ... but what it ranks is code, which the general model reads.
        assert sum(kind_of(k) == NodeKind.SYMBOL for k in described.keys) > len(described.keys) / 2
        assert not any(SKIPPED in n for n in described.notes), described.notes
    docs = corpus / "docs"
    docs.mkdir()
    for name, text in (("retention", "Closed periods are kept for ten years, then archived."),
                       ("publishing", "Each closed period is published to Kafka for the reporting service."),
                       ("storage", "Entries are stored in PostgreSQL, one row per entry, never updated in place."),
                       ("auditing", "Auditors read the ledger through a read-only replica of PostgreSQL."),
                       ("currencies", "Every entry carries its currency; periods are summed per currency."),
                       ("access", "Only the ledger service writes entries; others read the published periods."),
                       ("reversals", "A reversal books the opposite of an entry: the ledger never deletes one."),
                       ("closing", "A period closes on the last day of the month.")):
        (docs / f"{name}.md").write_text(f"# {name.title()}\n\n{text}\n", encoding="utf-8")
    prose = "How long are closed periods kept, and where are they published?"
    with Graphmem.open("ledger", home=tmp_path / "home") as gm:
        gm.ingest(corpus, llm=False)
        ranked = gm.query(prose, mode="hybrid-rerank")
        # Mostly the documentation's passages: prose, which the model did not learn from.
        assert sum(kind_of(k) == NodeKind.DOCUMENT for k in ranked.keys) > len(ranked.keys) / 2, ranked.keys
        assert any(SKIPPED in n for n in ranked.notes) and ranked.keys == gm.query(prose, mode="hybrid").keys
        # A recipe that calls a head prose only when all of it is lets the model reorder this one.
        allowed = preset("hybrid-rerank").with_overrides({"rerank": {"general_prose_share": 1.0}}, name="allowed")
        assert not any(SKIPPED in n for n in gm.query(prose, mode=allowed).notes)


def test_the_model_loads_once_whichever_thread_asks_first(built: dict[str, Any]) -> None:
    """The engine starts the load beside a first question's search while the answer may need it at
    once: both threads get the same loaded session, made once."""
    import threading

    rr = CrossEncoderReranker(general_reranker_dir(built["cache"]))
    loads: list[int] = []
    real = rr._load

    def counted() -> None:
        loads.append(1)
        real()

    rr._load = counted  # type: ignore[method-assign]
    threads = [threading.Thread(target=rr.prepare) for _ in range(4)]
    for t in threads:
        t.start()
    scores = rr.logits("books an entry", ["def post_entry(ledger, entry): ledger.append(entry)"])
    for t in threads:
        t.join()
    assert loads == [1] and rr.backend and len(scores) == 1


def test_build_general_command_checks_its_base_model_and_frozen_layers(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from graphmem.cli import cli

    missing = tmp_path / "no-such-model"
    out = CliRunner().invoke(cli, ["reranker", "build-general", "--base-model", str(missing)])
    assert out.exit_code == 2 and "--base-model" in out.output and "does not exist" in out.output
    out = CliRunner().invoke(cli, ["reranker", "build-general", "--frozen-layers", "-1"])
    assert out.exit_code == 2 and "--frozen-layers" in out.output
    assert not missing.exists()

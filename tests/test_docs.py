"""Documentation in the graph (``extractors/docs.py``): the parser of each format, malformed input,
chunks per section, mentions, conventions, incremental ingest, dating and redaction, and the
example organisation's questions that only its documentation answers."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from extractors.docs import (
    CHUNK_KIND,
    CONVENTION_CHUNK_KIND,
    MAX_DOC_CHARS,
    DocContext,
    classify,
    conventions,
    extract_document,
    parse_asciidoc_doc,
    parse_markdown_doc,
    parse_rst_doc,
    parse_text_doc,
    section_topic,
)
from extractors.text import MAX_CHUNK_CHARS, Vocabulary
from graphmem.api import Graphmem
from graphmem.config import Settings
from graphmem.ingest import ingest
from graphmem.model import NodeKind, RelType

FIXTURES = Path(__file__).parent / "fixtures" / "docs"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def outline(doc: Any) -> list[tuple[tuple[str, ...], int, int]]:
    return [(s.heading, s.start_line, s.end_line) for s in doc.sections]


# --- parsers ------------------------------------------------------------------------------------


def test_markdown_atx_and_setext_headings_but_not_code_quotes_or_lists() -> None:
    doc = parse_markdown_doc(fixture("guide.md"))
    assert doc.meta["title"] == "Payments guide" and doc.meta["tags"] == ["payments", "onboarding"]
    assert doc.title is None  # two top-level headings: none of them is the document's title
    assert outline(doc) == [
        ((), 6, 6),
        (("Setting up",), 11, 11),
        (("Running the billing service",), 15, 24),
        (("Running the billing service", "Configuration"), 28, 28),
        (("Troubleshooting",), 33, 33),
    ]
    running = doc.sections[2].text
    assert "# this comment is code, not a heading" in running and "> # a quoted heading" in running
    assert not doc.warnings


def test_markdown_title_toml_front_matter_and_unclosed_fence() -> None:
    text = "+++\ntitle = \"Hugo page\"\n+++\n# Page\n\nIntro.\n\n## Part\n\n```\n# in code\n## still code\n"
    doc = parse_markdown_doc(text)
    assert doc.meta == {"title": "Hugo page"} and doc.title == "Page"
    assert [s.heading for s in doc.sections] == [(), ("Part",)]
    assert "## still code" in doc.sections[1].text
    assert doc.warnings == ["code fence opened at line 10 is never closed: the rest of the file is read as code"]
    broken = parse_markdown_doc("---\ntitle: [unclosed\n---\n# T\n\nx\n")
    assert broken.title == "T" and broken.warnings and "not valid YAML" in broken.warnings[0]


def test_rst_titles_of_any_adornment_with_directives_kept_as_text() -> None:
    doc = parse_rst_doc(fixture("guide.rst"))
    assert doc.title == "Ledger manual" and doc.meta == {"author": "Bo Chen", "status": "draft"}
    assert [s.heading for s in doc.sections] == [
        (), ("Installing",), ("Installing", "From source"), ("Operating",), ("Operating", "Restarting")]
    installing = doc.sections[1]
    assert ".. code-block:: python" in installing.text and "Not a title" in installing.text
    restarting = doc.sections[-1]
    assert "A transition line above is not a heading." in restarting.text
    # Levels follow the order styles first appear in, whatever the characters.
    other = parse_rst_doc("Top\n###\n\nA\n\nSub\n***\n\nB\n\nNext\n####\n\nC\n")
    assert [s.heading for s in other.sections] == [("Top",), ("Top", "Sub"), ("Next",)]


def test_asciidoc_titles_outside_delimited_blocks() -> None:
    doc = parse_asciidoc_doc(fixture("guide.adoc"))
    assert doc.title == "Gateway handbook" and doc.meta["author"] == "Carla Diaz"
    assert [s.heading for s in doc.sections] == [(), ("Routing",), ("Routing", "Rate limits"), ("Deploying",)]
    assert "== this is inside a listing block" in doc.sections[1].text
    unclosed = parse_asciidoc_doc("= T\n\n== A\n\n----\n== B\n")
    assert [s.heading for s in unclosed.sections] == [("A",)] and "never closed" in unclosed.warnings[0]


def test_plain_text_is_one_document_split_at_paragraphs() -> None:
    doc = parse_text_doc(fixture("notes.txt"))
    assert doc.title == "Release checklist" and outline(doc) == [((), 1, 6)]
    long = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(12))
    ex = extract_document("docs/notes.txt", long)
    assert len(ex.chunks) > 3 and all(len(c.text) <= MAX_CHUNK_CHARS for c in ex.chunks)
    starts = [c.start_line for c in ex.chunks]
    # The first line is too long to be a title: the file name is.
    assert starts == sorted(starts) and all(c.text.startswith("notes\n\nParagraph ") for c in ex.chunks)


# --- which files ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "doc_type", "fmt"), [
    ("README.md", "readme", "markdown"),
    ("services/billing/README", "readme", "text"),
    ("docs/guide/install.rst", "guide", "rst"),
    ("docs/runbooks/ledger.adoc", "runbook", "asciidoc"),
    ("CHANGELOG.md", "changelog", "markdown"),
    ("doc/changes/1.3.rst", "changelog", "rst"),
    ("CONTRIBUTING.rst", "contributing", "rst"),
    ("CONVENTIONS.md", "convention", "markdown"),
    ("docs/STYLE_GUIDE.md", "convention", "markdown"),
    ("meetings/2025-03-02.md", "notes", "markdown"),
    ("notes.txt", "notes", "text"),
    (".editorconfig", "convention", "editorconfig"),
    (".eslintrc.json", "convention", "json"),
    ("pyproject.toml", "convention", "toml"),
    ("setup.cfg", "convention", "ini"),
    (".golangci.yml", "convention", "yaml"),
    ("checkstyle.xml", "convention", "xml"),
])
def test_documents_are_recognised_with_their_type(path: str, doc_type: str, fmt: str) -> None:
    spec = classify(path)
    assert spec is not None and (spec.doc_type, spec.format) == (doc_type, fmt)


@pytest.mark.parametrize("path", [
    "docs/adr/0005-use-kafka.md", "docs/incidents/INC-042.md", "LICENSE.txt", "LICENSE", "requirements-dev.txt",
    "src/app.py", "Makefile", "pkg.egg-info/SOURCES.txt", "package.json",
])
def test_records_licences_and_machine_files_are_not_documents(path: str) -> None:
    assert classify(path) is None


# --- malformed input ------------------------------------------------------------------------------


def test_binary_junk_and_empty_files_are_skipped_with_a_reason() -> None:
    junk = extract_document("docs/blob.md", bytes(range(256)) * 40)
    assert not junk.nodes and "binary content" in junk.skipped[0].reason
    late_nul = extract_document("docs/x.md", b"# Title\n\n" + b"text " * 4000 + b"\x00\x01")
    assert not late_nul.nodes and "NUL" in late_nul.skipped[0].reason
    assert extract_document("README.md", b"  \n\n").skipped[0].reason == "empty document"
    assert extract_document("README.md", b"# Only\n\n## Headings\n").skipped[0].reason == "no text besides headings"


def test_a_broken_encoding_is_read_as_windows_1252_and_noted() -> None:
    menu = "# Caf\u00e9 menu\n\nCr\u00e8me br\u00fbl\u00e9e \u2013 5\u20ac\n"
    ex = extract_document("docs/caf\u00e9.md", menu.encode("cp1252"))
    node = ex.nodes[0]
    assert node.name == "Caf\u00e9 menu" and "Cr\u00e8me br\u00fbl\u00e9e \u2013 5\u20ac" in ex.chunks[0].text
    assert "not UTF-8" in node.props["warnings"][0] and ex.skipped[0].reason.startswith("read in part")
    utf16 = extract_document("README.txt", "Readme\n\nHello.\n".encode("utf-16"))
    assert utf16.nodes[0].name == "Readme"


def test_a_huge_document_is_read_in_part() -> None:
    para = "A line of a very long generated reference document.\n\n"
    text = "# Reference\n\n" + para * ((MAX_DOC_CHARS * 11) // len(para))  # about 11 MB
    ex = extract_document("docs/reference.md", text.encode())
    node = ex.nodes[0]
    assert any("read the first" in w for w in node.props["warnings"])
    assert any("chunks are indexed" in w for w in node.props["warnings"])
    assert 0 < len(ex.chunks) <= 400


# --- chunks ---------------------------------------------------------------------------------------


def test_one_chunk_per_section_headed_by_its_heading_path() -> None:
    ex = extract_document("docs/guide.md", fixture("guide.md"))
    node = ex.nodes[0]
    assert node.key == "doc:docs/guide.md" and node.name == "Payments guide"
    assert node.props["format"] == "markdown" and node.props["doc_type"] == "guide"
    assert node.props["headings"] == ["Setting up", "Running the billing service",
                                      "Running the billing service › Configuration", "Troubleshooting"]
    heads = [c.text.split("\n", 1)[0] for c in ex.chunks]
    assert heads[0] == "Payments guide"
    assert "Payments guide › Running the billing service" in heads
    assert all(c.kind == CHUNK_KIND and c.start_line and c.end_line >= c.start_line for c in ex.chunks)


def test_long_sections_split_under_the_cap_and_tiny_ones_merge() -> None:
    long = "\n\n".join(f"Step {i}. " + "Do the thing carefully. " * 12 for i in range(10))
    text = f"# Runbook\n\n## Intro\n\nShort.\n\n### Restart\n\n{long}\n\n## Owner\n\nteam x\n"
    ex = extract_document("docs/runbook.md", text)
    restart = [c for c in ex.chunks if "Runbook › Intro › Restart" in c.text.split("\n", 1)[0]]
    assert len(restart) > 1 and all(len(c.text) <= MAX_CHUNK_CHARS for c in ex.chunks)
    assert "Short." in restart[0].text  # a tiny parent joins its first subsection
    lines = text.split("\n")
    assert restart[0].start_line == 5 and all(lines[c.start_line - 1] in c.text for c in restart)
    assert lines[restart[-1].end_line - 1] == "team x"
    assert "Owner\nteam x" in ex.chunks[-1].text  # a tiny last section joins the chunk before it


# --- mentions -------------------------------------------------------------------------------------


def test_mentions_of_services_symbols_files_records_tickets_and_people() -> None:
    vocab = Vocabulary.from_symbol_keys(["billing", "ledger"], ["sym:services/billing/api.py::InvoiceHandler.post"],
                                        ["payments"])
    files = ["services/billing/api.py", "services/billing/README.md", "docs/runbooks/billing.md",
             "docs/adr/0002-use-postgresql.md", "docs/incidents/INC-042.md"]
    known = {"adr:2", "incident:INC-042", "ticket:PAY-31", "person:ana@acme.dev", "team:payments"}
    context = DocContext.build(vocab, files, code_files=["services/billing/api.py"], known=known)
    text = ("# Billing\n\nThe billing service calls the ledger. `InvoiceHandler.post` lives in `api.py`;\n"
            "see [the runbook](../../docs/runbooks/billing.md), ADR-2, INC-042, PAY-31 and SEV-2.\n"
            "Ask @ana or @acme/payments (bo@elsewhere.dev). Stored in PostgreSQL.\n")
    ex = extract_document("services/billing/README.md", text, context=context)
    mentioned = {r.dst for r in ex.rels if r.type is RelType.MENTIONS}
    assert mentioned == {
        "service:billing", "service:ledger", "sym:services/billing/api.py::InvoiceHandler.post",
        "file:services/billing/api.py", "doc:docs/runbooks/billing.md", "adr:2", "incident:INC-042",
        "ticket:PAY-31", "person:ana@acme.dev", "team:payments", "entity:technology:postgresql",
    }  # SEV-2 and the unknown address are no nodes of the project
    assert all(r.props["section"] == "Billing" for r in ex.rels)
    assert any(n.key == "entity:technology:postgresql" for n in ex.nodes)


def test_cross_references_between_documents_without_extensions() -> None:
    files = ["doc/usage/configuration.rst", "doc/usage/index.rst", "doc/development/tutorial.rst", "doc/a.adoc"]
    context = DocContext.build(Vocabulary(), files)
    text = ("Usage\n=====\n\nSee :doc:`configuration`, :doc:`the tutorial <../development/tutorial>` and\n"
            "xref:../a.adoc[A]; :doc:`/missing` is no document.\n")
    ex = extract_document("doc/usage/index.rst", text, context=context)
    assert {r.dst for r in ex.rels} == {"doc:doc/usage/configuration.rst", "doc:doc/development/tutorial.rst",
                                        "doc:doc/a.adoc"}


# --- conventions ----------------------------------------------------------------------------------


def test_section_topics_come_from_headings_where_conventions_are_written() -> None:
    assert section_topic(("Logging",), "convention") == "logging"
    assert section_topic(("Dependency injection",), "convention") == "dependency injection"
    assert section_topic(("Commit messages",), "contributing") == "commit messages"
    assert section_topic(("Coding guidelines", "Error handling"), "guide") == "error handling"
    assert section_topic(("Code style",), "readme") == "code style"  # a convention wherever it is named
    assert section_topic(("Testing",), "readme") is None  # usually how to run the tests
    assert section_topic(("Bug fixes", "Documentation"), "changelog") is None


def write(root: Path, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        target = root / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")


CONVENTIONS = """\
# Team conventions

## Logging

Log errors once, where they are handled, with the request id.

## Naming

Functions are snake_case.
"""
PYPROJECT = """\
[project]
name = "shop"

[tool.ruff]
line-length = 100

[tool.ruff.lint]
select = ["E", "F", "B"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def test_conventions_are_listed_from_documents_and_linter_settings(
        tmp_path: Path, embedded_store_factory: Callable[[str], Any]) -> None:
    root = tmp_path / "shop"
    write(root, {
        "CONVENTIONS.md": CONVENTIONS,
        "CONTRIBUTING.md": "# Contributing\n\n## Setup\n\nRun make.\n\n## Commit messages\n\nImperative mood.\n",
        "pyproject.toml": PYPROJECT,
        "setup.cfg": "[metadata]\nname = shop\n\n[flake8]\nmax-line-length = 100\n",
        ".editorconfig": "root = true\n\n[*.py]\nindent_size = 4\n",
        "README.md": "# Shop\n\n## Testing\n\nRun pytest.\n",
    })
    store = embedded_store_factory("shop")
    ingest(root, store, cache_dir=tmp_path / "cache")
    found = [(c.topic, c.path, c.start_line, c.end_line) for c in conventions(store)]
    assert found == [
        ("code style", "pyproject.toml", 4, 5),
        ("code style", "pyproject.toml", 7, 8),
        ("code style", "setup.cfg", 4, 5),
        ("commit messages", "CONTRIBUTING.md", 9, 9),
        ("formatting", ".editorconfig", 3, 4),
        ("logging", "CONVENTIONS.md", 5, 5),
        ("naming", "CONVENTIONS.md", 9, 9),
    ]
    logging = conventions(store, topic="logging")[0]
    assert logging.text == "Log errors once, where they are handled, with the request id."
    assert logging.heading == "Team conventions › Logging" and logging.key == "doc:CONVENTIONS.md"
    doc = store.get_node("doc:CONVENTIONS.md")
    assert doc.props["doc_type"] == "convention" and doc.props["conventions"] == ["logging", "naming"]
    assert {c.kind for c in store.get_chunks(["doc:CONVENTIONS.md"])} == {CONVENTION_CHUNK_KIND}
    ruff = store.get_node("doc:pyproject.toml")
    assert ruff.props["tools"] == ["ruff"] and "[tool.pytest.ini_options]" not in ruff.props["headings"]
    assert store.get_node("doc:README.md").props.get("conventions") is None


# --- the pipeline ---------------------------------------------------------------------------------


def test_changed_and_deleted_documents_close_what_they_no_longer_say(
        tmp_path: Path, embedded_store_factory: Callable[[str], Any]) -> None:
    root = tmp_path / "repo"
    write(root, {
        "billing/api.py": "def charge_card(amount):\n    return amount\n",
        "ledger/store.py": "def append(entry):\n    return entry\n",
        "README.md": "# Repo\n\n## Billing\n\nThe billing code calls `charge_card`.\n",
        "docs/ops.md": "# Ops\n\nRestart the ledger nightly.\n",
    })
    store = embedded_store_factory("repo")
    ingest(root, store, cache_dir=tmp_path / "cache")
    def mentions(key: str) -> set[str]:
        return {r.dst for r in store.get_relationships([key]) if r.src == key and r.type is RelType.MENTIONS}

    assert mentions("doc:README.md") == {"service:billing", "sym:billing/api.py::charge_card"}
    before = {c.text for c in store.get_chunks(["doc:README.md"])}

    write(root, {"README.md": "# Repo\n\n## Ledger\n\nThe ledger appends entries.\n", "docs/ops.md": None})
    report = ingest(root, store, cache_dir=tmp_path / "cache")
    assert report.changed == 1 and report.deleted == 1
    assert mentions("doc:README.md") == {"service:ledger"}
    after = {c.text for c in store.get_chunks(["doc:README.md"])}
    assert after == {"Repo › Ledger\n\nThe ledger appends entries."} and not before & after
    closed = store.get_node("doc:docs/ops.md")
    assert closed is not None and closed.valid_to is not None and not store.get_chunks(["doc:docs/ops.md"])
    assert "doc:docs/ops.md" not in {n.key for n in store.iter_nodes([NodeKind.DOCUMENT])}
    closed_rels = [r for r in store.iter_rels(include_closed=True)
                   if r.src == "doc:README.md" and r.dst == "sym:billing/api.py::charge_card"]
    assert closed_rels and closed_rels[0].valid_to is not None


def git(repo: Path, *args: str, when: str = "2025-01-02T10:00:00+00:00") -> None:
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "Ana", "GIT_AUTHOR_EMAIL": "ana@acme.dev", "GIT_COMMITTER_NAME": "Ana",
           "GIT_COMMITTER_EMAIL": "ana@acme.dev"}
    subprocess.run(["git", "-C", str(repo), "-c", "commit.gpgsign=false", *args], check=True, env=env,
                   capture_output=True)


def test_a_document_holds_from_the_commit_that_added_it_and_secrets_never_reach_the_store(
        tmp_path: Path, embedded_store_factory: Callable[[str], Any]) -> None:
    root = tmp_path / "repo"
    secret = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
    write(root, {"app.py": "x = 1\n",
                 "docs/runbook.md": f"# Runbook\n\n## Deploy\n\nUse the token {secret} to deploy.\n"})
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Add the runbook (see @ana)", when="2025-01-02T10:00:00+00:00")
    store = embedded_store_factory("repo")
    report = ingest(root, store, cache_dir=tmp_path / "cache")
    node = store.get_node("doc:docs/runbook.md")
    assert node.valid_from == "2025-01-02T10:00:00.000000Z"
    text = " ".join(c.text for c in store.get_chunks(["doc:docs/runbook.md"]))
    assert secret not in text and "[REDACTED:github-token]" in text and report.redactions >= 1
    assert secret not in repr(node.props)


# --- the example organisation ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def documented(example_org: tuple[Path, dict], embedder: Any,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Graphmem, dict]]:
    repo, facts = example_org
    gm = Graphmem(Settings(store="embedded", home=tmp_path_factory.mktemp("docs")), "acme", embedder=embedder,
                  reranker=None)
    gm.ingest(repo)
    yield gm, facts
    gm.close()


def test_the_example_documents_are_in_the_graph(documented: tuple[Graphmem, dict]) -> None:
    gm, facts = documented
    documents = facts["docs"]["documents"]
    held = {n.key: n for n in gm.store.iter_nodes([NodeKind.DOCUMENT])}
    assert set(documents) == set(held)
    for key, info in documents.items():
        node = held[key]
        assert (node.name, node.props["doc_type"], node.props["path"]) == \
            (info["title"], info["doc_type"], info["path"])
        assert node.valid_from and node.provenance.extractor == "docs"
        headings = node.props.get("headings", [])
        assert all(any(h == s or h.startswith(s + " ") for h in headings) for s in info["sections"]), key
    listed = {(c.key, c.heading.split(" › ")[-1].split(" (")[0], c.topic) for c in conventions(gm.store)}
    expected = {(key, section, topic) for key, info in documents.items()
                for section, topic in info["conventions"].items()}
    assert listed == expected
    runbook = {r.dst for r in gm.store.get_relationships(["doc:docs/runbooks/notifications.md"])
               if r.type is RelType.MENTIONS}
    assert {"service:notifications", "team:growth", "person:emma@acme.dev", "incident:INC-038"} <= runbook


@pytest.mark.parametrize("mode", ["hybrid", "hybrid-rerank"])
def test_questions_only_the_documentation_answers_find_it_first(documented: tuple[Graphmem, dict],
                                                                mode: str) -> None:
    gm, facts = documented
    for q in facts["docs"]["questions"]:
        answer = gm.query(q["question"], mode=mode, k=5)
        rank = next((i for i, key in enumerate(answer.keys, start=1) if key in q["gold"]), None)
        assert rank is not None and rank <= 2, (q["id"], answer.keys)
        hit = answer.results[rank - 1]
        assert q["section"] in hit.text.split("\n", 1)[0], (q["id"], hit.text[:120])

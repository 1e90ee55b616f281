"""Linking a question to the code it names: when one word is a name and when it is English."""

from __future__ import annotations

import pytest

from graphmem.model import Node, Provenance
from graphmem.retrieval.config import LinkConfig
from graphmem.retrieval.graph.catalog import Catalog
from graphmem.retrieval.graph.linking import link
from graphmem.retrieval.question import parse_question
from graphmem.stores.embedded import EmbeddedStore

SERVICE_FN = "sym:examples/server/main.go::service"
INTEGER = "sym:src/fields.py::Integer"
PROJECT_METHOD = "sym:tools/premake.py::Toolchain.project"
PRIVATE_METHOD = "sym:src/builder.py::Builder._eval_snippets"
DUNDER = "sym:src/builder.py::Builder.__init__"
ONE_LETTER = "sym:tests/data/shapes.py::S"
BUILDER = "sym:src/builder.py::Builder"
OTHER_PRIVATE = "sym:src/runner.py::Runner._eval_snippets"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    store = EmbeddedStore(tmp_path_factory.mktemp("home"), "linking")
    prov = Provenance("src", "test")
    store.upsert([Node(SERVICE_FN, "service", prov, {"symbol_kind": "function"}),
                  Node(INTEGER, "Integer", prov, {"symbol_kind": "class"}),
                  Node(PROJECT_METHOD, "project", prov, {"symbol_kind": "method"}),
                  Node(PRIVATE_METHOD, "_eval_snippets", prov, {"symbol_kind": "method",
                                                                "qualname": "Builder._eval_snippets"}),
                  Node(DUNDER, "__init__", prov, {"symbol_kind": "method", "qualname": "Builder.__init__"}),
                  Node(ONE_LETTER, "S", prov, {"symbol_kind": "class", "qualname": "S"}),
                  Node(BUILDER, "Builder", prov, {"symbol_kind": "class", "qualname": "Builder"}),
                  Node(OTHER_PRIVATE, "_eval_snippets", prov, {"symbol_kind": "method",
                                                                "qualname": "Runner._eval_snippets"})], [], [])
    cat = Catalog.build(store)
    store.close()
    return cat


def linked(cat: Catalog, text: str) -> set[str]:
    return set(link(cat, parse_question(text), LinkConfig()))


@pytest.mark.parametrize("text, key", [
    ("Where is service() defined?", SERVICE_FN),  # written as a call
    ("Show me the source of project().", PROJECT_METHOD),
    ("Jump to Integer in the fields code.", INTEGER),  # capitalised inside a sentence
    ("Where does the `service` function live?", SERVICE_FN),  # quoted, and next to a code noun
    ("What does _eval_snippets call?", PRIVATE_METHOD),  # a private method by its own name
])
def test_a_word_written_as_a_name_links_the_symbol(catalog: Catalog, text: str, key: str) -> None:
    assert key in linked(catalog, text)


@pytest.mark.parametrize("text", [
    "Which service handles refunds?",  # an English word that happens to name a function
    "Integer overflow: where is it checked?",  # capitalised only because it starts the sentence
    "Where is the project configured? Integer values come later.",  # starts the second sentence
    "Who owns this project?",
    "Which SERVICE answers health checks?",  # capitals alone: an acronym's spelling, not a name
    "How does the method's validation fail?",  # the "s" of a possessive, next to a code noun
    "Why doesn't the function's result change?",
])
def test_a_plain_english_word_links_nothing(catalog: Catalog, text: str) -> None:
    assert linked(catalog, text) == set()



def test_a_dunder_method_is_not_linked_by_its_bare_name(catalog: Catalog) -> None:
    assert DUNDER not in linked(catalog, "What does __init__ call?")
    assert DUNDER in linked(catalog, "What does Builder.__init__ call?")


def test_a_root_commit_is_no_answer_to_what_changed_a_symbol(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The first commit created the file; only the later one changed the function in it."""
    from graphmem.model import RelType, Relationship
    from graphmem.retrieval.graph import GraphRetriever

    store = EmbeddedStore(tmp_path, "history")
    prov = Provenance("git", "test")
    fn = "sym:src/codec.py::decode_frame"
    root, later = "commit:" + "a" * 40, "commit:" + "b" * 40
    store.upsert([Node(fn, "decode_frame", prov, {"symbol_kind": "function", "qualname": "decode_frame"}),
                  Node(root, "release 1.0", prov, {"parents": [], "committed_at": "2024-01-01T00:00:00Z"}),
                  Node(later, "release 1.1", prov, {"parents": ["a" * 40], "committed_at": "2024-06-01T00:00:00Z"})],
                 [Relationship(root, RelType.MODIFIED, fn, prov, {"change_type": "A"}),
                  Relationship(later, RelType.MODIFIED, fn, prov, {"change_type": "M"}),
                  Relationship(later, RelType.PARENT, root, prov, {})], [])
    graph = GraphRetriever(store)
    assert graph.catalog.root_commits == {root}

    def commits(text: str) -> list[str]:
        q = parse_question(text)
        return [h.key for h in graph.retrieve(q).hits if h.key.startswith("commit:")]

    assert commits("Which release changed decode_frame?")[0] == later
    assert commits("Which release removed decode_frame?")[0] == later
    assert root in commits("Which release added decode_frame?")  # a root commit did add it
    store.close()


def test_a_member_of_a_named_type_is_linked_and_its_namesakes_dropped(catalog: Catalog) -> None:
    # A dunder links through the type the question names.
    assert DUNDER in linked(catalog, "What does the __init__ method of Builder call?")
    # Same-named methods: the named type's is kept, the other dropped.
    assert {PRIVATE_METHOD, OTHER_PRIVATE} <= linked(catalog, "What does _eval_snippets call?")
    found = linked(catalog, "What does the _eval_snippets method of Builder call?")
    assert PRIVATE_METHOD in found and OTHER_PRIVATE not in found and BUILDER in found

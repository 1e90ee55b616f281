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
FIELD_FN = "sym:src/make.py::field"
OTHER_FN = "sym:tests/data/pairs.py::other"
TESTDIR_CLASS = "sym:src/legacy.py::Testdir"
TESTDIR_METHOD = "sym:src/legacy.py::LegacyPlugin.testdir"
CODES = "sym:src/rules.py::RulePack.codes"
NESTED = "sym:src/cli.py::Option.Builder.option"


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
                                                                "qualname": "Runner._eval_snippets"}),
                  Node(FIELD_FN, "field", prov, {"symbol_kind": "function", "qualname": "field"}),
                  Node(OTHER_FN, "other", prov, {"symbol_kind": "function", "qualname": "other"}),
                  Node(TESTDIR_CLASS, "Testdir", prov, {"symbol_kind": "class", "qualname": "Testdir"}),
                  Node(TESTDIR_METHOD, "testdir", prov, {"symbol_kind": "method",
                                                         "qualname": "LegacyPlugin.testdir"}),
                  Node(CODES, "codes", prov, {"symbol_kind": "method", "qualname": "RulePack.codes"}),
                  Node(NESTED, "option", prov, {"symbol_kind": "method", "qualname": "Option.Builder.option"})],
                 [], [])
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
    ("Which functions call service?", SERVICE_FN),  # the object of a verb only code takes
    ("Which helpers are called by service?", SERVICE_FN),
    ("What does service call?", SERVICE_FN),  # the subject of a call verb after an auxiliary
    ("Where is service called from?", SERVICE_FN),  # before a passive call verb with a place
    ("Where is service called?", SERVICE_FN),
    ("Which code depends on service being called?", SERVICE_FN),
    ("Where does project get called?", PROJECT_METHOD),
    ("Who are the callers of service?", SERVICE_FN),
    ("What calls Builder.__init__?", DUNDER),  # an owner-qualified member
    ("What calls Runner._eval_snippets?", OTHER_PRIVATE),
    ("What calls Builder.option?", NESTED),  # a nested type's member by its owner-qualified tail
    ("What calls Option.Builder.option?", NESTED),
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
    "Which method projects the points onto a plane?",  # the asked-for method's verb, not its name
    "What function services the queue?",
    "What does the service call?",  # a determiner: the thing, not a name
    "What is this service called?",  # asks a name: the call has no place or agent
    "Which function is called by the service?",
])
def test_a_plain_english_word_links_nothing(catalog: Catalog, text: str) -> None:
    assert linked(catalog, text) == set()



def test_a_code_noun_frames_a_word_only_right_beside_it(catalog: Catalog) -> None:
    assert FIELD_FN not in linked(catalog, "Is there a function that creates a new field / attribute on a class?")
    assert FIELD_FN in linked(catalog, "Where is the field function defined?")
    assert FIELD_FN in linked(catalog, "Where is the `field` attribute helper?")  # quoted
    assert PROJECT_METHOD in linked(catalog, "Where is the method project defined?")  # a name after the noun
    assert PROJECT_METHOD in linked(catalog, "Which method calls project?")
    # A word for code is no name beside another.
    assert CODES not in linked(catalog, "What code helpers find an element within a segment?")
    assert CODES in linked(catalog, "Where is the `codes` helper?")


def test_a_word_that_picks_among_code_is_no_name(catalog: Catalog) -> None:
    assert OTHER_FN not in linked(catalog, "Which other functions does _eval_snippets call?")
    assert OTHER_FN not in linked(catalog, "Do any other methods of Builder call field?")
    assert OTHER_FN in linked(catalog, "Which functions call other?")  # still a name where one stands


def test_a_name_written_as_code_links_the_code_spelt_that_way(catalog: Catalog) -> None:
    """Names match in any case, but where the question spells one as code and some code is
    spelt exactly so, the namesakes in another case are not what it means."""
    assert linked(catalog, "What type defines testdir()?") >= {TESTDIR_METHOD}
    assert TESTDIR_CLASS not in linked(catalog, "What type defines testdir()?")
    assert TESTDIR_METHOD not in linked(catalog, "Where is `Testdir` used?")
    assert TESTDIR_CLASS in linked(catalog, "Where is `Testdir` used?")
    # Placed beside a noun for code, a word is a name but its spelling is no evidence: both stay.
    assert linked(catalog, "Who uses the testdir helper?") >= {TESTDIR_CLASS, TESTDIR_METHOD}
    # No code spelt as written: every namesake stays.
    assert linked(catalog, "What calls TESTDIR()?") >= {TESTDIR_CLASS, TESTDIR_METHOD}
    # Capitalised inside a sentence, a name is spelt as written too: the class, not the method.
    assert linked(catalog, "What does Testdir do?") == {TESTDIR_CLASS}


def test_the_projects_own_packages_name_no_symbol(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A question naming the project by its package ("the functions of _pytest") is not about a
    function that shares the package's name, unless project names are configured as anchors."""
    from graphmem.retrieval.graph import GraphRetriever, top_packages

    assert top_packages(["src/_pytest/__init__.py", "src/_pytest/config/__init__.py", "src/pytest/__init__.py",
                         "testing/__init__.py", "conans/__init__.py", "setup.py"]) == {"_pytest", "pytest", "conans"}
    assert top_packages(["__init__.py", "core/__init__.py"]) == set()  # the repository root is the package
    # A monorepo's services are no names of the project.
    assert top_packages(["services/billing/__init__.py", "libs/python/acme_http/__init__.py"]) == set()
    store = EmbeddedStore(tmp_path, "pytest")
    prov = Provenance("src/_pytest/pytester.py", "test")
    fixture = "sym:src/_pytest/pytester.py::_pytest"
    fail = "sym:src/_pytest/outcomes.py::fail"
    store.upsert([Node("file:src/_pytest/__init__.py", "src/_pytest/__init__.py", prov, {}),
                  Node(fixture, "_pytest", prov, {"symbol_kind": "function", "qualname": "_pytest"}),
                  Node(fail, "fail", prov, {"symbol_kind": "function", "qualname": "fail"})], [], [])
    q = parse_question("Which functions of _pytest call fail()?")
    assert set(GraphRetriever(store).link(q)) == {fail}
    assert fixture in GraphRetriever(store, link_config=LinkConfig(project_name_anchors=True)).link(q)
    store.close()


def test_a_plain_word_naming_a_service_and_a_function_names_the_service(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = EmbeddedStore(tmp_path, "router")
    prov = Provenance("middleware/", "test")
    fn = "sym:chain.go::middleware"
    store.upsert([Node("service:middleware", "middleware", prov, {"paths": ["middleware/"]}),
                  Node(fn, "middleware", prov, {"symbol_kind": "function", "qualname": "middleware"})], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "Which function is a middleware that logs each request?") == {"service:middleware"}
    assert fn in linked(cat, "Who calls middleware()?")


def test_the_project_is_named_by_meaning_no_more_than_by_spelling(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    """A question naming the project is close in meaning to the project's own service, and that
    says nothing about where its answer is; another service still links by meaning."""
    from graphmem.retrieval.graph import GraphRetriever

    store = EmbeddedStore(tmp_path, "commons-cli")
    prov = Provenance("org/", "test")
    store.upsert([Node("service:commons-cli", "commons-cli", prov, {"paths": ["org/apache/commons/cli/"]}),
                  Node("service:billing", "billing", prov, {"paths": ["billing/"]})], [], [])
    graph = GraphRetriever(store, embedder=embedder)
    ask = "In commons-cli, where is the logic that tests whether an option is deprecated?"
    q = parse_question(ask)
    assert "service:commons-cli" not in graph.link(q, query_vec=embedder.encode_query(ask))
    keys, _ = graph._name_vectors(graph.refresh())
    assert keys == ["service:billing"]
    anchors = GraphRetriever(store, embedder=embedder, link_config=LinkConfig(project_name_anchors=True))
    assert "service:commons-cli" in anchors._name_vectors(anchors.refresh())[0]
    store.close()


def test_a_top_level_package_is_named_by_meaning_no_more_than_by_spelling(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    """A repository with two top-level packages (a library and its command line): a question placing
    its answer in the second ("the part of shop_cli that ...") names the project, and the package's
    service must not come back by meaning as a seed the graph list then ranks first."""
    from graphmem.retrieval.graph import GraphRetriever

    store = EmbeddedStore(tmp_path, "shop")
    prov = Provenance("src/", "test")
    store.upsert([Node("file:src/shop/__init__.py", "src/shop/__init__.py", prov, {}),
                  Node("file:src/shop_cli/__init__.py", "src/shop_cli/__init__.py", prov, {}),
                  Node("service:shop_cli", "shop_cli", prov, {"paths": ["src/shop_cli/"]}),
                  Node("service:billing", "billing", prov, {"paths": ["billing/"]})], [], [])
    graph = GraphRetriever(store, embedder=embedder)
    ask = "I need the part of shop_cli that prints the receipt."
    assert "service:shop_cli" not in graph.link(parse_question(ask), query_vec=embedder.encode_query(ask))
    assert graph._name_vectors(graph.refresh())[0] == ["service:billing"]
    anchors = GraphRetriever(store, embedder=embedder, link_config=LinkConfig(project_name_anchors=True))
    assert "service:shop_cli" in anchors._name_vectors(anchors.refresh())[0]
    store.close()


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


def test_what_one_directed_step_reaches_answers_before_better_connected_neighbours(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A module calls ``render_table`` at import time and holds its callers, so PageRank gathers on
    the module; asked what ``render_table`` relies on, its two callees answer first, and the module
    (a caller) and the class holding it come after them."""
    from graphmem.model import RelType, Relationship
    from graphmem.retrieval.config import WalkConfig
    from graphmem.retrieval.graph import GraphRetriever

    store = EmbeddedStore(tmp_path, "callees")
    prov = Provenance("src/report.py", "test")
    module, cls = "file:src/report.py", "sym:src/report.py::Report"
    fn = "sym:src/report.py::Report.render_table"
    helpers = ["sym:src/cells.py::pad_cell", "sym:src/cells.py::join_row"]
    callers = [f"sym:src/report.py::section_{i}" for i in range(12)]
    nodes = [Node(module, "src/report.py", prov, {}), Node(cls, "Report", prov, {"symbol_kind": "class"}),
             Node(fn, "render_table", prov, {"symbol_kind": "method", "qualname": "Report.render_table"})]
    nodes += [Node(key, key.rsplit("::", 1)[1], prov, {"symbol_kind": "function"}) for key in helpers + callers]
    rels = [Relationship(module, RelType.CONTAINS, key, prov, {}) for key in [cls, *callers]]
    rels += [Relationship(cls, RelType.CONTAINS, fn, prov, {}), Relationship(module, RelType.CALLS, fn, prov, {})]
    rels += [Relationship(fn, RelType.CALLS, key, prov, {}) for key in helpers]
    rels += [Relationship(key, RelType.CALLS, fn, prov, {}) for key in callers]
    store.upsert(nodes, rels, [])

    def first_two(text: str, config: WalkConfig) -> list[str]:
        return sorted(h.key for h in GraphRetriever(store, walk_config=config).retrieve(parse_question(text)).hits[:2])

    for text in ("What does render_table call?", "Which helpers does render_table rely on?"):
        assert first_two(text, WalkConfig()) == sorted(helpers), text
    # Without the ordering, the module's PageRank mass puts it above a callee.
    assert module in first_two("Which helpers does render_table rely on?", WalkConfig(direct_first=False))
    store.close()


def test_a_member_of_a_named_type_is_linked_and_its_namesakes_dropped(catalog: Catalog) -> None:
    # A dunder links through the type the question names.
    assert DUNDER in linked(catalog, "What does the __init__ method of Builder call?")
    # Same-named methods: the named type's is kept, the other dropped.
    assert {PRIVATE_METHOD, OTHER_PRIVATE} <= linked(catalog, "What does _eval_snippets call?")
    found = linked(catalog, "What does the _eval_snippets method of Builder call?")
    assert PRIVATE_METHOD in found and OTHER_PRIVATE not in found and BUILDER in found


TIMES = ["2024-01-01T00:00:00.000000Z", "2024-03-01T00:00:00.000000Z", "2024-06-01T00:00:00.000000Z",
         "2024-09-01T00:00:00.000000Z"]


def _commit_chain(store: EmbeddedStore, times: list[str]) -> list[Node]:
    """One commit ("release 1.<i>") at each time, each the parent of the next, written as it was made."""
    from graphmem.model import RelType, Relationship

    git = Provenance("git", "test")
    shas = [str(i + 1) * 40 for i in range(len(times))]
    commits = [Node(f"commit:{sha}", f"release 1.{i}", git,
                    {"parents": [shas[i - 1]] if i else [], "committed_at": t}) for i, (sha, t) in enumerate(zip(shas, times))]
    for i, node in enumerate(commits):
        store.upsert([node], [Relationship(node.key, RelType.PARENT, commits[i - 1].key, git, {})] if i else [],
                     at=times[i])
    return commits


def test_the_commit_that_ended_or_began_a_symbol_answers_removal_and_creation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A function added by one release and deleted by a later one: the deleted function is still
    named by "which release removed ...", and the commits at its start and end are the answers."""
    from graphmem.model import RelType, Relationship
    from graphmem.retrieval.graph import GraphRetriever

    store = EmbeddedStore(tmp_path, "lifetimes")
    git = Provenance("git", "test")
    times = TIMES
    commits = _commit_chain(store, times)
    gone = "sym:src/codec.py::decodeLegacyFrame"
    kept = "sym:src/codec.py::encode_frame"
    store.upsert([Node(kept, "encode_frame", Provenance("src/codec.py", "test"), {"qualname": "encode_frame"})],
                 [Relationship(commits[0].key, RelType.MODIFIED, kept, git, {})], at=times[0])
    store.upsert([Node(gone, "decodeLegacyFrame", Provenance("src/legacy.py", "test"), {"qualname": "decodeLegacyFrame"})],
                 [Relationship(commits[1].key, RelType.MODIFIED, gone, git, {})], at=times[1])
    store.close_sources(["src/legacy.py"], at=times[2])
    graph = GraphRetriever(store)
    assert graph.catalog.lifetimes[gone] == (times[1], times[2])

    def first_commit(text: str) -> str:
        return next(h.key for h in graph.retrieve(parse_question(text)).hits if h.key.startswith("commit:"))

    assert first_commit("Which release removed decodeLegacyFrame?") == commits[2].key
    assert first_commit("In which version did decodeLegacyFrame go away?") == commits[2].key
    assert first_commit("When was decodeLegacyFrame added?") == commits[1].key
    assert first_commit("Which release introduced encode_frame?") == commits[0].key
    store.close()


def test_code_moved_to_another_file_was_neither_removed_nor_added_by_the_move(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``Frame`` began in ``codec.py``, moved to ``src/codec.py`` (its old node closed, a new one
    opened a little later) and was deleted after that: the removal is the deletion, the addition
    the first beginning."""
    from graphmem.model import RelType, Relationship
    from graphmem.retrieval.graph import GraphRetriever

    store = EmbeddedStore(tmp_path, "moves")
    git = Provenance("git", "test")
    commits = _commit_chain(store, TIMES)
    old, new = "sym:codec.py::Frame", "sym:src/codec.py::Frame"
    store.upsert([Node(old, "Frame", Provenance("codec.py", "test"), {"qualname": "Frame"})],
                 [Relationship(commits[0].key, RelType.MODIFIED, old, git, {})], at=TIMES[0])
    store.close_sources(["codec.py"], at=TIMES[1])
    store.upsert([Node(new, "Frame", Provenance("src/codec.py", "test"), {"qualname": "Frame"})],
                 [Relationship(commits[2].key, RelType.MODIFIED, new, git, {})], at=TIMES[2])
    store.close_sources(["src/codec.py"], at=TIMES[3])
    graph = GraphRetriever(store)

    def first_commit(text: str) -> str:
        return next(h.key for h in graph.retrieve(parse_question(text)).hits if h.key.startswith("commit:"))

    assert first_commit("Which release removed the Frame class?") == commits[3].key
    assert first_commit("When was the Frame class added?") == commits[0].key
    store.close()


@pytest.mark.parametrize("text,change,removal,creation", [
    ("When was CreateArticle deleted?", True, True, False),  # "Create" inside a name is no creation
    ("When was removeListener added?", False, False, True),  # nor is "remove" inside one a removal
    ("In which version did parse_header go away?", True, True, False),
    ("Which release changed parse_header?", True, False, False),
    ("When did parse_header first appear?", False, False, True),
    # Behaviour, not history: a present form, a present passive, or the words of a name.
    ("Is there a function that creates a new field on a class?", False, False, False),
    ("Which method removes a listener from the bus?", False, False, False),
    ("What runs when a session is created?", False, False, False),
    ("Which helpers does `_add_eq` rely on?", False, False, False),
    ("Add_init() is a method of which type?", False, False, False),
    ("Which function updates the cache?", False, False, False),
    # Any form counts when a commit or release is asked for.
    ("Which release removes parse_header?", True, True, False),
    ("Which commit adds the retry loop?", False, False, True),
])
def test_change_removal_and_creation_are_read_from_english_words(text: str, change: bool, removal: bool,
                                                                 creation: bool) -> None:
    q = parse_question(text)
    assert (q.asks_change, q.asks_removal, q.asks_creation) == (change, removal, creation)


@pytest.mark.parametrize("text,edits", [
    ("Is there a function that prevents an attribute to be modified?", False),  # behaviour
    ("Which function stops a frozen attribute being modified?", False),
    ("Which commits modified the parser?", True),  # commits asked for
    ("Which functions did the commit 'Raise the limit' change?", True),  # a commit spoken of
    ("Who changed parse_header?", True),  # people
    ("When was parse_header changed?", True),  # history
])
def test_an_edit_word_leads_to_commits_only_in_a_question_about_history_or_its_makers(text: str, edits: bool) -> None:
    from graphmem.model import RelType

    assert (RelType.MODIFIED in parse_question(text).rel_types) is edits


@pytest.mark.parametrize("text,kinds", [
    ("When was CreateArticle deleted?", ("commit",)),  # the time of a change is its commit's
    ("When was removeListener added?", ("commit",)),
    ("When did parse_header last change?", ("commit",)),
    ("When was ADR-5 superseded?", ("decision",)),  # a kind the question names stays
    ("When did the billing service fail?", ()),  # no change asked about
    ("What runs when a session is created?", ()),
    ("Tell me when parse_header was removed.", ("commit",)),
    ("Which exception is raised when a frozen attribute is modified?", ()),  # "when" opens a clause
])
def test_when_a_change_was_made_asks_for_its_commit(text: str, kinds: tuple[str, ...]) -> None:
    assert tuple(k.value for k in parse_question(text).answer_kinds) == kinds


def test_a_word_that_a_name_extends_is_no_misspelling_of_it(tmp_path) -> None:
    """"Why do we maintain two parsers" names no team called maintainers, nor "parsing" the person
    whose handle is "arsing"; a typo still names them."""
    store = EmbeddedStore(tmp_path / "home", "typos")
    prov = Provenance("CODEOWNERS", "test")
    store.upsert([Node("team:maintainers", "maintainers", prov, {}),
                  Node("service:scheduler", "scheduler", prov, {}),
                  Node("person:arsing@example.com", "Ar Sing", prov, {"email": "arsing@example.com"})], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "Why do we maintain two parsers?") == set()
    assert linked(cat, "What errors can parsing a header name produce?") == set()
    assert linked(cat, "What did arsinng change last week?") == {"person:arsing@example.com"}
    assert linked(cat, "How do I schedule a retry?") == set()
    assert linked(cat, "Who are the maintainres?") == {"team:maintainers"}
    assert linked(cat, "Who owns the schedular?") == {"service:scheduler"}


def test_a_word_for_code_names_no_person_whose_handle_it_is(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An author whose address is code@... is no answer to "which code ...": the word asks for code.
    A plain word that is someone's handle names them only where the question asks about people or
    their work ("what did kludex change"), or where it is written as a name."""
    store = EmbeddedStore(tmp_path / "home", "handles")
    prov = Provenance("git", "test")
    store.upsert([Node("person:code@example.org", "Ben Beasley", prov, {"email": "code@example.org"}),
                  Node("person:kludex@example.org", "Marcelo", prov, {"email": "kludex@example.org"})], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "Which code signs the session cookie?") == set()
    assert linked(cat, "Who wrote the code that signs the session cookie?") == set()
    assert linked(cat, "What did kludex change last week?") == {"person:kludex@example.org"}
    assert linked(cat, "Where is the kludex limit enforced?") == set()  # no one's work: a plain word
    assert linked(cat, "Which commits did kludex author?") == {"person:kludex@example.org"}
    assert linked(cat, "Where is the limit Kludex set enforced?") == {"person:kludex@example.org"}


def test_a_code_file_is_named_as_a_module_only_when_the_word_is_framed_as_code(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"The sessions module" and "starlette.middleware.sessions" name the file; "sessions" alone
    is a topic; a package is named by its folder."""
    store = EmbeddedStore(tmp_path / "home", "modules")
    prov = Provenance("starlette/middleware/sessions.py", "test")
    sessions = "file:starlette/middleware/sessions.py"
    package = "file:src/_pytest/config/__init__.py"
    static = "file:starlette/staticfiles.py"
    store.upsert([Node(sessions, "starlette/middleware/sessions.py", prov, {"language": "python"}),
                  Node(package, "src/_pytest/config/__init__.py", prov, {"language": "python"}),
                  Node(static, "starlette/staticfiles.py", prov, {"language": "python"}),
                  Node("sym:starlette/staticfiles.py::StaticFiles", "StaticFiles", prov,
                       {"symbol_kind": "class", "qualname": "StaticFiles"})], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "Which commit last changed the sessions module?") == {sessions}
    # A class named as the module is spelt: followed by "module", the word names the module.
    assert linked(cat, "Who maintains the staticfiles module?") == {static}
    assert linked(cat, "Who maintains StaticFiles?") == {"sym:starlette/staticfiles.py::StaticFiles"}
    assert linked(cat, "Who calls into starlette.middleware.sessions?") == {sessions}
    assert linked(cat, "How do sessions expire?") == set()
    assert linked(cat, "What does the _pytest.config package import?") == {package}


def test_a_member_with_a_short_name_is_linked_only_when_spelt_as_code(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"Walk", "Swap()" and "`name`" are too short to link as plain words, but spelt exactly so and
    written as code they name the members; a constructor named as its class is the class's."""
    store = EmbeddedStore(tmp_path / "home", "short")
    prov = Provenance("mux.go", "test")
    members = {"Router.Walk": "sym:mux.go::Router.Walk", "nodes.Swap": "sym:tree.go::nodes.Swap",
               "Decl.name": "sym:ast.py::Decl.name", "Gson.Gson": "sym:Gson.java::Gson.Gson",
               "CodeWriter.CodeWriter": "sym:CodeWriter.java::CodeWriter.CodeWriter"}
    store.upsert([Node(k, q.rsplit(".", 1)[1], prov, {"symbol_kind": "method", "qualname": q}) for q, k in members.items()],
                 [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "When was the Walk method added?") == {members["Router.Walk"]}
    assert linked(cat, "Who invokes Swap() in chi?") == {members["nodes.Swap"]}
    assert linked(cat, "What does `name` return?") == {members["Decl.name"]}
    assert linked(cat, "How do I walk the routes?") == set()  # a plain word
    assert linked(cat, "Where is the name attribute set?") == set()  # framed, but a plain English word
    assert members["Gson.Gson"] not in linked(cat, "Which class in Gson parses JSON?")
    assert linked(cat, "Which methods of CodeWriter emit annotations?") == set()  # the class, which is no node here


def test_a_removed_module_that_shares_a_technologys_name_answers_which_release_removed_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"Which release removed the graphql module?": the GraphQL technology that commits mention is
    linked too, but the commit at the end of the module's file is the answer."""
    from graphmem.model import RelType, Relationship
    from graphmem.retrieval.graph import GraphRetriever

    store = EmbeddedStore(tmp_path, "gone-module")
    git = Provenance("git", "test")
    times = TIMES[:3]
    commits = _commit_chain(store, times)
    graphql = "entity:technology:graphql"
    store.upsert([Node(graphql, "GraphQL", git, {})],
                 [Relationship(commits[0].key, RelType.MENTIONS, graphql, git, {}),
                  Relationship(commits[1].key, RelType.MENTIONS, graphql, git, {})], at=times[1])
    module = "file:starlette/graphql.py"
    store.upsert([Node(module, "starlette/graphql.py", Provenance("starlette/graphql.py", "test"), {"language": "python"})],
                 [Relationship(commits[0].key, RelType.CHANGED, module, git, {})], at=times[0])
    store.close_sources(["starlette/graphql.py"], at=times[2])
    graph = GraphRetriever(store)
    q = parse_question("Which release removed the graphql module?")
    assert {module, graphql} <= set(graph.link(q))
    assert next(h.key for h in graph.retrieve(q).hits if h.key.startswith("commit:")) == commits[2].key
    store.close()


def test_the_catalog_is_kept_between_processes_until_the_graph_changes(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    """A new process reads the catalog an earlier one saved while the graph is unchanged; any write
    (names or not) makes it build a new one, and a damaged file is built again."""
    from graphmem.model import RelType, Relationship
    from graphmem.retrieval.graph import GraphRetriever

    store = EmbeddedStore(tmp_path, "kept")
    prov = Provenance("src/app.py", "test")
    parse = Node("sym:src/app.py::parse_settings", "parse_settings", prov, {"symbol_kind": "function",
                                                                          "qualname": "parse_settings"})
    store.upsert([Node("file:src/app.py", "src/app.py", prov, {}), parse], [], [])
    first = GraphRetriever(store, cache_dir=tmp_path / "cache")
    built = first.catalog
    path = first.catalog_path
    assert path is not None and path.is_file()
    again = GraphRetriever(store, cache_dir=tmp_path / "cache").catalog
    assert again == built and again is not built
    q = parse_question("What does parse_settings return?")
    assert parse.key in first.link(q)
    # What the next process uses is the saved file: a name the file lacks is not linked.
    stamp = {"generation": store.get_meta("graph_generation"), "fuzzy_min_length": LinkConfig().fuzzy_min_length}
    saved = Catalog.from_bytes(path.read_bytes(), **stamp)
    assert saved is not None
    saved.by_name = {words: keys for words, keys in saved.by_name.items() if parse.key not in keys}
    path.write_bytes(saved.to_bytes(**stamp))
    assert parse.key not in GraphRetriever(store, cache_dir=tmp_path / "cache").link(q)
    # A relationship written (no name changed) is a new generation: the catalog is built again.
    store.upsert([], [Relationship("file:src/app.py", RelType.CONTAINS, parse.key, prov)], [])
    fresh = GraphRetriever(store, cache_dir=tmp_path / "cache")
    assert parse.key in fresh.link(q) and fresh.catalog.rel_types == {"CONTAINS"}
    path.write_bytes(b"\x00 not a catalog")
    with caplog.at_level("WARNING"):
        assert GraphRetriever(store, cache_dir=tmp_path / "cache").catalog == fresh.catalog
    assert "unreadable" in caplog.text
    store.close()


def test_a_type_is_named_by_its_words_and_a_sort_noun_names_no_node(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"The CORS middleware", "the HTTP endpoint" and "Static Files" name ``CORSMiddleware``,
    ``HTTPEndpoint`` and ``StaticFiles``; words none of which is written as a name do not ("the
    test client"), a one-word type is not named so, nor are words of a function's lower-case name;
    a function capitalised as a type is (Go's ``CORSMethodMiddleware``), before a word for code
    ("method") makes the next word a name alone. In "which endpoint class ...", asking for the
    project's endpoint types, the noun names no function called ``endpoint``."""
    store = EmbeddedStore(tmp_path / "home", "words")
    prov = Provenance("web", "test")
    types = {name: f"sym:web/app.py::{name}" for name in
             ("CORSMiddleware", "TestClient", "StaticFiles", "HTTPEndpoint", "WebSocketEndpoint", "Client")}
    endpoint = "sym:tests/test_app.py::endpoint"
    store.upsert([Node(k, n, prov, {"symbol_kind": "class", "qualname": n}) for n, k in types.items()]
                 + [Node(endpoint, "endpoint", prov, {"symbol_kind": "function", "qualname": "endpoint"}),
                    Node("sym:web/app.py::get_client", "get_client", prov, {"symbol_kind": "function",
                                                                            "qualname": "get_client"}),
                    Node("sym:mw.go::CORSMethodMiddleware", "CORSMethodMiddleware", prov,
                         {"symbol_kind": "function", "qualname": "CORSMethodMiddleware"}),
                    Node("sym:mw.go::middleware", "middleware", prov, {"symbol_kind": "interface",
                                                                      "qualname": "middleware"}),
                    Node("sym:mw.go::NewMux", "NewMux", prov, {"symbol_kind": "function", "qualname": "NewMux"})],
                 [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "Which commits touched the CORS middleware?") == {types["CORSMiddleware"]}
    assert linked(cat, "How does the HTTP endpoint answer HEAD requests?") == {types["HTTPEndpoint"]}
    assert linked(cat, "How do Static Files prevent path traversal?") == {types["StaticFiles"]}
    assert linked(cat, "How does the test client send requests?") == set()  # no word written as a name
    assert linked(cat, "Who wrote the client?") == set()  # one word: a plain English word
    assert linked(cat, "Where do we get client settings?") == set()  # a function is not named by its words
    assert linked(cat, "Where is the CORS method middleware defined?") == {"sym:mw.go::CORSMethodMiddleware"}
    # A verb phrase that happens to spell a function's name does not name it; words that start
    # with a capital do.
    assert "sym:mw.go::NewMux" not in linked(cat, "Which method creates a new Mux as a subrouter?")
    assert linked(cat, "What does New Mux allocate?") == {"sym:mw.go::NewMux"}
    q = parse_question("Which endpoint class handles websocket connections?")
    assert endpoint in set(link(cat, q, LinkConfig()))
    assert endpoint not in set(link(cat, q, LinkConfig(), sort=True))


def test_a_commit_is_named_by_a_subject_of_several_words_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A commit subjected "Elements" is not what "which evaluator matches elements" names; a
    subject quoted in full names its commit."""
    store = EmbeddedStore(tmp_path / "home", "subjects")
    prov = Provenance("git", "test")
    short, long = "commit:" + "a" * 40, "commit:" + "b" * 40
    store.upsert([Node(short, "Elements", prov, {}),
                  Node(long, "Stream the parser over large inputs", prov, {})], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "Which evaluator matches elements containing some text?") == set()
    assert linked(cat, "What did 'Stream the parser over large inputs' change?") == {long}


def test_a_plural_name_links_the_type_spelt_so_before_its_singular(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = EmbeddedStore(tmp_path / "home", "plural")
    prov = Provenance("src", "test")
    one, many = "sym:nodes/Element.java::Element", "sym:select/Elements.java::Elements"
    store.upsert([Node(one, "Element", prov, {"symbol_kind": "class", "qualname": "Element"}),
                  Node(many, "Elements", prov, {"symbol_kind": "class", "qualname": "Elements"})], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "Which methods of Elements remove nodes?") == {many}
    assert linked(cat, "Which methods of Element remove nodes?") == {one}


def test_paths_private_names_and_plural_nouns_are_read_as_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"HeaderMap::insert" is the member ``HeaderMap.insert``; "#fetch" the private method of that
    name, not a same-named function elsewhere; after a plural code noun comes its verb ("how are
    the hooks run"), not a name; "a Method" is the type so spelt."""
    store = EmbeddedStore(tmp_path / "home", "spelling")
    prov = Provenance("src", "test")
    keys = {"HeaderMap.insert": "sym:src/map.rs::HeaderMap.insert", "HeaderMap": "sym:src/map.rs::HeaderMap",
            "Ky.#fetch": "sym:source/Ky.ts::Ky.#fetch", "fetch": "sym:test/helpers.ts::fetch",
            "Run": "sym:test/page.ts::Run", "Method": "sym:src/method.rs::Method"}
    store.upsert([Node(k, q.rsplit(".", 1)[-1], prov, {"symbol_kind": "method" if "." in q else "function",
                                                       "qualname": q}) for q, k in keys.items()], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "What does HeaderMap::insert call?") == {keys["HeaderMap.insert"]}
    assert linked(cat, "What does #fetch call?") == {keys["Ky.#fetch"]}
    assert linked(cat, "What does `fetch` call?") == {keys["fetch"]}
    assert linked(cat, "How are the beforeRequest hooks run?") == set()
    assert linked(cat, "When is the hook Run installed?") == {keys["Run"]}
    assert linked(cat, "List the functions run calls.") == {keys["Run"]}  # the subject of a call
    # A word for code in general, capitalised inside a sentence as a type of that name is spelt.
    assert linked(cat, "How is a Method compared to a string?") == {keys["Method"]}
    assert linked(cat, "Which method compares two strings?") == set()


def test_a_plain_word_naming_a_member_of_a_named_type_links_that_member(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"Where does a Request read its body?" names ``Request.body``, more weakly than a name written
    as code; the word names no member of a type the question does not name."""
    store = EmbeddedStore(tmp_path / "home", "members")
    prov = Provenance("src", "test")
    keys = {"Request": "sym:web/requests.py::Request", "Request.body": "sym:web/requests.py::Request.body",
            "Response.body": "sym:web/responses.py::Response.body"}
    store.upsert([Node(k, q.rsplit(".", 1)[-1], prov, {"symbol_kind": "method" if "." in q else "class",
                                                       "qualname": q}) for q, k in keys.items()], [], [])
    cat = Catalog.build(store)
    store.close()
    links = link(cat, parse_question("Where does a Request read its body?"), LinkConfig())
    assert set(links) == {keys["Request"], keys["Request.body"]}
    assert links[keys["Request.body"]].weight < links[keys["Request"]].weight
    assert set(link(cat, parse_question("Where does a Request read its body?"), LinkConfig(member_word_weight=0))) == {
        keys["Request"]}
    assert set(link(cat, parse_question("Where is the body read?"), LinkConfig())) == set()


@pytest.mark.parametrize("text, rels, latest", [
    ("Who changed HeaderMap::extend most recently?", {"MODIFIED"}, True),  # a name, not "extends"
    ("Who changed routing.py last?", {"MODIFIED"}, True),  # the adverb after what changed
    ("Which classes extend Base?", {"INHERITS"}, False),  # the verb itself
    ("Which commit changed the last element?", {"MODIFIED"}, False),  # "last" of a noun
    ("What changed most recently in route.go?", {"MODIFIED"}, True),  # the adverb right after the verb
    ("Which files changed last week?", {"MODIFIED"}, False),  # a time window, not an order
])
def test_a_dotted_name_is_no_verb_and_most_recently_asks_for_the_latest_change(text: str, rels: set[str],
                                                                                latest: bool) -> None:
    q = parse_question(text)
    read = {r.value for r in q.rel_types}
    assert rels <= read and ("INHERITS" in read) == ("INHERITS" in rels)
    assert q.latest_change is latest


def test_a_dotted_name_keeps_the_direction_of_the_relationship_around_it() -> None:
    assert parse_question("What imports starlette.datastructures?").directions == parse_question(
        "What imports datastructures?").directions
    assert parse_question("What does HeaderMap.extend call?").directions == parse_question(
        "What does parse call?").directions


@pytest.mark.parametrize("text, kind", [
    ("What does Version::parse call?", "symbol"),  # a type named Version asks for no release
    ("What does Service.run call?", "symbol"),
    ("Which release removed Version.parse?", "release"),
])
def test_a_dotted_name_is_no_word_for_the_kind_asked_for(text: str, kind: str) -> None:
    assert parse_question(text).answer_kinds[0].value == kind


def test_a_name_the_project_shares_with_test_code_names_the_projects_own(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Tests define helpers named as the code they test (``test_repr.command``): "the command
    decorator" names the project's ``command``; a question that speaks of tests names both, and a
    name only tests have still links them."""
    store = EmbeddedStore(tmp_path / "home", "tests-namesakes")
    prov = Provenance("src", "test")
    own, helper = "sym:src/decorators.py::command", "sym:tests/test_basic.py::test_repr.command"
    only = "sym:tests/test_basic.py::make_runner"
    store.upsert([Node(k, k.rsplit("::", 1)[1], prov, {"symbol_kind": "function", "qualname": k.rsplit("::", 1)[1]})
                  for k in (own, helper, only)], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "What does the command decorator call?") == {own}
    assert linked(cat, "Which test helper is named `command`?") == {own, helper}
    assert linked(cat, "What does make_runner return?") == {only}


def test_a_definition_written_after_its_modules_name_is_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"termui.prompt" is the function ``prompt`` of the module ``termui`` (``src/click/termui.py``),
    not the ``prompt`` of another module; a dotted word naming no module's definition links nothing."""
    store = EmbeddedStore(tmp_path / "home", "modules")
    prov = Provenance("src", "test")
    store.upsert([Node("file:src/click/termui.py", "src/click/termui.py", prov, {}),
                  Node("file:src/click/core.py", "src/click/core.py", prov, {}),
                  Node("sym:src/click/termui.py::prompt", "prompt", prov, {"symbol_kind": "function", "qualname": "prompt"}),
                  Node("sym:src/click/core.py::Option.prompt", "Option.prompt", prov,
                       {"symbol_kind": "method", "qualname": "Option.prompt"})], [], [])
    cat = Catalog.build(store)
    store.close()
    assert linked(cat, "What functions does termui.prompt call?") == {"sym:src/click/termui.py::prompt"}
    assert linked(cat, "What does core.Option.prompt do?") == {"sym:src/click/core.py::Option.prompt"}
    assert linked(cat, "What does termui.confirm call?") == set()


def test_a_constructor_named_as_its_class_is_not_linked_by_the_class_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """"Which methods of CodeWriter …" names the class ``CodeWriter``; its constructor
    ``CodeWriter.CodeWriter`` is neither named by that word nor linked as the class's member."""
    store = EmbeddedStore(tmp_path / "home", "constructors")
    prov = Provenance("CodeWriter.java", "test")
    keys = {q: f"sym:CodeWriter.java::{q}" for q in ("CodeWriter", "CodeWriter.CodeWriter", "CodeWriter.emitAnnotations")}
    store.upsert([Node(k, q.rsplit(".", 1)[-1], prov, {"symbol_kind": "class" if q == "CodeWriter" else "method",
                                                       "qualname": q}) for q, k in keys.items()], [], [])
    cat = Catalog.build(store)
    store.close()
    assert keys["CodeWriter.CodeWriter"] not in linked(cat, "Which methods of CodeWriter emit annotations?")
    assert keys["CodeWriter"] in linked(cat, "Which methods of CodeWriter emit annotations?")

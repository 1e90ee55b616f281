"""What a question's wording rules in or out beyond its words: the sort of thing it asks for by a
noun ("which middleware ..."), a place ("where is ..."), and the changelogs of a question that
asks nothing of the project's history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graphmem.api import Graphmem
from graphmem.config import Settings
from graphmem.model import Node, Provenance, RelType
from graphmem.retrieval.graph.catalog import Catalog, base_names, type_sorts
from graphmem.retrieval.engine import declarations_after_definitions
from graphmem.retrieval.graph.sorts import implementers_of_outside_bases
from graphmem.retrieval.question import parse_question
from graphmem.stores.embedded import EmbeddedStore


@pytest.mark.parametrize("text,noun", [
    ("Which middleware compresses responses?", "middleware"),
    ("What exception is raised when the client disconnects?", "exception"),
    ("Which response class streams a file from disk?", "response"),
    ("Which convertors parse paths?", "convertors"),
    ("What value does url_path_for return?", ""),  # the value X gives, not a type of value
    ("Which function parses dates?", ""),  # a node kind the reader knows
    ("Which two methods build the URL?", ""),  # a number picks, it names no sort
    ("Where is the middleware that compresses responses?", ""),  # asks for a place
    ("What calls _prepareconfig()?", ""),  # a verb the reader knows, not a noun
    ("What changed in the router?", ""),
    ("List all middleware classes", "middleware"),
    ("List the callers of parse()", ""),
    ("What is thrown when the server returns an error status?", "exception"),  # raised things are exceptions
    ("What does parse_key raise on a bad key?", "exception"),
    ("What error does the router raise for a bad path?", "error"),
    ("Which function raises ValueError?", ""),  # asks for a function
    ("What calls the function that throws?", ""),
    ("Which classes implement NodeVisitor?", ""),  # a kind of code, and a relationship
    ("Which subclasses of Evaluator match attributes?", ""),
    ("What raises UsageError?", ""),  # a verb before its object, not a noun
    ("What handles the request?", ""),
])
def test_a_question_asking_for_a_thing_by_a_noun_names_its_sort(text: str, noun: str) -> None:
    assert parse_question(text).sort_noun == noun


def test_a_type_is_of_the_sort_its_name_and_its_bases_make() -> None:
    assert base_names("class ClientDisconnect(Exception)") == ["Exception"]
    assert base_names("class Box(Generic[T], metaclass=ABCMeta)") == ["Generic"]
    assert base_names("public class Oops extends RuntimeException implements Comparable<Oops<X>>") == [
        "RuntimeException", "Comparable"]
    assert base_names("class Plain:") == []
    sorts = type_sorts([("k:http", "HTTPException", ["Exception"]), ("k:404", "NotFound", ["HTTPException"]),
                        ("k:gzip", "GZipMiddleware", []), ("k:deep", "Gone", ["NotFound"])])
    assert sorts["exception"] == {"k:http", "k:404", "k:deep"}  # through the project's own bases
    assert sorts["middleware"] == {"k:gzip"} and sorts["found"] == {"k:404", "k:deep"}



def test_a_rust_type_is_of_the_sort_of_the_traits_it_implements(tmp_path: Path) -> None:
    """``impl Error for InvalidUri`` makes ``InvalidUri`` an error, though its name does not say so."""
    store = EmbeddedStore(tmp_path / "home", "traits")
    prov = Provenance("src/uri.rs", "test")
    store.upsert([Node("sym:src/uri.rs::InvalidUri", "InvalidUri", prov,
                       {"symbol_kind": "struct", "qualname": "InvalidUri", "signature": "pub struct InvalidUri(ErrorKind);",
                        "bases": ["Debug", "Display", "Error"]}),
                  Node("sym:src/uri.rs::Uri", "Uri", prov, {"symbol_kind": "struct", "qualname": "Uri",
                                                             "bases": ["Display", "FromStr"]})], [], [])
    cat = Catalog.build(store)
    store.close()
    assert cat.sorts["error"] == {"sym:src/uri.rs::InvalidUri"}
    assert cat.sorts["display"] == {"sym:src/uri.rs::InvalidUri", "sym:src/uri.rs::Uri"}


def test_a_method_named_as_an_outside_base_does_not_make_it_the_projects_own(tmp_path: Path) -> None:
    """``Route.Handler`` is a method: "which types implement http.Handler?" still asks for the
    types that satisfy the standard library's ``Handler``, as a Go ``Router`` with ``ServeHTTP`` does."""
    store = EmbeddedStore(tmp_path / "home", "handlers")
    prov = Provenance("mux.go", "test")
    store.upsert([Node("sym:mux.go::Router", "Router", prov, {"symbol_kind": "struct", "qualname": "Router",
                                                             "bases": ["Handler"]}),
                  Node("sym:route.go::Route.Handler", "Route.Handler", prov,
                       {"symbol_kind": "method", "qualname": "Route.Handler"})], [], [])
    cat = Catalog.build(store)
    store.close()
    for text in ("Which types implement http.Handler?", "Which types satisfy the Handler interface?"):
        assert implementers_of_outside_bases(cat, parse_question(text)) == {"sym:mux.go::Router"}, text


_FILES = {
    "web/middleware/gzip.py": '''
class GZipResponder:
    def __init__(self, app, minimum_size):
        self.app = app
        self.minimum_size = minimum_size

    def compress_body(self, body):
        """Compress a response body with gzip when it is large enough."""
        return gzip.compress(body) if len(body) >= self.minimum_size else body


class GZipMiddleware:
    def __init__(self, app, minimum_size=500):
        self.app = app
        self.minimum_size = minimum_size
''',
    "web/middleware/cors.py": '''
class CORSMiddleware:
    """Answers cross-origin preflight requests."""

    def __init__(self, app, allow_origins=()):
        self.app = app
        self.allow_origins = allow_origins
''',
    "web/middleware/sessions.py": '''
class SessionMiddleware:
    """Signs the session cookie."""

    def __init__(self, app, secret_key):
        self.app = app
        self.secret_key = secret_key
''',
    "web/requests.py": '''
class ClientDisconnect(Exception):
    pass


class HTTPException(Exception):
    def __init__(self, status_code):
        self.status_code = status_code


class Request:
    async def body(self):
        """Read the whole body; raise ClientDisconnect when the client disconnects first."""
        message = await self.receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        return message["body"]
''',
    "docs/compression.md": "# Compression\n\nResponses are compressed with gzip when they are large enough.\n",
    "web/multipart.py": """
def encode_fields(fields):
    '''Encode form fields as a multipart body.'''
    return b"".join(f"--boundary {k}={v}".encode() for k, v in fields.items())
""",
    "web/clients.py": """
def send_raw(data):
    return data


class SyncClient:
    def send(self, data):
        return send_raw(data)

    def flush(self):
        return send_raw(b"")


class AsyncClient:
    async def send(self, data):
        '''Call send_raw for the data, as every client method that sends must call send_raw.'''
        return send_raw(data)

    async def close(self):
        return send_raw(b"")
""",
    "tests/test_multipart.py": """
def test_build_multipart_body():
    '''Build a multipart request body from form fields and check its boundary.'''
    body = encode_fields({"a": "1"})
    assert body.startswith(b"--boundary")
""",
}


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Any:
    repo = tmp_path_factory.mktemp("web-repo")
    for rel, text in _FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text.lstrip())
    gm = Graphmem(Settings(store="embedded", home=tmp_path_factory.mktemp("web-home")), "web", embedder=embedder,
                  reranker=None)
    gm.ingest(Path(repo))
    yield gm
    gm.close()


@pytest.mark.parametrize("text,first", [
    ("Which middleware compresses responses?", "sym:web/middleware/gzip.py::GZipMiddleware"),
    ("What exception is raised when the client disconnects?", "sym:web/requests.py::ClientDisconnect"),
])
def test_a_question_asking_for_a_sort_answers_with_types_of_that_sort(web: Any, text: str, first: str) -> None:
    """The type that holds the code found for the words comes first (``GZipMiddleware`` for the
    compressing method of its file), and the other types of the sort come before other code."""
    keys = web.query(text, mode="hybrid", k=3).keys
    assert keys[0] == first, keys
    sort = "Middleware" if "middleware" in text else "Exception"
    assert all(key.endswith(sort) or key == first for key in keys[:2]), keys


def test_a_sort_noun_before_a_word_for_members_asks_for_the_members_of_that_sort(web: Any) -> None:
    """"Which client methods ..." asks for methods that the project's clients hold, not for the
    clients, nor for a function that is no client's."""
    q = parse_question("Which client methods send data?")
    assert q.sort_noun == "client" and q.sort_owns_answer
    assert not parse_question("Which client sends data?").sort_owns_answer
    keys = web.query("Which client methods send data?", mode="hybrid", k=4).keys
    assert set(keys[:2]) == {"sym:web/clients.py::SyncClient.send", "sym:web/clients.py::AsyncClient.send"}, keys


@pytest.mark.parametrize("text,first", [
    ("Which function builds a multipart request body?", "sym:web/multipart.py::encode_fields"),
    ("Which test builds a multipart request body?", "sym:tests/test_multipart.py::test_build_multipart_body"),
    ("Which testing function builds a multipart request body?",  # speaks of testing
     "sym:tests/test_multipart.py::test_build_multipart_body"),
    ("Where do we build a multipart request body from form fields?", "sym:web/multipart.py::encode_fields"),
])
def test_a_question_asking_for_code_answers_with_the_project_code_before_its_tests(
        web: Any, text: str, first: str) -> None:
    """The test's words match the question best, yet a question for a function, or for the place
    where something is done, asks for the project's code: test code follows it, unless tests are
    asked for."""
    assert web.query(text, mode="hybrid", k=3).keys[0] == first


@pytest.mark.parametrize("text,place", [
    ("Where are path variables extracted from a request?", True),
    ("Where is the session cookie signed?", True),
    ("Where does the router clean paths?", True),
    ("Where was the router changed last?", False),  # a question about history
    ("Which commit added the router?", False),
])
def test_a_question_asking_where_asks_for_a_place(text: str, place: bool) -> None:
    assert parse_question(text).asks_place is place
    assert not parse_question(text).asks_docs


@pytest.mark.parametrize("text,way", [
    ("How do I add CORS headers to responses?", True),
    ("How does the router clean paths?", True),
    ("How did the router change in 2.0?", False),  # history: no way of doing something
    ("Why does the router clean paths?", False),
])
def test_a_question_asking_how_asks_for_a_way(text: str, way: bool) -> None:
    assert parse_question(text).asks_way is way


@pytest.mark.parametrize("text,docs", [
    ("Where is the lifespan documented?", True),
    ("Which guide covers sessions?", True),
    ("Where does sphinx-doc implement visit_error?", False),  # a name
    ("Which element is documentation-only?", False),  # a compound
])
def test_a_question_speaks_of_documentation_in_its_own_words(text: str, docs: bool) -> None:
    assert parse_question(text).asks_docs is docs


def test_a_commit_is_no_answer_to_where_something_is(tmp_path: Path, embedder: Any) -> None:
    """A commit whose message repeats the question's words is no place in the code, nor a guide
    that does so the place where it is done: "where" answers with code first, documents next,
    unless the question speaks of documentation."""
    import subprocess

    repo = tmp_path / "repo"
    (repo / "web").mkdir(parents=True)
    (repo / "web/vars.py").write_text("def route_values(request):\n    return request.scope.get('path_params', {})\n")
    (repo / "docs").mkdir()
    (repo / "docs/routing.md").write_text("# Path variables\n\nPath variables are extracted from the request "
                                          "path and handed to the endpoint as path variables.\n")
    git = ["git", "-C", str(repo), "-c", "user.name=Dev", "-c", "user.email=dev@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Extract path variables from the request"], check=True)
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "where", embedder=embedder, reranker=None)
    gm.ingest(repo)
    try:
        for mode in ("hybrid", "hybrid-rerank"):
            keys = gm.query("Where are path variables extracted from the request?", mode=mode, k=3).keys
            assert keys[0].startswith(("sym:", "file:")), keys
            keys = gm.query("Where are path variables documented?", mode=mode, k=3).keys
            assert keys[0] == "doc:docs/routing.md", keys
            keys = gm.query("How do I extract path variables from the request?", mode=mode, k=5).keys
            assert not any(k.startswith(("commit:", "person:")) for k in keys[:2]), keys
            assert any(k.startswith("commit:") for k in gm.query("Which commit extracted path variables?",
                                                                  mode=mode, k=3).keys)
    finally:
        gm.close()


def test_a_changelog_comes_after_the_code_unless_the_question_is_about_history(tmp_path: Path, embedder: Any) -> None:
    """A changelog mentions every part of the code in the question's words; it answers questions
    about the project's history, and comes after the rest for the others."""
    from graphmem.retrieval.graph import GraphRetriever

    repo = tmp_path / "repo"
    (repo / "web").mkdir(parents=True)
    (repo / "web/background.py").write_text(
        "class BackgroundTasks:\n    async def run_all(self):\n"
        "        \"\"\"Run each queued task after the response is sent.\"\"\"\n"
        "        for task in self.tasks:\n            await task()\n")
    (repo / "CHANGELOG.md").write_text(
        "# Changelog\n\n## 0.2.0\n\n- Background tasks run after the response is sent.\n"
        "- Background tasks that fail no longer stop the other background tasks.\n")
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "bg", embedder=embedder, reranker=None)
    gm.ingest(repo)
    try:
        changelog = "doc:CHANGELOG.md"
        graph = GraphRetriever(gm.store)
        assert graph.catalog.changelogs == {changelog}
        assert graph.retrieve(parse_question("How are background tasks run after the response is sent?")).records == {
            changelog}
        assert not graph.retrieve(parse_question("Which release changed how background tasks run?")).records
        keys = gm.query("How are background tasks run after the response is sent?", mode="hybrid", k=5).keys
        assert changelog in keys and keys.index(changelog) > max(i for i, k in enumerate(keys) if k.startswith("sym:")), keys
    finally:
        gm.close()


def test_a_question_asking_for_the_methods_of_a_type_answers_with_its_members(web: Any) -> None:
    q = parse_question("Which methods of SyncClient call send_raw?")
    assert q.members_of == "SyncClient"
    assert parse_question("Which method of the client calls send_raw?").members_of == ""  # names no type
    assert parse_question("Which method of TypeSpec.Builder adds a method?").members_of == "TypeSpec.Builder"
    keys = web.query("Which methods of SyncClient send data through send_raw, as every client must?",
                     mode="hybrid", k=3).keys
    assert set(keys[:2]) == {"sym:web/clients.py::SyncClient.send", "sym:web/clients.py::SyncClient.flush"}, keys


def test_a_question_asking_for_a_class_answers_with_classes_before_methods(web: Any) -> None:
    """The method whose words match stands for its class: the class comes first, the method after
    the classes."""
    keys = web.query("Which class compresses a response body with gzip?", mode="hybrid", k=4).keys
    assert keys[0] == "sym:web/middleware/gzip.py::GZipResponder", keys
    methods = [i for i, key in enumerate(keys) if key.endswith(".compress_body")]
    types = [i for i, key in enumerate(keys) if key.startswith("sym:") and "." not in key.split("::")[1]]
    assert all(i > max(types) for i in methods), keys


def test_a_question_counting_a_relationship_ranks_the_code_by_that_count(
        tmp_path: Path, embedder: Any) -> None:
    """"Which function is called the most?" counts callers over the whole project, not around the
    words of the question (which name nothing here), and not in the tests it does not speak of."""
    files = {
        "app/util.py": "def clean(s):\n    return s.strip()\n\n\ndef lone():\n    '''The most called helper? No.'''\n    return 1\n",
        "app/a.py": "from app.util import clean\n\n\ndef f(x):\n    return clean(x)\n\n\ndef g(x):\n    return clean(x)\n",
        "app/b.py": "from app.util import clean, lone\n\n\ndef h(x):\n    return clean(x) + lone()\n",
        # Tests call `lone` most, and import util most: the project's own code counts here.
        "tests/test_util.py": "".join(f"from app.util import lone\n\n\ndef test_{i}():\n    assert lone() == 1\n\n\n"
                                      for i in range(4)),
        "tests/test_more.py": "from app.b import h\n\n\ndef test_h():\n    assert h(' a ')\n",
    }
    repo = tmp_path / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    gm = Graphmem(Settings(store="embedded", home=tmp_path / "home"), "counts", embedder=embedder, reranker=None)
    try:
        gm.ingest(repo)
        for mode in ("graph", "hybrid"):
            assert gm.query("Which function is called the most?", mode=mode, k=3).keys[0] == \
                "sym:app/util.py::clean", mode
            assert gm.query("Which module is imported by the most files?", mode=mode, k=3).keys[0] == \
                "file:app/util.py", mode
    finally:
        gm.close()
    q = parse_question("Which class has the most subclasses?")
    assert q.directions.get(RelType.INHERITS) == "dst" and q.asks_most
    assert parse_question("Which function has the most callers?").directions.get(RelType.CALLS) == "dst"


def test_a_question_asking_for_a_document_answers_with_documents(web: Any) -> None:
    for text in ("Which document explains the minimum size of GZipMiddleware?",
                 "Is there a guide to the gzip compression of a response body?"):
        q = parse_question(text)
        assert [k.value for k in q.answer_kinds] == ["document"] and not q.sort_noun, text
        assert web.query(text, mode="hybrid", k=3).keys[0] == "doc:docs/compression.md", text
    assert [k.value for k in parse_question("Which function parses the document?").answer_kinds] == [
        "symbol", "file"]  # the kind asked for comes first


def test_the_types_that_declare_a_base_from_outside_the_project_answer_which_extend_it(
        tmp_path: Path, embedder: Any) -> None:
    """``Exception`` is no node of the project: the types whose declarations name it are what
    "which classes extend Exception?" asks for, though other code speaks of exceptions more."""
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app/errors.py").write_text("class Gone(Exception):\n    pass\n\n\nclass Late(Exception):\n    pass\n")
    (repo / "app/format.py").write_text(
        'class ExceptionFormatter:\n    """Formats an exception and the exception chain of an exception."""\n\n'
        "    def format_exception(self, exception):\n        return str(exception)\n")
    with Graphmem(Settings(store="embedded", home=tmp_path / "home"), "errs", embedder=embedder, reranker=None) as gm:
        gm.ingest(repo)
        keys = gm.query("Which classes extend Exception?", mode="hybrid", k=3).keys
    assert set(keys[:2]) == {"sym:app/errors.py::Gone", "sym:app/errors.py::Late"}, keys


def test_a_declaration_file_follows_the_code_it_declares(tmp_path: Path, embedder: Any) -> None:
    """A package's hand-written typings (``typings/index.d.ts``) document its classes better than
    the code does, but the code that does the work answers first; a declaration of which no
    definition was found keeps its place (``Parser``)."""
    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    (repo / "typings").mkdir()
    (repo / "lib/help.js").write_text(
        "class Help {\n  formatHelp(cmd, helper) {\n    return helper.padWidth(cmd) + cmd.name();\n  }\n}\n"
        "exports.Help = Help;\n")
    (repo / "typings/index.d.ts").write_text(
        "/** Formats the help output of a command: usage, description, options and subcommands. */\n"
        "export class Help {\n  /** Format the help output of a command as a string. */\n"
        "  formatHelp(cmd: Command, helper: Help): string;\n}\n")
    with Graphmem(Settings(store="embedded", home=tmp_path / "home"), "typings", embedder=embedder,
                  reranker=None) as gm:
        gm.ingest(repo)
        keys = gm.query("Which class formats the help output of a command?", mode="hybrid", k=5).keys
    assert keys[0] == "sym:lib/help.js::Help", keys
    alone = ["sym:typings/index.d.ts::Parser", "sym:lib/help.js::Help", "sym:typings/index.d.ts::Help", "file:a.js"]
    assert declarations_after_definitions(alone) == [
        "sym:typings/index.d.ts::Parser", "sym:lib/help.js::Help", "file:a.js", "sym:typings/index.d.ts::Help"]


def test_a_question_that_names_code_and_asks_for_nothing_else_answers_with_code_first(
        tmp_path: Path, embedder: Any) -> None:
    """"What does attribute_name return?" speaks of no history: the commits whose messages say
    the same words, and their authors, come after the code."""
    import subprocess

    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@acme.dev", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@acme.dev", "PATH": "/usr/bin:/bin"}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)

    git("init", "-q")
    for i, body in enumerate(("return flag.strip('-')", "return camel(flag.strip('-'))")):
        (repo / "lib/option.py").write_text(
            f"def camel(text):\n    return text.title()\n\n\ndef attribute_name(flag):\n    {body}\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"attribute_name: return the attribute name of an option flag ({i})")
    with Graphmem(Settings(store="embedded", home=tmp_path / "home"), "plain", embedder=embedder,
                  reranker=None) as gm:
        gm.ingest(repo)
        keys = gm.query("What does attribute_name return?", mode="hybrid", k=6).keys
    assert keys[0] == "sym:lib/option.py::attribute_name", keys
    code = [i for i, key in enumerate(keys) if key.startswith(("sym:", "file:"))]
    events = [i for i, key in enumerate(keys) if key.startswith(("commit:", "person:", "release:"))]
    assert events and max(code) < min(events), keys


def test_a_question_for_functions_answers_with_functions_before_files(tmp_path: Path, embedder: Any) -> None:
    """A module's top-level code that calls ``flush_queue`` is a caller, but no function: "which
    function calls flush_queue ...?" puts every file after the code it found."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "queue.py").write_text("def flush_queue(items):\n    return list(items)\n")
    (repo / "worker.py").write_text(
        "from queue import flush_queue\n\n\ndef drain(items):\n    return flush_queue(items)\n")
    (repo / "boot.py").write_text('"""Boots the service: flushes the queue when the service boots."""\n'
                                  "from queue import flush_queue\n\nflush_queue([])\n")
    with Graphmem(Settings(store="embedded", home=tmp_path / "home"), "funcs", embedder=embedder,
                  reranker=None) as gm:
        gm.ingest(repo)
        keys = gm.query("Which function calls flush_queue when the service boots?", mode="hybrid", k=8).keys
        what = gm.query("What calls flush_queue when the service boots?", mode="hybrid", k=8).keys
    assert keys[0] == "sym:worker.py::drain", keys
    files = [i for i, key in enumerate(keys) if key.startswith("file:")]
    assert files and max(i for i, key in enumerate(keys) if key.startswith("sym:")) < min(files), keys
    assert what.index("file:boot.py") < what.index("sym:queue.py::flush_queue"), what  # a caller all the same

"""Linking a question to the nodes it names or describes.

Every link carries a typed reason (``LinkReason``); the message shown to users is derived from it,
and no code reads the message.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from graphmem.model import NodeKind, is_test_key
from graphmem.retrieval.config import LinkConfig
from graphmem.retrieval.graph.catalog import (IDENT_LIKE, STOP, WORD, Catalog, common_noun, is_constructor, singular,
                                              spelt_as, words_of)
from graphmem.retrieval.question import Question


class LinkReason(Enum):
    """Why a node became a seed of graph retrieval."""

    IDENTIFIER = "names the identifier"  # ADR-5, INC-042, a ticket, a commit sha
    NAME = "names"  # a node's name, spelled out
    FUZZY_NAME = "misspells the name"
    SIMILAR_NAME = "its name is close in meaning"
    TITLE = "matches its title"
    AS_OF = "the question is asked as of"
    PICKED = "picked by time"  # "the latest incident"
    IN_WINDOW = "in the time the question names"
    STEPPED = "one step from what the question names"  # "the function that calls X"
    DESCRIBED = "the kind the question describes, next to what it names"
    MEMBER = "a member of the code the question names"  # "which commits changed StaticFiles": its methods
    FACT = "in an extracted fact the question reads like"
    LEXICAL = "found by words or meaning"

    @property
    def named(self) -> bool:
        """The question names the node outright (an identifier or a name)."""
        return self in (LinkReason.IDENTIFIER, LinkReason.NAME)


@dataclass(frozen=True, slots=True)
class Link:
    weight: float
    reason: LinkReason
    detail: str = ""

    @property
    def named(self) -> bool:
        return self.reason.named

    @property
    def message(self) -> str:
        return f"{self.reason.value} {self.detail!r}" if self.detail else self.reason.value


def link(cat: Catalog, q: Question, config: LinkConfig, *, names: tuple[list[str], np.ndarray] | None = None,
         query_vec: np.ndarray | None = None, plain: set[str] | None = None,
         ignore: frozenset[tuple[str, ...]] = frozenset(), sort: bool = False) -> dict[str, Link]:
    """Nodes the question names or describes.

    ``names``: keys and vectors of the names matched by meaning; ``ignore``: word sequences that
    link nothing (the project's own name). ``plain`` collects the passages and untyped entities
    named by one lower-case word ("mother" for the film "Mother"): a common word rather than a name.
    ``sort``: the project has types of the sort the question asks for by a noun ("which endpoint
    class ..."), so that noun names no node (not the test function ``endpoint``)."""
    out: dict[str, Link] = {}

    def add(keys: Sequence[str] | set[str], weight: float, reason: LinkReason, detail: str) -> None:
        keys = [k for k in keys if k in cat.nodes]
        for k in keys:
            w = weight / len(keys)
            if k not in out or out[k].weight < w:
                out[k] = Link(w, reason, detail)

    for n in q.adr_numbers:
        add([f"adr:{n}"], 1.0, LinkReason.IDENTIFIER, f"ADR-{n}")
    for n in q.incident_numbers:
        if n in cat.incidents_by_number:
            add([cat.incidents_by_number[n]], 1.0, LinkReason.IDENTIFIER, f"INC-{n}")
    for t in q.tickets:
        add([f"ticket:{t}"], 1.0, LinkReason.IDENTIFIER, t)
    for sha in q.shas:
        add([k for k in cat.by_kind.get(NodeKind.COMMIT, []) if k[7:].startswith(sha)], 1.0, LinkReason.IDENTIFIER, f"commit {sha}")
    # Names: the longest word sequences first, so "billing service" is not also "billing".
    words = [singular(w) for w in words_of(q.text)]
    spans = list(WORD.finditer(q.text))
    raw = [m.group() for m in spans]
    used = [False] * len(words)
    # The "s" of "method's" and the "t" of "doesn't" are no words of their own: never a name alone
    # nor a name's start (but inside one: "Ender's Game").
    clitic = {i for i, m in enumerate(spans)
              if m.start() > 0 and q.text[m.start() - 1] in "'\u2019" and m.group().lower() in _CLITICS}
    quoted = _quoted_words(q.text)
    # A name after "#" is a private member as JavaScript writes it ("what does #fetch call").
    private = {i for i, m in enumerate(spans) if m.start() > 0 and q.text[m.start() - 1] == "#" and m.group()[0].isalpha()}
    # Words written as code: called, quoted, capitalised inside a sentence, next to a word for code.
    as_code = private | {i for i in range(len(raw)) if IDENT_LIKE.search(raw[i]) or _written_as_name(q.text, spans, i)
                         or _framed_as_code(q.text, spans, words, quoted, i)}

    # Words whose spelling is deliberate: written as code (called, with an underscore, in camel
    # case) or quoted; not a word merely placed beside a noun for code ("the segment class").
    spelt_as_code = private | {i for i in range(len(raw)) if IDENT_LIKE.search(raw[i]) or words[i] in quoted
                               or q.text.startswith("(", spans[i].end())}

    taken: list[set[str]] = [set() for _ in words]  # the keys each word has linked
    if sort and q.sort_noun:
        for i, word in enumerate(raw[:3]):
            if word.lower() == q.sort_noun:
                used[i] = True
                break
    # The question asks for people or their work (an author, a fixer, an owner, commits).
    people = bool(set(q.answer_kinds) & {NodeKind.PERSON, NodeKind.TEAM, NodeKind.COMMIT} or q.rel_types)

    def claim(i: int, size: int, keys: Collection[str], written: str) -> None:
        """Link ``keys`` as named by the words ``i .. i + size`` (``written``), which are then taken."""
        if not q.mentions_tests and len(code := [k for k in keys if not is_test_key(k)]) < len(keys) and code:
            keys = code  # "the command decorator": the project's own, not a test's namesake
        add(keys, 1.0, LinkReason.NAME, written)
        used[i:i + size] = [True] * size
        for j in range(i, i + size):
            taken[j].update(keys)

    def free(i: int, size: int, closed: bool) -> bool:
        # Code that is gone may share its name with an entity the documents mention: "the graphql
        # module" of a question about its history is the module as well as the GraphQL technology.
        if closed and all(cat.nodes[k][0] is NodeKind.ENTITY for j in range(i, i + size) for k in taken[j]):
            return True
        return not any(used[i:i + size])

    def link_names(names: dict[tuple[str, ...], set[str]], closed: bool = False) -> None:
        for size in range(config.max_name_words, 0, -1):
            # Of overlapping names of one length, those not starting or ending with a function word
            # go first: "the World Series" names "World Series", not "the World".
            starts = sorted(range(len(words) - size + 1),
                            key=lambda i: (words[i] in STOP or words[i + size - 1] in STOP, i))
            for i in starts:
                if not free(i, size, closed):
                    continue
                gram = tuple(words[i:i + size])
                keys = names.get(gram)
                if not keys or (size == 1 and gram[0] in STOP) or gram in ignore or i in clitic:
                    continue
                if size == 1 and i + 1 < len(words) and words[i + 1] == "module" and raw[i] in cat.modules:
                    continue  # "the staticfiles module" is the module staticfiles.py, not the class StaticFiles
                if size == 1 and gram[0] in _CODE_IN_GENERAL and i not in spelt_as_code and not (
                        i > 0 and raw[i][:1].isupper() and spelt_as(keys, raw[i])):
                    # "which code signs the cookie": a word for code, not the person whose handle it
                    # is; but "how is a Method compared" names the type ``Method``, capitalised so.
                    continue
                if size == 1 and i not in as_code:
                    # A plain English word that happens to name a function names no function
                    # ("a middleware that logs" names the middleware service, not `Middlewares`),
                    # nor, in a question about no one's work, the person whose handle it is ("the
                    # max request size" is no max@...).
                    keys = {k for k in keys if cat.nodes[k][0] is not NodeKind.SYMBOL
                            and (people or cat.nodes[k][0] is not NodeKind.PERSON)}
                    if not keys:
                        continue
                if size == 1 and (i in spelt_as_code or (i > 0 and raw[i][:1].isupper())):
                    # Spelt as code, or capitalised inside a sentence ("what does Mount do": the
                    # class, not the method ``mount``).
                    keys = _same_spelling(keys, "#" + raw[i] if i in private else raw[i])
                claim(i, size, keys, " ".join(raw[i:i + size]))
                if plain is not None and size == 1 and raw[i].islower():
                    plain.update(k for k in keys if common_noun(k))

    def link_modules(modules: dict[str, set[str]], closed: bool = False) -> None:
        # A code file as a module: a word spelt as the module is ("sessions", "_pytest.config",
        # not "LaTeX" for latex.py) and written as code or followed by "module" ("the sessions
        # module"). Beside "package", "file" or "class", or capitalised, it names something else
        # ("editable package registration", "Texinfo files", "the formatter class").
        for i in range(len(words)):
            if (not free(i, 1, closed) or i in clitic or words[i] in STOP or words[i] in _DETERMINERS
                    or (words[i],) in ignore):  # the project's own package is the project
                continue
            if raw[i] in modules and (i in spelt_as_code or (i + 1 < len(words) and words[i + 1] == "module")):
                claim(i, 1, modules[raw[i]], raw[i])

    # A type named by its words ("the CORS middleware", "the GZip middleware", "Static Files"): two
    # or three words that, run together, spell a type's name, one of them written as a name
    # (capitalised inside the sentence, an acronym): "the test execution" or "the version range" of
    # a question describing code are English. Before single words, which a word for code beside
    # them makes names: "the CORS method middleware" is ``CORSMethodMiddleware``, not ``middleware``.
    # A function capitalised as a type is named so too, by words that start with a capital.
    for size in (3, 2):
        for i in range(len(words) - size + 1):
            if (not free(i, size, False) or any(w in STOP or w in _DETERMINERS for w in words[i:i + size])
                    or not any(raw[j][:1].isupper() and j > 0 for j in range(i, i + size))):
                continue
            joined = {"".join(w.lower() for w in raw[i:i + size]), "".join(words[i:i + size])}
            keys = set().union(*(cat.names_by_words.get(j, set()) for j in joined))
            if not raw[i][:1].isupper():
                # A function's words start with a capital, as its name does ("the Strip Slashes
                # middleware"): "creates a new Mux" describes making one, it does not name ``NewMux``.
                keys &= cat.types
            if keys:
                claim(i, size, keys, " ".join(raw[i:i + size]))
    link_names(cat.by_name)
    link_modules(cat.modules)
    # A definition written after its module's name ("termui.prompt", "sessions.SessionMiddleware"):
    # the module named so, and the definition of that name in it.
    for i, word in enumerate(raw):
        if used[i] or "." not in word or i in clitic:
            continue
        parts = word.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module, rest = ".".join(parts[:cut]), ".".join(parts[cut:])
            keys = {key for path in cat.modules.get(module, ()) if (key := f"sym:{path[5:]}::{rest}") in cat.nodes}
            if keys:
                claim(i, 1, keys, word)
                break
    # A member whose name is too short to link alone ("Walk", "Get"): spelt exactly so and written
    # as code, the word names it ("the Walk method", "what does Match call").
    for i in sorted(as_code):
        if (used[i] or i in clitic or words[i] in STOP or (words[i],) in ignore
                or not (i in spelt_as_code or raw[i][:1].isupper())):  # "the name attribute" is English
            continue
        if raw[i] in cat.short_members:
            claim(i, 1, cat.short_members[raw[i]], raw[i])
    # "Which release removed X", "when was X added": code gone from the graph is named too by a
    # question about its history (its node is closed).
    if q.asks_removal or q.asks_creation or q.asks_change:
        link_names(cat.closed_by_name, closed=True)
        link_modules(cat.closed_modules, closed=True)
    # Misspelt names ("notifcations"): single-word names of services, teams, people and entities.
    if cat.fuzzy_names:
        from rapidfuzz import fuzz, process

        for i, word in enumerate(words):
            if used[i] or len(word) < config.fuzzy_min_length or word in STOP or (word,) in cat.by_name:
                continue
            match = process.extractOne(word, cat.fuzzy_names, scorer=fuzz.ratio, score_cutoff=config.fuzzy_cutoff)
            # A word the name merely extends is another word, not a typo of it: "maintain" is no
            # misspelt "maintainer", nor "schedule" a misspelt "scheduler"; nor is a word that
            # holds the whole name ("parsing" is no misspelt handle "arsing").
            if match and not match[0].startswith(word) and match[0] not in word:
                add(cat.by_name[(match[0],)], config.fuzzy_weight, LinkReason.FUZZY_NAME, f"{raw[i]!r} ~ {match[0]!r}")
    # Names that mean what the question says without saying them (embedding similarity).
    if query_vec is not None and names is not None:
        named, matrix = names
        if named:
            sims = matrix @ np.asarray(query_vec, dtype=np.float32)
            for j in np.argsort(-sims)[:config.name_matches]:
                if sims[j] >= config.name_similarity:
                    add([named[j]], float(sims[j]) * config.name_similarity_weight, LinkReason.SIMILAR_NAME,
                        f"{sims[j]:.2f}")
    # "`submit` in clients/go/client.go": of same-named symbols, keep those in the file it names.
    named_files = {k[5:] for k, link in out.items() if k.startswith("file:") and link.named}
    if named_files:
        in_named = {k for k in out if k.startswith("sym:") and k[4:].split("::")[0] in named_files}
        for k in [k for k in out if k.startswith("sym:") and k not in in_named and in_named
                  and k.rsplit("::", 1)[-1].lower() in {j.rsplit("::", 1)[-1].lower() for j in in_named}]:
            del out[k]
    _link_members(cat, out, raw, as_code, add)
    _link_member_words(cat, out, raw, words, as_code | clitic, config.member_word_weight, add)
    # Decision and incident titles the question paraphrases closely.
    qwords = set(words) - STOP
    for key, title in cat.titles:
        if len(title) >= 2 and len(title & qwords) / len(title) >= config.title_overlap:
            add([key], config.title_weight, LinkReason.TITLE, "")
    _link_kinds(cat, q, add)
    return out


def _same_spelling(keys: set[str], written: str) -> set[str]:
    """Of the code one word names in any case, the code spelt as written, when there is some:
    "testdir()" is the method ``testdir``, not the class ``Testdir``; "`Config`" the class, not a
    ``config`` fixture; a plural, the code spelt with it before the code spelt without. Other
    nodes of that name (a service, a file) stay."""
    def spelt(key: str) -> bool:
        qual = key.rsplit("::", 1)[-1]
        forms = {qual, qual.rsplit(".", 1)[-1]}
        return written in forms or (written.endswith("s") and written[:-1] in forms)

    code = {k for k in keys if k.startswith("sym:")}
    exact = {k for k in code if spelt(k)}
    # "Elements" is ``Elements`` where there is one, not ``Element`` as well.
    as_written = {k for k in exact if written in (k.rsplit("::", 1)[-1], k.rsplit("::", 1)[-1].rsplit(".", 1)[-1])}
    if as_written:
        exact = as_written
    return keys - (code - exact) if exact else keys


def _link_members(cat: Catalog, out: dict[str, Link], raw: list[str], as_code: set[int],
                  add) -> None:  # type: ignore[no-untyped-def]
    """"The __init__ method of Tuple", "TerminalReporter's flush method": a member of a type the
    question names is linked by its own word, even one too common to link alone (a dunder); and of
    same-named members, those of the named type are kept and the others dropped."""
    owners = [k for k, ln in out.items() if ln.named and k.startswith("sym:")]
    if not owners:
        return
    members: set[str] = set()
    for i in as_code:
        word = raw[i]
        for owner in owners:
            key = f"{owner}.{word}"
            if key in cat.nodes and cat.nodes[key][0] is NodeKind.SYMBOL and not is_constructor(key.rsplit("::", 1)[-1]):
                members.add(key)
                add([key], 1.0, LinkReason.NAME, f"{owner.rsplit('::', 1)[-1]}.{word}")
    if not members:
        return
    last = {m.rsplit(".", 1)[-1].lower() for m in members}
    types = {m.rsplit(".", 1)[0] for m in members}
    for k in [k for k in out if k.startswith("sym:") and k not in members and k not in types
              and k.rsplit("::", 1)[-1].rsplit(".", 1)[-1].lower() in last]:
        del out[k]


def _link_member_words(cat: Catalog, out: dict[str, Link], raw: list[str], words: list[str], skip: set[int],
                       weight: float, add) -> None:  # type: ignore[no-untyped-def]
    """"Where does a Request read its body?": a plain lower-case word that is the name of a member
    of a type the question names links that member, more weakly than a name written as code."""
    owners = [k for k, ln in out.items() if ln.named and k.startswith("sym:")]
    if not owners or weight <= 0:
        return
    for i, word in enumerate(raw):
        if i in skip or words[i] in STOP or len(word) < 3 or not word.islower():
            continue
        keys = [key for key in (f"{owner}.{word}" for owner in owners)
                if key not in out and key in cat.nodes and cat.nodes[key][0] is NodeKind.SYMBOL]
        if keys:
            add(keys, weight, LinkReason.NAME, word)


def _link_kinds(cat: Catalog, q: Question, add) -> None:  # type: ignore[no-untyped-def]
    """Kinds named with a time ("the latest incident", "incidents last month") seed their nodes."""
    tf = q.time
    if tf.as_of_ref:
        ref = resolve_ref(cat, tf.as_of_ref)
        if ref:
            add([ref], 1.0, LinkReason.AS_OF, tf.as_of_ref)
    if tf.pick and tf.pick_kind:
        dated = [(cat.nodes[k][2], k) for k in cat.by_kind.get(tf.pick_kind, []) if cat.nodes[k][2]]
        dated = [(d, k) for d, k in dated if tf.admits(d)]
        if dated:
            _d, k = (max if tf.pick == "latest" else min)(dated)
            add([k], 1.0, LinkReason.PICKED, f"the {tf.pick} {tf.pick_kind.value}")
        return
    if tf.start or tf.end:
        for kind in q.kind_mentions:
            if kind is NodeKind.DECISION and q.adr_numbers or kind is NodeKind.INCIDENT and q.incident_numbers:
                continue
            keys = [k for k in cat.by_kind.get(kind, []) if cat.nodes[k][2] and tf.admits(cat.nodes[k][2])]
            if keys:
                add(keys, 1.0, LinkReason.IN_WINDOW, f"{kind.value} in {tf.phrase!r}")

def resolve_ref(cat: Catalog, ref: str) -> str | None:
    m = re.match(r"(INC|ADR)-?0*(\d+)", ref, re.IGNORECASE)
    if not m:
        return None
    if m.group(1).upper() == "ADR":
        key = f"adr:{int(m.group(2))}"
        return key if key in cat.nodes else None
    return cat.incidents_by_number.get(int(m.group(2)))

def reference_date(cat: Catalog, q: Question) -> str | None:
    """The date an "as of INC-042" question is asked at."""
    ref = resolve_ref(cat, q.time.as_of_ref) if q.time.as_of_ref else None
    return cat.nodes[ref][2] if ref else None



# Words that say the word next to them is the name of code: "the frozen function", "method close".
CODE_NOUNS = frozenset({"function", "functions", "method", "methods", "class", "classes", "helper", "helpers",
                        "decorator", "type", "types", "interface", "struct", "constructor", "module", "routine",
                        "callback", "hook", "constant", "enum", "trait", "field", "property", "attribute"})


def _quoted_words(text: str) -> set[str]:
    """Words the question writes as code: in backticks or quotes."""
    spans = re.findall(r"`([^`]+)`|'([^'\s]+)'|\"([^\"\s]+)\"", text)
    return {singular(w) for groups in spans for span in groups if span for w in words_of(span)}


_CLITICS = frozenset({"s", "t", "re", "ll", "d", "ve", "m"})


def _written_as_name(text: str, spans: list[re.Match[str]], i: int) -> bool:
    """Whether one word is written as a name: called ("service()") or capitalised inside a sentence
    ("jump to Integer"), where English capitalises only a sentence's first word; acronyms ("HTTP",
    "CREATE TABLE") are capitals anywhere, so a word in capitals alone is not taken for a name."""
    if text.startswith("(", spans[i].end()):
        return True
    word = spans[i].group()
    before = text[:spans[i].start()].rstrip()
    return (i > 0 and word[0].isupper() and not word.isupper()
            and not before.endswith((".", "!", "?", ":")))


# Verbs whose object is code: only code calls or invokes ("which functions call evolve"), and
# their passives' agent ("called by render").
CALL_VERBS = frozenset({"call", "calling", "invoke", "invoking"})
_CALLED = frozenset({"called", "invoked"})
_BY = frozenset({"by"})
# "What does parse call": the subject of a call verb after an auxiliary is code too.
_AUX = frozenset(singular(w) for w in ("does", "do", "did"))  # as the question's words are compared
# "Split being called", "where does parse get called": the word before these and a passive call
# verb. Right before the verb alone it is a name only where the call has a place or an agent
# ("where is attrib called from", "attrib called by"): "what is this pattern called" asks a name.
_PASSIVE = frozenset(singular(w) for w in ("being", "getting", "get", "gets", "got"))
_CALL_PLACE = frozenset({"from", "by", "in", "at", "inside", "within", "anywhere", "elsewhere", "when", "during"})
_WHERE = frozenset({"where"})
# "The callers of render": the word after these nouns and "of".
_CALL_NOUNS = frozenset({"caller", "callee"})
_OF = frozenset({"of"})
_ASKING = frozenset({"which", "what"})
# Words for code in general, never a name beside a code noun (unlike "field" or "hook", which can be).
_CODE_IN_GENERAL = frozenset({"code", "function", "functions", "method", "methods", "class", "classes",
                              "helper", "helpers", "routine", "routines"})
# Words that pick among things rather than name one: "the other functions", "each method".
_DETERMINERS = frozenset({"other", "another", "each", "every", "some", "such", "same", "both", "either",
                          "neither", "no", "more", "most", "few", "several", "many", "own"})


def _framed_as_code(text: str, spans: list[re.Match[str]], words: list[str], quoted: set[str], i: int) -> bool:
    """Whether one lower-case word is used as a name: quoted, next to a noun for code ("the frozen
    function", "method close"), the object or subject of a verb only code takes ("which functions
    call evolve", "called by render", "what does parse call", "where is attrib called from", "the
    callers of render"), with only spaces or quotes between ("a new field / attribute" joins two
    nouns; neither names the other)."""
    def beside(j: int, frame: frozenset[str]) -> bool:
        if not 0 <= j < len(words) or words[j] not in frame:
            return False
        lo, hi = sorted((i, j))
        return not text[spans[lo].end():spans[hi].start()].strip(" `'\"")

    # After "which function" or "what method" comes the asked-for code's verb ("which method parses
    # a list"), not its name: the noun is the question's subject, named by nothing yet.
    # A word for code in general is no name beside another ("what code helpers", "the class method").
    generic = words[i] in _CODE_IN_GENERAL
    # After a plural comes the nouns' verb ("how are the hooks run"), not a name, unless a call
    # verb follows it ("list the functions rules calls").
    after_noun = (beside(i - 1, CODE_NOUNS) and (spans[i - 1].group().lower() == words[i - 1]
                                                 or beside(i + 1, CALL_VERBS))
                  and not (i >= 2 and words[i - 2] in _ASKING) and not generic)
    before_noun = beside(i + 1, CODE_NOUNS) and words[i] not in _DETERMINERS and not generic
    placed = (i + 2 < len(words) and words[i + 2] in _CALL_PLACE) or (bool(words) and words[0] in _WHERE)
    called_next = ((beside(i + 1, _CALLED) and placed)
                   or (beside(i + 1, _PASSIVE) and i + 2 < len(words) and words[i + 2] in _CALLED))
    subject = not generic and words[i] not in STOP | _DETERMINERS | _PASSIVE | _AUX
    return (words[i] in quoted or before_noun or after_noun or beside(i - 1, CALL_VERBS)
            or (i >= 2 and words[i - 2] in _CALLED and beside(i - 1, _BY))
            or (i >= 2 and words[i - 2] in _CALL_NOUNS and beside(i - 1, _OF) and subject)
            or (subject and beside(i - 1, _AUX) and beside(i + 1, CALL_VERBS))
            or (subject and called_next))

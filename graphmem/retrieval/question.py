"""What a question asks, read without a model: the kind of answer, the relationships it follows,
the identifiers it names and the time it talks about.

The reading is deliberately shallow and predictable (keywords and regular expressions); it steers
graph retrieval (seeds, relationship weights, date filters) and never removes a candidate that
another retriever found.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from graphmem.model import NodeKind, RelType, to_iso

# Words that name what the answer should be ("which team ...", "who ..."); never the first half of a
# hyphenated compound ("what is the system-specific manager" asks for no system).
_ANSWER_PATTERNS: list[tuple[re.Pattern[str], tuple[NodeKind, ...]]] = [
    (re.compile(r"\b(which|what|list|show|find|name)\b[^?.]{0,25}?\b(teams?)\b(?!-)", re.IGNORECASE), (NodeKind.TEAM,)),
    (re.compile(r"\b(which|what|list|show|find|name)\b[^?.]{0,25}?\b(services?|systems?)\b(?!-)", re.IGNORECASE),
     (NodeKind.SERVICE,)),
    (re.compile(r"\b(which|what|list|show|find|name)\b[^?.]{0,25}?"
                r"\b(commits?|changes?|change ?sets?)\b(?!-)", re.IGNORECASE), (NodeKind.COMMIT,)),
    # "What changed in 2.1?", "what's new since Monday": the changes, and the releases that hold them.
    (re.compile(r"\b(what)(?:'s| has| have)? (?:changed|new)\b", re.IGNORECASE), (NodeKind.COMMIT, NodeKind.RELEASE)),
    # A release is a tag where the repository has them, else the commit that made it.
    (re.compile(r"\b(which|what|list|show|find|name)\b[^?.]{0,25}?\b(releases?|versions?)\b(?!-)",
                re.IGNORECASE), (NodeKind.RELEASE, NodeKind.COMMIT)),
    # "when was X added", "when did X go away", "when did X last change": the change that did it. A
    # dot inside a name ("Builder.setHelpAppendable()") ends no sentence. After another question
    # word, "when" opens a clause of the question ("which exception is raised when X is modified").
    (re.compile(r"^(?:(?!\b(?:which|what|who|whom|whose|where|how|why)\b)[^?.])*?"
                r"\bwhen\b(?:[^?.]|\.(?=\w)){0,60}?\b(added|introduced|removed|deleted|renamed|changed|modified|"
                r"rewritten|first appear\w*|go away|went away|dropped|last (?:change|edit|touch)\w*)\b", re.IGNORECASE),
     (NodeKind.COMMIT,)),
    (re.compile(r"\b(which|what|list|show|find|name)\b[^?.]{0,25}?\b(decisions?|adrs?)\b(?!-)", re.IGNORECASE),
     (NodeKind.DECISION,)),
    (re.compile(r"\b(which|what|list|show|find|name)\b[^?.]{0,25}?\b(incidents?|outages?|postmortems?)\b(?!-)",
                re.IGNORECASE), (NodeKind.INCIDENT,)),
    (re.compile(r"\b(which|what|list|show|find|name)\b[^?.]{0,25}?\b(files?|modules?)\b(?!-)", re.IGNORECASE),
     (NodeKind.FILE, NodeKind.SYMBOL)),
    # "Which document explains authentication?", "is there a guide for async usage?"
    (re.compile(r"\b(which|what|list|show|find|name|is there|are there)\b[^?.]{0,25}?"
                r"\b(documents?|docs|documentation|guides?|tutorials?|readmes?)\b(?!-)", re.IGNORECASE),
     (NodeKind.DOCUMENT,)),
    (re.compile(r"\b(which|what|list|show|find|name|all)\b[^?.]{0,30}?\b(code|functions?|methods?|classes|class|"
                r"endpoints?|handlers?|symbols?|callers?|callees?|types?|interfaces?|structs?|helpers?)\b(?!-)",
                re.IGNORECASE), (NodeKind.SYMBOL, NodeKind.FILE)),
    (re.compile(r"\bwho\b", re.IGNORECASE), (NodeKind.PERSON, NodeKind.TEAM)),
    (re.compile(r"\b(which|what)\b[^?.]{0,20}?\b(people|persons?|engineers?|developers?|authors?)\b(?!-)", re.IGNORECASE),
     (NodeKind.PERSON,)),
]

# "Resolved" is a fix of trouble in a question about people or work, or one that speaks of trouble
# ("who resolved INC-7", "how was the outage resolved"); elsewhere it is what code does ("how is a
# group's subcommand resolved").
_RESOLVE = (re.compile(r"\bresolv(e|es|ed|ing)\b", re.IGNORECASE), (RelType.RESOLVED_BY, RelType.FIXES, RelType.AUTHORED))
_TROUBLE = re.compile(r"\b(?:incidents?|outages?|issues?|bugs?|tickets?|problems?|alerts?|failures?|crash(?:es)?"
                      r"|regressions?|INC[-_ ]?\d+)\b", re.IGNORECASE)
_DECISION_WORDS = re.compile(r"\bdecid|\bdecision|\badr\b", re.IGNORECASE)
# Words that name relationships, and the types they mean.
# "used to" and "used for" give a purpose ("the helper used to parse dates"), "used as" a role
# ("an object used as a key"), not a user.
_USE = re.compile(r"\bus(?:e|es|ed)\b(?!\s+(?:to|for|as)\b)", re.IGNORECASE)
# English forms of editing something, which lead to the commits that did it (and, with removals,
# updates and renames, make a question about change: ``_CHANGE_WORDS``).
_EDIT_WORDS = frozenset({"change", "changed", "changes", "changing", "modify", "modified", "modifies", "modifying",
                         "modification", "modifications", "touch", "touched", "touches", "touching", "edit",
                         "edited", "edits", "editing"})
_EDITS = (re.compile(r"\b(?:" + "|".join(sorted(_EDIT_WORDS)) + r")\b", re.IGNORECASE),
          (RelType.MODIFIED, RelType.CHANGED, RelType.IMPLEMENTS, RelType.REFERENCES, RelType.RELEASED_IN))
# "Which classes implement NodeVisitor?", "which types implement the matcher interface?", "which
# interfaces does Element implement?": implementing a type, or satisfying it in Go's word (a name
# spelt with capitals, or called an interface, or the object asked for) is inheriting from it;
# "which function implements retry logic" describes code.
_IMPLEMENTS_TYPE = (r"\b(?:implement(?:s|ed|ing)?|satisf(?:y|ies|ied|ying))\b(?=\s+(?:the\s+)?[`'\"]?(?:(?-i:(?:[A-Za-z_]\w*\.)*[A-Z]\w*[a-z])"
                    r"(?![\w.]*\()|[\w.]+[`'\"]?\s+interface\b))"
                    # At the end in its active forms only: "where is the timeout implemented?" asks for code.
                    r"|\bimplements?\s*[?.!]*\s*$")
# Each word is matched in its own forms only, not as the start of another word: "fixture" is not
# "fix", "authorization" not "author", "editable" not "edit", "important" not "import", an
# "extension point" not "extends", a "broker" not "broke".
_REL_WORDS: list[tuple[re.Pattern[str], tuple[RelType, ...]]] = [
    (re.compile(r"\bcall(s|ed|ing|ers?)?\b|\binvok|\breach(es|ed)?\b", re.IGNORECASE), (RelType.CALLS,)),
    (re.compile(r"\bdepend|\bdependen|\bconsum", re.IGNORECASE), (RelType.DEPENDS_ON, RelType.IMPORTS)),
    (_USE, (RelType.CALLS, RelType.DEPENDS_ON, RelType.IMPORTS)),
    (re.compile(r"\bimport(s|ed|ing)?\b", re.IGNORECASE), (RelType.IMPORTS,)),
    # "Its own package" is no ownership.
    (re.compile(r"\bown(s|ed|er|ers|ership)\b|(?<!\bits )(?<!\btheir )(?<!\bhis )(?<!\bher )(?<!\bour )"
                r"(?<!\bmy )(?<!\byour )\bown\b|\bresponsible\b|\bmaintain", re.IGNORECASE), (RelType.OWNS,)),
    (re.compile(r"\bmembers?\b|\bworks? (on|in)\b|\bteam\b", re.IGNORECASE), (RelType.MEMBER_OF,)),
    _EDITS,
    (re.compile(r"\bwrote\b|\bauthor(s|ed|ing|ship)?\b|\bcommitted\b|\blast changed\b", re.IGNORECASE),
     (RelType.AUTHORED,)),
    (re.compile(r"\bcaus|\btrigger|\bintroduc|\broot cause", re.IGNORECASE), (RelType.CAUSED_BY,)),
    (re.compile(r"\bfix(es|ed|ing|er)?\b|\bmitigat", re.IGNORECASE), (RelType.RESOLVED_BY, RelType.FIXES, RelType.AUTHORED)),
    _RESOLVE,
    (_DECISION_WORDS, (RelType.DECIDED, RelType.IMPLEMENTS, RelType.REFERENCES)),
    (re.compile(r"\bsupersed|\breplac|\bin force\b|\bobsolete", re.IGNORECASE), (RelType.SUPERSEDES,)),
    (re.compile(r"\bfail|\bbroken?\b|\bhit\b|\baffect|\boutage", re.IGNORECASE), (RelType.AFFECTED, RelType.CAUSED_BY)),
    (re.compile(r"\bmention|\brefer(s|red|ring|ence|ences|enced|encing)?\b", re.IGNORECASE),
     (RelType.MENTIONS, RelType.REFERENCES)),
    (re.compile(r"\binherit|\bextend(s|ed|ing)?\b|\bsubclass|\bimplements? the interface|" + _IMPLEMENTS_TYPE
                + r"|\b(base|parent|super|child)\s*class(es)?\s+of\b", re.IGNORECASE), (RelType.INHERITS,)),
]

# Words of a thing's coming and going, which lead to the commits that changed it only when the
# question reads as history (``_history_words``): "which method removes a listener" describes code.
_COMING_AND_GOING = (re.compile(r"\badded\b|\bremov|\bdelet|\brenam|\bintroduc|\bfirst appear|\bgo(ne)? away\b"
                                r"|\bwent away\b", re.IGNORECASE), (RelType.MODIFIED, RelType.CHANGED))

# Code implements a decision through the commits that changed it ("what code implements ADR-5");
# without a decision in the question, "implement" describes code ("why does X implement Y as a
# static method") and leads nowhere in the graph.
_IMPLEMENT = (re.compile(r"\bimplement", re.IGNORECASE),
              (RelType.MODIFIED, RelType.CHANGED, RelType.IMPLEMENTS, RelType.REFERENCES))
# Agent sessions, read only in a project that holds some (elsewhere "which session" is an HTTP or
# database session): the answer kind, and the one relationship that joins a session to what it
# read, edited, committed or named.
_SESSION_ANSWER = (re.compile(r"\b(which|what|list|show|find|name)\b[^?.]{0,25}?\b(sessions?|transcripts?)\b(?!-)",
                              re.IGNORECASE), (NodeKind.SESSION,))
_EDITORS = frozenset({NodeKind.COMMIT, NodeKind.RELEASE, NodeKind.PERSON, NodeKind.TEAM, NodeKind.SESSION})
_SESSION_REL = (re.compile(r"\bsessions?\b|\btranscripts?\b", re.IGNORECASE), (RelType.TOUCHED,))

# Kind words whose mention (without an identifier) makes every node of that kind a candidate seed.
_KIND_WORDS: list[tuple[re.Pattern[str], NodeKind]] = [
    (re.compile(r"\bincidents?\b|\boutages?\b", re.IGNORECASE), NodeKind.INCIDENT),
    (re.compile(r"\bdecisions?\b|\badrs?\b", re.IGNORECASE), NodeKind.DECISION),
]

ADR_RE = re.compile(r"\bADR[-_ ]?0*(\d{1,5})\b", re.IGNORECASE)
INCIDENT_RE = re.compile(r"\bINC[-_ ]?0*(\d{1,6})\b", re.IGNORECASE)
TICKET_RE = re.compile(r"\b([A-Z][A-Z0-9]{1,9})-(\d{1,6})\b")
SHA_RE = re.compile(r"\b[0-9a-f]{7,40}\b")

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_UNITS = {"day": 1, "week": 7, "month": 30, "quarter": 91, "year": 365}
_LAST_N = re.compile(r"\b(?:last|past|previous)\s+(\d+|two|three|four|five|six|few)?\s*(day|week|month|quarter|year)s?\b",
                     re.IGNORECASE)
_WORD_NUM = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "few": 3}
_MONTH_YEAR = r"(?:(?P<m>[A-Za-z]{3,9})\s+)?(?P<y>(?:19|20)\d\d)"
_BEFORE = re.compile(r"\b(?:before|prior to|until|up to)\s+" + _MONTH_YEAR, re.IGNORECASE)
_AFTER = re.compile(r"\b(?:after|since|from)\s+" + _MONTH_YEAR, re.IGNORECASE)
_IN = re.compile(r"\b(?:in|during)\s+" + _MONTH_YEAR, re.IGNORECASE)
_AS_OF = re.compile(r"\b(?:as of|at the time of|when)\s+(INC[-_ ]?\d+|ADR[-_ ]?\d+)", re.IGNORECASE)
_LATEST = re.compile(r"\b(latest|most recent|newest|last)\s+"
                     r"(incident|outage|commit|change|decision|adr|release|version)s?\b", re.IGNORECASE)
_LATEST_CHANGE = re.compile(r"\b(last|latest|most recent(ly)?|recently)\s+(changed|modified|touched|edited|"
                            r"updated|worked on|change|edit|commit)", re.IGNORECASE)
# The same said after what changed: at the end of the question ("who changed X most recently?"), or
# right after the verb ("what changed most recently in X?"; not "changed last week").
_CHANGED_LAST = re.compile(r"\b(changed|modified|touched|edited|updated)\b(\s+(most recently|recently|lately)\b|"
                           r"[^?!]{0,80}?\b(most recently|last|lately)\s*[?.!]*\s*$)", re.IGNORECASE)
# English words for a change, a removal and a creation. Matched as whole words so that a name
# written in camel case ("CreateArticle", "removeListener") is not read as one.
_REMOVAL_WORDS = frozenset({"remove", "removed", "removes", "removing", "removal", "delete", "deleted", "deletes",
                            "deleting", "deletion", "drop", "dropped", "drops", "dropping"})
_CHANGE_WORDS = _REMOVAL_WORDS | _EDIT_WORDS | frozenset({
    "update", "updated", "updates", "updating", "rename", "renamed", "renames", "renaming"})
_CREATION_WORDS = frozenset({"add", "added", "adds", "adding", "addition", "introduce", "introduced", "introduces",
                             "introducing", "introduction", "create", "created", "creates", "creating", "creation"})
_GONE = re.compile(r"\b(go|goes|gone|went) away\b", re.IGNORECASE)
_APPEARED = re.compile(r"\bfirst (appear|show)", re.IGNORECASE)


_PRESENT_BE = frozenset({"is", "are", "be", "being", "get", "gets", "getting", "become", "becomes"})


def _english_words(text: str) -> list[str]:
    """The question's plain English words, lower case, in order. A token written as code (with an
    underscore, a digit, a dot or brackets inside, in backticks, or in camel case: ``_add_eq``,
    ``Add_init()``, ``removeListener``) is a name, not words."""
    out = []
    for token in text.split():
        word = token.strip("?,.!:;\"'()[]{}")
        if word.isalpha() and word.isascii() and (word.islower() or word.istitle()):
            out.append(word.lower())
        elif word.isalpha() and word.isupper():
            out.append("")  # an acronym keeps its place (it can stand between a verb and its auxiliary)
    return out


def _history_words(words: list[str], vocabulary: frozenset[str], asks_commit: bool) -> bool:
    """Whether ``words`` ask about the history of ``vocabulary``'s change: any form of it when the
    question asks for a commit or release ("which release removes X"), otherwise only a past form
    that is not a present passive ("when was X removed", "which version dropped X"; not "which
    function removes listeners" or "what runs when a session is created": those describe behaviour)."""
    for i, word in enumerate(words):
        if word not in vocabulary:
            continue
        if asks_commit:
            return True
        if word.endswith("ed") and not _PRESENT_BE & set(words[max(0, i - 2):i]):
            return True
    return False


_RELATIVE_STEP = re.compile(r"\bthe\s+(function|method|code|endpoint|handler|service|caller|routine)s?\s+"
                            r"(that|which)\s+(calls?|invokes?|depends?\s+on)\b", re.IGNORECASE)
# A call relationship crossed twice: "calls X indirectly", "two calls away", "through one
# intermediate call", "the callers of X's callers", "which functions call those helpers".
_TWO_CALLS = re.compile(r"\bindirect(?:ly)?\b|\b(?:two|2) (?:calls|hops|steps|levels) (?:away|removed|deep)\b"
                        r"|\bthrough (?:one|an?) (?:intermediate|middle|other) (?:call|function|caller)\b"
                        r"|\bcall\w* (?:of )?(?:the |its |their )?callers\b|\bcall(?:s|ed)? (?:those|these) \w+",
                        re.IGNORECASE)
_ASKS_TYPE = re.compile(r"\b(which|what)\s+(\w+\s+){0,3}(class|classes|type|types|struct|structs|interface|interfaces)\b"
                        r"|\bof which (class|type|struct|interface)\b", re.IGNORECASE)
_ASKS_CALLABLE = re.compile(r"\b(which|what)\s+(\w+\s+){0,3}(method|methods|function|functions|func|funcs|"
                            r"constructor|constructors|routine|routines)\b", re.IGNORECASE)
# The asker's own call ("which type do I need an instance of to call `setData`?", "how do we invoke
# X?"): the question is about using X, not about the code that calls it.
# A path written with "::" (Rust's ``HeaderMap::insert``, C++'s and Ruby's too) is read as the dotted
# qualified name graphmem gives that member.
_PATH_SEPARATOR = re.compile(r"(?<=[A-Za-z0-9_])::(?=[A-Za-z_#$])")
_DOTTED_NAME = re.compile(r"[A-Za-z_#$][\w#$]*(?:\.[A-Za-z_#$][\w#$]*)+")
_ASKER_CALLS = re.compile(r"\b(?:do|does|did|should|must|can|could|would|will|shall)\s+(?:I|we|you)\s+"
                          r"(?:(?:\w+\s+){0,6}?to\s+)?(call|invoke)\b", re.IGNORECASE)
# "Call" as a noun after an article or a word that counts ("turn a request into a tRPC call", "on
# each call to fetch"): one call made, no relationship asked about.
_A_CALL = re.compile(r"(?<!\bdo\s)(?<!\bdoes\s)(?<!\bdid\s)\b(?:a|an|each|every|one|per|single)\s+(?:[\w-]+\s+)?(call)\b",
                     re.IGNORECASE)  # not "what does a Router call"
_IN_FORCE = re.compile(r"\bin (?:force|effect)\b|\bcurrent(?:ly)?\b|\bstill (?:valid|appl(?:y|ies)|holds?|stands?)\b",
                       re.IGNORECASE)
_FIRST = re.compile(r"\b(first|earliest|oldest)\s+(incident|outage|commit|change|decision|adr)s?\b", re.IGNORECASE)
_KIND_OF_WORD = {"incident": NodeKind.INCIDENT, "outage": NodeKind.INCIDENT, "commit": NodeKind.COMMIT,
                 "change": NodeKind.COMMIT, "decision": NodeKind.DECISION, "adr": NodeKind.DECISION,
                 "release": NodeKind.RELEASE, "version": NodeKind.RELEASE}


@dataclass(slots=True)
class TimeFilter:
    """A date window (ISO strings, half-open ``[start, end)``), a pick of the newest or oldest node of a
    kind, or a reference node whose date the question is asked "as of"."""

    start: str | None = None
    end: str | None = None
    pick: str | None = None  # "latest" | "earliest"
    pick_kind: NodeKind | None = None
    as_of_ref: str | None = None  # e.g. "INC-042"
    phrase: str = ""

    @property
    def active(self) -> bool:
        return bool(self.start or self.end or self.pick or self.as_of_ref)

    def admits(self, when: str | None) -> bool:
        """Whether a node dated ``when`` lies in the window (undated nodes always do)."""
        if when is None:
            return True
        if self.start and when < self.start:
            return False
        return not (self.end and when >= self.end)

    def as_dict(self) -> dict[str, object]:
        return {"start": self.start, "end": self.end, "pick": self.pick,
                "pick_kind": self.pick_kind.value if self.pick_kind else None,
                "as_of": self.as_of_ref, "phrase": self.phrase}


@dataclass(slots=True)
class Question:
    """A question as graph retrieval reads it."""

    text: str
    answer_kinds: tuple[NodeKind, ...] = ()
    rel_types: dict[RelType, float] = field(default_factory=dict)
    # The relationships the main clause names ("who FIXED the incident that hit X"): those lead to
    # the answer; the ones of relative clauses ("that hit X") lead to what the answer is about.
    main_rel_types: frozenset[RelType] = frozenset()
    # For relationships read with a direction: "src" when the answer is the relationship's start
    # ("which services depend on auth": the dependents), "dst" when it is its end ("what does X call").
    directions: dict[RelType, str] = field(default_factory=dict)
    kind_mentions: tuple[NodeKind, ...] = ()
    # "who last changed X", "the most recent change to X": of the commits that changed a piece of
    # code, the newest one matters.
    latest_change: bool = False
    # "which release removed X", "when was X last modified": a change to what already existed, so
    # a root commit (which only creates) is no answer.
    asks_change: bool = False
    # "which release removed X", "when was X added": the answer is the commit that ended or began
    # X's time in the graph.
    asks_removal: bool = False
    asks_creation: bool = False
    # "which class has the evolve method", "what type defines Format": the answer is a type, so a
    # method found stands for the type that holds it.
    asks_type: bool = False
    # "which method cancels a timeout", "what function parses dates": the answer is a function or a
    # method, not the type around it.
    asks_callable: bool = False
    # "which decision is in force for X", "the current decision on Y": a superseded decision is no
    # answer (as of the question's reference time, if it names one).
    asks_in_force: bool = False
    # "the function that calls X": the question's way in is not X but the nodes one directed step
    # from it (here X's callers). The relationship, and which end of it those nodes are.
    step: tuple[RelType, str] | None = None
    adr_numbers: tuple[int, ...] = ()
    incident_numbers: tuple[int, ...] = ()
    tickets: tuple[str, ...] = ()
    shas: tuple[str, ...] = ()
    time: TimeFilter = field(default_factory=TimeFilter)
    words: int = 0  # plain English words (names written as code are not words)
    # "which database does billing use": the question names what it asks for with a word no node
    # kind is, so a service, team or person it names is what it asks about, not its answer.
    asks_other_thing: bool = False
    # "which code outside middleware/ calls X": directories (packages) the answer lies outside.
    outside: tuple[str, ...] = ()
    # "who uses X from other packages", "outside its own package": the answer lies outside the
    # package (directory) of the code the question names.
    outside_own: bool = False
    # "the functions in the assertion module", "which code under src/app/ calls X": directories
    # written as paths, or names of a package, module or directory, the answer lies in.
    inside: tuple[str, ...] = ()
    # The question opens by asking for a thing ("which class ...", "list the ..."), not how or why
    # something is done ("how does X decide which class ...").
    opens_asking: bool = False
    # "Which methods of Client call X?": the answer is a member of the type of that name.
    members_of: str = ""
    # "which tests cover X", "where is X tested": the answer is test code.
    asks_tests: bool = False
    # The question speaks of tests or testing at all ("the testing utility that invokes the CLI"):
    # test code may be its answer.
    mentions_tests: bool = False
    # "Which middleware compresses responses?", "what exception is raised when ...", "which response
    # class streams a file?": the question asks for a thing by a noun that is no node kind (lower
    # case, as written). Where the project's type names end with it (``GZipMiddleware``), those
    # types are the answers (see ``graphmem.retrieval.graph.sorts``).
    sort_noun: str = ""
    # The sort's types hold what is asked for ("which builder methods ..."): their members answer.
    sort_owns_answer: bool = False
    # "Where is X defined?", "where are path variables extracted?": the answer is a place (code, a
    # file, a document), not a commit, a release or a person.
    asks_place: bool = False
    # The question speaks of documentation ("where is X documented", "which guide covers Y").
    asks_docs: bool = False
    # "How do I add CORS headers?", "how does X parse Y?": the answer shows a way (code, a document),
    # it is no commit, release or person.
    asks_way: bool = False
    # "Who wrote most of regexp.go?", "who knows the router best?": the people are ranked by how
    # much of it they wrote (a count, not "the most recent change").
    asks_most: bool = False

    def keep_relationships(self, held: Collection[str]) -> None:
        """Forget the relationships (and their directions and steps) whose type is not in ``held``:
        a graph holding none of a type has no edge of it to walk."""
        gone = {t for t in (*self.rel_types, *self.directions, *self.main_rel_types) if t.value not in held}
        if self.step is not None and self.step[0].value not in held:
            gone.add(self.step[0])
        if not gone:
            return
        self.rel_types = {t: w for t, w in self.rel_types.items() if t not in gone}
        self.main_rel_types = frozenset(self.main_rel_types - gone)
        self.directions = {t: end for t, end in self.directions.items() if t not in gone}
        if self.step is not None and self.step[0] in gone:
            self.step = None

    @property
    def about_history(self) -> bool:
        """Whether the question asks about the project's history: for commits or releases, or about
        what was added, changed or removed."""
        return (self.asks_change or self.asks_creation or self.asks_removal
                or bool({NodeKind.COMMIT, NodeKind.RELEASE} & set(self.answer_kinds)))

    @property
    def relational(self) -> bool:
        """Whether the question asks for a relationship (its answer plays a role towards another node)."""
        return bool(self.rel_types or self.directions or self.step)

    def as_dict(self) -> dict[str, object]:
        return {"answer_kinds": [k.value for k in self.answer_kinds],
                "relationships": {t.value: w for t, w in self.rel_types.items()},
                "main_relationships": sorted(t.value for t in self.main_rel_types),
                "directions": {t.value: d for t, d in self.directions.items()},
                "kind_mentions": [k.value for k in self.kind_mentions], "latest_change": self.latest_change,
                "asks_change": self.asks_change, "asks_removal": self.asks_removal,
                "asks_creation": self.asks_creation,
                "asks_type": self.asks_type, "asks_callable": self.asks_callable, "asks_in_force": self.asks_in_force,
                "asks_other_thing": self.asks_other_thing, "asks_tests": self.asks_tests,
                "mentions_tests": self.mentions_tests,
                "sort_noun": self.sort_noun or None, "sort_owns_answer": self.sort_owns_answer,
                "members_of": self.members_of or None,
                "asks_place": self.asks_place, "asks_docs": self.asks_docs,
                "asks_way": self.asks_way, "asks_most": self.asks_most,
                "step": [self.step[0].value, self.step[1]] if self.step else None,
                "adrs": list(self.adr_numbers), "incidents": list(self.incident_numbers),
                "tickets": list(self.tickets), "shas": list(self.shas), "time": self.time.as_dict()}


def _month_year(month: str | None, year: str) -> tuple[datetime, datetime] | None:
    """The span of ``[month] year`` as (start, end)."""
    y = int(year)
    if month:
        m = _MONTHS.get(month.lower())
        if m is None:
            return None
        start = datetime(y, m, 1, tzinfo=timezone.utc)
        end = datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=timezone.utc)
        return start, end
    return datetime(y, 1, 1, tzinfo=timezone.utc), datetime(y + 1, 1, 1, tzinfo=timezone.utc)


def parse_time(text: str, now: datetime) -> TimeFilter:
    """Read the time a question talks about, relative to ``now``."""
    tf = TimeFilter()
    if m := _AS_OF.search(text):
        tf.as_of_ref, tf.phrase = m.group(1).upper().replace("_", "-").replace(" ", "-"), m.group(0)
    if m := _LATEST.search(text):
        tf.pick, tf.pick_kind, tf.phrase = "latest", _KIND_OF_WORD[m.group(2).lower()], m.group(0)
    elif m := _FIRST.search(text):
        tf.pick, tf.pick_kind, tf.phrase = "earliest", _KIND_OF_WORD[m.group(2).lower()], m.group(0)
    if m := _LAST_N.search(text):
        count_word = (m.group(1) or "1").lower()
        count = _WORD_NUM.get(count_word) or int(count_word)
        tf.start, tf.end, tf.phrase = to_iso(now - timedelta(days=count * _UNITS[m.group(2).lower()])), None, m.group(0)
    elif re.search(r"\byesterday\b", text, re.IGNORECASE):
        tf.start, tf.phrase = to_iso(now - timedelta(days=1)), "yesterday"
    elif re.search(r"\bthis year\b", text, re.IGNORECASE):
        tf.start, tf.phrase = to_iso(datetime(now.year, 1, 1, tzinfo=timezone.utc)), "this year"
    for pattern, side in ((_BEFORE, "end"), (_AFTER, "start"), (_IN, "in")):
        m = pattern.search(text)
        span = _month_year(m.group("m"), m.group("y")) if m else None
        if m is None or span is None:
            continue
        if side == "end":
            tf.end = to_iso(span[0])
        elif side == "start":
            tf.start = to_iso(span[1] if m.group(0).lower().startswith("after") else span[0])
        else:
            tf.start, tf.end = to_iso(span[0]), to_iso(span[1])
        tf.phrase = m.group(0)
    return tf


# A passive verb: a be-verb before it ("where is X called from", "X being called"); with words
# between the two, those words are the verb's object and the answer is its subject.
# A dot inside a name ("node.findEdge") ends no sentence.
_PASSIVE = re.compile(r"\b(?P<be>is|are|was|were|be|been|being|gets?|got)\b(?P<between>(?:[^?.!,;]|\.(?=\w))*)$",
                      re.IGNORECASE)
# Verbs whose English subject is the start of the relationship ("A calls B": A -CALLS-> B).
_DIRECTED_VERBS: list[tuple[re.Pattern[str], RelType]] = [
    (re.compile(r"\bcall(?:s|ed|ing)?\b|\binvok\w*|\brel(?:y|ies|ied|ying) on\b|\bdelegat\w*|\breach(?:es|ed)?\b",
                re.IGNORECASE), RelType.CALLS),
    # The verb only: "a dependency chain" names no end ("dependents", "dependencies of" below do).
    (re.compile(r"\bdepend(?:s|ed|ing)?\b|\bcall\w* into\b", re.IGNORECASE), RelType.DEPENDS_ON),
    # Code that uses a function calls it ("which functions use parse_args"); a service that uses
    # another depends on it.
    (_USE, RelType.CALLS),
    (_USE, RelType.DEPENDS_ON),
    (re.compile(r"\bsupersed\w*|\breplac\w*", re.IGNORECASE), RelType.SUPERSEDES),
    (re.compile(r"\bimport(?:s|ed|ing)?\b", re.IGNORECASE), RelType.IMPORTS),
    # Verbs only: "the inheritance of parameters" or "inherited by subclasses" names no end.
    (re.compile(r"\binherit(?:s|ed|ing)?\b|\bextend(?:s|ed|ing)?\b|\bsubclass(?:ed|ing)\b|" + _IMPLEMENTS_TYPE,
                re.IGNORECASE), RelType.INHERITS),
]
_ASKS_OBJECT = re.compile(r"\b((what|which)(\s+\w+)?|who(m)?)\s+(does|do|did|is|are|was|were)\s+\S+", re.IGNORECASE)


_WHO = (NodeKind.PERSON, NodeKind.TEAM)
_WHO_RELATES = re.compile(r"\bwho\s+(else\s+|still\s+|directly\s+)?(calls?|invokes?|depends?|uses?\b|supersed|replac)"
                          r"|\bwho\s+(is|are)\s+the\s+call(er|ee)s?\b",
                          re.IGNORECASE)
# "Who is on the team that owns billing?", "who are the members of payments": the who is a member,
# and a team is no member of a team.
_WHO_BELONGS = re.compile(r"\bwho\b[^?.]{0,20}?\b(?:members?\b|(?:on|in|part of|belongs? to)\s+(?:the|that|this|a)\s+"
                          r"(?:[\w-]+\s+)?team\b)", re.IGNORECASE)
# "Which database does billing use?", "what library do the clients call?": the question names what
# it asks for, and no node kind is that thing, so the relationship does not choose a kind for it
# (a database is no function because "use" reads as calling). Words that qualify the asking word
# name nothing ("what else does X call").
_ASKS_UNKNOWN_THING = re.compile(
    r"\b(?:which|what)\s+(?!(?:else|exactly|then|now|all|one|ones)\b)(?:[a-z][a-z-]*\s+){1,3}?"
    r"(?:does|do|did|will|would|should|can|could)\b", re.IGNORECASE)
_KIND_OF_RELATION = {RelType.CALLS: (NodeKind.SYMBOL,), RelType.DEPENDS_ON: (NodeKind.SERVICE,),
                     RelType.SUPERSEDES: (NodeKind.DECISION,), RelType.INHERITS: (NodeKind.SYMBOL,),
                     RelType.IMPORTS: (NodeKind.FILE, NodeKind.SYMBOL)}


def _asking_clause(text: str) -> str:
    """Of clauses joined by ";" or ":", the last one that asks ("X is called by a few helpers;
    which functions call those helpers?" asks in its second)."""
    clauses = [c for c in re.split(r"[;:]\s", text) if c.strip()]
    asking = [c for c in clauses if re.search(r"\b(which|what|who|whom|where|when|list|find|show)\b", c, re.IGNORECASE)]
    return asking[-1] if asking else text


def _nearest_asking_word(text: str) -> str | None:
    """The last question word of ``text`` (lower case), if any."""
    found = re.findall(r"\b(which|what|who|how|why|list|find|show)\b", text, re.IGNORECASE)
    return found[-1].lower() if found else None


def _directions(text: str) -> dict[RelType, str]:
    """Which end of a named relationship the answer is, where the wording says so."""
    text = _asking_clause(text)
    out: dict[RelType, str] = {}
    if re.search(r"\bcallers?\b", text, re.IGNORECASE):
        out[RelType.CALLS] = "src"
    if re.search(r"\bcallees?\b", text, re.IGNORECASE):
        out[RelType.CALLS] = "dst"
    # "Which function has the most callers?" asks for what is called; "the most subclasses" for a base.
    if re.search(r"\bmost\s+callers\b", text, re.IGNORECASE):
        out[RelType.CALLS] = "dst"
    elif re.search(r"\bmost\s+callees\b", text, re.IGNORECASE):
        out[RelType.CALLS] = "src"
    if re.search(r"\bmost\s+(?:sub\s*classes|child\s+classes|implementations)\b", text, re.IGNORECASE):
        out[RelType.INHERITS] = "dst"
    elif re.search(r"\bsubclass(?:es)?\s+of\b|\bchild\s+class(?:es)?\s+of\b", text, re.IGNORECASE):
        out[RelType.INHERITS] = "src"  # "the subclasses of Response" start the relationship
    elif re.search(r"\b(?:base|parent|super)\s*class(?:es)?\s+of\b|\bsuperclass(?:es)?\s+of\b", text, re.IGNORECASE):
        out[RelType.INHERITS] = "dst"  # "the base class of FileResponse" ends it
    if re.search(r"\bdependents\b", text, re.IGNORECASE):
        out[RelType.DEPENDS_ON] = "src"  # "the dependents of auth" start the relationship
    elif re.search(r"\bdependenc(?:y|ies)\s+(?:of|for)\b", text, re.IGNORECASE):
        out[RelType.DEPENDS_ON] = "dst"  # "the dependencies of auth" end it
    for pattern, rel in _DIRECTED_VERBS:
        m = pattern.search(text)
        if m is None or rel in out:
            continue
        after = text[m.end():]
        by = re.match(r"\s*:?\s*by\s+[`'\"(]*(\w+)", after, re.IGNORECASE)
        passive = _PASSIVE.search(text[:m.start()])
        if passive and m.group(0).lower().endswith("ing") and not passive["between"].strip():
            passive = None  # "are depending on", "is calling": the progressive is active
        if passive and m.group(0).lower().endswith("s"):
            passive = None  # "how are imports resolved": a noun, not a participle
        if by:  # passive: "superseded by which decision" asks for the subject, "called by X" for the object
            out[rel] = "src" if by.group(1).lower() in ("which", "what", "whom", "who") else "dst"
        elif passive and (passive["between"].strip() or passive["be"].lower() == "being"):
            out[rel] = "src"  # "where is X called from", "code that depends on X being called"
        elif passive:
            out[rel] = "dst"  # "what is called when X runs"
        elif _ASKS_OBJECT.search(text[:m.start()]) and not re.search(r"\b(is|are|was|were)\b", text[:m.start()]):
            out[rel] = "dst"  # "what does X call"
        elif not re.sub(r"\b(directly|itself|at all|on|in|into)\b|[\s?.!]", "", after, flags=re.IGNORECASE):
            out[rel] = "dst"  # the verb ends the question: "the functions X calls directly"
        elif _nearest_asking_word(text[:m.start()]) in ("which", "what", "who", "list", "find", "show"):
            # "which services depend on auth"; not "what is X, and how does it depend on Y", where
            # the verb's own clause asks how, not for one of its ends.
            out[rel] = "src"
    return out


_RELATIVE = re.compile(r"\b(that|which|who|whose|where)\b", re.IGNORECASE)

# A question about the reach of a failure or a change ("which services are affected if billing goes
# down?", "what breaks if I change parse_date?", "if auth fails, what stops working?"): the answer
# depends on what the question names, so it is a dependent (a caller, a service depending on it),
# not what an incident AFFECTED. The condition says what happens to the named node; the asking part
# says something suffers.
_CONDITION = re.compile(r"\b(?:if|when|whenever|should|once)\b[^?,;]*?\b(?:go(?:es)?\s+(?:down|away|offline)|is\s+(?:down|"
                        r"offline|unavailable|removed|deleted|changed|renamed)|fail(?:s|ed)?|crash(?:es|ed)?|breaks?|broke|"
                        r"(?:chang|remov|delet|renam)(?:e|es|ed))\b", re.IGNORECASE)
_SUFFERS = re.compile(r"\b(?:affected|impacted|break|breaks|broken|stop(?:s)?\s+working|go\s+down|fail|be\s+hit)\b",
                      re.IGNORECASE)
_IMPACT_RELATIONS = (RelType.DEPENDS_ON, RelType.CALLS, RelType.IMPORTS)
_IMPACT_KINDS = (NodeKind.SYMBOL, NodeKind.FILE, NodeKind.SERVICE)


def _impact_condition(text: str) -> re.Match[str] | None:
    """The condition of a question that asks what suffers when the node it names fails or changes
    (see ``_CONDITION``), if it is one."""
    condition = _CONDITION.search(text)
    if condition is None or INCIDENT_RE.search(text):
        return None  # an incident named: what it affected is asked ("which services did INC-5 hit?")
    rest = text[:condition.start()] + " " + text[condition.end():]
    return condition if _SUFFERS.search(rest) else None


# A subordinate clause the question opens with ("If the service behind INC-5 fails again, which
# services ..."): the question word comes after its comma. "When was X added, and by whom" asks
# when: there "when" is the question word.
_OPENING_CLAUSE = re.compile(r"^\s*(?:if|(?:when|since)(?!\s+(?:is|are|was|were|do|does|did|has|have|had|will|would|"
                             r"can|could|should)\b)|whenever|once|after|before|because|given|assuming|suppose|"
                             r"while|although|though|unless)\b[^,?]*,\s*", re.IGNORECASE)


def _main_clause(text: str) -> str:
    """The question without its relative clauses: each "that/which/who ..." after the first word
    runs to the next comma or the end ("Who fixed the incident that hit billing?" -> "Who fixed the
    incident"). A subordinate clause the question opens with is no part of it."""
    if m := _OPENING_CLAUSE.match(text):
        text = text[m.end():]
    out, pos = [], 0
    for m in _RELATIVE.finditer(text):
        if m.start() < pos or not text[:m.start()].strip():
            continue  # the question word itself ("Which team ...", "Who ...")
        out.append(text[pos:m.start()])
        end = text.find(",", m.end())
        pos = len(text) if end < 0 else end
    out.append(text[pos:])
    return "".join(out)


# A directory written as a path ("src/_pytest/config/", "`middleware/`"). A path that goes on into a
# file ("`submit` in clients/go/client.go") places what the question names, not its answer.
_DIRECTORY = r"[`'\"]?((?:[\w.-]+/)+)(?![\w.-])"
_OUTSIDE_PATH = re.compile(r"\boutside\s+(?:of\s+)?(?:the\s+)?" + _DIRECTORY, re.IGNORECASE)
_OUTSIDE_OWN = re.compile(r"\boutside\s+(?:of\s+)?(?:its|their)\s+own\s+(?:package|module|directory|folder)s?\b"
                          r"|\b(?:from|in|by)\s+(?:any\s+)?other\s+(?:packages|modules|directories|folders)\b",
                          re.IGNORECASE)

# The question asks for test code: "which tests cover X", "what test checks Y", "where is X tested"
# (not "the test that verifies X", which names a test as the place of something else).
_ASKS_TESTS = re.compile(r"\b(?:which|what)\s+(?:unit\s+|integration\s+)?tests?\b(?!\s+(?:file|suite|helper|util))"
                         r"|\bwhere\s+(?:is|are)\s+.{1,60}?\s+tested\b", re.IGNORECASE)
_OPENS_ASKING = re.compile(r"\s*(?:which|what|list|show|find|name)\b", re.IGNORECASE)
_TEST_WORDS = re.compile(r"\btest(?:s|ed|ing|case|cases|suite|suites)?\b", re.IGNORECASE)
# A question that opens by asking for a thing by a noun ("Which middleware compresses ...", "what
# exception is raised ...", "which endpoint class handles ...", "list all middleware classes"), the
# noun its subject: "what value does X return" asks about a value X gives, not for a type of value.
_SORT_NOUN = re.compile(r"^\s*(?:(?:which|what)\s+([A-Za-z]+)(\s+(?:class|classes|type|types))?"
                        # A verb's object follows a verb, not a noun: "what raises UsageError",
                        # "what handles the request".
                        r"\s+(?!(?:do|does|did|a|an|the|this|that|these|those)\b|(?-i:\w*[A-Z_(])|\w+[.(])\w"
                        r"|(?:list|show|find)\s+(?:(?:all|every|each|the)\s+)?([A-Za-z]+)"
                        r"(\s+(?:class|classes|type|types))\b)", re.IGNORECASE)
# What is raised or thrown is an exception, though the question names no noun ("what is thrown when
# ...", "what does parse() raise"), and the noun of "what error does X raise" is its sort although
# an object.
_RAISED = re.compile(r"^\s*(?:what|which)\s+(?:([A-Za-z]+)\s+)?(?:is|are|was|were|gets?|got|does|do|did|can|could"
                     r"|may|might|will|would)\b.*\b(?:raise[sd]?|throw[sn]?)\b", re.IGNORECASE)
# Nouns the reader knows as node kinds or as words for code in general (the answer patterns above):
# a sort only when a class or type follows ("which endpoint class", "which service class").
_KIND_NOUNS = frozenset({
    "team", "service", "system", "commit", "change", "changeset", "release", "version", "decision", "adr",
    "incident", "outage", "postmortem", "file", "module", "package", "directory", "folder", "endpoint", "handler",
    "symbol", "caller", "callee", "interface", "struct", "helper", "people", "person", "engineer", "developer",
    "author", "test", "session", "transcript", "document", "docs", "documentation", "guide", "tutorial", "readme"})
# Words that pick rather than name, words for code in general, and verbs.
_NOT_SORTS = frozenset({
    "code", "function", "method", "class", "type", "other", "kind", "part", "thing", "way", "place", "line",
    "is", "are", "was", "were", "happen", "happened", "one", "two", "three", "four", "first", "last", "main",
    "single", "specific", "exact", "new", "old", "do", "does", "did", "can", "could", "would", "should", "will",
    "must", "might", "has", "have", "had"})
# "Where is X defined?", "where are path variables extracted?", "where does X happen?": the answer
# is a place (code, a file, a document), not a commit, a release or a person. ("Where was X
# changed?" asks about history.)
_ASKS_PLACE = re.compile(r"^\s*where\s+(?:is|are|does|do|can|should|would|will|must)\b", re.IGNORECASE)
# "How do I add CORS headers?", "how does X parse Y?": the answer is code or a document that shows
# the way, not a commit, a release or a person ("how did X change" asks about history).
_ASKS_WAY = re.compile(r"^\s*how\s+(?:do|does|can|could|should|would|will|is|are|to)\b", re.IGNORECASE)
_MOST = re.compile(r"\bmost\b(?!\s+recent)|\bbest\b", re.IGNORECASE)
# Words for documentation: "where is the lifespan documented", "which guide covers X" (not a
# "document" a program handles, nor the "-doc" of a name).
_DOC_WORDS = re.compile(r"(?<![-\w])(?:docs|documentation|documented|guides?|tutorials?|readme)\b(?!-)", re.IGNORECASE)
# "Which builder methods add modifiers?": the sort's types hold the answer; they are not it.
_SORT_OWNS = re.compile(r"^\s*(?:which|what)\s+[A-Za-z]+\s+(?:methods?|functions?|fields?|attributes?|properties"
                        r"|property|constructors?|members?)\b", re.IGNORECASE)
_MEMBERS_OF = re.compile(r"^\s*(?:which|what|list|show|find)\s+(?:(?:all|the)\s+)?(?:methods?|functions?|members?)\s+"
                         r"(?:of|in|on)\s+(the\s+)?([`'\"])?([A-Za-z_][\w.]*[\w])", re.IGNORECASE)
_INSIDE_PATH = re.compile(r"\b(?:in|under|within|inside)\s+(?:the\s+)?" + _DIRECTORY, re.IGNORECASE)
_INSIDE_NAME = re.compile(r"\b(?:in|under|within|inside)\s+the\s+[`'\"]?([\w.-]+)[`'\"]?\s+"
                          r"(?:sub)?(?:package|module|director(?:y|ies)|folder)\b", re.IGNORECASE)


def _blank_verb(m: re.Match[str]) -> str:
    """The match with its first group (a "call" that asks for no relationship) blanked out."""
    return m.group(0)[:m.start(1) - m.start()] + " " * len(m.group(1)) + m.group(0)[m.end(1) - m.start():]


def parse_question(text: str, now: datetime | None = None, *, sessions: bool = False) -> Question:
    """Read ``text`` (see the module docstring); ``now`` anchors "last month" and the like;
    ``sessions``: the project holds agent sessions, so "which sessions ..." asks for them."""
    now = now or datetime.now(timezone.utc)
    text = _PATH_SEPARATOR.sub(".", text)
    q = Question(text=text)
    # A hypothetical failure or change ("if I changed X") is no history, asks for no change and
    # names no relationship: the rest of the question is read without it.
    impact = _impact_condition(text)
    read = text if impact is None else text[:impact.start()] + " " * (impact.end() - impact.start()) + text[impact.end():]
    found: list[tuple[int, tuple[NodeKind, ...]]] = []
    # A dotted name is code, not a word for a kind or a relation ("what does Version.parse call"
    # asks for no release, "who changed HeaderMap.extend" nothing of inheritance). It stays one
    # word, which the directions read ("what imports starlette.datastructures"), and a name, which
    # "implement" before it reads as a type's ("which types implement http.Handler").
    code_masked = _DOTTED_NAME.sub(lambda m: "X" + "x" * (len(m.group(0)) - 1), read)
    for pattern, kinds in _ANSWER_PATTERNS + ([_SESSION_ANSWER] if sessions else []):
        if m := pattern.search(code_masked):
            found.append((m.start(2) if (m.lastindex or 0) >= 2 else m.start(), kinds))
    # The kind word named first is the answer: "which team owns the service ..." asks for a team.
    q.answer_kinds = min(found, key=lambda item: item[0])[1] if found else ()
    words = _english_words(read)
    q.words = sum(1 for w in _english_words(text) if w)
    asks_commit = NodeKind.COMMIT in q.answer_kinds
    creation = _history_words(words, _CREATION_WORDS, asks_commit) or bool(_APPEARED.search(read))
    q.asks_removal = _history_words(words, _REMOVAL_WORDS, asks_commit) or bool(_GONE.search(read))
    q.asks_change = (_history_words(words, _CHANGE_WORDS, asks_commit) or q.asks_removal) and not creation
    q.asks_creation = creation and not q.asks_removal
    history = q.asks_change or q.asks_creation
    rel_text = _A_CALL.sub(_blank_verb, _ASKER_CALLS.sub(_blank_verb, code_masked))
    main = _main_clause(rel_text)
    main_types: set[RelType] = set()
    # An edit word leads to the commits that made an edit only in a question about history, one
    # that asks for commits, releases or people, or one that speaks of a commit ("which functions
    # did the commit 'Raise the limit' change"): "a function that prevents an attribute to be
    # modified" describes code.
    edits = history or any(set(kinds) & _EDITORS for _, kinds in found)
    trouble = edits or bool(_TROUBLE.search(read))
    patterns = ([p for p in _REL_WORDS if (edits or p is not _EDITS) and (trouble or p is not _RESOLVE)]
                + ([_COMING_AND_GOING] if history else [])
                + ([_IMPLEMENT] if _DECISION_WORDS.search(text) else []) + ([_SESSION_REL] if sessions else []))
    for pattern, types in patterns:
        if pattern.search(rel_text):
            for t in types:
                q.rel_types[t] = q.rel_types.get(t, 0.0) + 1.0
            if pattern.search(main):
                main_types.update(types)
    q.directions = _directions(rel_text)
    if impact is not None:
        # What suffers depends on, or calls, what fails or changes.
        main_types -= {RelType.AFFECTED, RelType.CAUSED_BY}
        for rel in (RelType.AFFECTED, RelType.CAUSED_BY):
            q.rel_types.pop(rel, None)
        for rel in _IMPACT_RELATIONS:
            q.rel_types[rel] = q.rel_types.get(rel, 0.0) + 1.0
            q.directions[rel] = "src"
            main_types.add(rel)
        # "What breaks if ...": what depends on the named node, be it code, a file or a service.
        q.answer_kinds = q.answer_kinds or _IMPACT_KINDS
    q.main_rel_types = frozenset(main_types)
    thing = _ASKS_UNKNOWN_THING.search(read) if not found else None
    # "What internal calls does X make" asks for the relationship itself.
    names_thing = thing is not None and not any(pattern.search(thing.group(0)) for pattern, _ in _REL_WORDS)
    if names_thing and impact is None:
        # Nor does the verb say which relationship leads to it: a database is used through code
        # and configuration alike, and what says which one is used is prose.
        q.directions, q.rel_types, q.main_rel_types = {}, {}, frozenset()
        q.asks_other_thing = True
    if impact is None and not names_thing and (not q.answer_kinds
                                               or (q.answer_kinds == _WHO and _WHO_RELATES.search(text))):
        # "what does X call" names no kind, and in "who calls X" the who is code: a directed
        # relationship joins nodes of one kind.
        for rel in q.directions:
            q.answer_kinds = _KIND_OF_RELATION.get(rel, q.answer_kinds)
            break
    if q.answer_kinds == _WHO and _WHO_BELONGS.search(read):
        q.answer_kinds = (NodeKind.PERSON,)
    q.latest_change = bool(_LATEST_CHANGE.search(text) or _CHANGED_LAST.search(text))
    # Of "which functions use the classes method", the kind word nearest the asking word is asked for.
    asks_type, asks_callable = _ASKS_TYPE.search(text), _ASKS_CALLABLE.search(text)
    q.asks_type = bool(asks_type) and not (asks_callable and asks_callable.end() < asks_type.end())
    q.asks_callable = not q.asks_type and bool(asks_callable)
    q.opens_asking = bool(_OPENS_ASKING.match(text))
    q.asks_in_force = NodeKind.DECISION in q.answer_kinds and bool(_IN_FORCE.search(text))
    if m := _RELATIVE_STEP.search(text):
        verb = m.group(3).lower()
        q.step = (RelType.DEPENDS_ON if verb.startswith("depend") else RelType.CALLS, "src")
    elif RelType.CALLS in q.rel_types and _TWO_CALLS.search(text):
        # One step along the calls first: the answer is a further step the same way.
        q.step = (RelType.CALLS, q.directions.get(RelType.CALLS, "src"))
    q.kind_mentions = tuple(kind for pattern, kind in _KIND_WORDS if pattern.search(text))
    q.adr_numbers = tuple(dict.fromkeys(int(n) for n in ADR_RE.findall(text)))
    q.incident_numbers = tuple(dict.fromkeys(int(n) for n in INCIDENT_RE.findall(text)))
    q.tickets = tuple(dict.fromkeys(f"{p.upper()}-{n}" for p, n in TICKET_RE.findall(text)
                                    if p.upper() not in ("ADR", "INC")))
    q.shas = tuple(dict.fromkeys(s for s in SHA_RE.findall(text.lower()) if not s.isdigit()))
    q.time = parse_time(text, now)
    q.outside = tuple(dict.fromkeys(m.group(1).rstrip("/") for m in _OUTSIDE_PATH.finditer(text)))
    q.outside_own = bool(_OUTSIDE_OWN.search(text))
    q.asks_tests = bool(_ASKS_TESTS.search(text))
    q.mentions_tests = q.asks_tests or bool(_TEST_WORDS.search(text))
    q.asks_place = bool(_ASKS_PLACE.match(text))
    q.asks_way = bool(_ASKS_WAY.match(text))
    q.asks_most = bool(_MOST.search(text))
    q.asks_docs = bool(_DOC_WORDS.search(text))
    if m := _SORT_NOUN.match(read):
        noun = (m.group(1) or m.group(3)).lower()
        # Before "class" or "type" a kind word names a sort too ("which endpoint class"); a verb the
        # reader knows names none ("what calls X", "what changed").
        excluded = _NOT_SORTS if m.group(2) or m.group(4) else _NOT_SORTS | _KIND_NOUNS
        if (not {noun, noun.removesuffix("s"), noun.removesuffix("es")} & excluded
                and not any(pattern.match(noun) for pattern, _ in (*_REL_WORDS, _COMING_AND_GOING, _IMPLEMENT))):
            q.sort_noun = noun
    q.sort_owns_answer = bool(q.sort_noun) and bool(_SORT_OWNS.match(read))
    if not q.sort_noun and (m := _RAISED.match(read)):
        noun = (m.group(1) or "exception").lower()
        if not {noun, noun.removesuffix("s")} & (_NOT_SORTS | _KIND_NOUNS):
            q.sort_noun = noun
    if (m := _MEMBERS_OF.match(text)) and (m.group(2) or not m.group(1) or not m.group(3).isalpha()
                                           or not m.group(3).islower()):
        q.members_of = m.group(3)  # a type's name: not a plain word after "the" ("the method of the client")
    q.inside = tuple(dict.fromkeys([m.group(1) for m in _INSIDE_PATH.finditer(text)]
                                   + [m.group(1) for m in _INSIDE_NAME.finditer(text)]))
    return q

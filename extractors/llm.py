"""Entity and relation extraction by an LLM behind any OpenAI-compatible chat completions API.

OpenAI, Ollama, vLLM, LM Studio and llama.cpp's server all speak ``POST <base>/chat/completions``;
this module talks to it with the standard library only (``urllib``), so an install without the
feature configured carries nothing extra.

One call extracts one text of one *source kind* (``decision``, ``incident``, ``commit``,
``docstring``, ``document``), each with its own instruction. The answer is a JSON object::

    {"entities": [{"name": str, "type": one of ENTITY_TYPES, "confidence": 0..1}],
     "relationships": [{"subject": str, "predicate": str, "object": str, "confidence": 0..1}]}

It is asked for with ``response_format`` (a JSON schema) where the server supports it, but never
trusted: every answer is parsed and validated here, and an invalid one is sent back once with the
problems found ("repair"); a second invalid answer fails that text. Names are then *grounded*: an
entity is kept only if its name occurs in the text (case-insensitive, whitespace-normalised, on
word boundaries), with the character span where it does; a relationship is kept only between kept
entities. Nothing the model invents without the text saying it reaches the graph.

Requests are retried with exponential backoff on 429 (honouring ``Retry-After``), 5xx, timeouts,
connection errors and unreadable bodies; 401/403/404 stop at once (a configuration problem).
Answers are cached in SQLite by prompt version, model, source kind and text hash, so the same text
is never paid for twice. Text is secret-redacted (:mod:`extractors.secrets`) before it is sent.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import re
import socket
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from extractors.secrets import redact
from graphmem.config import LLM_SOURCE_KINDS, LLMSettings
from graphmem.errors import GraphmemError
from graphmem.model import normalise_name, now_iso

EXTRACTOR = "llm"
# Bump when a prompt, the schema or the validation changes: cached answers of an older version
# are then not reused, and enrichment redoes every text.
PROMPT_VERSION = "1"

SOURCE_KINDS = LLM_SOURCE_KINDS

# The fixed vocabulary of entity types. An entity's key is ``entity:<type>:<name>`` unless it
# names something the graph already holds (a service, a code symbol, a known technology).
ENTITY_TYPES = (
    "technology",  # a product or standard used to build software: Kafka, PostgreSQL, gRPC
    "service",  # a deployed service of the organisation
    "component",  # a part of a system: a module, queue, job, endpoint, cache
    "library",  # a package or framework used from code
    "datastore",  # a database, bucket, table or index holding data
    "protocol",  # a wire format or protocol: HTTP/2, OAuth, Avro
    "api",  # an interface offered or called: an endpoint, an RPC, a public function
    "code_symbol",  # a class, function or method named in prose
    "team",
    "person",
    "organisation",
    "product",  # something sold or offered to customers
    "location",  # a region, data centre, country, place
    "event",  # an incident, release, outage, meeting, historical event
    "metric",  # a measured quantity: p99 latency, error rate
    "error",  # an error, exception or failure mode: OOMKilled, deadlock
    "concept",  # anything else worth a node: a practice, pattern, idea
    "work",  # a book, film, paper, song, standard document
    "date",
)
TYPE_ALIASES = {
    "organization": "organisation", "org": "organisation", "company": "organisation",
    "tech": "technology", "tool": "technology", "platform": "technology", "framework": "library",
    "package": "library", "database": "datastore", "db": "datastore", "table": "datastore",
    "queue": "component", "module": "component", "system": "component", "endpoint": "api",
    "function": "code_symbol", "class": "code_symbol", "method": "code_symbol", "symbol": "code_symbol",
    "people": "person", "place": "location", "region": "location", "exception": "error",
    "time": "date", "year": "date", "other": "concept", "misc": "concept",
}

MAX_NAME_CHARS = 200
MAX_PREDICATE_CHARS = 100
MAX_ITEMS = 100  # per list in one answer; more is cut off, not an error
DEFAULT_CONFIDENCE = 0.5

SYSTEM_PROMPT = """You extract a knowledge graph from text written in a software organisation.
Answer with one JSON object and nothing else, of this form:
{"entities": [{"name": "...", "type": "...", "confidence": 0.9}],
 "relationships": [{"subject": "...", "predicate": "...", "object": "...", "confidence": 0.8}]}
Rules:
- "name" is copied exactly as the text writes it (same words, same spelling). Never invent, expand,
  translate or correct names: a name that does not occur in the text is discarded.
- "type" is one of: TYPES.
- "confidence" is a number from 0 to 1: how sure you are that the text names this entity or states
  this relationship.
- A relationship joins two entities of your "entities" list, by their exact names. "predicate" is a
  short verb phrase in lower case ("uses", "depends on", "replaces", "caused", "stores data in").
- Only what the text itself says. Leave out vague words ("the system", "the team", "data"), file
  paths and commit hashes.
- When the text names nothing, answer {"entities": [], "relationships": []}.""".replace("TYPES", ", ".join(ENTITY_TYPES))

KIND_PROMPTS = {
    "decision": "The text is an architecture decision record ({title}). Extract the technologies, services, "
                "components, libraries, datastores, protocols, teams, people and main concepts it names, and the "
                "relationships the decision states between them: what is chosen, what it replaces, what uses or "
                "depends on what.",
    "incident": "The text is an incident postmortem ({title}). Extract the services, components, datastores, "
                "technologies, errors, metrics, teams and people involved, and how they relate: what failed, what "
                "caused what, what depends on what, what fixed it.",
    "commit": "The text is a git commit message ({title}). Extract the components, services, libraries, "
              "technologies, datastores, errors and concepts the change is about, and the relationships it states.",
    "docstring": "The text is the documentation of the code symbol {title}. Extract the components, services, "
                 "libraries, technologies, datastores, protocols and concepts it names, and the relationships it "
                 "states: what the code uses, calls, stores, returns or depends on.",
    "document": "The text is a passage ({title}). Extract the named entities (people, organisations, places, "
                "works, events, products, technologies, concepts) and the relationships the passage states "
                "between them.",
}


def _item_schema(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": list(props), "properties": props}


ANSWER_SCHEMA: dict[str, Any] = _item_schema({
    "entities": {"type": "array", "items": _item_schema({
        "name": {"type": "string"},
        "type": {"type": "string", "enum": list(ENTITY_TYPES)},
        "confidence": {"type": "number"},
    })},
    "relationships": {"type": "array", "items": _item_schema({
        "subject": {"type": "string"},
        "predicate": {"type": "string"},
        "object": {"type": "string"},
        "confidence": {"type": "number"},
    })},
})


def build_messages(kind: str, text: str, title: str | None = None) -> list[dict[str, str]]:
    """The chat messages that ask for the entities and relationships of ``text``."""
    if kind not in KIND_PROMPTS:
        raise ValueError(f"unknown source kind {kind!r}: one of {', '.join(SOURCE_KINDS)}")
    instruction = KIND_PROMPTS[kind].format(title=title or "untitled")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"{instruction}\n\nText:\n<<<\n{text}\n>>>"},
    ]


# --- answers ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entity:
    """An entity as the extraction states it: a name as written in the text, a type, a confidence."""

    name: str
    type: str
    confidence: float = 1.0


@dataclass(frozen=True, slots=True)
class Relation:
    """``subject -predicate-> object``, both ends named as in the entity list."""

    subject: str
    predicate: str
    object: str
    confidence: float = 1.0


@dataclass(slots=True)
class Answer:
    """A validated answer."""

    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({
            "entities": [{"name": e.name, "type": e.type, "confidence": e.confidence} for e in self.entities],
            "relationships": [{"subject": r.subject, "predicate": r.predicate, "object": r.object,
                               "confidence": r.confidence} for r in self.relations],
        }, ensure_ascii=False)


class InvalidAnswer(ValueError):
    """An answer that does not fit the schema; ``problems`` are what is sent back to repair it."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def normalise_type(value: str) -> str | None:
    """A type as the vocabulary spells it (``"Organization"`` -> ``organisation``), or None."""
    t = re.sub(r"[\s-]+", "_", value.strip().lower())
    t = TYPE_ALIASES.get(t, t)
    return t if t in ENTITY_TYPES else None


_FENCED = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)
_THINKING = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)  # reasoning models think aloud first


def _load_json(content: str) -> Any:
    text = _THINKING.sub("", content).strip()
    fenced = _FENCED.match(text)
    if fenced:  # models without response_format often wrap JSON in a Markdown code fence
        text = fenced.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        first, last = text.find("{"), text.rfind("}")
        if 0 <= first < last and (first > 0 or last < len(text) - 1):
            try:  # a JSON object with prose around it
                return json.loads(text[first:last + 1])
            except json.JSONDecodeError:
                pass
        raise InvalidAnswer([f"the answer is not valid JSON ({exc.msg} at character {exc.pos})"]) from None


def _confidence(item: dict[str, Any], where: str, problems: list[str]) -> float | None:
    value = item.get("confidence", DEFAULT_CONFIDENCE)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(f"{where}: confidence must be a number from 0 to 1, not {value!r}")
        return None
    return min(1.0, max(0.0, float(value)))


def _text_field(item: dict[str, Any], name: str, limit: int, where: str, problems: list[str]) -> str | None:
    value = item.get(name)
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {name!r} must be a non-empty string")
        return None
    value = " ".join(value.split())
    if len(value) > limit:
        problems.append(f"{where}: {name!r} is longer than {limit} characters")
        return None
    return value


def parse_answer(content: str, *, final: bool = False) -> tuple[Answer, list[str]]:
    """Parse and validate a model answer.

    Raises :class:`InvalidAnswer` when the answer is not a JSON object with an ``entities`` list,
    or (unless ``final``) when any item is malformed. With ``final`` (no repair left), malformed
    items are dropped and listed in the returned problems instead.
    """
    data = _load_json(content)
    if not isinstance(data, dict):
        raise InvalidAnswer([f"the answer must be a JSON object, not {type(data).__name__}"])
    raw_entities = data.get("entities")
    if not isinstance(raw_entities, list):
        raise InvalidAnswer(['the answer needs an "entities" list'])
    raw_relations = data.get("relationships", [])
    if not isinstance(raw_relations, list):
        raise InvalidAnswer(['"relationships" must be a list'])
    problems: list[str] = []
    answer = Answer()
    for i, item in enumerate(raw_entities[:MAX_ITEMS]):
        where = f"entities[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object")
            continue
        name = _text_field(item, "name", MAX_NAME_CHARS, where, problems)
        raw_type = item.get("type")
        etype = normalise_type(raw_type) if isinstance(raw_type, str) else None
        if etype is None:
            problems.append(f"{where}: type {raw_type!r} is not one of {', '.join(ENTITY_TYPES)}")
        conf = _confidence(item, where, problems)
        if name is not None and etype is not None and conf is not None:
            answer.entities.append(Entity(name, etype, conf))
    for i, item in enumerate(raw_relations[:MAX_ITEMS]):
        where = f"relationships[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object")
            continue
        subject = _text_field(item, "subject", MAX_NAME_CHARS, where, problems)
        predicate = _text_field(item, "predicate", MAX_PREDICATE_CHARS, where, problems)
        obj = _text_field(item, "object", MAX_NAME_CHARS, where, problems)
        conf = _confidence(item, where, problems)
        if subject and predicate and obj and conf is not None:
            answer.relations.append(Relation(subject, predicate, obj, conf))
    if problems and not final:
        raise InvalidAnswer(problems)
    return answer, problems


# --- grounding ----------------------------------------------------------------------------------


def _fold(text: str) -> tuple[str, list[int]]:
    """``text`` lower-cased with whitespace runs as single spaces, and each folded character's
    index in ``text`` (lower-casing may turn one character into two)."""
    out: list[str] = []
    index: list[int] = []
    space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if not space:
                out.append(" ")
                index.append(i)
            space = True
            continue
        space = False
        for c in ch.lower():
            out.append(c)
            index.append(i)
    return "".join(out), index


def _wordy(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class Grounder:
    """Finds names in one text: case-insensitive, whitespace-normalised, on word boundaries."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._folded, self._index = _fold(text)

    def find(self, name: str) -> tuple[int, int] | None:
        """``(start, end)`` character offsets in the text of the first occurrence of ``name``."""
        needle = _fold(" ".join(name.split()))[0]
        if not needle:
            return None
        hay = self._folded
        pos = hay.find(needle)
        while pos >= 0:
            end = pos + len(needle)
            left_ok = not (_wordy(needle[0]) and pos > 0 and _wordy(hay[pos - 1]))
            right_ok = not (_wordy(needle[-1]) and end < len(hay) and _wordy(hay[end]))
            if left_ok and right_ok:
                return self._index[pos], self._index[end - 1] + 1
            pos = hay.find(needle, pos + 1)
        return None


@dataclass(frozen=True, slots=True)
class GroundedEntity:
    """An entity found in the text: ``mention`` is the text at ``[start, end)``."""

    name: str
    type: str
    confidence: float
    start: int
    end: int
    mention: str


@dataclass(slots=True)
class Grounded:
    """What of an answer the text supports, and how much was dropped."""

    entities: list[GroundedEntity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    dropped_entities: list[str] = field(default_factory=list)
    dropped_relations: int = 0


def ground(entities: list[Entity], relations: list[Relation], text: str | None) -> Grounded:
    """Keep the entities whose name occurs in ``text`` (each name once, at its first occurrence)
    and the relationships between two different kept entities. ``text=None`` trusts every name
    (span ``(0, 0)``)."""
    out = Grounded()
    finder = Grounder(text) if text is not None else None
    kept: dict[str, GroundedEntity] = {}
    for ent in entities:
        norm = normalise_name(ent.name)
        if norm in kept:
            if ent.confidence > kept[norm].confidence:  # the same name twice: keep the surer one
                old = kept[norm]
                kept[norm] = GroundedEntity(old.name, ent.type, ent.confidence, old.start, old.end, old.mention)
            continue
        if finder is None:
            kept[norm] = GroundedEntity(ent.name, ent.type, ent.confidence, 0, 0, ent.name)
            continue
        span = finder.find(ent.name)
        if span is None:
            out.dropped_entities.append(ent.name)
            continue
        mention = finder.text[span[0]:span[1]]
        kept[norm] = GroundedEntity(" ".join(mention.split()), ent.type, ent.confidence, span[0], span[1], mention)
    out.entities = list(kept.values())
    seen: set[tuple[str, str, str]] = set()
    for rel in relations:
        s, o = normalise_name(rel.subject), normalise_name(rel.object)
        ident = (s, rel.predicate.lower(), o)
        if s not in kept or o not in kept or s == o:
            out.dropped_relations += 1
            continue
        if ident in seen:
            continue
        seen.add(ident)
        out.relations.append(Relation(kept[s].name, rel.predicate, kept[o].name, rel.confidence))
    return out


# --- the endpoint -------------------------------------------------------------------------------


class LLMError(GraphmemError):
    """An extraction did not succeed."""


class EndpointError(LLMError):
    """The endpoint cannot serve requests now (down, rate limited, failing, misconfigured):
    further requests of the same run would fail alike."""


class Cancelled(EndpointError):
    """The run stopped (another request found the endpoint unavailable) before this one finished."""

    def __init__(self) -> None:
        super().__init__("cancelled")


class AnswerError(LLMError):
    """The endpoint answered, but not usably for this text (invalid twice, refused the request)."""


@dataclass(slots=True)
class Usage:
    """Requests made and tokens spent, from the ``usage`` field of each response."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add(self, other: Usage) -> Usage:
        self.requests += other.requests
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        return self

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "total_tokens": self.total_tokens}


def _usage_of(body: dict[str, Any]) -> Usage:
    raw = body.get("usage") if isinstance(body.get("usage"), dict) else {}

    def num(name: str) -> int:
        value = raw.get(name)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    prompt, completion = num("prompt_tokens"), num("completion_tokens")
    return Usage(1, prompt, completion, num("total_tokens") or prompt + completion)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _content_of(body: Any) -> str:
    """The text of the first choice (``message.content``; content parts joined)."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ValueError("no choices[0].message.content in the response") from None
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        raise TypeError("choices[0].message.content is not text")
    return content


class ChatClient:
    """``POST <base_url>/chat/completions`` with retries, backoff and a shared cancel switch."""

    def __init__(self, settings: LLMSettings, *, cancel: threading.Event | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.settings = settings.require()
        base = (settings.base_url or "").rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.cancel = cancel or threading.Event()
        self._sleep = sleep
        self._format = settings.response_format
        self._lock = threading.Lock()
        self.usage = Usage()

    def _wait(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        elif self.cancel.wait(seconds):  # a cancelled run stops waiting at once
            raise Cancelled

    def _payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.settings.model, "messages": messages, "temperature": 0}
        if self._format == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "graphmem_extraction", "strict": True, "schema": ANSWER_SCHEMA}}
        elif self._format == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    def _post(self, body: dict[str, Any]) -> tuple[int, Any, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.headers, exc.read()

    def complete(self, messages: list[dict[str, str]]) -> tuple[str, Usage]:
        """The answer's text and the usage of the one request that produced it.

        Raises :class:`EndpointError` once retries are exhausted (or at once for 401/403/404) and
        :class:`AnswerError` for a request the server refuses (another 4xx).
        """
        s = self.settings
        attempt = 0
        while True:
            if self.cancel.is_set():
                raise Cancelled
            retry_after: float | None = None
            try:
                status, headers, raw = self._post(self._payload(messages))
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                timed_out = isinstance(exc, (TimeoutError, socket.timeout)) or isinstance(reason, (TimeoutError, socket.timeout))
                problem = f"no answer within {s.timeout:g} s" if timed_out else f"cannot connect: {reason}"
            else:
                if status == 200:
                    try:
                        body = json.loads(raw)
                        content = _content_of(body)
                    except (ValueError, TypeError) as exc:
                        problem = f"unreadable response ({exc})"
                    else:
                        usage = _usage_of(body)
                        with self._lock:
                            self.usage.add(usage)
                        return content, usage
                elif status == 429:
                    problem, retry_after = "rate limited (HTTP 429)", _retry_after(headers.get("Retry-After"))
                elif status >= 500:
                    problem = f"server error (HTTP {status})"
                elif status in (400, 422) and self._format != "none" and b"response_format" in raw:
                    self._format = "none"  # the server does not support it: validation does the job
                    continue
                elif status in (401, 403, 404):
                    raise EndpointError(f"HTTP {status} from {self.url}: {_snippet(raw)} "
                                        "(check GRAPHMEM_LLM_BASE_URL, GRAPHMEM_LLM_MODEL, GRAPHMEM_LLM_API_KEY)")
                else:
                    raise AnswerError(f"HTTP {status}: {_snippet(raw)}")
            attempt += 1
            if attempt > s.max_retries:
                raise EndpointError(f"{problem}; gave up after {attempt} attempts")
            if retry_after is not None and retry_after > s.backoff_max:
                raise EndpointError(f"{problem}: the server asks to wait {retry_after:.0f} s, more than "
                                    f"GRAPHMEM_LLM_BACKOFF_MAX ({s.backoff_max:g} s)")
            delay = retry_after if retry_after is not None else \
                min(s.backoff_max, s.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            self._wait(delay)


def _snippet(raw: bytes, limit: int = 200) -> str:
    text = " ".join(raw.decode("utf-8", errors="replace").split())
    return text[:limit] + ("..." if len(text) > limit else "")


# --- cache --------------------------------------------------------------------------------------


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", errors="surrogatepass"), digest_size=16).hexdigest()


def cache_key(kind: str, text: str, model: str, prompt_version: str | None = None) -> str:
    """What an answer depends on: prompt version (default: the current one), model, source kind
    and the text sent."""
    raw = f"{prompt_version or PROMPT_VERSION}\0{model}\0{kind}\0{text_hash(text)}"
    return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


class AnswerCache:
    """Validated answers in SQLite (``<home>/cache/llm/answers.sqlite``), with the tokens each cost."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "answers.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("""CREATE TABLE IF NOT EXISTS answers (
                key TEXT PRIMARY KEY, prompt_version TEXT NOT NULL, model TEXT NOT NULL, kind TEXT NOT NULL,
                text_hash TEXT NOT NULL, answer TEXT NOT NULL, requests INTEGER NOT NULL,
                prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, total_tokens INTEGER NOT NULL,
                created_at TEXT NOT NULL)""")

    def get(self, key: str) -> Answer | None:
        with self._lock:
            row = self._db.execute("SELECT answer FROM answers WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return parse_answer(row[0], final=True)[0]
        except InvalidAnswer:  # written by an incompatible version: ask again
            return None

    def put(self, key: str, *, kind: str, text: str, model: str, answer: Answer, usage: Usage) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (key, PROMPT_VERSION, model, kind, text_hash(text), answer.to_json(), usage.requests,
                 usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, now_iso()))

    def usage(self) -> Usage:
        """Everything the cached answers cost."""
        with self._lock:
            row = self._db.execute("SELECT count(*), sum(requests), sum(prompt_tokens), sum(completion_tokens), "
                                   "sum(total_tokens) FROM answers").fetchone()
        return Usage(*(int(v or 0) for v in row[1:]))

    def close(self) -> None:
        with self._lock:
            self._db.close()


# --- extraction ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Extracted:
    """One text's answer: ``text`` is what was sent (redacted) and what spans point into."""

    text: str
    answer: Answer
    cached: bool
    usage: Usage = field(default_factory=Usage)
    problems: list[str] = field(default_factory=list)  # malformed items dropped from the final answer


class LLMExtractor:
    """Cached, validated, redacted extraction of one text at a time (safe to call from threads)."""

    def __init__(self, settings: LLMSettings, cache_dir: str | Path, *, cancel: threading.Event | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.settings = settings.require()
        self.model = str(settings.model)
        self.client = ChatClient(settings, cancel=cancel, sleep=sleep)
        self.cache = AnswerCache(cache_dir)

    @property
    def version(self) -> str:
        """The extractor version recorded in provenance: prompt version and model."""
        return f"{PROMPT_VERSION}+{self.model}"

    def prepare(self, text: str) -> str:
        """The text as it would be sent: secrets redacted."""
        return redact(text)[0]

    def cached(self, kind: str, text: str) -> Extracted | None:
        """The cached answer for ``text``, without calling the endpoint."""
        sent = self.prepare(text)
        answer = self.cache.get(cache_key(kind, sent, self.model))
        return Extracted(sent, answer, cached=True) if answer is not None else None

    def extract(self, kind: str, text: str, *, title: str | None = None) -> Extracted:
        """Ask for the entities and relationships of ``text`` (from the cache when it has them)."""
        hit = self.cached(kind, text)
        if hit is not None:
            return hit
        sent = self.prepare(text)
        messages = build_messages(kind, sent, title)
        usage = Usage()
        content, spent = self.client.complete(messages)
        usage.add(spent)
        try:
            answer, problems = parse_answer(content)
        except InvalidAnswer as exc:
            # One repair: the model sees its answer and what was wrong with it.
            messages = [*messages, {"role": "assistant", "content": content[:8000]},
                        {"role": "user", "content": "Your answer was invalid: " + "; ".join(exc.problems[:20])
                         + ". Answer again with only the corrected JSON object."}]
            first = content
            content, spent = self.client.complete(messages)
            usage.add(spent)
            try:
                answer, problems = parse_answer(content, final=True)
            except InvalidAnswer as again:
                try:  # a first answer with only some malformed items is better than none
                    answer, problems = parse_answer(first, final=True)
                except InvalidAnswer:
                    raise AnswerError(f"invalid answer after one repair: {again}") from None
        self.cache.put(cache_key(kind, sent, self.model), kind=kind, text=sent, model=self.model,
                       answer=answer, usage=usage)
        return Extracted(sent, answer, cached=False, usage=usage, problems=problems)

    def close(self) -> None:
        self.cache.close()


__all__ = [
    "ANSWER_SCHEMA",
    "ENTITY_TYPES",
    "EXTRACTOR",
    "PROMPT_VERSION",
    "SOURCE_KINDS",
    "Answer",
    "AnswerCache",
    "AnswerError",
    "Cancelled",
    "ChatClient",
    "EndpointError",
    "Entity",
    "Extracted",
    "Grounded",
    "GroundedEntity",
    "Grounder",
    "InvalidAnswer",
    "LLMError",
    "LLMExtractor",
    "Relation",
    "Usage",
    "build_messages",
    "cache_key",
    "ground",
    "normalise_type",
    "parse_answer",
    "text_hash",
]

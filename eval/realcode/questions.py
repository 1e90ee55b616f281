"""Questions about a real repository, from its oracle facts (``facts/<name>.json``).

Each question type asks what engineers ask of code they did not write, in several wordings,
often naming the project. Gold answers are the oracle's keys: definitions (``sym:path::qualname``)
and release commits (``commit:<sha>``). Only production code is asked about; test code may still
be returned by retrieval, and is simply not gold.

Deterministic: the same facts give the same questions (one seeded generator per repository and type).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# Questions per type and repository, at most.
QUOTAS = {"definition": 8, "concept": 10, "callers": 8, "callees": 6, "two-hop": 4, "method-type": 5,
          "cross-package": 4, "history": 9}
MAX_GOLD = 6
MIN_DOC_WORDS = 6

TEMPLATES: dict[str, tuple[str, ...]] = {
    "definition": (
        "Where is {x} defined{in_p}?",
        "Which file has the implementation of {x}{in_p}?",
        "Show me the source of {x}{in_p}.",
        "Where does {p} implement {x}?",
        "I'm looking for the definition of {x}{in_p}.",
        "Jump to {x}{in_p}.",
        "Find {x}{in_p}.",
    ),
    "concept": (
        "Which {kind} {does}?",
        "What code {does}{in_p}?",
        "In {p}, where is the logic that {does}?",
        "I need the part of {p} that {does}.",
        "Is there a {kind} that {does}{in_p}?",
        "Where would I look for the code that {does}?",
    ),
    "callers": (
        "What calls {x}{in_p}?",
        "Which functions use {x}{in_p}?",
        "Where is {x} called from?",
        "If I change the signature of {x}, which call sites in {p} break?",
        "Who invokes {x}{in_p}?",
        "List the callers of {x}{in_p}.",
        "Which code depends on {x} being called?",
    ),
    "callees": (
        "What does {x} call{in_p}?",
        "Which helpers does {x} rely on?",
        "What functions does {x} delegate to{in_p}?",
        "When {x} runs, which other functions of {p} does it invoke?",
        "List the functions {x} calls.",
    ),
    "two-hop": (
        "Which functions reach {x} through one intermediate call{in_p}?",
        "{x} is called by a few helpers; which functions call those helpers?",
        "What calls the callers of {x}{in_p}?",
        "Which code calls {x} indirectly, two calls away?",
    ),
    "method-type": (
        "Which class has the {m} method{in_p}?",
        "What type defines {m}{in_p}?",
        "{m} is a method of which type{in_p}?",
        "Which {p} type do I need an instance of to call {m}?",
    ),
    "cross-package": (
        "Which code outside {d} calls {x}?",
        "Who uses {x} from other packages of {p}?",
        "Which modules outside {d} depend on {x}?",
        "Where is {x} used outside its own package?",
    ),
    "history-added": (
        "Which release of {p} introduced {x}?",
        "When was {x} added{in_p}?",
        "In which version did {x} first appear?",
    ),
    "history-removed": (
        "Which release of {p} removed {x}?",
        "When was {x} deleted{in_p}?",
        "In which version did {x} go away?",
    ),
    "history-changed": (
        "Which releases changed {x}{in_p}?",
        "When was {x} last modified{in_p}?",
        "Which versions of {p} touched the implementation of {x}?",
    ),
}

KIND_WORDS = {"function": "function", "method": "method", "class": "class", "struct": "type",
              "interface": "interface", "enum": "enum", "type": "type", "trait": "trait"}
_IDENT = re.compile(r"`[^`]*`|:\w+:`[^`]*`|\b\w*[a-z][A-Z]\w*\b|\b\w+_\w+\b|\b\w+\(\)")
_LEADING = re.compile(r"^(?:this|the|a|an)\s+(?:function|method|class|type|helper|constructor)\s+", re.I)


@dataclass(frozen=True, slots=True)
class Definition:
    key: str
    path: str
    qualname: str
    name: str
    kind: str
    container: str | None
    doc: str
    test: bool

    @property
    def directory(self) -> str:
        return self.path.rsplit("/", 1)[0] if "/" in self.path else "."


def _definitions(facts: dict[str, Any]) -> dict[str, Definition]:
    return {f"sym:{d['path']}::{d['qualname']}": Definition(
        f"sym:{d['path']}::{d['qualname']}", d["path"], d["qualname"], d["name"], d["kind"], d.get("container"),
        d.get("doc") or "", bool(d.get("test"))) for d in facts["definitions"]}


def third_person(verb: str) -> str:
    """'Return' -> 'returns', 'Apply' -> 'applies'; a verb already in the third person stays."""
    v = verb.lower()
    if v.endswith("s") and not v.endswith(("ss", "us")):
        return v
    if v.endswith(("sh", "ch", "x", "ss", "o")):
        return v + "es"
    if v.endswith("y") and len(v) > 2 and v[-2] not in "aeiou":
        return v[:-1] + "ies"
    return v + "s"


def describe(d: Definition) -> str | None:
    """The first sentence of the documentation as a verb phrase without the definition's own name
    ("Return the attribute's value." -> "returns the attribute's value"), or None."""
    sentence = re.split(r"(?<=[.!?])\s", d.doc.strip(), maxsplit=1)[0].rstrip(".!? ")
    words = sentence.split()
    if words and words[0].strip("`'\"()") in (d.name, d.qualname):  # Go and Java docs start with the name
        words = words[1:]
    text = _LEADING.sub("", " ".join(words))
    text = _IDENT.sub("it", text) if d.name in text else text
    text = re.sub(rf"\b{re.escape(d.name)}\b", "it", text)
    words = text.split()
    if len(words) < MIN_DOC_WORDS or not words[0].isalpha() or words[0].lower() in ("it", "this", "see", "deprecated"):
        return None
    first = words[0]
    if first[0].isupper() and first.lower() not in ("a", "an", "the"):
        return " ".join([third_person(first)] + words[1:])
    if first.lower() in ("a", "an", "the"):
        return "is " + " ".join([first.lower()] + words[1:])
    return " ".join([first.lower()] + words[1:])


def _pick(rng: random.Random, items: list[Any], n: int) -> list[Any]:
    items = list(items)
    rng.shuffle(items)
    return items[:n]


class Generator:
    """All question types for one repository."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.name = record["name"]
        self.words = record.get("project_words") or [self.name]
        self.releases = record["releases"]
        latest = self.releases[-1]["facts"]
        self.defs = _definitions(latest)
        self.called_by: dict[str, set[str]] = defaultdict(set)  # callee -> callers
        self.calls_from: dict[str, set[str]] = defaultdict(set)
        for c in latest["calls"]:
            a, b = f"sym:{c['caller']}", f"sym:{c['callee']}"
            if a in self.defs and b in self.defs and a != b:
                self.called_by[b].add(a)
                self.calls_from[a].add(b)
        # Production code, without functions nested in functions (closures nobody asks for by name).
        self.prod = {k: d for k, d in self.defs.items() if not d.test
                     and not (d.kind == "function" and "." in d.qualname)}
        names: dict[str, int] = defaultdict(int)
        for d in self.prod.values():
            names[d.name] += 1
        self.unique_name = {k for k, d in self.prod.items() if names[d.name] == 1}
        self.count = 0

    # --- wording -------------------------------------------------------------------------------

    def _mention(self, d: Definition, rng: random.Random) -> str:
        """How a question names a definition: its name, often in code quotes, the method with its type."""
        if d.kind == "method" and d.container and (d.key not in self.unique_name or rng.random() < 0.4):
            form = rng.choice(["{c}.{n}", "the {n} method of {c}", "{c}.{n}()"])
            return form.format(c=d.container.rsplit(".", 1)[-1], n=d.name)
        if d.key not in self.unique_name:
            return d.qualname
        form = rng.choice(["{n}", "`{n}`", "{n}()" if d.kind in ("function", "method") else "{n}", "the {n} {k}"])
        return form.format(n=d.name, k=KIND_WORDS.get(d.kind, d.kind))

    def _fill(self, qtype: str, rng: random.Random, **slots: str) -> str:
        template = rng.choice(TEMPLATES[qtype])
        p = rng.choice(self.words)
        in_p = rng.choice([f" in {p}", f" in {p}", "", f" in the {p} code"])
        return template.format(p=p, in_p=in_p, **slots)

    def _question(self, qtype: str, text: str, gold: list[str], hops: int) -> dict[str, Any]:
        self.count += 1
        text = text[0].upper() + text[1:]
        return {"id": f"{self.name}-{self.count:03d}", "question": text, "gold": sorted(gold)[:MAX_GOLD],
                "type": qtype, "hops": hops, "repo": self.name}

    # --- types ---------------------------------------------------------------------------------

    def definition(self, rng: random.Random) -> Iterator[dict[str, Any]]:
        pool = [d for d in self.prod.values() if len(d.name) >= 4 and not d.name.startswith("_")
                and d.kind != "type" and d.key in self.unique_name]
        for d in _pick(rng, sorted(pool, key=lambda d: d.key), QUOTAS["definition"]):
            yield self._question("definition", self._fill("definition", rng, x=self._mention(d, rng)), [d.key], 1)

    def concept(self, rng: random.Random) -> Iterator[dict[str, Any]]:
        pool = [(d, describe(d)) for d in sorted(self.prod.values(), key=lambda d: d.key)]
        pool = [(d, text) for d, text in pool if text]
        seen: set[str] = set()
        for d, text in _pick(rng, pool, QUOTAS["concept"] * 2):
            if text in seen or len(seen) >= QUOTAS["concept"]:
                continue
            seen.add(text)
            kind = KIND_WORDS.get(d.kind, "function")
            if text.startswith("is "):
                kind = {"method": "method", "function": "function"}.get(d.kind, "class")
            yield self._question("concept", self._fill("concept", rng, kind=kind, does=text), [d.key], 1)

    def callers(self, rng: random.Random) -> Iterator[dict[str, Any]]:
        pool = [k for k in sorted(self.called_by) if k in self.prod
                and 1 <= len(self._prod_callers(k)) <= MAX_GOLD]
        for key in _pick(rng, pool, QUOTAS["callers"]):
            d = self.defs[key]
            yield self._question("callers", self._fill("callers", rng, x=self._mention(d, rng)),
                                 self._prod_callers(key), 2)

    def _prod_callers(self, key: str) -> list[str]:
        return sorted(c for c in self.called_by.get(key, ()) if c in self.prod)

    def callees(self, rng: random.Random) -> Iterator[dict[str, Any]]:
        pool = [k for k in sorted(self.calls_from) if k in self.prod
                and 2 <= len([c for c in self.calls_from[k] if c in self.prod]) <= MAX_GOLD]
        for key in _pick(rng, pool, QUOTAS["callees"]):
            gold = sorted(c for c in self.calls_from[key] if c in self.prod)
            yield self._question("callees", self._fill("callees", rng, x=self._mention(self.defs[key], rng)), gold, 2)

    def two_hop(self, rng: random.Random) -> Iterator[dict[str, Any]]:
        pool = []
        for key in sorted(self.called_by):
            if key not in self.prod:
                continue
            direct = set(self._prod_callers(key))
            second = {c for mid in direct for c in self._prod_callers(mid)} - direct - {key}
            if 1 <= len(second) <= MAX_GOLD:
                pool.append((key, sorted(second)))
        for key, gold in _pick(rng, pool, QUOTAS["two-hop"]):
            yield self._question("two-hop", self._fill("two-hop", rng, x=self._mention(self.defs[key], rng)), gold, 3)

    def method_type(self, rng: random.Random) -> Iterator[dict[str, Any]]:
        types = {d.qualname: d for d in self.prod.values() if d.kind not in ("function", "method")}
        pool = [d for d in sorted(self.prod.values(), key=lambda d: d.key)
                if d.kind == "method" and d.key in self.unique_name and not d.name.startswith("_")
                and len(d.name) >= 4 and d.container in types and types[d.container].path == d.path]
        for d in _pick(rng, pool, QUOTAS["method-type"]):
            m = rng.choice([d.name, f"`{d.name}`", f"{d.name}()"])
            gold = f"sym:{d.path}::{d.container}"
            yield self._question("method-type", self._fill("method-type", rng, m=m), [gold], 2)

    def cross_package(self, rng: random.Random) -> Iterator[dict[str, Any]]:
        pool = []
        for key in sorted(self.called_by):
            if key not in self.prod:
                continue
            d = self.defs[key]
            outside = [c for c in self._prod_callers(key) if self.defs[c].directory != d.directory]
            if 1 <= len(outside) <= MAX_GOLD and d.directory != ".":
                pool.append((d, outside))
        for d, gold in _pick(rng, pool, QUOTAS["cross-package"]):
            text = self._fill("cross-package", rng, x=self._mention(d, rng), d=f"{d.directory}/")
            yield self._question("cross-package", text, gold, 2)

    def history(self, rng: random.Random) -> Iterator[dict[str, Any]]:
        added: dict[str, str] = {}
        removed: dict[str, str] = {}
        changed: dict[str, list[str]] = defaultdict(list)
        shas = [r["sha"] for r in self.releases]
        before: dict[str, str] = {}
        seen: dict[str, Definition] = {}  # every production definition of any release, latest form
        for i, release in enumerate(self.releases):
            prod = [d for d in release["facts"]["definitions"] if not d.get("test")]
            now = {f"sym:{d['path']}::{d['qualname']}": d.get("body_sha", "") for d in prod}
            seen.update(_definitions({"definitions": prod}))
            if i:
                for key in now.keys() - before.keys():
                    added[key] = shas[i]
                for key in before.keys() - now.keys():
                    removed[key] = shas[i]
                for key in now.keys() & before.keys():
                    if now[key] != before[key]:
                        changed[key].append(shas[i])
            before = now
        per_kind = max(1, QUOTAS["history"] // 3)
        names: dict[str, int] = defaultdict(int)
        for d in seen.values():
            names[d.name] += 1

        def mention(key: str) -> str:
            d = seen[key]
            return self._mention(d, rng) if names[d.name] == 1 or d.kind != "method" else d.qualname

        def usable(key: str) -> bool:
            d = seen[key]
            return not d.name.startswith("_") and len(d.name) >= 4 and names[d.name] == 1

        for kind, table in (("history-added", added), ("history-removed", removed)):
            pool = sorted(k for k in table if usable(k))
            for key in _pick(rng, pool, per_kind):
                yield self._question("history", self._fill(kind, rng, x=mention(key)), [f"commit:{table[key]}"], 2)
        pool = sorted(k for k, v in changed.items() if usable(k) and 1 <= len(v) <= 3)
        for key in _pick(rng, pool, per_kind):
            gold = [f"commit:{s}" for s in changed[key]]
            yield self._question("history", self._fill("history-changed", rng, x=mention(key)), gold, 2)

    def all(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        steps: list[tuple[str, Callable[[random.Random], Iterator[dict[str, Any]]]]] = [
            ("definition", self.definition), ("concept", self.concept), ("callers", self.callers),
            ("callees", self.callees), ("two-hop", self.two_hop), ("method-type", self.method_type),
            ("cross-package", self.cross_package), ("history", self.history)]
        for qtype, step in steps:
            out.extend(step(random.Random(f"{self.name}:{qtype}")))
        return out


def generate(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The questions of one repository's facts record (see ``build.build``)."""
    return Generator(record).all()

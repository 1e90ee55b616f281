"""Adapters for the public multi-hop sets in ``../shared/datasets`` (2WikiMultiHopQA, MuSiQue, HotpotQA).

``load(name)`` reads a set into passages and SPEC.md questions whose gold keys (``doc:<id>``) come
from the dataset's own supporting-fact annotations; ``import_corpus`` writes the passages and an
entity graph over them into a graphmem project: by default the rule-based one
(:mod:`extractors.passages`: titles, capitalised names, dates), or for MuSiQue the GPT-3.5 OpenIE
triples, written by :func:`graphmem.enrich.write_extractions` as LLM extractions are. Either
graph's entities then go through entity resolution.

    python -m eval.datasets musique out/ --graph openie
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphmem.model import (
    Chunk,
    Node,
    NodeKind,
    Provenance,
    Relationship,
    RelType,
    doc_key,
    entity_key,
    normalise_name,
    now_iso,
)
from graphmem.stores.base import NAMES_STAMP

if TYPE_CHECKING:
    from graphmem.enrich import SourceExtraction

DEFAULT_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
NAMES = ("2wiki", "musique", "hotpotqa")
SPLITS = ("all", "dev", "test")
EXTRACTOR_VERSION = "1"
# The OpenIE output lists entity names without types; they all get this one.
GENERIC_ENTITY_TYPE = "concept"
# OpenIE names are grounded in their passage (title and text) as LLM extractions are: a name the
# passage does not spell is not written.
OPENIE_GROUND_NAMES = True
OPENIE_FILE = "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"
# What each set is read from, relative to the datasets folder: (passages, questions).
LAYOUT = {
    "2wiki": ("2wikimultihopqa/2wikimultihopqa_corpus.json", "2wikimultihopqa/2wikimultihopqa_first37.json"),
    "musique": ("musique_train_sample/musique_train_corpus.json", "musique_train_sample/musique_train.json"),
    "hotpotqa": ("hotpotqa_train_sample/hotpotqa_train_corpus.json", "hotpotqa_train_sample/hotpotqa_train.json"),
}
_SLUG_MAX = 80


@dataclass(slots=True, frozen=True)
class Passage:
    id: str
    title: str
    text: str

    @property
    def key(self) -> str:
        return doc_key(self.id)


@dataclass(slots=True)
class Dataset:
    name: str
    passages: list[Passage]
    questions: list[dict[str, Any]]
    # Supporting facts that named no passage of the corpus (should stay empty; see ``check``).
    unresolved: list[str] = field(default_factory=list)

    def check(self) -> dict[str, Any]:
        """Counts, and whether every gold key is a passage of the corpus and every id is unique."""
        keys = [p.key for p in self.passages]
        known = set(keys)
        gold = [g for q in self.questions for g in q["gold"]]
        missing = sorted({g for g in gold if g not in known})
        return {
            "dataset": self.name,
            "passages": len(self.passages),
            "questions": len(self.questions),
            "gold_keys": len(gold),
            "gold_found": sum(g in known for g in gold),
            "missing_gold": missing,
            "unresolved_supporting_facts": list(self.unresolved),
            "duplicate_ids": len(keys) - len(known),
            "ok": not missing and not self.unresolved and len(keys) == len(known),
        }


# --- ids ----------------------------------------------------------------------------------------


def slug(title: str) -> str:
    """A readable, key-safe form of a title: ASCII lower case words joined by '-'."""
    ascii_ = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    out = re.sub(r"[^a-z0-9]+", "-", ascii_.lower()).strip("-")[:_SLUG_MAX].rstrip("-")
    return out or "passage"


def _digest(title: str, text: str) -> str:
    return hashlib.blake2b(f"{title}\n{text}".encode(), digest_size=4).hexdigest()


def assign_ids(items: Iterable[tuple[str, str]]) -> list[Passage]:
    """Passages with unique ids: the title's slug, or for slugs that several passages share (repeated
    titles, titles differing only in punctuation or accents) the slug plus a hash of title and text,
    so an id does not depend on file order."""
    pairs = list(items)
    counts = Counter(slug(t) for t, _ in pairs)
    out, seen = [], set()
    for title, text in pairs:
        base = slug(title)
        pid = base if counts[base] == 1 else f"{base}-{_digest(title, text)}"
        n = 2
        while pid in seen:  # identical title and text twice: keep both, deterministically by order
            pid, n = f"{base}-{_digest(title, text)}-{n}", n + 1
        seen.add(pid)
        out.append(Passage(pid, title, text))
    return out


def split_of(question_id: str) -> str:
    """``dev`` or ``test``: the half of a sample a question belongs to, by a hash of its id (fixed
    before any result is seen; fusion trains on MuSiQue's dev half and the gate reads its test half)."""
    return "dev" if hashlib.sha256(question_id.encode()).digest()[0] % 2 == 0 else "test"


def split_questions(questions: Iterable[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    """The questions of ``part`` (``all``, ``dev`` or ``test``; see :func:`split_of`)."""
    if part not in SPLITS:
        raise ValueError(f"unknown split {part!r}: choose one of {', '.join(SPLITS)}")
    return [q for q in questions if part == "all" or split_of(q["id"]) == part]


# --- loaders ------------------------------------------------------------------------------------


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _load_2wiki(root: Path) -> Dataset:
    corpus, asked = (root / p for p in LAYOUT["2wiki"])
    passages = assign_ids((p["title"], p["text"]) for p in _read(corpus))
    by_title = {p.title: p for p in passages}  # titles are unique (SOURCE.md); checked by ``check``
    questions, unresolved = [], []
    for item in _read(asked):
        titles = list(dict.fromkeys(t for t, _ in item["supporting_facts"]))
        unresolved += [f"{item['_id']}: {t}" for t in titles if t not in by_title]
        gold = [by_title[t].key for t in titles if t in by_title]
        # Hops: the distinct supporting passages (2 for compositional/comparison, 4 for bridge_comparison).
        questions.append({"id": item["_id"], "question": item["question"], "gold": gold,
                          "hops": len(titles), "type": item["type"]})
    return Dataset("2wiki", passages, questions, unresolved)


def _load_musique(root: Path) -> Dataset:
    corpus, asked = (root / p for p in LAYOUT["musique"])
    passages = assign_ids((p["title"], p["text"]) for p in _read(corpus))
    # Titles repeat in MuSiQue, so a supporting paragraph is matched on title and text together.
    by_content = {(p.title, p.text): p for p in passages}
    questions, unresolved = [], []
    for item in _read(asked):
        gold = []
        for para in item["paragraphs"]:
            if not para["is_supporting"]:
                continue
            hit = by_content.get((para["title"], para["paragraph_text"]))
            if hit is None:
                unresolved.append(f"{item['id']}: {para['title']}")
            elif hit.key not in gold:
                gold.append(hit.key)
        # The id prefix ("2hop", "3hop1", "4hop3") names the composition shape; hops = sub-questions.
        questions.append({"id": item["id"], "question": item["question"], "gold": gold,
                          "hops": len(item["question_decomposition"]), "type": item["id"].split("__", 1)[0]})
    return Dataset("musique", passages, questions, unresolved)


def _load_hotpotqa(root: Path) -> Dataset:
    corpus_file, asked = (root / p for p in LAYOUT["hotpotqa"])
    # The corpus is {title: [sentence, ...]}; sentences after the first carry their leading space.
    corpus = _read(corpus_file)
    passages = assign_ids((title, "".join(sents).strip()) for title, sents in corpus.items())
    by_title = {p.title: p for p in passages}
    questions, unresolved = [], []
    for item in _read(asked):
        titles = list(dict.fromkeys(t for t, _ in item["supporting_facts"]))
        unresolved += [f"{item['_id']}: {t}" for t in titles if t not in by_title]
        questions.append({"id": item["_id"], "question": item["question"],
                          "gold": [by_title[t].key for t in titles if t in by_title],
                          "hops": len(titles), "type": item["type"], "level": item["level"]})
    return Dataset("hotpotqa", passages, questions, unresolved)


_LOADERS = {"2wiki": _load_2wiki, "musique": _load_musique, "hotpotqa": _load_hotpotqa}


def expected_files(name: str, graph: str | None = None) -> tuple[str, ...]:
    """The files set ``name`` is read from, relative to the datasets folder (with ``graph="openie"``,
    MuSiQue's OpenIE triples too)."""
    if name not in LAYOUT:
        raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(NAMES)}")
    extra = (f"musique_train_sample/{OPENIE_FILE}",) if graph == "openie" and name == "musique" else ()
    return (*LAYOUT[name], *extra)


def missing_files(name: str, root: Path | str, graph: str | None = None) -> str | None:
    """Why ``root`` cannot give set ``name`` (the folder, or which expected files are not in it),
    or ``None`` when it can."""
    root = Path(root)
    files = expected_files(name, graph)
    if not root.is_dir():
        return f"dataset folder not found: {root} (it should hold {', '.join(files)})"
    missing = [f for f in files if not (root / f).is_file()]
    return f"{root} lacks {', '.join(missing)} (the layout of the public samples)" if missing else None


def load(name: str, root: Path | str = DEFAULT_ROOT) -> Dataset:
    """One of ``2wiki``, ``musique``, ``hotpotqa`` from ``root`` (default ``<repo>/../shared/datasets``;
    :data:`LAYOUT` says which files under it)."""
    if name not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(NAMES)}")
    problem = missing_files(name, root)
    if problem:
        raise FileNotFoundError(problem)
    return _LOADERS[name](Path(root))


def write_questions(dataset: Dataset, path: Path | str) -> Path:
    """The questions as SPEC.md JSON Lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for q in dataset.questions:
            fh.write(json.dumps(q, ensure_ascii=False) + "\n")
    return path


# --- import -------------------------------------------------------------------------------------


def _provenance(dataset: str, passage_id: str) -> Provenance:
    return Provenance(source_path=f"dataset:{dataset}/{passage_id}", extractor=f"dataset-{dataset}",
                      extractor_version=EXTRACTOR_VERSION)


def passage_elements(dataset: str, passage: Passage) -> tuple[Node, Chunk]:
    """The document node and its single chunk (title, blank line, text) for one passage."""
    prov = _provenance(dataset, passage.id)
    node = Node(passage.key, passage.title, prov, props={"title": passage.title, "dataset": dataset})
    chunk = Chunk(passage.key, 0, f"{passage.title}\n\n{passage.text}", "document", prov)
    return node, chunk


def _batches(items: list[Any], size: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def openie_graph(dataset: Dataset, openie_path: Path, *, only: set[str] | None = None, titles: bool = True,
                 ) -> tuple[list[Node], list[Relationship], list[SourceExtraction], dict[str, int]]:
    """The OpenIE graph's parts: the corpus's title structure (entity nodes and passage MENTIONS)
    and one :class:`~graphmem.enrich.SourceExtraction` per matched passage (its GPT-3.5 entities
    and triples), for :func:`graphmem.enrich.write_extractions` - the path LLM extractions take.

    OpenIE docs are matched to passages by exact (title, text), then by their ``passage`` field
    ("title\\ntext"), then by a title that names one passage only. ``only`` limits the graph to these
    passage ids (for importing a slice).

    With ``titles`` (the default) the structure is the one :func:`rules_graph` writes: each passage
    is about the entity its title names (``role = "about"``) and mentions the other passages'
    titles its text spells. The two graphs then differ only in what was *extracted*: GPT-3.5
    entities and triples here, capitalised names and dates there."""
    from extractors.passages import TitleIndex, title_mentions, title_name
    from graphmem.enrich import SourceExtraction

    docs = _read(openie_path)["docs"]
    index = TitleIndex(p.title for p in dataset.passages)
    by_content = {(p.title, p.text): p for p in dataset.passages}
    by_passage = {f"{p.title}\n{p.text}": p for p in dataset.passages}
    title_counts = Counter(p.title for p in dataset.passages)
    by_title = {p.title: p for p in dataset.passages if title_counts[p.title] == 1}
    stats = Counter(openie_docs=len(docs))
    entities: dict[str, Node] = {}
    rels: dict[tuple[str, str, str], Relationship] = {}
    extractions: list[SourceExtraction] = []
    # Every passage naming a title entity is one of its sources, so withdrawing one passage closes
    # only what no other passage still says.
    sources: dict[str, dict[str, None]] = {}

    def entity(name: str, prov: Provenance) -> str | None:
        name = " ".join(str(name).split())
        if not normalise_name(name):
            return None
        # The type extractions get too (``from_triples``' default), so a title entity and the
        # same name extracted from a passage are one node.
        key = entity_key(GENERIC_ENTITY_TYPE, name)
        if key not in entities:
            entities[key] = Node(key, name, prov, props={"entity_type": GENERIC_ENTITY_TYPE})
        sources.setdefault(key, {})[prov.source_path] = None
        return key

    for doc in docs:
        passage = by_content.get((doc.get("title"), doc.get("text")))
        how = "matched_by_text"
        if passage is None:
            passage, how = by_passage.get(doc.get("passage", "")), "matched_by_passage_field"
        if passage is None:
            passage, how = by_title.get(doc.get("title", "")), "matched_by_title"
        if passage is None:
            stats["unmatched_docs"] += 1
            continue
        stats[how] += 1
        if only is not None and passage.id not in only:
            continue
        stats["docs_imported"] += 1
        prov = _provenance(dataset.name, passage.id)
        # The passage's own source path: withdrawing the passage withdraws its triples too. The
        # title is part of the text names are grounded in, as it is of the passage's chunk.
        extraction = SourceExtraction.from_triples(
            passage.key, f"{passage.title}\n{passage.text}", doc.get("extracted_triples") or [],
            entities=doc.get("extracted_entities") or [], entity_type=GENERIC_ENTITY_TYPE,
            extractor="openie", extractor_version=EXTRACTOR_VERSION, source_path=prov.source_path)
        stats["malformed_triples"] += extraction.malformed
        extractions.append(extraction)
        # The passage is about its title (the dataset says so; the triples need not): the same
        # ``role = "about"`` mention the rule-based graph makes, so passages of one article meet.
        if titles and (about := entity(title_name(passage.title), prov)):
            rels[(passage.key, "MENTIONS", about)] = Relationship(passage.key, RelType.MENTIONS, about, prov,
                                                                  props={"role": "about"})
            # Other passages' titles spelt in the text name those passages' subjects.
            for name in title_mentions(passage.text, index):
                if (key := entity(name, prov)) and key != about:
                    rels.setdefault((passage.key, "MENTIONS", key),
                                    Relationship(passage.key, RelType.MENTIONS, key, prov))
    for key, node in entities.items():
        node.sources = tuple(sources[key])
    return list(entities.values()), list(rels.values()), extractions, dict(stats)


GRAPHS = ("rules", "openie")


def rules_graph(dataset: Dataset, passages: Iterable[Passage] | None = None,
                ) -> tuple[list[Node], list[Relationship], dict[str, int]]:
    """The rule-based entity graph (``extractors.passages``): title entities the passages are about,
    capitalised names and dates they mention; a name spelling another passage's title is that
    passage's entity. Titles are taken from the whole corpus so a slice still links to them."""
    from extractors.passages import TitleIndex, passage_graph

    chosen = list(dataset.passages if passages is None else passages)
    nodes, rels = passage_graph(((p.key, p.title, p.text) for p in chosen),
                                source=f"dataset:{dataset.name}/{{id}}",
                                titles=TitleIndex(p.title for p in dataset.passages))
    stats = {"docs_imported": len(chosen), "entities": len(nodes),
             "mentions": sum(r.type is RelType.MENTIONS for r in rels)}
    return nodes, rels, stats


def write_entity_graph(store: Any, nodes: list[Node], rels: list[Relationship], *, batch: int = 2000,
                       resolve: bool = True) -> dict[str, Any]:
    """Write extracted entities and their relationships, then merge duplicate entities
    (``graphmem.resolution.resolve_entities``): the one path every entity graph takes."""
    written: Counter[str] = Counter()
    for part in _batches(nodes, batch):
        written["entity_nodes"] += store.upsert(part, (), ()).nodes
    for part in _batches(rels, batch):
        summary = store.upsert((), part, ())
        written["rels"] += summary.rels
        written["missing_endpoints"] += summary.missing_endpoints
    out: dict[str, Any] = dict(written)
    if resolve:
        from graphmem.resolution import resolve_entities

        resolved = resolve_entities(store).as_dict()
        resolved["merge_ids"] = len(resolved["merge_ids"])  # the ids are in the store (merge_history)
        out["resolution"] = resolved
    return out


def import_corpus(gm: Any, dataset: Dataset, *, graph: str | None = "rules", triples: bool = False,
                  batch: int = 2000, passages: Iterable[Passage] | None = None, root: Path | str = DEFAULT_ROOT,
                  sync: bool = True, resolve: bool = True) -> dict[str, Any]:
    """Write the passages (default: all; or ``passages``, a slice) as document nodes with one chunk
    each, and an entity graph over them, then sync the indexes.

    ``graph``: ``"rules"`` (default; :func:`rules_graph`), ``"openie"`` (MuSiQue only: the GPT-3.5
    OpenIE triples) or ``None`` (passages only). ``triples=True`` is the older spelling of
    ``graph="openie"``. The rule graph and the OpenIE graph's title structure are written by
    :func:`write_entity_graph`; the OpenIE entities and triples by
    :func:`graphmem.enrich.write_extractions`, as LLM extractions are (grounded in the passage,
    linked, with the passage's provenance). Duplicate entities are then resolved unless
    ``resolve`` is false.
    """
    if triples:
        graph = "openie"
    if graph is not None and graph not in GRAPHS:
        raise ValueError(f"unknown graph {graph!r}; choose from {', '.join(GRAPHS)} or None")
    if graph == "openie" and dataset.name != "musique":
        raise ValueError(f"OpenIE triples exist for the MuSiQue sample only, not {dataset.name!r}")
    chosen = list(dataset.passages if passages is None else passages)
    started = time.perf_counter()
    report: dict[str, Any] = {"dataset": dataset.name, "passages": len(chosen), "graph": graph}
    written: Counter[str] = Counter()
    for part in _batches([passage_elements(dataset.name, p) for p in chosen], batch):
        summary = gm.store.upsert([n for n, _ in part], (), [c for _, c in part])
        written.update(nodes=summary.nodes, chunks=summary.chunks)
    if graph == "openie":
        from graphmem.enrich import write_extractions

        nodes, rels, extractions, stats = openie_graph(
            dataset, Path(root) / "musique_train_sample" / OPENIE_FILE, only={p.id for p in chosen})
        # The title structure first: extraction links to its entities and leaves its ``about``
        # mentions as they are (the deterministic facts are not overwritten).
        written.update(write_entity_graph(gm.store, nodes, rels, batch=batch, resolve=False))
        facts = write_extractions(gm.store, extractions, ground_names=OPENIE_GROUND_NAMES, batch=batch,
                                  resolve=False)
        paths = {_provenance(dataset.name, p.id).source_path for p in chosen}
        stats["entities"] = sum(1 for n in gm.store.iter_nodes([NodeKind.ENTITY])
                                if paths.intersection(n.sources or (n.provenance.source_path,)))
        stats["mentions"] = len(rels) + facts.mentions
        stats["related_to"] = facts.related
        stats["dropped_entities"] = facts.dropped_entities
        stats["dropped_relations"] = facts.dropped_relations
        report["triples"] = stats
        written["entity_nodes"] = stats["entities"]
        written["rels"] += facts.mentions + facts.related
        written["missing_endpoints"] += facts.missing_endpoints
    elif graph == "rules":
        nodes, rels, stats = rules_graph(dataset, chosen)
        report["rules"] = stats
        written.update(write_entity_graph(gm.store, nodes, rels, batch=batch, resolve=False))
    if graph is not None and resolve:
        # Once, after both writes: duplicates may span the title structure and the extractions.
        from graphmem.resolution import resolve_entities

        resolved = resolve_entities(gm.store).as_dict()
        resolved["merge_ids"] = len(resolved["merge_ids"])  # the ids are in the store (merge_history)
        report["resolution"] = resolved
    # Graph retrieval rebuilds its name catalog when this stamp moves.
    gm.store.set_meta({"last_ingested_at": now_iso(), NAMES_STAMP: now_iso(), "root": f"dataset:{dataset.name}"})
    report["written"] = dict(written)
    if sync:
        report["index"] = gm.sync_indexes().as_dict()
    report["seconds"] = round(time.perf_counter() - started, 2)
    return report


# --- command line -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.datasets", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=NAMES)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="folder holding the datasets")
    parser.add_argument("--graph", choices=GRAPHS, default=None,
                        help="build this entity graph (in a throwaway embedded store, without indexing) and "
                             "print its numbers; openie is for musique only")
    parser.add_argument("--triples", action="store_true", help="the same as --graph openie")
    args = parser.parse_args(argv)
    graph = "openie" if args.triples else args.graph
    if graph == "openie" and args.name != "musique":
        parser.error("the OpenIE graph (--graph openie, --triples) is for musique only")
    try:
        dataset = load(args.name, args.root)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    path = write_questions(dataset, args.out_dir / f"{args.name}.questions.jsonl")
    out: dict[str, Any] = {"questions_file": str(path), **dataset.check()}
    if graph:
        from graphmem.api import Graphmem
        from graphmem.config import Settings

        with tempfile.TemporaryDirectory() as home:
            gm = Graphmem(Settings(store="embedded", home=Path(home)), "ds", reranker=None)
            try:
                out["import"] = import_corpus(gm, dataset, graph=graph, root=args.root, sync=False)
            finally:
                gm.close()
    print(json.dumps(out, indent=2))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The rule-based entity graph of passage corpora (extractors/passages.py) and its import
(eval/datasets.py), on hand-written passages and on a slice of 2WikiMultiHopQA, on both stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eval.datasets import Dataset, Passage, import_corpus, load, rules_graph
from extractors.passages import (
    TitleIndex,
    dates,
    names,
    passage_graph,
    passage_mentions,
    title_name,
)
from graphmem.api import Graphmem
from graphmem.config import Settings
from graphmem.model import NodeKind, RelType
from graphmem.resolution import merge_history
from tests.conftest import require

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def test_titles_names_and_dates_in_text() -> None:
    titles = TitleIndex(["Ermengarde of Tours", "Hello Love (song)", "Aldri annet enn bråk"])
    text = ("Lothair II was the son of Emperor Lothair I and Ermengarde of Tours. He met J. Om Prakash "
            "in New York City. Aldri annet enn bråk was shown, Curtiz's films and the Hello Love single "
            "came out on December 8, 1982 and 20 March 851.")
    found = names(text, titles)
    assert "Ermengarde of Tours" in found  # a title, matched whole, not "Ermengarde" + "Tours"
    assert "Aldri annet enn bråk" in found  # titles keep their lower-case words
    assert "Hello Love" in found  # a title is matched without its disambiguation
    assert {"Lothair II", "Emperor Lothair I", "J. Om Prakash", "New York City", "Curtiz"} <= set(found)
    assert "Tours" not in found and "He" not in found and "The" not in found
    assert dates(text) == {"1982-12-08": "December 8, 1982", "0851-03-20": "20 March 851", "1982": "1982"}
    assert title_name("Johnnycake, West Virginia") == "Johnnycake, West Virginia"
    assert title_name("Hello Love (song)") == "Hello Love"


def test_a_title_spelt_in_another_passage_joins_the_two() -> None:
    passages = [("doc:lothair-ii", "Lothair II", "He was the son of Ermengarde of Tours, born in 835."),
                ("doc:ermengarde", "Ermengarde of Tours", "Ermengarde of Tours died on 20 March 851."),
                ("doc:song", "Hello Love (song)", "A 1974 single by Hank Snow.")]
    nodes, rels = passage_graph(passages, source="dataset:t/{id}")
    by_key = {n.key: n for n in nodes}
    shared = "entity:concept:ermengarde of tours"
    joined = {(r.src, r.props.get("role")) for r in rels if r.dst == shared}
    assert joined == {("doc:lothair-ii", None), ("doc:ermengarde", "about")}
    assert set(by_key[shared].sources) == {"dataset:t/lothair-ii", "dataset:t/ermengarde"}
    assert by_key["entity:concept:hello love"].props["aliases"] == ["Hello Love (song)"]
    assert "entity:date:0851-03-20" in by_key and by_key["entity:date:0851-03-20"].props["entity_type"] == "date"
    assert all(r.type is RelType.MENTIONS and r.src.startswith("doc:") for r in rels)
    assert passage_mentions("Lothair II", "Lothair II was king.").mentions == {}  # not about itself twice


def test_import_rejects_unknown_graphs() -> None:
    tiny = Dataset("2wiki", [Passage("a", "A", "text")], [])
    with pytest.raises(ValueError, match="unknown graph"):
        import_corpus(object(), tiny, graph="llm")
    with pytest.raises(ValueError, match="MuSiQue"):
        import_corpus(object(), tiny, graph="openie")


@pytest.fixture(scope="module")
def wiki() -> Dataset:
    require(DATA.is_dir(), f"shared datasets not found at {DATA}")
    return load("2wiki", DATA)


def _slice(ds: Dataset, questions: int = 4, extra: int = 120) -> tuple[list[Passage], list[dict[str, Any]]]:
    qs = ds.questions[:questions]
    gold = {g for q in qs for g in q["gold"]}
    return [p for i, p in enumerate(ds.passages) if i < extra or p.key in gold], qs


@pytest.mark.parametrize("backend", ["embedded", "neo4j"])
def test_rule_graph_import_links_the_hops(wiki: Dataset, backend: str, tmp_path: Path, embedder: Any,
                                          request: pytest.FixtureRequest) -> None:
    passages, questions = _slice(wiki)
    store = request.getfixturevalue("neo4j_store_factory")("passages") if backend == "neo4j" else None
    gm = Graphmem(Settings(store=backend, home=tmp_path), "passages", store=store, embedder=embedder,
                  reranker=None)
    try:
        report = import_corpus(gm, wiki, graph="rules", passages=passages, root=DATA)
        assert report["graph"] == "rules" and report["written"]["nodes"] == len(passages)
        assert report["written"]["missing_endpoints"] == 0
        assert report["written"]["entity_nodes"] == report["rules"]["entities"]
        assert report["resolution"]["entities"] == report["rules"]["entities"]
        assert len(merge_history(gm.store)) == report["resolution"]["merges"]
        # Lothair II's passage names his mother, whose passage is about her: two hops, one entity apart.
        mother = "entity:concept:ermengarde of tours"
        around = {(r.src, r.dst) for r in gm.store.get_relationships([mother]) if r.type is RelType.MENTIONS}
        assert {("doc:lothair-ii", mother), ("doc:ermengarde-of-tours", mother)} <= around
        assert gm.store.counts().nodes[NodeKind.ENTITY.value] > len(passages)
        first = gm.query(questions[0]["question"], mode="graph", k=5)
        assert set(questions[0]["gold"]) <= set(first.keys), first.keys
        assert any(h.evidence for h in first.results)  # hits carry the path through the entity
        hits = sum(len(set(gm.query(q["question"], mode="graph", k=5).keys) & set(q["gold"])) for q in questions)
        assert hits >= sum(len(q["gold"]) for q in questions) - 2
    finally:
        gm.close()


def test_rules_graph_of_a_slice_uses_every_title(wiki: Dataset) -> None:
    passages, _ = _slice(wiki, questions=1, extra=0)  # Lothair II and Ermengarde of Tours only
    nodes, rels, stats = rules_graph(wiki, passages)
    assert stats["docs_imported"] == 2 and stats["entities"] == len(nodes)
    # "Emperor Lothair I" stays a name of its own; titles outside the slice are still recognised.
    assert {r.src for r in rels} == {"doc:lothair-ii", "doc:ermengarde-of-tours"}
    assert "entity:concept:teutberga" in {n.key for n in nodes}


def test_a_walk_that_reaches_a_name_goes_on_to_the_passage_about_it() -> None:
    from graphmem.retrieval.config import LayerConfig
    from graphmem.retrieval.graph.layer import EntityLayer

    song, singer = "entity:concept:changed it", "entity:concept:nicki minaj"
    about = {("doc:song", "MENTIONS", song), ("doc:singer", "MENTIONS", singer)}
    edges = [*about, ("doc:song", "MENTIONS", singer)]
    edges += [(f"doc:other{i}", "MENTIONS", singer) for i in range(4)]  # passages that merely name her
    scores = {}
    for weight in (1.0, 10.0):
        layer = EntityLayer.build(edges, [], config=LayerConfig(about_weight=weight), about=about)
        assert layer is not None
        ranked = layer.rank({song: 1.0})
        scores[weight] = {key: float(ranked[layer.index[key]]) for key in ("doc:singer", "doc:other0")}
    assert scores[1.0]["doc:singer"] == pytest.approx(scores[1.0]["doc:other0"])
    assert scores[10.0]["doc:singer"] > 3 * scores[10.0]["doc:other0"]
    paths = layer.paths([layer.index[song]], [layer.index[k] for k in ("doc:singer", "doc:song", "doc:other0")])
    bridge, named = paths[layer.index["doc:singer"]], paths[layer.index["doc:song"]]
    assert bridge.nodes == (song, "doc:song", singer, "doc:singer")
    assert layer.bridged(bridge)  # the next hop: through the song's passage into the singer's own
    assert not layer.bridged(named)  # the passage the question names is not a bridge
    assert not layer.bridged(paths[layer.index["doc:other0"]])  # it names her, it is not about her

"""Retrieval policy as typed configuration: validation, presets, overrides, and learned fusion's
model and floor."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from graphmem.errors import ConfigError
from graphmem.retrieval.config import (
    PRESETS,
    FusionConfig,
    LinkConfig,
    RerankConfig,
    RetrievalConfig,
    WalkConfig,
    load_overrides,
    load_recipe,
    preset,
)
from graphmem.retrieval.engine import Candidates
from graphmem.retrieval.learned import (
    CandidateSignals,
    FusionModel,
    QuestionSignals,
    TreeRanker,
    apply_floor,
    demote_subjects,
    feature_names,
    load_model,
    matrix,
    outside_scope_last,
    spread_over_files,
)
from graphmem.retrieval.question import parse_question


@pytest.mark.parametrize("make", [
    lambda: WalkConfig(damping=1.5),
    lambda: WalkConfig(base_weights={"NOT_A_TYPE": 1.0}),
    lambda: WalkConfig(base_weights={"CALLS": -1.0}),
    lambda: LinkConfig(name_similarity=2.0),
    lambda: LinkConfig(fuzzy_cutoff=120.0),
    lambda: FusionConfig(method="magic"),
    lambda: FusionConfig(weights={"bm25": 0.0}),
    lambda: FusionConfig(weights={"sparse": 1.0}),
    lambda: FusionConfig(floor_rank=-1),
    lambda: RerankConfig(general_prose_share=1.5),
])
def test_settings_are_validated_when_made(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError):
        make()


def test_presets_are_recipes_of_one_config_type() -> None:
    assert {"bm25", "vector", "graph", "rrf", "hybrid", "hybrid-rerank"} <= set(PRESETS)
    assert preset("bm25").retrievers == ("bm25",)
    assert preset("rrf").fusion.method == "rrf" and preset("rrf").retrievers == ("bm25", "vector", "graph")
    assert preset("hybrid").fusion.method == "learned" and not preset("hybrid").rerank.enabled
    assert preset("hybrid-rerank").rerank.enabled
    with pytest.raises(ConfigError, match="unknown mode"):
        preset("nope")
    with pytest.raises(TypeError):
        PRESETS["x"] = PRESETS["bm25"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        preset("hybrid").fusion.floor_rank = 3  # type: ignore[misc]


def test_overrides_make_a_validated_copy(tmp_path: Path) -> None:
    base = preset("hybrid")
    swept = base.with_overrides({"fusion": {"floor_rank": 3}, "walk": {"damping": 0.6, "base_weights": {"CALLS": 2.0}}},
                                name="sweep")
    assert swept.name == "sweep" and swept.fusion.floor_rank == 3 and swept.walk.damping == 0.6
    assert swept.walk.base_weights["CALLS"] == 2.0 and swept.walk.base_weights["OWNS"] == base.walk.base_weights["OWNS"]
    assert base.fusion.floor_rank == 10  # the preset is untouched
    with pytest.raises(ConfigError, match="unknown walk settings"):
        base.with_overrides({"walk": {"dampning": 0.6}})
    with pytest.raises(ConfigError, match="section"):
        base.with_overrides({"walks": {}})
    with pytest.raises(ConfigError):
        base.with_overrides({"walk": {"damping": 7}})
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"mode": "hybrid", "fusion": {"floor_top": 2}}))
    loaded = load_overrides(path)
    assert preset(loaded.pop("mode")).with_overrides(loaded).fusion.floor_top == 2
    recipe = load_recipe(path)
    assert recipe.name == "sweep" and recipe.fusion.floor_top == 2 and recipe.fusion.method == "learned"
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ConfigError):
        load_overrides(tmp_path / "bad.json")
    assert isinstance(RetrievalConfig("x").as_dict()["walk"]["base_weights"], dict)


def test_the_floor_keeps_every_lists_first_candidates_near_the_top() -> None:
    order = ["a", "b", "c", "d", "e", "f", "g"]
    lists = {"bm25": ["g", "a"], "vector": ["a", "f"], "graph": ["b"]}
    out = apply_floor(order, lists, top=1, rank=3)
    assert set(out[:3]) == {"a", "b", "g"} and sorted(out) == sorted(order)
    assert out[:3] == ["a", "b", "g"]  # in the model's order
    assert apply_floor(order, lists, top=1, rank=0) == order
    assert apply_floor(order, {"bm25": ["a"]}, top=1, rank=5) == order  # nothing to move
    two = apply_floor(order, lists, top=2, rank=4)
    assert {"g", "a", "f", "b"} == set(two[:4])


def test_a_relationships_named_end_stays_out_of_the_first_places() -> None:
    order = ["x", "a", "y", "b", "c"]
    assert demote_subjects(order, {"x", "y"}, 2) == ["a", "b", "x", "y", "c"]
    assert demote_subjects(order, {"x"}, 0) == order  # off
    assert demote_subjects(["x", "a"], {"x"}, 5) == ["a", "x"]  # fewer others than places: all of them first
    assert demote_subjects(order, set(), 3) == order


def test_an_open_questions_hits_spread_over_files() -> None:
    a1, a2, a3 = "sym:src/a.py::one", "sym:src/a.py::two", "sym:src/a.py::three"
    b1, c1 = "sym:src/b.py::one", "file:src/c.py"
    commit = "commit:" + "c" * 40
    order = [a1, a2, a3, b1, commit, c1]
    # The second hit of a file moves two places down, the third four; other files' hits close up.
    assert spread_over_files(order, 2, 15) == [a1, b1, a2, commit, c1, a3]
    assert spread_over_files([a1, a2, "x", "y", "z"], 1, 15) == [a1, "x", a2, "y", "z"]
    assert spread_over_files(order, 2, 3) == [a1, a2, a3, b1, commit, c1]  # only within the window
    assert spread_over_files(order, 0, 15) == order  # off
    with pytest.raises(ConfigError):
        FusionConfig(file_spread=-1)


def test_code_in_a_package_the_question_excludes_comes_last() -> None:
    from graphmem.retrieval.graph import excluded_packages
    from graphmem.retrieval.graph.linking import Link, LinkReason

    named = "sym:cli/Option.java::Option.getSince"
    order = [named, "sym:cli/Options.java::Options.addOption", "commit:" + "a" * 40,
             "sym:cli/help/OptionFormatter.java::OptionFormatter.getSince", "file:cli/Parser.java"]
    moved = ["commit:" + "a" * 40, "sym:cli/help/OptionFormatter.java::OptionFormatter.getSince",
             named, "sym:cli/Options.java::Options.addOption", "file:cli/Parser.java"]
    assert outside_scope_last(order, {"cli"}) == moved  # a subdirectory is another package
    assert outside_scope_last(order, set()) == order

    def excluded(text: str) -> set[str]:
        return excluded_packages(parse_question(text), {named: Link(1.0, LinkReason.NAME, "Option.getSince")})

    assert excluded("Who uses Option.getSince from other packages of commons-cli?") == {"cli"}
    assert excluded("Where is Option.getSince used outside its own package?") == {"cli"}
    assert excluded("Which code outside `cli/help/` calls Option.getSince?") == {"cli/help"}
    assert excluded("Which modules outside of src/app/ depend on Option.getSince?") == {"src/app"}
    assert excluded("Who calls Option.getSince?") == set()
    assert excluded("Which packages does the parser use?") == set()  # packages named, no scope read


def test_code_outside_the_package_a_question_names_comes_last(tmp_path: Path) -> None:
    from graphmem.model import Node, Provenance
    from graphmem.retrieval.graph import GraphRetriever, scope_paths
    from graphmem.stores.embedded import EmbeddedStore

    assert parse_question("Which functions in the assertion module call fail?").inside == ("assertion",)
    assert parse_question("Which code under `src/app/` calls fail?").inside == ("src/app/",)
    assert parse_question("Where is fail defined in pytest?").inside == ()  # a project, not a package
    # A path that goes on into a file places the code the question names, not its answer.
    assert parse_question("Who calls `SubmitOrder` in clients/go/orders/client.go?").inside == ()
    assert parse_question("Who uses `Timeout` outside middleware/timeout.go?").outside == ()
    store = EmbeddedStore(tmp_path, "scopes")
    files = ["src/_pytest/assertion/util.py", "src/_pytest/assertion/rewrite.py", "src/_pytest/python.py",
             "src/_pytest/directives/patches.py", "src/app/main.py", "httpx/_models.py"]
    store.upsert([Node(f"file:{p}", p, Provenance(p, "test"), {}) for p in files], [], [])
    cat = GraphRetriever(store).catalog
    assert scope_paths(("assertion",), cat) == {"src/_pytest/assertion/"}
    assert scope_paths(("patches",), cat) == {"src/_pytest/directives/patches.py"}  # a module is a file
    assert scope_paths(("src/app/",), cat) == {"src/app/"}
    assert scope_paths(("models",), cat) == {"httpx/_models.py"}  # a private module by its name
    assert scope_paths(("documentation", "lib/"), cat) == set()  # names nothing here
    store.close()
    order = ["sym:src/_pytest/python.py::fail", "commit:" + "b" * 40, "sym:src/_pytest/assertion/util.py::_diff",
             "file:src/_pytest/directives/patches.py"]
    assert outside_scope_last(order, set(), {"src/_pytest/assertion/"}) == [
        "commit:" + "b" * 40, "sym:src/_pytest/assertion/util.py::_diff", "sym:src/_pytest/python.py::fail",
        "file:src/_pytest/directives/patches.py"]
    assert outside_scope_last(order, set(), {"src/_pytest/directives/patches.py"})[:2] == [
        "commit:" + "b" * 40, "file:src/_pytest/directives/patches.py"]
    # A question for code in a module: a commit lies in none.
    assert outside_scope_last(order, set(), {"src/_pytest/assertion/"}, code=True)[:2] == [
        "sym:src/_pytest/assertion/util.py::_diff", "sym:src/_pytest/python.py::fail"]


@pytest.mark.parametrize("text,tests", [
    ("Which test covers the www redirect?", True),
    ("What tests exercise StaticFiles.lookup_path?", True),
    ("Where is the GZip middleware tested?", True),
    ("What code tests whether a path is a directory?", False),  # "tests" is the code's verb
    ("Which test file has the fixtures?", False),  # a file that holds tests, not a test
    ("What is the effect of the settings in the test that verifies the resolution?", False),  # a place
])
def test_a_question_asking_for_tests_puts_test_code_first(text: str, tests: bool) -> None:
    assert parse_question(text).asks_tests is tests
    order = ["sym:web/routing.py::Router.redirect", "commit:" + "c" * 40, "sym:tests/test_routing.py::test_redirect",
             "doc:docs/routing.md", "sym:tests/test_hosts.py::test_www_redirect"]
    expected = [order[2], order[4], order[0], order[1], order[3]] if tests else order
    assert outside_scope_last(order, set(), (), parse_question(text).asks_tests) == expected


def test_the_shipped_model_matches_the_features_and_ranks() -> None:
    model = load_model(FusionConfig().model)
    assert list(model.names) == feature_names()
    q = QuestionSignals(asks_kind=True, anchored=True, named=1, relations=frozenset({"CALLS"}), directed=True)
    cands = {"sym:a.py::f": CandidateSignals(ranks={"bm25": 1, "vector": 1, "graph": 1},
                                             scores={"bm25": 1.0, "vector": 0.7, "graph": 1.0}, kind_match=True),
             "sym:b.py::g": CandidateSignals(ranks={"bm25": 40}, scores={"bm25": 0.05})}
    for path in ("walk", "layer"):
        scores = model.score(matrix(q, list(cands), cands), path)
        assert scores.shape == (2,) and np.all(np.isfinite(scores))
        assert scores[0] > scores[1]  # first everywhere beats fortieth in one list


def test_a_model_trained_before_a_feature_was_added_reads_its_own_columns() -> None:
    """An older model lacks the newest features: it scores as the same model with those weighed 0."""
    full = load_model(FusionConfig().model).as_dict()
    walk = full["rankers"]["walk"]
    assert walk["type"] == "linear"
    dropped = {"named_plain", "in_tests"}
    keep = [i for i, name in enumerate(full["features"]) if name not in dropped]
    older = dict(full, features=[full["features"][i] for i in keep],
                 rankers={"walk": {**walk, **{part: [walk[part][i] for i in keep] for part in ("mean", "scale", "weights")}}})
    zeroed = dict(full, rankers={"walk": {**walk, "weights": [0.0 if name in dropped else w
                                                              for name, w in zip(full["features"], walk["weights"])]}})
    q = QuestionSignals(named=1)
    cands = {"sym:src/outcomes.py::skip": CandidateSignals(ranks={"bm25": 3}, scores={"bm25": 0.6}, named=True),
             "sym:tests/test_skip.py::test_skip": CandidateSignals(ranks={"bm25": 1, "vector": 2},
                                                                   scores={"bm25": 1.0, "vector": 0.8})}
    x = matrix(q, list(cands), cands)
    assert x[:, feature_names().index("named_plain")].tolist() == [1.0, 0.0]  # named, no relation asked
    assert x[:, feature_names().index("in_tests")].tolist() == [0.0, 1.0]
    np.testing.assert_allclose(FusionModel.from_dict(older).score(x), FusionModel.from_dict(zeroed).score(x), rtol=1e-6)
    assert not np.allclose(FusionModel.from_dict(older).score(x), load_model(FusionConfig().model).score(x))


def test_text_agreement_and_description_features() -> None:
    names = feature_names()
    cands = {"sym:a.py::f": CandidateSignals(ranks={"bm25": 2, "vector": 4, "graph": 1}, named=True),
             "sym:a.py::g": CandidateSignals(ranks={"bm25": 1})}
    describing = QuestionSignals(named=1, words=30, anchored=True)
    x = matrix(describing, list(cands), cands)
    assert x[:, names.index("text_agree")].tolist() == [0.25, 0.0]  # the weaker of the two text lists
    assert x[:, names.index("text_agree_x_anchored")].tolist() == [0.25, 0.0]
    assert x[:, names.index("describes")].tolist() == [1.0, 1.0]  # long: saturated
    assert x[:, names.index("named_x_describes")].tolist() == [1.0, 0.0]
    assert x[:, names.index("graph_rr_x_describes")].tolist() == [1.0, 0.0]
    short = matrix(QuestionSignals(named=1, words=6), list(cands), cands)
    assert short[0, names.index("describes")] == pytest.approx(0.25)
    # A question that asks for a relationship describes nothing, whatever its length.
    asking = matrix(QuestionSignals(named=1, words=30, relations=frozenset({"CALLS"})), list(cands), cands)
    assert asking[:, names.index("describes")].tolist() == [0.0, 0.0]
    assert asking[:, names.index("named_x_describes")].tolist() == [0.0, 0.0]


def test_a_lists_first_place_counts_by_how_clearly_it_leads() -> None:
    names = feature_names()
    cands = {"sym:a.py::clear": CandidateSignals(ranks={"bm25": 1, "vector": 1}, scores={"bm25": 1.0, "vector": 0.8}),
             "sym:a.py::far": CandidateSignals(ranks={"bm25": 2, "vector": 3}, scores={"bm25": 0.25, "vector": 0.6}),
             "sym:a.py::tie": CandidateSignals(ranks={"vector": 2, "graph": 1}, scores={"vector": 0.8, "graph": 1.0})}
    x = matrix(QuestionSignals(words=12), list(cands), cands)
    # bm25's first stands well clear of its second; vector's second ties with its first (cosines,
    # not normalised: a ratio still reads them); the graph list holds one candidate, so nothing
    # contests its first place.
    assert x[:, names.index("bm25_top1_margin")].tolist() == [0.75, 0.0, 0.0]
    assert x[:, names.index("vector_top1_margin")].tolist() == [0.0, 0.0, 0.0]
    assert x[:, names.index("graph_top1_margin")].tolist() == [0.0, 0.0, 1.0]
    assert x[:, names.index("bm25_top1_margin_x_describes")].tolist() == [0.375, 0.0, 0.0]  # 12 of 24 words
    relating = matrix(QuestionSignals(words=12, directed=True), list(cands), cands)
    assert relating[:, names.index("bm25_top1_margin_x_describes")].tolist() == [0.0, 0.0, 0.0]
    assert relating[:, names.index("bm25_top1_margin")].tolist() == [0.75, 0.0, 0.0]


def test_a_callable_asked_for_is_a_feature() -> None:
    """"Which method ..." marks methods and functions as what it asks for and types as not."""
    names = feature_names()
    cls, method, other = ("sym:src/cli/CommandLine.java::CommandLine", "sym:src/cli/CommandLine.java::CommandLine.getArgList",
                          "commit:" + "c" * 40)
    rankings = {"bm25": [method, cls], "vector": [cls, other, method]}
    ref = datetime(2026, 6, 1, tzinfo=timezone.utc)

    def columns(text: str) -> dict[str, list[float]]:
        cands = Candidates(parse_question(text, ref), rankings=rankings, shapes={cls: "class", method: "method"})
        qs, signals = cands.signals()
        x = matrix(qs, [cls, method, other], signals)
        return {name: x[:, names.index(name)].tolist() for name in
                ("callable_match", "callable_mismatch")}

    asked = columns("Which method returns the left-over arguments that were not recognised as options by the parser?")
    assert asked["callable_match"] == [0.0, 1.0, 0.0] and asked["callable_mismatch"] == [1.0, 0.0, 0.0]
    typed = columns("Which class has the getArgList method?")  # a type: the methods found stand in for it
    assert typed["callable_match"] == typed["callable_mismatch"] == [0.0, 0.0, 0.0]
    relating = columns("Which methods call getArgList?")  # asks for callables, and for a relationship
    assert relating["callable_match"] == [0.0, 1.0, 0.0]
    assert columns("Where are the left-over arguments kept?") == {"callable_match": [0.0] * 3,
                                                                  "callable_mismatch": [0.0] * 3}


def test_a_kind_almost_never_seen_in_training_cannot_dominate() -> None:
    from eval.train_fusion import SCALE_FLOOR, fit

    rng = np.random.default_rng(2)
    groups = []
    for i in range(60):
        x = rng.random((5, 3))
        x[:, 2] = 0.0
        labels = np.zeros(5, dtype=bool)
        labels[int(np.argmax(x[:, 0]))] = True  # feature 0 decides
        if i == 0:
            x[labels, 2] = 1.0  # feature 2 appears once, on a gold candidate
        groups.append((x, labels))
    ranker = fit(groups, 0.1, floored=[2])
    assert ranker.scale[2] >= SCALE_FLOOR
    assert fit(groups, 0.1).scale[2] < SCALE_FLOOR  # not floored unless asked
    probe = np.array([[0.9, 0.5, 0.0], [0.1, 0.5, 1.0]])  # the rare feature must not outrank feature 0
    scores = ranker.score(probe)
    assert scores[0] > scores[1]


def test_leave_one_source_out_trains_without_the_held_out_questions() -> None:
    from eval.train_fusion import Row, cross_validate, first_gold

    assert first_gold(np.array([0.1, 0.9, 0.5]), np.array([False, False, True])) == 2
    assert first_gold(np.array([0.1, 0.9]), np.array([False, False])) is None
    rng = np.random.default_rng(1)
    n = len(feature_names())

    def row(source: str, signal: int) -> Row:
        x = rng.random((6, n)).astype(np.float32)
        labels = np.zeros(6, dtype=bool)
        labels[3] = True
        x[3, signal] += 2.0  # the gold candidate stands out on the source's own feature
        return Row(x, labels, "walk", source, "concept")

    # Two sources agree on which feature marks the gold, a third uses another: held out, the
    # agreeing ones are ranked by what the other taught, the odd one is not.
    rows = [row("a", 0) for _ in range(20)] + [row("b", 0) for _ in range(20)] + [row("c", 5) for _ in range(20)]
    report = cross_validate(rows, ["a", "c"], set(), 0.1)
    lines = {line.split()[0]: line.split() for line in report.splitlines()[2:]}
    assert lines["all"][1] == "40" and lines["concept"][1] == "40"
    held_a = cross_validate(rows, ["a"], set(), 0.1).splitlines()[2].split()
    held_c = cross_validate(rows, ["c"], set(), 0.1).splitlines()[2].split()
    assert float(held_a[3]) >= 0.95 and float(held_c[3]) < 0.9


def test_a_model_for_other_features_or_malformed_is_refused(tmp_path: Path) -> None:
    good = load_model(FusionConfig().model).as_dict()
    stale = dict(good, features=good["features"][:-1] + ["something_else"])
    with pytest.raises(ConfigError, match="does not compute.*something_else"):
        FusionModel.from_dict(stale)
    linear = good["rankers"]["layer"]
    short = dict(linear, weights=linear["weights"][:-1])
    with pytest.raises(ConfigError):
        FusionModel.from_dict(dict(good, rankers={"walk": short}))
    with pytest.raises(ConfigError, match="walk"):
        FusionModel.from_dict(dict(good, rankers={"layer": linear}))
    with pytest.raises(ConfigError, match="type"):
        FusionModel.from_dict(dict(good, rankers={"walk": dict(linear, type="forest")}))
    # A model of the previous format (linear rankers without a type) still loads.
    old = dict(good, format=2, rankers={"walk": {k: v for k, v in linear.items() if k != "type"}})
    assert FusionModel.from_dict(old).rankers["walk"].as_dict() == linear
    with pytest.raises(ConfigError):
        FusionModel.from_dict(dict(good, format=99))
    with pytest.raises(ConfigError, match="no fusion model"):
        load_model(str(tmp_path / "missing.json"))


def test_tree_rankers_score_as_the_boosting_they_were_exported_from() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    from eval.train_fusion import export_trees

    rng = np.random.default_rng(0)
    x = rng.random((400, 6))
    y = (x[:, 0] > 0.5) & (x[:, 3] < 0.4) | (x[:, 2] > 0.9)  # an interaction no linear ranker holds
    clf = HistGradientBoostingClassifier(max_iter=40, max_leaf_nodes=7, random_state=0).fit(x, y)
    trees = export_trees(clf)
    probe = rng.random((50, 6))
    assert np.allclose(trees.score(probe), clf.decision_function(probe), atol=1e-9)
    again = TreeRanker.from_dict(json.loads(json.dumps(trees.as_dict())))
    assert np.allclose(again.score(probe), trees.score(probe), atol=1e-6)
    again.check(6, "probe")
    with pytest.raises(ConfigError):
        again.check(3, "probe")  # a feature the model was not given
    broken = dict(trees.as_dict(), left=[len(trees.feature)] * len(trees.feature))
    with pytest.raises(ConfigError):
        TreeRanker.from_dict(broken).check(6, "probe")


def test_a_swept_recipe_brings_its_own_graph_settings(tmp_path: Path) -> None:
    from graphmem.retrieval.engine import Retriever
    from graphmem.retrieval.indexes import Indexes
    from graphmem.stores.embedded import EmbeddedStore

    store = EmbeddedStore(tmp_path / "graph", "p")
    try:
        retriever = Retriever(store, Indexes(tmp_path / "index", embedder=lambda: None))  # type: ignore[arg-type,return-value]
        base = preset("hybrid")
        swept = base.with_overrides({"layer": {"about_weight": 2.0}, "walk": {"damping": 0.6}})
        assert retriever.graph_for(base) is retriever.graph  # the default recipe's, wired once
        assert retriever.graph_for(preset("graph")) is retriever.graph  # presets share the graph settings
        graph = retriever.graph_for(swept)
        assert graph is not retriever.graph and graph is retriever.graph_for(swept)
        assert graph.layer_config.about_weight == 2.0 and graph.walk_config.damping == 0.6
    finally:
        store.close()

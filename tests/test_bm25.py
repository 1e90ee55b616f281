"""The code-aware tokenizer and the incremental BM25 index, checked against rank_bm25 as the reference."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from graphmem.errors import StoreError
from graphmem.retrieval.bm25 import BM25Index
from graphmem.retrieval.tokenize import STOP_WORDS, stem, tokenize

# --- tokenizer ------------------------------------------------------------------------------------


def test_camel_and_dotted_identifiers_are_kept_whole_and_split() -> None:
    toks = tokenize("InvoiceHandler.post")
    assert {"invoicehandler", "invoice", "handler", "post"} <= set(toks)
    assert "invoicehandler.post" in toks
    assert {"get", "user", "by", "id"} - STOP_WORDS <= set(tokenize("getUserById"))
    assert "getuserbyid" in tokenize("getUserById")


def test_snake_and_kebab_case() -> None:
    assert tokenize("charge_card") == ["charge_card", "charge", "card"]
    toks = tokenize("payment-service-client")
    assert toks[0] == "payment-service-client"
    assert {"payment", "service", "client"} <= set(toks)


def test_acronyms_split_from_words() -> None:
    assert tokenize("HTTPServer") == ["httpserver", "http", "server"]
    assert {"parse", "json", "response"} <= set(tokenize("parseJSONResponse"))
    assert {"http", "2", "server"} <= set(tokenize("HTTP2Server"))
    assert tokenize("HTTP") == ["http"]


def test_record_ids_are_normalised() -> None:
    assert "adr-5" in tokenize("ADR-0005") and "adr-5" in tokenize("ADR-5")
    assert "inc-42" in tokenize("INC-042") and "inc-42" in tokenize("INC-42")
    assert set(tokenize("ADR-0005")) == set(tokenize("ADR-5")) == {"adr-5", "adr", "5"}
    assert "inc-42" in tokenize("see INC-042-followup.")


def test_stemming() -> None:
    cases = {"incidents": "incident", "services": "service", "calls": "call", "depends": "depend",
             "classes": "class", "dependencies": "dependency", "indexes": "index", "patches": "patch",
             "caches": "cache"}
    for word, expected in cases.items():
        assert stem(word) == expected, word
        assert tokenize(word) == [expected]
    for word in ("class", "status", "process", "analysis", "bus", "address"):
        assert stem(word) == word
        assert tokenize(word) == [word]


def test_stop_words_dropped_but_question_verbs_kept() -> None:
    assert tokenize("Which service owns the incidents?") == ["service", "own", "incident"]
    assert tokenize("what calls charge_card") == ["call", "charge_card", "charge", "card"]
    assert tokenize("What depends on it, and what changed?") == ["depend", "changed"]
    for word in ("owns", "calls", "depends", "changed"):
        assert word not in STOP_WORDS
    assert 40 <= len(STOP_WORDS) <= 80


def test_case_punctuation_and_empty_input() -> None:
    assert tokenize("") == []
    assert tokenize("  ...  ;; ") == []
    assert tokenize("Retry retry RETRY.") == ["retry", "retry", "retry"]
    assert "charge_card" in tokenize("self.charge_card(amount)")
    assert tokenize("über Straße") == ["über", "straße"]


# --- a realistic, seeded corpus ----------------------------------------------------------------------

WORDS = [
    "service", "owns", "invoice", "handler", "calls", "charge", "card", "payment", "gateway", "retry", "timeout",
    "database", "connection", "pool", "error", "request", "fails", "cache", "user", "account", "billing", "order",
    "refund", "webhook", "queue", "worker", "schedule", "token", "session", "login", "auth", "permission",
    "config", "deploy", "release", "build", "pipeline", "client", "server", "response", "status", "parse",
    "stream", "lock", "transaction", "commit", "migration", "schema", "query", "filter", "event", "listener",
    "publish", "topic", "message", "latency", "memory", "crash", "exception", "validate", "render", "template",
    "route", "proxy", "replica", "failover", "health", "alert", "incident", "decision", "owner", "team", "depends",
    "changed", "fixed", "bug", "feature", "refactor",
]
PROSE = [
    "the", "a", "of", "to", "in", "and", "is", "that", "for", "when", "which", "what", "this", "with", "on", "by",
    "from", "it", "as", "be", "are", "was", "should",
]


def _identifier(rng: random.Random) -> str:
    parts = rng.sample(WORDS, rng.randint(2, 3))
    style = rng.randrange(5)
    if style == 0:
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    if style == 1:
        return "".join(p.capitalize() for p in parts)
    if style == 2:
        return "_".join(parts)
    if style == 3:
        return "".join(p.capitalize() for p in parts[:-1]) + "." + parts[-1]
    return f"self.{'_'.join(parts)}()"


def _made_up_words(rng: random.Random, n: int) -> list[str]:
    """Pronounceable made-up words: the long tail of rare terms real code has."""
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 3))))
    return sorted(out)


def make_corpus(n: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    vocab = WORDS + _made_up_words(rng, 1500)
    # Zipf-ish: domain words first and far more frequent than the made-up tail.
    weights = [1 / (i + 1) for i in range(len(vocab))]
    docs = []
    for _ in range(n):
        items = rng.choices(vocab, weights, k=rng.randint(5, 40))
        items += rng.choices(PROSE, k=rng.randint(0, 10))
        items += [_identifier(rng) for _ in range(rng.randint(0, 8))]
        if rng.random() < 0.2:
            items.append(f"ADR-{rng.randint(1, 30):04d}" if rng.random() < 0.5 else f"INC-{rng.randint(1, 60)}")
        rng.shuffle(items)
        docs.append(" ".join(items))
    return docs


QUERIES = ["which service owns InvoiceHandler.post", "what calls charge_card", "payment gateway timeout retries",
           "ADR-0005 decision", "INC-12 incident database connection pool", "webhook queue worker schedule",
           "refactor migration schema", "PaymentGateway.charge failover alert", "latency of the billing service",
           "crash exception in render template route"]


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return make_corpus(400)


def _ref_query(query: str) -> list[str]:
    """rank_bm25 adds a repeated query term once per repetition; BM25Index counts it once."""
    return list(dict.fromkeys(tokenize(query)))


def test_okapi_scores_equal_rank_bm25(corpus: list[str]) -> None:
    ids = list(range(1000, 1000 + len(corpus)))
    index = BM25Index(idf="okapi")
    index.add(zip(ids, corpus))
    ref = BM25Okapi([tokenize(d) for d in corpus])
    for query in QUERIES:
        got_ids, got = index.scores(query)
        assert got_ids.tolist() == ids
        expected = ref.get_scores(_ref_query(query))
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-6), query
        assert np.any(expected > 0), query
        # search returns the positive scores in the reference's order (ties by id).
        top = index.search(query, 10)
        order = sorted((i for i in range(len(corpus)) if expected[i] > 0), key=lambda i: (-expected[i], i))[:10]
        assert [doc_id for doc_id, _ in top] == [ids[i] for i in order], query
        assert np.allclose([s for _, s in top], expected[order], rtol=1e-5)


def test_okapi_matches_with_custom_parameters(corpus: list[str]) -> None:
    index = BM25Index(idf="okapi", k1=1.2, b=0.5, epsilon=0.1)
    index.add(enumerate(corpus))
    ref = BM25Okapi([tokenize(d) for d in corpus], k1=1.2, b=0.5, epsilon=0.1)
    for query in QUERIES[:4]:
        assert np.allclose(index.scores(query)[1], ref.get_scores(_ref_query(query)), rtol=1e-5, atol=1e-6)


def test_lucene_top10_close_to_rank_bm25(corpus: list[str]) -> None:
    index = BM25Index()
    index.add(enumerate(corpus))
    ref = BM25Okapi([tokenize(d) for d in corpus])
    overlaps = []
    for query in QUERIES:
        expected = ref.get_scores(_ref_query(query))
        ref_top = set(np.argsort(-expected, kind="stable")[:10].tolist())
        got = index.search(query, 10)
        assert len(got) == 10
        assert all(s > 0 for _, s in got)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        overlaps.append(len(ref_top & {doc_id for doc_id, _ in got}) / 10)
    # The variants differ on terms in about half the documents or more (okapi floors their idf at
    # epsilon * mean idf, lucene keeps a small positive one): "what calls charge_card" overlaps 0.4 here.
    assert np.mean(overlaps) >= 0.8, overlaps
    assert min(overlaps) >= 0.3, overlaps


def test_lucene_idf_never_negative() -> None:
    index = BM25Index()
    index.add([(1, "retry retry"), (2, "retry"), (3, "retry timeout")])
    result = dict(index.search("retry", 10))
    assert set(result) == {1, 2, 3}
    assert all(s > 0 for s in result.values())
    assert result[1] > result[2]  # more occurrences, same-ish length


def test_record_ids_match_across_spellings() -> None:
    index = BM25Index()
    index.add([(1, "Decision ADR-0005: use Postgres"), (2, "ADR-0050 about queues"), (3, "unrelated text")])
    assert index.search("ADR-5", 1)[0][0] == 1
    assert index.search("adr-0005", 1)[0][0] == 1


# --- behaviour of the index --------------------------------------------------------------------------


def test_add_replace_remove_and_lookup() -> None:
    index = BM25Index()
    assert len(index) == 0 and index.ids() == set() and index.search("anything", 5) == []
    index.add([(1, "charge the card"), (2, "refund the order"), (2**63 - 1, "charge_card retries")])
    assert len(index) == 3 and index.ids() == {1, 2, 2**63 - 1} and 1 in index
    assert {i for i, _ in index.search("charge", 10)} == {1, 2**63 - 1}
    index.add([(1, "refund policy")])  # replaces the text of id 1
    assert {i for i, _ in index.search("charge", 10)} == {2**63 - 1}
    assert {i for i, _ in index.search("refund", 10)} == {1, 2}
    index.remove([2, 12345])  # unknown ids are ignored
    assert index.ids() == {1, 2**63 - 1}
    assert index.search("refund", 0) == []
    assert index.search("the of", 10) == []  # only stop words
    assert index.search("zzz-unknown", 10) == []
    with pytest.raises(ValueError):
        index.add([(2**63, "too big")])
    with pytest.raises(TypeError):
        index.add([("7", "not an int")])  # type: ignore[list-item]


def test_empty_documents_count_but_never_match() -> None:
    index = BM25Index()
    index.add([(1, ""), (2, "the of and"), (3, "retry")])
    assert len(index) == 3
    assert index.search("retry", 10)[0][0] == 3
    assert index.search("retry", 10) == [(3, pytest.approx(index.search("retry", 1)[0][1]))]
    ids, scores = index.scores("retry")
    assert ids.tolist() == [1, 2, 3] and scores[0] == scores[1] == 0


def test_ties_broken_by_id_and_k_respected() -> None:
    index = BM25Index()
    index.add((i, "same text here") for i in (50, 7, 30, 1, 99))
    assert [i for i, _ in index.search("text", 3)] == [1, 7, 30]
    assert [i for i, _ in index.search("text", 10)] == [1, 7, 30, 50, 99]


def test_repeated_query_terms_count_once() -> None:
    index = BM25Index()
    index.add([(1, "retry timeout"), (2, "retry retry"), (3, "timeout")])
    assert index.search("retry retry retry timeout", 5) == index.search("retry timeout", 5)


def _scratch(final: dict[int, str], **kwargs: object) -> BM25Index:
    index = BM25Index(**kwargs)  # type: ignore[arg-type]
    index.add(sorted(final.items()))
    return index


TEXTS = st.lists(st.sampled_from(["retry", "timeout", "charge_card", "InvoiceHandler.post", "ADR-0005", "the",
                                  "billing", "services", "HTTPServer", "queue"]), max_size=8).map(" ".join)
OPS = st.lists(st.tuples(st.sampled_from(["add", "remove", "search"]), st.integers(1, 12), TEXTS), max_size=40)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, idf=st.sampled_from(["lucene", "okapi"]))
def test_incremental_equals_from_scratch(ops: list[tuple[str, int, str]], idf: str) -> None:
    index = BM25Index(idf=idf)  # type: ignore[arg-type]
    final: dict[int, str] = {}
    for op, doc_id, text in ops:
        if op == "add":
            index.add([(doc_id, text)])
            final[doc_id] = text
        elif op == "remove":
            index.remove([doc_id])
            final.pop(doc_id, None)
        else:
            index.search(text, 3)  # forces a rebuild mid-way
    scratch = _scratch(final, idf=idf)
    assert index.ids() == set(final) and len(index) == len(final)
    for query in ["retry timeout", "charge card", "InvoiceHandler", "adr-5 billing", "service queue http"]:
        assert index.search(query, 5) == scratch.search(query, 5)
        got_ids, got = index.scores(query)
        want_ids, want = scratch.scores(query)
        assert np.array_equal(got_ids, want_ids) and np.array_equal(got, want)


def test_vocabulary_compaction_keeps_results(corpus: list[str]) -> None:
    index = BM25Index()
    index.add(enumerate(corpus))
    index.add([(10**6, " ".join(f"tmpname{i}" for i in range(12_000)))])
    index.search("retry", 5)
    index.remove([10**6])
    before = len(index._vocab.terms)
    result = index.search("payment gateway retry", 10)  # dead terms now outnumber live ones
    assert len(index._vocab.terms) < before - 11_000
    assert result == _scratch(dict(enumerate(corpus))).search("payment gateway retry", 10)
    index.add([(5, "tmpname3 again")])  # new terms after compaction get fresh ids
    assert index.search("tmpname3", 1)[0][0] == 5


# --- persistence -------------------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path: Path, corpus: list[str]) -> None:
    index = BM25Index(idf="okapi", k1=1.2, b=0.6)
    index.add(enumerate(corpus, start=2**40))
    index.add([(2**40, "replaced text about charge_card")])
    index.remove([2**40 + 1])
    path = tmp_path / "idx" / "bm25.npz"
    index.save(path)
    loaded = BM25Index.load(path)
    assert (loaded.k1, loaded.b, loaded.idf) == (1.2, 0.6, "okapi")
    assert loaded.ids() == index.ids()
    for query in QUERIES:
        assert loaded.search(query, 10) == index.search(query, 10)
        assert np.array_equal(loaded.scores(query)[1], index.scores(query)[1])
    # The file holds the weight matrix: a loaded index searches without building it, with the
    # same scores as one built from the counts (a file of an earlier version, without the matrix).
    assert not loaded._stale
    with np.load(path) as data:
        counts_only = {name: data[name] for name in data.files if not name.startswith("matrix_")}
    np.savez(tmp_path / "counts-only.npz", **counts_only)
    rebuilt = BM25Index.load(tmp_path / "counts-only.npz")
    assert rebuilt._stale
    for query in QUERIES:
        assert np.array_equal(rebuilt.scores(query)[1], loaded.scores(query)[1])
    # A loaded index stays editable.
    loaded.add([(1, "brand new zebracorn text")])
    loaded.remove([2**40])
    assert loaded.search("zebracorn", 1)[0][0] == 1
    assert 2**40 not in loaded.ids()


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    index = BM25Index()
    index.add([(1, "retry timeout")])
    path = tmp_path / "bm25.npz"
    index.save(path)
    index.add([(2, "queue worker")])
    index.save(path)  # replaces the previous version
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bm25.npz"]
    assert BM25Index.load(path).ids() == {1, 2}
    # Saving into a path that cannot be replaced fails and cleans its temporary file up.
    (tmp_path / "dir.npz").mkdir()
    with pytest.raises(OSError):
        index.save(tmp_path / "dir.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bm25.npz", "dir.npz"]


def test_empty_index_round_trip_and_missing_file(tmp_path: Path) -> None:
    missing = BM25Index.load(tmp_path / "nope.npz", idf="okapi")
    assert len(missing) == 0 and missing.idf == "okapi"
    BM25Index().save(tmp_path / "empty.npz")
    empty = BM25Index.load(tmp_path / "empty.npz")
    assert len(empty) == 0 and empty.search("anything", 3) == []


def test_corrupt_files_raise_store_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not a zip file at all")
    with pytest.raises(StoreError, match="damaged"):
        BM25Index.load(garbage)

    index = BM25Index()
    index.add(enumerate(make_corpus(50)))
    good = tmp_path / "good.npz"
    index.save(good)
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(StoreError):
        BM25Index.load(truncated)

    with np.load(good) as data:
        arrays = {name: data[name] for name in data.files}
    bad = dict(arrays, terms=arrays["terms"] + 10**6)
    inconsistent = tmp_path / "inconsistent.npz"
    np.savez(inconsistent, **bad)
    with pytest.raises(StoreError, match="inconsistent"):
        BM25Index.load(inconsistent)

    for name, value in (("matrix_docs", arrays["matrix_docs"] + 10**6),
                        ("matrix_indptr", arrays["matrix_indptr"][::-1].copy()),
                        ("matrix_weights", arrays["matrix_weights"][:-1])):
        np.savez(inconsistent, **dict(arrays, **{name: value}))
        with pytest.raises(StoreError, match="inconsistent"):
            BM25Index.load(inconsistent)

    missing_key = {k: v for k, v in arrays.items() if k != "vocab"}
    partial = tmp_path / "partial.npz"
    np.savez(partial, **missing_key)
    with pytest.raises(StoreError):
        BM25Index.load(partial)

    other_format = tmp_path / "future.npz"
    np.savez(other_format, **dict(arrays, format=np.array([99])))
    with pytest.raises(StoreError, match="format"):
        BM25Index.load(other_format)

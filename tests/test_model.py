"""Keys, kinds and validation of the graph model."""

from __future__ import annotations

import pytest

from graphmem.errors import ModelError
from graphmem.model import (
    NodeKind,
    Provenance,
    Relationship,
    RelType,
    adr_key,
    check_relationship,
    chunk_id,
    commit_key,
    entity_key,
    file_key,
    incident_key,
    is_test_key,
    key_contains,
    kind_of,
    person_key,
    project_from_path,
    symbol_key,
    to_iso,
)


def test_keys_follow_the_spec() -> None:
    assert symbol_key("billing/api/handlers.py", "InvoiceHandler.post") == \
        "sym:billing/api/handlers.py::InvoiceHandler.post"
    assert file_key("./billing/x.py") == "file:billing/x.py"
    assert adr_key("ADR-0005") == adr_key(5) == adr_key("0005") == "adr:5"
    assert incident_key("inc-042") == "incident:INC-042"
    assert person_key(" Ana@Example.com ") == "person:ana@example.com"
    assert entity_key("Technology", "  PostgreSQL ") == "entity:technology:postgresql"
    assert commit_key("A" * 40) == "commit:" + "a" * 40
    with pytest.raises(ModelError):
        commit_key("abc123")
    with pytest.raises(ModelError):
        file_key("../outside.py")
    assert kind_of("adr:5") is NodeKind.DECISION and NodeKind.DECISION.label == "Decision"
    assert NodeKind.SYMBOL.prefix == "sym:"


def test_containment_used_by_gold_matching() -> None:
    assert key_contains("file:a/b.py", "sym:a/b.py::C.m")
    assert key_contains("sym:a/b.py::C", "sym:a/b.py::C.m")
    assert not key_contains("sym:a/b.py::C", "sym:a/b.py::CC")
    assert not key_contains("file:a/b.py", "sym:a/b.pyx::f")


def test_times_compare_as_strings() -> None:
    times = [to_iso("2025-03-01T12:00:00Z"), to_iso("2025-03-01T12:00:00.5+00:00"), to_iso("2025-03-01T13:00:00+02:00")]
    assert times == ["2025-03-01T12:00:00.000000Z", "2025-03-01T12:00:00.500000Z", "2025-03-01T11:00:00.000000Z"]
    assert sorted(times) == [times[2], times[0], times[1]]


def test_chunk_ids_are_stable_positive_63_bit() -> None:
    ids = {chunk_id(f"sym:a.py::f{i}", j) for i in range(500) for j in range(3)}
    assert len(ids) == 1500 and all(0 < i < 2**63 for i in ids)
    assert chunk_id("sym:a.py::f", 0) == chunk_id("sym:a.py::f", 0)


def test_project_names_are_safe_directory_names() -> None:
    assert project_from_path("/home/me/My Repo!") == "My-Repo"
    assert project_from_path("/") == "default"
    assert project_from_path("/srv/app.v2/") == "app.v2"


def test_relationship_types_and_endpoints_are_checked() -> None:
    p = Provenance("a.py", "code")
    rel = Relationship("sym:a.py::f", "CALLS", "sym:a.py::g", p)  # type: ignore[arg-type]
    assert check_relationship(rel).type is RelType.CALLS
    with pytest.raises(ModelError, match="cannot join"):
        check_relationship(Relationship("person:a@b.c", RelType.CALLS, "sym:a.py::g", p))
    with pytest.raises(ModelError, match="unknown relationship type"):
        check_relationship(Relationship("sym:a.py::f", "CALLS]->() DETACH DELETE n //", "sym:a.py::g", p))  # type: ignore[arg-type]


@pytest.mark.parametrize("key,test", [
    ("sym:tests/test_api.py::test_get", True),  # a test file
    ("file:pkg/handler_test.go", True),
    ("sym:src/uri/path.rs::tests.compares_with_a_string", True),  # Rust's inline `mod tests`
    ("sym:src/header/value.rs::from_header_name_tests.it_can_insert", True),
    ("sym:src/method.rs::test.test_extension_method_chars", True),
    ("sym:src/uri/path.rs::PathAndQuery.as_str", False),
    ("sym:src/runner.py::test", False),  # a function named "test" is no test module
    ("sym:src/latest.py::Contest.run", False),
    ("commit:" + "a" * 40, False),
])
def test_test_code_is_known_by_its_file_or_its_test_module(key: str, test: bool) -> None:
    assert is_test_key(key) is test

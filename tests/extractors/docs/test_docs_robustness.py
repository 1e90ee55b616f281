"""Arbitrary input never crashes the document extractors, and what they emit is always valid."""

from __future__ import annotations

import json

from docs_helpers import assert_valid
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extractors.decisions import extract_decision
from extractors.incidents import extract_incident
from extractors.ownership import OwnershipRules
from extractors.secrets import redact

# Markdown-ish text: the characters that drive the parsers, plus anything else.
MARKDOWN_BITS = st.sampled_from(
    ["---\n", "# ", "## ", "### ", "```\n", "\n", "\n\n", ": ", "- ", "* ", "| a | b |\n", "ADR-7 ",
     "INC-042 ", "Status: ", "Superseded by ", "Supersedes ", "status: [", "date: 2024-01-0", "\r\n",
     "password = '", "sym:a.py::f ", "3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b "]
)
TEXT = st.lists(st.one_of(MARKDOWN_BITS, st.text(max_size=20)), max_size=40).map("".join)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=15),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "title", "severity", "services", "caused_by", "resolved_by", "timeline",
                         "action_items", "decisions", "started_at", "root_cause", "summary", "x"]),
        inner, max_size=6),
    max_leaves=20,
)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(TEXT)
def test_decisions_never_crash(text: str) -> None:
    ex = extract_decision("docs/adr/0003-fuzz.md", text)
    assert_valid(ex)
    assert ex.nodes or ex.skipped


@FAST
@given(TEXT)
def test_markdown_incidents_never_crash(text: str) -> None:
    assert_valid(extract_incident("incidents/INC-1-fuzz.md", text))


@FAST
@given(JSONISH)
def test_json_incidents_never_crash(data: object) -> None:
    ex = extract_incident("incidents/fuzz.json", json.dumps(data))
    assert_valid(ex)
    assert ex.nodes or ex.skipped


@FAST
@given(TEXT)
def test_redaction_is_total_and_idempotent(text: str) -> None:
    once, _ = redact(text)
    assert redact(once) == (once, 0)


@FAST
@given(TEXT, st.text(alphabet="abc/._-*", max_size=12))
def test_codeowners_never_crash(text: str, path: str) -> None:
    rules = OwnershipRules.parse(text)
    assert isinstance(rules.owners_of(path or "a"), list)

"""Shared fixtures for the code extractor tests: the fixture project, parsed once."""

from __future__ import annotations

import pytest

from code_test_helpers import FIXTURES, parse_tree
from extractors.code import FileFacts, build_graph


@pytest.fixture(scope="session")
def project_facts() -> dict[str, FileFacts]:
    return parse_tree(FIXTURES)


@pytest.fixture(scope="session")
def project_graph(project_facts):
    return build_graph(project_facts, extractor_version="test", commit="a" * 40)

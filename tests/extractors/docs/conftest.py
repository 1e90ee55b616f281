"""Shared fixtures for the document, ownership, policy and secret extractor tests."""

from __future__ import annotations

from pathlib import Path

import pytest

# The fixture trees are inputs (some hold code files), not tests.
collect_ignore = ["fixtures"]

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture()
def fixtures() -> Path:
    return FIXTURES


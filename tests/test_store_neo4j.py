"""The Neo4j store passes the store contract, against a real server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.contract.store_contract import StoreContract

pytestmark = pytest.mark.neo4j


class TestNeo4jStore(StoreContract):
    @pytest.fixture
    def make_store(self, neo4j_store_factory: Callable[[str], Any]) -> Callable[[str], Any]:
        return neo4j_store_factory

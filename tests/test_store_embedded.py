"""The embedded store passes the store contract."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.contract.store_contract import StoreContract


class TestEmbeddedStore(StoreContract):
    @pytest.fixture
    def make_store(self, embedded_store_factory: Callable[[str], Any]) -> Callable[[str], Any]:
        return embedded_store_factory

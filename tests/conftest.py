"""Shared fixtures. Neo4j tests use a real server (NEO4J_* settings; `scripts/neo4j-local start`).

Under CI=true a missing Neo4j fails the tests that need it; elsewhere they are skipped with a reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REPO = Path(__file__).resolve().parents[1]
NOW = "2026-06-01"  # the example organisation's reference date in tests


def require(condition: bool, reason: str) -> None:
    """Skip when a prerequisite is missing, except under CI where that is a failure."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: tests may not skip for this)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def neo4j_driver() -> Iterator[Any]:
    import neo4j

    uri = os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687")
    auth = (os.environ.get("NEO4J_USERNAME", "neo4j"), os.environ.get("NEO4J_PASSWORD", "graphmem-local"))
    driver = neo4j.GraphDatabase.driver(uri, auth=auth, notifications_min_severity="OFF")
    try:
        driver.verify_connectivity()
    except Exception as exc:  # noqa: BLE001 - any failure means "no usable server"
        driver.close()
        require(False, f"Neo4j not reachable at {uri}: {exc.__class__.__name__}: {exc}")
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def neo4j_schema(neo4j_driver: Any) -> Any:
    """The driver, with graphmem's schema applied once per session."""
    from graphmem.stores.neo4j import Neo4jStore

    Neo4jStore(neo4j_driver, "schema-setup", database=os.environ.get("NEO4J_DATABASE")).ensure_schema()
    return neo4j_driver


@pytest.fixture
def neo4j_store_factory(neo4j_schema: Any) -> Iterator[Callable[[str], Any]]:
    """Make Neo4j stores for fresh, unique projects; their data is dropped afterwards."""
    from graphmem.stores.neo4j import Neo4jStore

    made: list[Any] = []
    suffix = uuid.uuid4().hex[:8]

    def make(project: str) -> Any:
        store = Neo4jStore(neo4j_schema, f"{project}-{suffix}", database=os.environ.get("NEO4J_DATABASE"))
        made.append(store)
        return store

    yield make
    for store in made:
        store.drop_project()


@pytest.fixture
def embedded_store_factory(tmp_path: Path) -> Callable[[str], Any]:
    """Make embedded stores under a temporary home; calling again with a name reopens it from disk."""
    from graphmem.stores.embedded import EmbeddedStore

    return lambda project: EmbeddedStore(tmp_path / "home", project)


@pytest.fixture(scope="session")
def example_org(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The example organisation (``examples/make_example_org.py --now NOW``): repository and facts."""
    out = tmp_path_factory.mktemp("example")
    subprocess.run([sys.executable, str(REPO / "examples" / "make_example_org.py"), str(out), "--now", NOW],
                   check=True, capture_output=True)
    return out / "acme", json.loads((out / "facts.json").read_text())

@pytest.fixture(scope="module")
def template_home(tmp_path_factory: pytest.TempPathFactory, example_org: tuple[Path, dict[str, Any]]) -> Path:
    """The example organisation ingested once into an embedded home (graph and indexes); tests of
    a module work on copies of it."""
    from graphmem.api import Graphmem
    from graphmem.config import Settings

    home = tmp_path_factory.mktemp("template")
    with Graphmem(Settings(store="embedded", home=home), "acme") as gm:
        gm.ingest(example_org[0])
    return home


@pytest.fixture(scope="module")
def neo4j_acme(neo4j_schema: Any, tmp_path_factory: pytest.TempPathFactory, example_org: tuple[Path, dict[str, Any]],
               request: pytest.FixtureRequest) -> Iterator[Any]:
    """The example organisation ingested once into a fresh Neo4j project named after the test
    module, dropped afterwards; a module's tests share it (they use keys of their own)."""
    from graphmem.api import Graphmem
    from graphmem.config import Settings
    from graphmem.stores.neo4j import Neo4jStore

    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-")
    store = Neo4jStore(neo4j_schema, f"{name}-{uuid.uuid4().hex[:8]}", database=os.environ.get("NEO4J_DATABASE"))
    g = Graphmem(Settings(store="neo4j", home=tmp_path_factory.mktemp(f"{name}-neo4j")), store.project, store=store)
    try:
        g.ingest(example_org[0])
        yield g
    finally:
        store.drop_project()
        g.close()



@pytest.fixture(scope="session")
def embedder() -> Any:
    """The default embedder (bge-small-en-v1.5 on ONNX Runtime), loaded once per session."""
    from graphmem.retrieval.embed import load_embedder

    return load_embedder()

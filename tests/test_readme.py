"""The README's schema picture agrees with the graph model."""

from __future__ import annotations

import re

from graphmem.model import REL_ENDPOINTS, NodeKind, RelType
from tests.conftest import REPO


def test_the_schema_picture_draws_only_allowed_relationships() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```mermaid\n(.*?)```", readme, flags=re.DOTALL)
    assert block, "the README has no schema picture"
    labels = {k.label: k for k in NodeKind}
    drawn = re.findall(r"^\s*(\w+) -- (\w+) --> (\w+)\s*$", block.group(1), flags=re.MULTILINE)
    assert len(drawn) >= 15
    for src, typ, dst in drawn:
        allowed_src, allowed_dst = REL_ENDPOINTS[RelType(typ)]
        assert labels[src] in allowed_src and labels[dst] in allowed_dst, (src, typ, dst)
    assert {RelType(t) for _, t, _ in drawn} == set(RelType)

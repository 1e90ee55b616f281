"""Rule-based mentions in commit messages and docstrings: the deterministic baseline of extraction.

Decision records and postmortems already link the services, code symbols and technologies their
text names (:class:`extractors.text.Vocabulary`). This gives commit messages and docstrings the
same treatment, so that without any LLM configured the graph still knows that a commit "moves
invoices to Kafka" or that a function's docstring names ``charge_card``:

* a commit mentions the services, symbols and technologies its message names;
* a symbol (or a file, by its module docstring) mentions the symbols and technologies its
  docstring names, and the services other than the one that holds it.

Each fact has the provenance of the node it comes from (``extractor="mentions"``), so it is
withdrawn with that commit or file like every other fact; the output is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

from extractors.base import Extraction
from extractors.text import Vocabulary, symbol_key_refs
from graphmem.model import Node, Provenance, Relationship, RelType, key_contains

EXTRACTOR = "mentions"
VERSION = "1"


def _text_of(node: Node) -> str | None:
    if node.key.startswith("commit:"):
        value = node.props.get("message")
    elif node.key.startswith(("sym:", "file:")):
        value = node.props.get("docstring")
    else:
        return None
    return value if isinstance(value, str) and value.strip() else None


def prose_mentions(
    facts: Extraction, vocabulary: Vocabulary, *, service_of: Callable[[str], str | None] | None = None
) -> Extraction:
    """MENTIONS (and technology entity nodes) for the commits, symbols and files in ``facts``.

    ``service_of(path)`` names the service a file belongs to; a docstring naming its own service
    says nothing new and is not linked.
    """
    out = Extraction()
    for node in facts.nodes:
        text = _text_of(node)
        if text is None:
            continue
        src = node.key
        prov = node.provenance
        own_service = None
        if service_of is not None and not src.startswith("commit:"):
            own_service = service_of(prov.source_path)

        def rel(dst: str, conf: float = 1.0, *, src: str = src, prov: Provenance = prov,
                since: str | None = node.valid_from) -> None:
            p = Provenance(prov.source_path, EXTRACTOR, VERSION, prov.source_commit, round(conf, 3))
            out.rels.append(Relationship(src, RelType.MENTIONS, dst, p, valid_from=since))

        found = vocabulary.find(text)
        for svc in found.services:
            if own_service is None or svc != f"service:{own_service}":
                rel(svc)
        symbols = dict(found.symbols)
        for sym in symbol_key_refs(text):
            symbols.setdefault(sym, 1.0)
        for sym, conf in symbols.items():
            # A docstring naming its own symbol, or one inside or around it, is self-description.
            if not (key_contains(src, sym) or key_contains(sym, src)):
                rel(sym, conf)
        for ekey, name in found.technologies:
            out.nodes.append(Node(ekey, name, Provenance(prov.source_path, EXTRACTOR, VERSION, prov.source_commit),
                                  props={"entity_type": "technology", "canonical_name": name}))
            rel(ekey)
    return out


__all__ = ["EXTRACTOR", "VERSION", "prose_mentions"]

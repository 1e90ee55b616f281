"""Loading a new process's models ahead of its first question.

A first question waits for two model sessions (the embedder's, and the reranker's when the model
will reorder it), read from disk and built without holding the interpreter lock. Started early on
another thread, they load while the process imports its modules and reads its graph and indexes,
instead of after. This module is light to import, so a command can start them before the heavy
imports; each model is claimed once, so the engine asking again starts nothing twice.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from graphmem.retrieval.config import RetrievalConfig, preset

if TYPE_CHECKING:
    from graphmem.retrieval.rerank import Reranker

_LOCK = threading.Lock()
_CLAIMED: weakref.WeakSet[Any] = weakref.WeakSet()  # objects whose model some thread is loading


def _claim(holder: Any) -> bool:
    """Whether this caller is the first to load ``holder``'s model (then it must)."""
    with _LOCK:
        if holder in _CLAIMED:
            return False
        _CLAIMED.add(holder)
        return True


def wants_models(indexes: Any, reranker: Reranker | None, spec: RetrievalConfig) -> bool:
    """Whether a question under ``spec`` may wait for a model not loaded yet."""
    return (("vector" in spec.searches and not indexes.embedder_loaded)
            or (spec.rerank.enabled and reranker is not None and not reranker.loaded))


def load_models(indexes: Callable[[], Any], reranker: Callable[[], Reranker | None], text: str,
                mode: str | RetrievalConfig, now: datetime | None = None) -> None:
    """Load, on this thread and in the order a question needs them, the models the question
    ``text`` under ``mode`` will use that no other thread is loading: the embedder (of the
    ``indexes()`` it searches), then ``reranker()``'s session when a first reading of the question
    says the model will likely reorder it."""
    spec = preset(mode)
    held = indexes()
    if "vector" in spec.searches and not held.embedder_loaded and _claim(held):
        held.embedder  # noqa: B018 - loads it
    model = reranker() if spec.rerank.enabled else None
    if model is None or model.loaded:
        return
    from graphmem.retrieval.question import parse_question

    first = parse_question(text, now or datetime.now(timezone.utc))
    if model.helps_for([kd.value for kd in first.answer_kinds], spec.rerank, relational=first.relational) \
            and _claim(model):
        model.prepare()


def in_background(call: Callable[[], object], name: str) -> threading.Thread:
    """Run ``call`` on a thread of its own, started now. An error there is not reported: what it
    loads is loaded again where it is used, and the error raised there."""
    def run() -> None:
        try:
            call()
        except Exception:  # noqa: BLE001,S110 - see the docstring
            pass

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread

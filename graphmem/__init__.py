"""graphmem: knowledge-graph memory for software organisations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from graphmem.api import Graphmem


def __getattr__(name: str) -> Any:
    # Imported on first use, so `import graphmem` stays light for the command line and the hooks.
    if name == "Graphmem":
        from graphmem.api import Graphmem

        return Graphmem
    raise AttributeError(f"module 'graphmem' has no attribute {name!r}")


__all__ = ["Graphmem", "__version__"]

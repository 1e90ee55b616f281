"""graphmem: knowledge-graph memory for software organisations."""

__version__ = "0.1.0"

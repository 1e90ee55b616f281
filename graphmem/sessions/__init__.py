"""Learning from coding agents' sessions: their transcripts captured into the graph.

- :mod:`~graphmem.sessions.events`: the normalised, redacted event model and error fingerprints;
- :mod:`~graphmem.sessions.adapters`: Claude Code, Codex CLI and generic JSONL transcripts -> events;
- :mod:`~graphmem.sessions.digest`: facts and a digest per session (deterministic, or LLM-written);
- :mod:`~graphmem.sessions.graph`: the session node, its digest chunk and TOUCHED relationships;
- :mod:`~graphmem.sessions.retention`: raw bodies outside the graph within a byte budget;
- :mod:`~graphmem.sessions.capture`: incremental ingest with per-file cursors;
- :mod:`~graphmem.sessions.cli`: ``graphmem sessions ingest|status``.

Nothing is imported here, so ``import graphmem.sessions`` costs nothing.
"""

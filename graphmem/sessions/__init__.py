"""Learning from coding agents' sessions: their transcripts captured into the graph.

- :mod:`~graphmem.sessions.events`: the normalised, redacted event model and error fingerprints;
- :mod:`~graphmem.sessions.adapters`: Claude Code, Codex CLI and generic JSONL transcripts -> events;
- :mod:`~graphmem.sessions.digest`: facts and a digest per session (deterministic, or LLM-written);
- :mod:`~graphmem.sessions.graph`: the session node, its digest chunk and TOUCHED relationships;
- :mod:`~graphmem.sessions.retention`: raw bodies outside the graph within a byte budget;
- :mod:`~graphmem.sessions.capture`: incremental ingest with per-file cursors;
- :mod:`~graphmem.sessions.cli`: ``graphmem sessions ingest|status``;
- :mod:`~graphmem.sessions.patterns`: recurring errors and fixes across sessions, an evidence bar, the catalog;
- :mod:`~graphmem.sessions.proposals`: approved patterns as CLAUDE.md / AGENTS.md proposals and diffs;
- :mod:`~graphmem.sessions.patterns_cli`: ``graphmem patterns detect|review|approve|reject|propose``.

Nothing is imported here, so ``import graphmem.sessions`` costs nothing.
"""

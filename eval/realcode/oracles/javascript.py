"""The JavaScript oracle is the TypeScript one: the compiler parses and binds JavaScript too."""

from __future__ import annotations

from eval.realcode.oracles.typescript import TYPESCRIPT_VERSION, command

__all__ = ["TYPESCRIPT_VERSION", "command"]

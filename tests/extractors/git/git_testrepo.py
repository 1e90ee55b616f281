"""A tiny helper to build real git repositories in tests, with fixed identities and dates."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path


class Repo:
    """A git repository in a temporary folder; every commit gets the next fixed timestamp."""

    def __init__(self, root: Path, *, start: int = 1_700_000_000) -> None:
        self.root = root
        self.clock = start
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> str:
        full_env = {
            **os.environ,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            **(env or {}),
        }
        out = subprocess.run(
            ["git", *args], cwd=self.root, env=full_env, input=input, capture_output=True, check=True
        )
        return out.stdout.decode("utf-8", "replace").strip()

    def write(self, path: str, text: str | bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text)

    def commit(
        self,
        message: str | bytes,
        *,
        name: str = "Ana Lima",
        email: str = "ana@example.com",
        allow_empty: bool = False,
    ) -> str:
        self.clock += 3600
        stamp = f"@{self.clock} +0000"
        env = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
        }
        self.git("add", "-A")
        data = message if isinstance(message, bytes) else message.encode()
        args = ["commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", "-"]
        if allow_empty:
            args.append("--allow-empty")
        self.git(*args, env=env, input=data)
        return self.git("rev-parse", "HEAD")


def parse_python(path: str, data: bytes) -> list[tuple[str, int, int]]:
    """Qualified names and 1-based inclusive line ranges of Python definitions."""
    if not path.endswith(".py"):
        return []
    out: list[tuple[str, int, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = prefix + child.name
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out.append((qual, start, child.end_lineno or child.lineno))
                walk(child, qual + ".")

    walk(ast.parse(data), "")
    return out

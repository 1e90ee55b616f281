"""The TypeScript/JavaScript oracle's command: ``ts/oracle.js`` on a pinned ``typescript`` from npm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

TYPESCRIPT_VERSION = "5.9.3"
SCRIPT = Path(__file__).with_name("ts") / "oracle.js"


def _installed(prefix: Path) -> bool:
    manifest = prefix / "node_modules" / "typescript" / "package.json"
    try:
        return json.loads(manifest.read_text("utf-8")).get("version") == TYPESCRIPT_VERSION
    except (OSError, ValueError):
        return False


def command(cache: Path) -> list[str]:
    """Install ``typescript`` into ``cache`` unless the pinned version is there; the oracle's argv.

    The compiler's directory is passed as an argument (before the tree root the caller appends),
    so the oracle needs no NODE_PATH and no node_modules next to it.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise RuntimeError("the TypeScript oracle needs node and npm on PATH")
    # The version is in the path, so a new pin installs beside an old one, never over it.
    prefix = cache / "ts-oracle" / f"typescript-{TYPESCRIPT_VERSION}"
    if not _installed(prefix):
        partial = prefix.with_name(f".{prefix.name}.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        result = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(partial),
             f"typescript@{TYPESCRIPT_VERSION}"],
            cwd=partial,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if result.returncode != 0 or not _installed(partial):
            shutil.rmtree(partial, ignore_errors=True)
            raise RuntimeError(f"installing typescript@{TYPESCRIPT_VERSION} failed:\n{result.stdout[-2000:]}")
        try:
            os.replace(partial, prefix)  # atomic: a concurrent install leaves one whole copy
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)
            if not _installed(prefix):
                raise
    return [node, str(SCRIPT), str(prefix / "node_modules" / "typescript")]


if __name__ == "__main__":  # python -m eval.realcode.oracles.typescript CACHE: print the argv
    print(" ".join(command(Path(sys.argv[1]))))

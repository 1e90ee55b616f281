"""The Go oracle's command: a small program on the standard library's go/parser, built once."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("go")
_FILES = ("go.mod", "main.go")


def _digest() -> str:
    sha = hashlib.sha256()
    for name in _FILES:
        sha.update(name.encode() + b"\0" + (SOURCE / name).read_bytes() + b"\0")
    return sha.hexdigest()[:16]


def command(cache: Path) -> list[str]:
    """Build ``oracle-go`` into ``cache`` unless a build of the same source is there."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the Go oracle needs the go toolchain on PATH")
    cache.mkdir(parents=True, exist_ok=True)
    # The binary's name carries the source digest, so an edited oracle is rebuilt, never reused.
    binary = cache / f"oracle-go-{_digest()}"
    if not binary.exists():
        partial = cache / f".{binary.name}.{os.getpid()}"
        # Offline and reproducible: no toolchain download, no workspace, no VCS stamping.
        env = dict(os.environ, GOTOOLCHAIN="local", GOWORK="off", GOFLAGS="-buildvcs=false", CGO_ENABLED="0")
        result = subprocess.run(
            [go, "build", "-trimpath", "-o", str(partial), "."],
            cwd=SOURCE,
            env=env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"building the Go oracle failed:\n{result.stderr}")
        os.replace(partial, binary)  # atomic: a concurrent build leaves one whole binary
        for stale in cache.glob("oracle-go-*"):
            if stale != binary:
                stale.unlink(missing_ok=True)
    return [str(binary)]

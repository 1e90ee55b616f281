"""Java oracle: JavaParser's syntax tree (a pinned javaparser-core jar from Maven Central) read by
``java/Oracle.java``, compiled once into the cache. Shares nothing with graphmem's tree-sitter
extractor."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "Oracle.java"
JAVAPARSER_VERSION = "3.27.1"
JAVAPARSER_SHA256 = "7ae10d11c5388060a7bf93b721600b951f5585f3782778b6d0555160680d35f8"
JAVAPARSER_PATH = f"com/github/javaparser/javaparser-core/{JAVAPARSER_VERSION}/javaparser-core-{JAVAPARSER_VERSION}.jar"
JAVAPARSER_URL = f"https://repo1.maven.org/maven2/{JAVAPARSER_PATH}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _javaparser(home: Path) -> Path:
    """The pinned jar: from the cache, the local Maven repository, or Maven Central."""
    jar = home / Path(JAVAPARSER_PATH).name
    if jar.exists() and _sha256(jar.read_bytes()) == JAVAPARSER_SHA256:
        return jar
    local = Path.home() / ".m2" / "repository" / JAVAPARSER_PATH
    if local.exists() and _sha256(local.read_bytes()) == JAVAPARSER_SHA256:
        data = local.read_bytes()
    else:
        with urllib.request.urlopen(JAVAPARSER_URL, timeout=120) as resp:  # noqa: S310 - pinned registry URL
            data = resp.read()
    digest = _sha256(data)
    if digest != JAVAPARSER_SHA256:
        raise RuntimeError(f"{JAVAPARSER_URL}: sha256 {digest} is not the pinned {JAVAPARSER_SHA256}")
    _write_atomically(jar, data)
    return jar


def _write_atomically(path: Path, data: bytes) -> None:
    # Concurrent builds may prepare the same cache: a rename never leaves a half-written file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def command(cache: Path) -> list[str]:
    """Fetch javaparser-core, compile the oracle (once per source version) and return its command."""
    home = Path(cache) / "java-oracle"
    home.mkdir(parents=True, exist_ok=True)
    jar = _javaparser(home)
    source = SOURCE.read_bytes()
    # Keyed by the oracle's source, so an edited oracle is recompiled rather than served stale.
    classes = home / f"classes-{hashlib.sha256(source + JAVAPARSER_SHA256.encode()).hexdigest()[:16]}"
    if not (classes / "Oracle.class").exists():
        staging = Path(tempfile.mkdtemp(dir=home, prefix="classes."))
        try:
            proc = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", str(jar),
                                   "-d", str(staging), str(SOURCE)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"javac failed on {SOURCE}: {proc.stderr.strip()[-2000:]}")
            try:
                staging.rename(classes)
            except OSError:
                if not (classes / "Oracle.class").exists():
                    raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    # Deeply nested expressions in real code need more stack than the default for the parser.
    return ["java", "-Xss16m", "-cp", os.pathsep.join([str(jar), str(classes)]), "Oracle"]

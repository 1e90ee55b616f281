"""Assemble each manifest's releases into one git repository with reproducible commit SHAs, and
run the language's oracle on every release.

Archives come from the package registries (PyPI, the Go module proxy, npm, Maven Central,
crates.io), are fetched once into the cache and checked against the manifest's sha256. Every
release is committed with the manifest's fixed author and the release date as both author and
committer date, so two machines that build the same manifest get the same SHAs.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFESTS = HERE / "repos"
MAX_MEMBER_BYTES = 4 * 1024 * 1024  # larger files in an archive are data, not code anyone asks about


class BuildError(RuntimeError):
    """A manifest that cannot be built: a bad checksum, an unreadable archive, a failing oracle."""


@dataclass(frozen=True, slots=True)
class Release:
    version: str
    date: str
    url: str
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    name: str
    language: str
    split: str
    source: str
    releases: tuple[Release, ...]
    project_words: tuple[str, ...] = ()
    strip: str | None = None
    module: str | None = None
    exclude: tuple[str, ...] = ()
    author: tuple[str, str] = ("maintainers", "maintainers@example.invalid")
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Manifest:
        raw = json.loads(path.read_text(encoding="utf-8"))
        try:
            releases = tuple(Release(r["version"], r["date"], r["url"], r["sha256"].lower())
                             for r in raw["releases"])
            author = raw.get("author") or {}
            known = {"name", "language", "split", "source", "releases", "project_words", "strip", "module",
                     "exclude", "author"}
            manifest = cls(name=raw["name"], language=raw["language"], split=raw["split"], source=raw["source"],
                           releases=releases, project_words=tuple(raw.get("project_words") or ()),
                           strip=raw.get("strip"), module=raw.get("module"),
                           exclude=tuple(raw.get("exclude") or ()),
                           author=(author.get("name", "maintainers"), author.get("email", "maintainers@example.invalid")),
                           extra={k: v for k, v in raw.items() if k not in known})
        except (KeyError, TypeError) as exc:
            raise BuildError(f"{path}: malformed manifest ({exc})") from None
        if manifest.split not in ("dev", "test"):
            raise BuildError(f"{path}: split must be 'dev' or 'test'")
        if not releases:
            raise BuildError(f"{path}: no releases")
        return manifest


def manifests(only: list[str] | None = None) -> list[Manifest]:
    out = [Manifest.load(p) for p in sorted(MANIFESTS.glob("*.json"))]
    if only:
        missing = set(only) - {m.name for m in out}
        if missing:
            raise BuildError(f"no manifest named {', '.join(sorted(missing))}")
        out = [m for m in out if m.name in only]
    return out


def home() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "graphmem" / "realcode"
    return Path(os.environ.get("GRAPHMEM_REALCODE_HOME", default))


def fetch(release: Release, cache: Path) -> bytes:
    """The archive's bytes, from the cache or the registry, checked against its sha256."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{release.sha256}{Path(release.url).suffix}"
    if path.exists():
        data = path.read_bytes()
    else:
        with urllib.request.urlopen(release.url, timeout=120) as resp:  # noqa: S310 - registry URLs from manifests
            data = resp.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != release.sha256:
        raise BuildError(f"{release.url}: sha256 {digest} is not the pinned {release.sha256}")
    if not path.exists():
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(path)
    return data


def members(data: bytes, url: str) -> dict[str, bytes]:
    """Regular files of an archive, by POSIX path (links and oversized files left out)."""
    out: dict[str, bytes] = {}
    if url.endswith((".zip", ".jar")):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if not info.is_dir() and info.file_size <= MAX_MEMBER_BYTES:
                    out[info.filename] = zf.read(info)
        return out
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
        for info in tf.getmembers():
            if info.isfile() and info.size <= MAX_MEMBER_BYTES:
                handle = tf.extractfile(info)
                if handle is not None:
                    out[info.name.lstrip("./")] = handle.read()
    return out


def tree_of(manifest: Manifest, release: Release, data: bytes) -> dict[str, bytes]:
    """The release's files after stripping the archive prefix and applying the excludes."""
    files = members(data, release.url)
    if manifest.module:
        prefix = f"{manifest.module}@{release.version}/"
    elif manifest.strip is not None:
        prefix = manifest.strip
    else:
        tops = {name.split("/", 1)[0] for name in files}
        prefix = f"{tops.pop()}/" if len(tops) == 1 and all("/" in n for n in files) else ""
    out = {}
    for name, body in files.items():
        if not name.startswith(prefix):
            continue
        rel = name[len(prefix):]
        if not rel or any(part in ("", ".", "..") for part in rel.split("/")):
            continue
        if any(fnmatch.fnmatch(rel, pattern) for pattern in manifest.exclude):
            continue
        out[rel] = body
    if not out:
        raise BuildError(f"{manifest.name} {release.version}: no files left after strip {prefix!r} and excludes")
    return out


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise BuildError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def assemble(manifest: Manifest, root: Path, *, archives: Path | None = None) -> list[dict[str, str]]:
    """Build ``root/repos/<name>``: one commit per release. Returns [{version, sha, date}].
    Archives are cached in ``archives`` (default ``root/archives``)."""
    repo = root / "repos" / manifest.name
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "commit.gpgsign", "false")
    name, email = manifest.author
    out = []
    for release in manifest.releases:
        files = tree_of(manifest, release, fetch(release, archives or root / "archives"))
        for child in repo.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        for rel, body in files.items():
            target = repo / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
        # Whole seconds in git's own format: the date is part of the commit, so of its SHA.
        when = datetime.fromisoformat(release.date).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": when,
               "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": when,
               "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}
        _git(repo, "add", "-A", "-f", env=env)
        _git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m",
             f"{manifest.name} {release.version}", env=env)
        out.append({"version": release.version, "sha": _git(repo, "rev-parse", "HEAD"), "date": release.date})
    return out


def oracle_command(language: str, cache: Path) -> list[str]:
    try:
        module = importlib.import_module(f"eval.realcode.oracles.{language}")
    except ModuleNotFoundError:
        raise BuildError(f"no oracle for {language!r} (eval/realcode/oracles/{language}.py)") from None
    return list(module.command(cache))


def run_oracle(command: list[str], tree: Path) -> dict[str, Any]:
    proc = subprocess.run([*command, str(tree)], capture_output=True, text=True, cwd=HERE.parent.parent)
    if proc.returncode != 0:
        raise BuildError(f"oracle {' '.join(command)} failed on {tree}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def build(manifest: Manifest, root: Path | None = None) -> Path:
    """Assemble the repository and write ``facts/<name>.json``: every release's SHA and oracle output."""
    root = root or home()
    commits = assemble(manifest, root)
    command = oracle_command(manifest.language, root / "oracles")
    repo = root / "repos" / manifest.name
    releases = []
    with tempfile.TemporaryDirectory() as tmp:
        for commit in commits:
            tree = Path(tmp) / commit["version"]
            _git(repo, "worktree", "add", "-q", "--detach", str(tree), commit["sha"])
            try:
                releases.append({**commit, "facts": run_oracle(command, tree)})
            finally:
                _git(repo, "worktree", "remove", "--force", str(tree))
    out = root / "facts" / f"{manifest.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"name": manifest.name, "language": manifest.language, "split": manifest.split,
                               "project_words": list(manifest.project_words), "releases": releases}),
                   encoding="utf-8")
    return out

"""Which files an ingest reads: include/exclude globs, .gitignore, secrets, binaries, size, symlinks.

:meth:`Policy.discover` walks a folder and returns the relative POSIX paths worth extracting plus a
:class:`~extractors.base.Skipped` entry, with a reason, for everything it left out. Files that
usually hold credentials (``.env``, ``*.pem``, ``id_rsa``, ``.npmrc``...) are recognised by name
and never opened. The walk never follows a symlink into a loop and never reads a FIFO or device.

The gitignore-style glob matcher here is shared with CODEOWNERS parsing (:mod:`extractors.ownership`).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from extractors.base import Skipped
from extractors.code.languages import MINIFIED_SNIFF_BYTES, language_for, looks_minified
from extractors.secrets import MARKER, redact
from graphmem.errors import ConfigError

CONFIG_FILE = "graphmem.toml"
DEFAULT_MAX_FILE_SIZE = 1 << 20
SNIFF_BYTES = 8192

# Folders that hold tool state, dependencies or build output, never the organisation's own sources.
DEFAULT_EXCLUDED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".jj",
        "node_modules", "bower_components", "jspm_packages",
        ".venv", "venv", ".virtualenv", ".tox", ".nox", ".eggs", "__pycache__",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".ipynb_checkpoints",
        "dist", "build", "target", "vendor", ".gradle", ".next", ".nuxt", ".svelte-kit",
        ".terraform", ".serverless", ".cache", ".parcel-cache", "coverage", ".nyc_output",
        ".idea", ".graphmem",
    }
)
_EXCLUDED_DIR_SUFFIXES = (".egg-info",)

# Folders that hold credentials as a whole.
SECRET_DIRS = frozenset({".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".password-store"})

# Base-name globs of files that usually hold credentials; matched case-insensitively, never opened.
SECRET_FILE_GLOBS: tuple[str, ...] = (
    ".env", ".env.*", "*.env", ".envrc",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.p8", "*.pkcs12", "*.jks", "*.keystore", "*.bks",
    "*.crt", "*.cer", "*.der", "*.csr", "*.ppk", "*.gpg", "*.pgp", "*.kdbx", "*.ovpn",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "credentials", "credentials*.json", "credentials*.y*ml", "client_secret*.json",
    "service-account*.json", "*serviceaccount*.json",
    ".npmrc", ".pypirc", ".netrc", "_netrc", ".git-credentials", ".htpasswd", ".pgpass",
    ".dockercfg", ".s3cfg", ".boto", "secrets.y*ml", "secrets.json", "secrets.toml", "*.secrets",
    "*.tfstate", "*.tfstate.*", "*.tfvars",
)

# Extensions of files that are binary by construction; skipped without reading.
BINARY_EXTENSIONS = frozenset(
    """
    png jpg jpeg gif bmp ico icns webp tif tiff psd ai eps heic avif svgz
    pdf doc docx xls xlsx ppt pptx odt ods odp key numbers pages
    zip gz tgz bz2 xz 7z rar tar zst lz4 lzma cab
    jar war ear class dex apk aab ipa
    so dylib dll exe bin o a obj lib pdb elf wasm
    pyc pyo pyd whl egg
    woff woff2 ttf otf eot
    mp3 mp4 m4a wav ogg oga flac aac avi mov mkv webm wmv flv
    sqlite sqlite3 db mdb dbf
    parquet orc arrow feather avro npy npz pkl pickle pt pth onnx h5 hdf5 safetensors ckpt tflite
    iso dmg img vmdk qcow2 deb rpm msi
    ds_store lockb
    """.split()
)

_FILE_KIND = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


# --- gitignore-style globs ----------------------------------------------------------------------


def glob_to_regex(glob: str) -> str:
    """Translate a gitignore-style glob body to a regex (``*`` stays within a path segment)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                i += 2
                if i < n and glob[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 2 if glob[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = glob[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class GlobRule:
    """One gitignore-style pattern.

    A pattern with a slash before its end is anchored to its base folder; one without matches at
    any depth. A trailing slash matches folders only. ``!`` negates.
    """

    pattern: str
    regex: re.Pattern[str]
    negated: bool = False
    dir_only: bool = False
    base: str = ""  # folder the pattern is relative to ("" for the root), with a trailing "/"

    @classmethod
    def compile(cls, pattern: str, base: str = "", *, ignore_case: bool = False) -> GlobRule:
        text = pattern
        negated = text.startswith("!")
        if negated:
            text = text[1:]
        dir_only = text.endswith("/")
        text = text.rstrip("/")
        anchored = "/" in text
        text = text.lstrip("/")
        prefix = "" if anchored or text.startswith("**") else "(?:.*/)?"
        flags = re.IGNORECASE if ignore_case else 0
        regex = re.compile(prefix + glob_to_regex(text) + "$", flags)
        if base and not base.endswith("/"):
            base += "/"
        return cls(pattern, regex, negated, dir_only, base)

    def matches(self, path: str, is_dir: bool = False) -> bool:
        """Whether the pattern matches ``path`` itself (not its ancestors)."""
        if self.dir_only and not is_dir:
            return False
        if self.base:
            if not path.startswith(self.base):
                return False
            path = path[len(self.base) :]
        return self.regex.match(path) is not None

    def matches_within(self, path: str, is_dir: bool = False) -> bool:
        """Whether the pattern matches ``path`` or one of the folders that contain it."""
        if self.matches(path, is_dir):
            return True
        parts = path.split("/")
        return any(self.matches("/".join(parts[:i]), True) for i in range(1, len(parts)))


def parse_gitignore(text: str, base: str = "") -> list[GlobRule]:
    """Rules of a ``.gitignore`` file found in folder ``base``."""
    rules: list[GlobRule] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        line = re.sub(r"(?<!\\)\s+$", "", line)  # trailing spaces unless escaped
        if line in ("!", "/"):
            continue
        rules.append(GlobRule.compile(line, base))
    return rules


def _ignored(rules: Iterable[GlobRule], path: str, is_dir: bool) -> bool:
    ignored = False
    for rule in rules:
        if rule.matches(path, is_dir):
            ignored = not rule.negated
    return ignored


_SECRET_RULES = tuple(GlobRule.compile(g, ignore_case=True) for g in SECRET_FILE_GLOBS)


def secret_reason(path: str) -> str | None:
    """Why a path is treated as a credentials file (by name only), or None."""
    pure = PurePosixPath(path)
    for part in pure.parts[:-1]:
        if part.lower() in SECRET_DIRS:
            return f"inside {part}/, a credentials folder; never read"
    name = pure.name
    for rule in _SECRET_RULES:
        if rule.regex.match(name):
            return f"may hold credentials (matches {rule.pattern!r}); never read"
    return None


# Secret kinds that do not count in a path: the webhook rule reads URL routes, and would take
# ordinary folders (`webhooks/github_events_v2.py`) for a hook's token.
_NOT_SECRETS_IN_PATHS = frozenset({"webhook-url"})
_MARKED_KIND = re.compile(re.escape(MARKER).replace(r"\{\}", r"([\w-]+)"))


def shown_path(path: str) -> str:
    """``path`` as reports may show it: secret-looking strings in it replaced by markers."""
    return redact(path)[0]


def secret_in_name(path: str) -> bool:
    """Whether a path holds a string the content redaction takes for a secret (an access key
    in a file name). Such a file cannot be ingested: its path is its key everywhere (graph, search
    index, caches), and a key cannot be redacted."""
    redacted, found = redact(path)
    return bool(found) and any(kind not in _NOT_SECRETS_IN_PATHS for kind in _MARKED_KIND.findall(redacted))


def binary_extension(path: str) -> str | None:
    """The extension that marks a path as binary, or None."""
    name = PurePosixPath(path).name.lower()
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    if name == ".ds_store":
        return "ds_store"
    return ext if ext in BINARY_EXTENSIONS else None


# --- project config -----------------------------------------------------------------------------


def read_project_config(root: str | Path) -> dict[str, Any]:
    """``graphmem.toml`` at the root as a dict ({} when absent); :class:`ConfigError` if invalid."""
    import tomllib

    path = Path(root) / CONFIG_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{CONFIG_FILE}: cannot read: {exc.strerror or exc}") from exc
    try:
        return tomllib.loads(raw.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{CONFIG_FILE}: not valid TOML: {exc}") from exc


# --- policy -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Policy:
    """What to ingest under a root folder.

    ``include`` globs (empty: everything) and ``exclude`` globs use gitignore syntax and are
    relative to the root. ``.gitignore`` files (root and nested) are honoured when
    ``use_gitignore`` is set.

    Symlinks: a broken link or one that loops back to an enclosing folder is always reported.
    With ``follow_symlinks`` off (the default) every other link is skipped. With it on, links to
    places outside the root are followed (each real folder or file at most once); links to
    places inside the root are skipped, since their targets are ingested under their own paths.
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    follow_symlinks: bool = False
    use_gitignore: bool = True
    excluded_dirs: frozenset[str] = DEFAULT_EXCLUDED_DIRS
    _include_rules: tuple[GlobRule, ...] = field(default=(), init=False, repr=False)
    _exclude_rules: tuple[GlobRule, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.include, str) or isinstance(self.exclude, str):
            raise ConfigError("include and exclude take lists of globs, not a single string")
        if not isinstance(self.max_file_size, int) or self.max_file_size <= 0:
            raise ConfigError(f"max_file_size must be a positive number of bytes, got {self.max_file_size!r}")
        self.include = tuple(self.include)
        self.exclude = tuple(self.exclude)
        self._include_rules = tuple(GlobRule.compile(g) for g in self.include)
        self._exclude_rules = tuple(GlobRule.compile(g) for g in self.exclude)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | str | Path, **overrides: Any) -> Policy:
        """A policy from the ``[ingest]`` table of ``graphmem.toml`` (a root folder or a parsed dict).

        Keys: ``include``, ``exclude`` (lists of globs), ``max_file_size`` (bytes),
        ``follow_symlinks``, ``use_gitignore``.
        """
        data = read_project_config(config) if isinstance(config, (str, Path)) else config
        table = data.get("ingest", {}) if isinstance(data, Mapping) else {}
        if not isinstance(table, Mapping):
            raise ConfigError(f"{CONFIG_FILE}: [ingest] must be a table")
        known = {"include", "exclude", "max_file_size", "follow_symlinks", "use_gitignore"}
        unknown = set(table) - known
        if unknown:
            raise ConfigError(f"{CONFIG_FILE}: unknown [ingest] setting(s): {', '.join(sorted(unknown))}")
        kwargs: dict[str, Any] = {}
        for name in ("include", "exclude"):
            if name in table:
                value = table[name]
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ConfigError(f"{CONFIG_FILE}: [ingest] {name} must be a list of strings")
                kwargs[name] = tuple(value)
        for name in ("follow_symlinks", "use_gitignore"):
            if name in table:
                if not isinstance(table[name], bool):
                    raise ConfigError(f"{CONFIG_FILE}: [ingest] {name} must be true or false")
                kwargs[name] = table[name]
        if "max_file_size" in table:
            kwargs["max_file_size"] = table["max_file_size"]
        kwargs.update(overrides)
        return cls(**kwargs)

    # -- single-path checks --

    def path_reason(self, path: str, is_dir: bool = False) -> str | None:
        """Why a relative path is left out by name alone (None: its name is acceptable)."""
        name = PurePosixPath(path).name
        if is_dir:
            if name in self.excluded_dirs or name.endswith(_EXCLUDED_DIR_SUFFIXES):
                return f"excluded folder ({name}: tool state, dependencies or build output)"
            if name in SECRET_DIRS:
                return f"{name}/ is a credentials folder; never read"
        else:
            reason = secret_reason(path)
            if reason:
                return reason
        for rule in self._exclude_rules:
            if rule.matches(path, is_dir):
                return f"excluded by pattern {rule.pattern!r}"
        if not is_dir and self._include_rules and not any(
            r.matches_within(path) for r in self._include_rules
        ):
            return "not matched by any include pattern"
        return None

    def file_reason(self, full: str | Path, path: str, st: os.stat_result | None = None) -> str | None:
        """Why an existing file is left out by its type, size or content (None: accept it)."""
        try:
            st = st or os.stat(full)
        except OSError as exc:
            return f"cannot stat: {exc.strerror or exc}"
        if not stat.S_ISREG(st.st_mode):
            kind = _FILE_KIND.get(stat.S_IFMT(st.st_mode), "not a regular file")
            return f"not a regular file ({kind})"
        if st.st_size > self.max_file_size:
            return f"too large ({st.st_size:,} bytes > limit {self.max_file_size:,})"
        ext = binary_extension(path)
        if ext:
            return f"binary file (.{ext})"
        try:
            with open(full, "rb") as handle:
                head = handle.read(SNIFF_BYTES)
        except PermissionError:
            return "unreadable: permission denied"
        except OSError as exc:
            return f"unreadable: {exc.strerror or exc}"
        if b"\x00" in head:
            return "binary file (NUL bytes in the first 8 KiB)"
        if language_for(path) and looks_minified(head):
            return f"minified or generated code (no line break in its first {MINIFIED_SNIFF_BYTES // 1024} KiB)"
        return None

    # -- the walk --

    def discover(self, root: str | Path) -> tuple[list[str], list[Skipped]]:
        """Accepted files under ``root`` (relative POSIX paths, sorted) and what was skipped, why."""
        root_path = Path(root)
        try:
            root_real = os.path.realpath(root_path)
            root_st = os.stat(root_path)
        except OSError as exc:
            raise ConfigError(f"cannot read {root}: {exc.strerror or exc}") from exc
        if not stat.S_ISDIR(root_st.st_mode):
            raise ConfigError(f"not a folder: {root}")

        accepted: list[str] = []
        skipped: list[Skipped] = []
        visited: set[tuple[int, int]] = {(root_st.st_dev, root_st.st_ino)}
        # (absolute folder, relative folder, gitignore rules in force, folder ids on this branch)
        stack: list[tuple[str, str, tuple[GlobRule, ...], frozenset[tuple[int, int]]]] = [
            (str(root_path), "", (), frozenset(visited))
        ]
        while stack:
            abs_dir, rel_dir, rules, ancestors = stack.pop()
            if self.use_gitignore:
                rules = rules + self._gitignore_rules(abs_dir, rel_dir, skipped)
            try:
                with os.scandir(abs_dir) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                skipped.append(Skipped(rel_dir or ".", f"cannot list folder: {exc.strerror or exc}"))
                continue
            subdirs: list[tuple[str, str, tuple[GlobRule, ...], frozenset[tuple[int, int]]]] = []
            for entry in entries:
                rel = f"{rel_dir}{entry.name}"
                unfit = _unfit_name(entry.name)
                if unfit:
                    skipped.append(Skipped(ascii(rel)[1:-1], f"name {unfit}"))
                    continue
                if secret_in_name(entry.name):
                    # Reported under a redacted path: the report must not repeat the secret.
                    shown = shown_path(rel) + ("/" if entry.is_dir(follow_symlinks=False) else "")
                    skipped.append(Skipped(shown, "its name looks like it holds a secret; never read"))
                    continue
                result = self._visit(entry, rel, rules, ancestors, visited, root_real, skipped)
                if result == "file":
                    accepted.append(rel)
                elif isinstance(result, tuple):
                    subdirs.append((entry.path, rel + "/", rules, ancestors | {result}))
            stack.extend(reversed(subdirs))
        accepted.sort()
        return accepted, skipped

    def _visit(
        self,
        entry: os.DirEntry[str],
        rel: str,
        rules: tuple[GlobRule, ...],
        ancestors: frozenset[tuple[int, int]],
        visited: set[tuple[int, int]],
        root_real: str,
        skipped: list[Skipped],
    ) -> str | tuple[int, int] | None:
        """Classify one folder entry: "file" to accept, a folder id to descend into, or None."""

        def skip(reason: str, as_dir: bool = False) -> None:
            skipped.append(Skipped(rel + "/" if as_dir else rel, reason))

        try:
            is_link = entry.is_symlink()
            lst = entry.stat(follow_symlinks=False)
        except OSError as exc:
            skip(f"cannot stat: {exc.strerror or exc}")
            return None

        if is_link:
            # Credentials by name are refused before the link is even resolved.
            reason = secret_reason(rel)
            if reason:
                skip(reason)
                return None
            try:
                st = os.stat(entry.path)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    skip("symlink loop (the link resolves to itself)")
                elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    skip(f"broken symlink (target {os.readlink(entry.path)!r} does not exist)")
                else:
                    skip(f"cannot resolve symlink: {exc.strerror or exc}")
                return None
            target = os.path.realpath(entry.path)
            here = os.path.realpath(os.path.dirname(entry.path))
            if stat.S_ISDIR(st.st_mode) and _within(here, target):
                skip(f"symlink loop (points back to enclosing folder {_shown(target, root_real)!r})")
                return None
            if not self.follow_symlinks:
                skip("symlink not followed (follow_symlinks is off)")
                return None
            if _within(target, root_real):
                # The target is ingested under its own path; following would ingest it twice.
                skip(f"symlink to {_shown(target, root_real)!r}, which is ingested under that path")
                return None
        else:
            st = lst

        is_dir = stat.S_ISDIR(st.st_mode)
        if self.use_gitignore and _ignored(rules, rel, is_dir):
            skip("ignored by .gitignore", is_dir)
            return None
        reason = self.path_reason(rel, is_dir)
        if reason:
            skip(reason, is_dir)
            return None
        if is_dir:
            ident = (st.st_dev, st.st_ino)
            if ident in ancestors:
                skip("symlink loop (points back to an enclosing folder)", True)
                return None
            if ident in visited:
                skip("already ingested through another path (symlink)", True)
                return None
            visited.add(ident)
            return ident
        if is_link:
            ident = (st.st_dev, st.st_ino)
            if ident in visited:
                skip("already ingested through another path (symlink)")
                return None
            visited.add(ident)
        reason = self.file_reason(entry.path, rel, st)
        if reason:
            skip(reason)
            return None
        return "file"

    @staticmethod
    def _gitignore_rules(abs_dir: str, rel_dir: str, skipped: list[Skipped]) -> tuple[GlobRule, ...]:
        path = os.path.join(abs_dir, ".gitignore")
        try:
            if not os.path.isfile(path):
                return ()
            with open(path, encoding="utf-8", errors="replace") as handle:
                return tuple(parse_gitignore(handle.read(), rel_dir))
        except OSError as exc:
            skipped.append(Skipped(rel_dir + ".gitignore", f"cannot read: {exc.strerror or exc}"))
            return ()


def _within(path: str, folder: str) -> bool:
    """Whether real path ``path`` is ``folder`` or lies inside it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _shown(target: str, root_real: str) -> str:
    """A symlink target as the user should see it: relative to the root when inside it."""
    if _within(target, root_real):
        rel = os.path.relpath(target, root_real).replace(os.sep, "/")
        return "." if rel == "." else rel
    return target


# Invisible characters that change how a name reads: bidirectional controls (U+202A-U+202E,
# U+2066-U+2069), marks such as U+200E/U+200F and other format characters (Cf), and line breaks
# outside ASCII (Zl, Zp). A name holding one can display as another file's (`\u202eexe.txt`).
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Zl", "Zp"})


def _unfit_name(name: str) -> str | None:
    """Why a file or folder name cannot become part of a key (control characters such as a newline,
    invisible formatting characters, or bytes that are not valid in the file system's encoding),
    or None."""
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        return "contains control characters"
    if any(unicodedata.category(ch) in _INVISIBLE_CATEGORIES for ch in name):
        return "contains invisible formatting characters (such as bidirectional text controls)"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    return None


def discover(root: str | Path, policy: Policy | None = None) -> tuple[list[str], list[Skipped]]:
    """:meth:`Policy.discover` with the given (or the default) policy."""
    return (policy or Policy()).discover(root)


__all__ = [
    "BINARY_EXTENSIONS",
    "CONFIG_FILE",
    "DEFAULT_EXCLUDED_DIRS",
    "DEFAULT_MAX_FILE_SIZE",
    "GlobRule",
    "Policy",
    "SECRET_DIRS",
    "SECRET_FILE_GLOBS",
    "binary_extension",
    "discover",
    "glob_to_regex",
    "parse_gitignore",
    "read_project_config",
    "secret_in_name",
    "secret_reason",
    "shown_path",
]

"""File policy: what discover() accepts, and the reason for everything it skips."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from extractors.policy import GlobRule, Policy, binary_extension, discover, parse_gitignore, secret_reason
from graphmem.errors import ConfigError

SECRET_NAMES = [
    ".env",
    ".env.production",
    "config/prod.env",
    "certs/server.pem",
    "certs/server.key",
    "certs/site.crt",
    "certs/site.cer",
    "certs/bundle.p12",
    "certs/bundle.pfx",
    "android/release.keystore",
    "android/release.jks",
    "id_rsa",
    "home/id_ed25519.pub",
    "credentials.json",
    "gcp/credentials-prod.json",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    "infra/terraform.tfstate",
    "deploy/.ssh/config",
    "ops/.aws/config",
]


def write(root: Path, rel: str, data: str | bytes = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def reasons(skipped) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {s.path: s.reason for s in skipped}


def test_secret_files_are_skipped_without_being_opened(tmp_path: Path) -> None:
    write(tmp_path, "src/app.py")
    for rel in SECRET_NAMES:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        # A FIFO: opening it would block the walk, so passing proves it was never opened.
        os.mkfifo(path)
    files, skipped = discover(tmp_path)
    assert files == ["src/app.py"]
    why = reasons(skipped)
    for rel in SECRET_NAMES:
        if ".ssh/" in rel or ".aws/" in rel:
            folder = rel.rsplit("/", 1)[0] + "/"
            assert "credentials folder" in why[folder], rel
        else:
            assert "never read" in why[rel], rel


def test_secret_reason_is_by_name_only() -> None:
    assert secret_reason("a/.env.local") is not None
    assert secret_reason("extractors/secrets.py") is None
    assert secret_reason("docs/credentials.md") is None
    assert secret_reason("src/keys.py") is None
    assert secret_reason("src/environment.ts") is None


def test_excluded_folders_binaries_size_and_empty_files(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "# hi\n")
    write(tmp_path, "empty.py", "")
    for rel in (".git/config", "node_modules/x/index.js", ".venv/lib/a.py", "pkg/__pycache__/a.pyc",
                "dist/a.js", "build/b.js", "target/c.rs", "vendor/d.go", "graphmem.egg-info/PKG-INFO"):
        write(tmp_path, rel)
    write(tmp_path, "logo.png", "not really a png, but the extension decides")
    write(tmp_path, "data.txt", b"header\x00\x01binary")
    write(tmp_path, "big.txt", "y" * 5000)
    files, skipped = Policy(max_file_size=4096).discover(tmp_path)
    assert files == ["README.md", "empty.py"]
    why = reasons(skipped)
    for folder in (".git/", "node_modules/", ".venv/", "pkg/__pycache__/", "dist/", "build/", "target/",
                   "vendor/", "graphmem.egg-info/"):
        assert why[folder].startswith("excluded folder"), folder
    assert why["logo.png"] == "binary file (.png)"
    assert why["data.txt"] == "binary file (NUL bytes in the first 8 KiB)"
    assert why["big.txt"] == "too large (5,000 bytes > limit 4,096)"
    assert not any(p.startswith(("node_modules/x", ".git/config")) for p in why), "pruned, not walked"


def test_minified_code_is_skipped_but_long_lines_of_prose_and_short_files_are_kept(tmp_path: Path) -> None:
    calls = "+".join(f"f{i}(x)" for i in range(3000))  # one line, over 8 KiB: how minifiers write
    write(tmp_path, "web/bundle.min.js", f"var a={calls};")
    write(tmp_path, "web/app.js", f"function g() {{ return a; }}\nvar a={calls};\n")  # a line break early on
    write(tmp_path, "web/tiny.js", "var a=f0(x)+f1(x);")  # one line, but short
    write(tmp_path, "notes/one-line.md", "word " * 3000)  # prose is not parsed as code
    files, skipped = Policy().discover(tmp_path)
    assert files == ["notes/one-line.md", "web/app.js", "web/tiny.js"]
    assert reasons(skipped)["web/bundle.min.js"] == "minified or generated code (no line break in its first 8 KiB)"


def test_gitignore_rules_including_negation_and_nested_files(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "*.log\n!keep.log\ngenerated/\n/only-root.txt\n")
    for rel in ("app.log", "keep.log", "generated/a.py", "only-root.txt", "sub/only-root.txt",
                "sub/.gitignore", "sub/local.txt", "sub/kept.txt", "other/local.txt"):
        write(tmp_path, rel, "local.txt\n" if rel == "sub/.gitignore" else "text\n")
    files, skipped = discover(tmp_path)
    assert files == [".gitignore", "keep.log", "other/local.txt", "sub/.gitignore", "sub/kept.txt",
                     "sub/only-root.txt"]
    why = reasons(skipped)
    assert why == {
        "app.log": "ignored by .gitignore",
        "generated/": "ignored by .gitignore",
        "only-root.txt": "ignored by .gitignore",
        "sub/local.txt": "ignored by .gitignore",
    }
    files2, _ = Policy(use_gitignore=False).discover(tmp_path)
    assert "app.log" in files2 and "generated/a.py" in files2


def test_include_and_exclude_globs(tmp_path: Path) -> None:
    for rel in ("src/a.py", "src/deep/b.py", "src/c.js", "docs/x.md", "README.md", "tools/t.py"):
        write(tmp_path, rel)
    files, skipped = Policy(include=("src/**/*.py", "*.md"), exclude=("docs/",)).discover(tmp_path)
    assert files == ["README.md", "src/a.py", "src/deep/b.py"]
    why = reasons(skipped)
    assert why["docs/"] == "excluded by pattern 'docs/'"
    assert why["src/c.js"] == "not matched by any include pattern"
    assert why["tools/t.py"] == "not matched by any include pattern"


def test_symlinks_broken_loops_and_not_followed(tmp_path: Path) -> None:
    write(tmp_path, "src/app.py")
    os.symlink("src/app.py", tmp_path / "link.py")
    os.symlink("missing.txt", tmp_path / "dangling.txt")
    os.symlink("self", tmp_path / "self")
    os.symlink("..", tmp_path / "src/up")
    files, skipped = discover(tmp_path)
    assert files == ["src/app.py"]
    why = reasons(skipped)
    assert why["link.py"] == "symlink not followed (follow_symlinks is off)"
    assert why["dangling.txt"] == "broken symlink (target 'missing.txt' does not exist)"
    assert why["self"] == "symlink loop (the link resolves to itself)"
    assert why["src/up"] == "symlink loop (points back to enclosing folder '.')"


def test_followed_symlinks_reach_outside_folders_once_and_never_loop(tmp_path: Path) -> None:
    root, shared = tmp_path / "repo", tmp_path / "shared"
    write(root, "src/app.py")
    write(shared, "lib/util.py")
    os.symlink(shared, root / "shared")
    os.symlink(shared, root / "shared-again")
    os.symlink(root / "src", root / "alias")
    os.symlink(shared, shared / "lib/loop")
    files, skipped = Policy(follow_symlinks=True).discover(root)
    assert files == ["shared/lib/util.py", "src/app.py"]
    why = reasons(skipped)
    assert why["alias"] == "symlink to 'src', which is ingested under that path"
    assert why["shared-again/"] == "already ingested through another path (symlink)"
    assert why["shared/lib/loop"].startswith("symlink loop (points back to enclosing folder")


def test_special_files_are_not_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.txt")
    files, skipped = discover(tmp_path)
    assert files == []
    assert reasons(skipped) == {"pipe.txt": "not a regular file (a FIFO)"}


_DISCOVER_AS_NOBODY = """
import json, os, sys
from extractors.policy import discover  # imported first: the interpreter may live where nobody can't read
os.setgid(65534); os.setuid(65534)  # root reads any file whatever its mode; nobody does not
files, skipped = discover(sys.argv[1])
print(json.dumps({"files": files, "why": {s.path: s.reason for s in skipped}}))
"""


def test_unreadable_files_and_folders_are_reported() -> None:
    import json
    import shutil
    import subprocess
    import sys
    import tempfile

    # A world-traversable folder, so the check can also run as an unprivileged user when root.
    root = Path(tempfile.mkdtemp(prefix="graphmem-perm-", dir="/tmp"))
    try:
        root.chmod(0o755)
        secret = write(root, "locked.txt")
        folder = root / "closed"
        write(root, "closed/a.py")
        secret.chmod(0)
        folder.chmod(0)
        if os.geteuid() == 0:
            out = subprocess.run([sys.executable, "-c", _DISCOVER_AS_NOBODY, str(root)], capture_output=True,
                                 text=True, check=True, cwd=Path(__file__).resolve().parents[3])
            result = json.loads(out.stdout)
            files, why = result["files"], result["why"]
        else:
            files, skipped = discover(root)
            why = reasons(skipped)
        assert why["locked.txt"] == "unreadable: permission denied"
        assert why["closed/"].startswith("cannot list folder")
        assert files == []
    finally:
        for path in (root / "locked.txt", root / "closed"):
            if path.exists():
                path.chmod(0o700)
        shutil.rmtree(root)


def test_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a folder"):
        discover(write(tmp_path, "file.txt"))
    with pytest.raises(ConfigError, match="cannot read"):
        discover(tmp_path / "nope")


def test_policy_from_config(tmp_path: Path) -> None:
    write(tmp_path, "graphmem.toml", '[ingest]\nexclude = ["docs/"]\nmax_file_size = 2048\nfollow_symlinks = true\n')
    policy = Policy.from_config(tmp_path)
    assert policy.exclude == ("docs/",) and policy.max_file_size == 2048 and policy.follow_symlinks
    assert Policy.from_config({}) == Policy()
    with pytest.raises(ConfigError, match="unknown"):
        Policy.from_config({"ingest": {"inclde": ["x"]}})
    with pytest.raises(ConfigError, match="list of strings"):
        Policy.from_config({"ingest": {"exclude": "docs/"}})
    with pytest.raises(ConfigError, match="positive"):
        Policy(max_file_size=0)


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "expected"),
    [
        ("*.py", "a/b/c.py", False, True),
        ("/a.py", "x/a.py", False, False),
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("**/logs", "deep/down/logs", True, True),
        ("logs/", "logs", False, False),
        ("logs/", "logs", True, True),
        ("file[0-9].txt", "file7.txt", False, True),
        ("file[!0-9].txt", "file7.txt", False, False),
        ("?.md", "ab.md", False, False),
    ],
)
def test_glob_rules(pattern: str, path: str, is_dir: bool, expected: bool) -> None:
    assert GlobRule.compile(pattern).matches(path, is_dir) is expected


def test_parse_gitignore_skips_comments_and_blank_lines() -> None:
    rules = parse_gitignore("# c\n\n*.tmp  \n\\#literal\n", base="sub")
    assert [r.pattern for r in rules] == ["*.tmp", "\\#literal"]
    assert rules[0].matches("sub/x.tmp") and not rules[0].matches("x.tmp")
    assert rules[1].matches("sub/#literal")
    assert binary_extension("A.PNG") == "png" and binary_extension("a.py") is None


@pytest.mark.parametrize(
    "name",
    [
        "invoice\u202etxt.py",  # right-to-left override: shows as "invoiceyp.txt"
        "a\u202ab.py", "a\u202cb.py", "a\u2066b.py", "a\u2069b.py",  # embeddings and isolates
        "left\u200eright.md", "left\u200fright.md",  # directional marks
        "zero\u200bwidth.md", "bom\ufeff.md",  # zero-width space, byte order mark
        "line\u2028sep.md", "c1\u0085control.md",  # separators and controls outside ASCII
    ],
)
def test_names_with_invisible_or_bidi_characters_are_skipped(tmp_path: Path, name: str) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / name).write_text("x = 1\n")
    (tmp_path / ("dir" + name[-4:-3] + "\u202e")).mkdir()
    (tmp_path / ("dir" + name[-4:-3] + "\u202e") / "inner.py").write_text("x = 1\n")
    accepted, skipped = discover(tmp_path)
    assert accepted == ["ok.py"]
    reasons = {s.path: s.reason for s in skipped}
    assert len(reasons) == 2 and all(r.startswith("name contains") for r in reasons.values()), reasons
    # The reported path shows the hidden characters as escapes, never as text that reorders.
    assert all(p.isascii() for p in reasons)


def test_names_in_other_scripts_are_kept(tmp_path: Path) -> None:
    for name in ("café.py", "مرحبا.md", "日本語.md", "emoji_🎉.md"):
        (tmp_path / name).write_text("x = 1\n")
    accepted, skipped = discover(tmp_path)
    assert len(accepted) == 4 and not skipped


@pytest.mark.parametrize(
    "rel",
    [
        "notes/deploy-AKIAFILENAME0000000Q.txt",  # an AWS access key id
        "ghp_0123456789abcdefABCDEF0123456789abcd.md",  # a GitHub token
        "keys-sk_live_0123456789abcdefABCD/readme.md",  # a Stripe key names a folder
    ],
)
def test_names_holding_secrets_are_skipped_without_repeating_them(tmp_path: Path, rel: str) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "deploy.txt").write_text("ok\n")
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text("ok\n")
    secret = next(part for part in rel.replace("/", "-").replace(".", "-").split("-")
                  if any(c.isdigit() for c in part) and len(part) >= 20)
    accepted, skipped = discover(tmp_path)
    assert accepted == ["notes/deploy.txt"]
    assert len(skipped) == 1 and "secret" in skipped[0].reason
    assert "[REDACTED:" in skipped[0].path
    assert secret not in repr(skipped)


def test_ordinary_names_near_secret_patterns_are_kept(tmp_path: Path) -> None:
    for rel in ("app/webhooks/github_events_handler_v2.py", "src/hooks/useAuthToken.ts",
                "docs/password-reset.md", "docs/secret_key_rotation.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("ok\n")
    accepted, skipped = discover(tmp_path)
    assert len(accepted) == 4 and not skipped

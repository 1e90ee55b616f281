"""Bad input is reported and skipped; ingestion completes and nothing stored before is lost."""

from __future__ import annotations

import os
import random
import shutil
import string
import subprocess
import sys
from pathlib import Path

import pytest

from extractors.base import REASON_LIMIT
from graphmem.ingest import ingest
from graphmem.stores.embedded import EmbeddedStore

REPO = Path(__file__).resolve().parents[1]


def plant_broken_inputs(repo: Path) -> dict[str, str]:
    """Broken files of every kind; returns path -> expected words of the skip reason (or '')."""
    (repo / "assets").mkdir()
    (repo / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    (repo / "assets" / "blob.dat").write_bytes(b"abc\x00def" * 100)
    (repo / "services" / "billing" / "latin1.py").write_bytes(b'"""Caf\xe9."""\ndef caf\xe9():\n    return 1\n')
    (repo / "services" / "billing" / "huge.py").write_bytes(b"x = 1\n" * (20 * 1024 * 1024 // 6))
    (repo / "services" / "billing" / "broken.py").write_text("def ok():\n    return 1\n\ndef broken(:\n  pass\n")
    (repo / "services" / "billing" / "empty.py").write_text("")
    (repo / "services" / "gateway" / "src" / "broken.ts").write_text("export function f( {\n")
    (repo / "docs" / "adr" / "0099-bad-front-matter.md").write_text("---\nstatus: [unclosed\n---\n# 99. Bad\n")
    (repo / "docs" / "incidents" / "INC-999.json").write_text("{not json")
    (repo / "docs" / "incidents" / "INC-998.md").write_text("")
    (repo / "services" / "billing" / "two\nlines.py").write_text("def split_name():\n    return 1\n")
    os.symlink("..", repo / "services" / "loop")
    os.symlink("missing-target", repo / "services" / "dangling")
    return {"assets/logo.png": "binary", "assets/blob.dat": "binary", "services/billing/huge.py": "large",
            "services/billing/broken.py": "syntax", "services/gateway/src/broken.ts": "syntax",
            "docs/incidents/INC-999.json": "", "docs/incidents/INC-998.md": "",
            "services/loop": "", "services/dangling": "", "services/billing/latin1.py": "not utf-8",
            "services/billing/two\\nlines.py": "control characters"}


@pytest.mark.parametrize("backend", ["embedded", "neo4j"])
def test_broken_inputs_are_skipped_with_reasons(
    backend: str, request: pytest.FixtureRequest, example_org: tuple, tmp_path: Path
) -> None:
    factory = request.getfixturevalue(f"{backend}_store_factory")
    repo = tmp_path / "acme"
    shutil.copytree(example_org[0], repo, symlinks=True)
    store = factory("broken")
    store.ensure_schema()
    ingest(repo, store, cache_dir=tmp_path / "cache")
    before = {n.key for n in store.iter_nodes()}
    expected = plant_broken_inputs(repo)

    report = ingest(repo, store, cache_dir=tmp_path / "cache")

    reasons = {s.path.rstrip("/"): s.reason.lower() for s in report.skipped}
    for path, words in expected.items():
        assert path in reasons, f"{path} not reported; skipped: {sorted(reasons)}"
        assert words in reasons[path], (path, reasons[path])
    after = {n.key for n in store.iter_nodes()}
    assert before <= after  # nothing ingested before is lost
    assert "sym:services/billing/broken.py::ok" in after  # what parsed is kept
    assert "sym:services/billing/latin1.py::café" in after  # a legacy encoding keeps the whole name
    assert not any("\n" in k for k in after)
    assert "file:services/billing/empty.py" in after
    assert not any(k.startswith("file:assets/") for k in after)


def test_skip_reasons_are_redacted_and_clipped(tmp_path: Path) -> None:
    """A CODEOWNERS naming an access token as an owner, and lines of 50,000 tokens or one 100 KB
    token: neither the token nor a reason longer than the clip reaches the report or stderr."""
    rng = random.Random(4411)
    token = "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    repo = tmp_path / "shop"
    (repo / "billing").mkdir(parents=True)
    (repo / "billing" / "api.py").write_text("def charge(amount):\n    return amount\n")
    (repo / "CODEOWNERS").write_text(
        f"/billing/ @acme/payments {token}\n"
        + "/docs/ " + " ".join(f"nobody{i}" for i in range(50_000)) + "\n"
        + "/api/ " + "x" * 100_000 + "\n"
        + "/" + "y" * 100_000 + "[/ @acme/web\n")

    store = EmbeddedStore(tmp_path / "home", "shop")
    store.ensure_schema()
    report = ingest(repo, store, cache_dir=tmp_path / "cache")
    store.close()
    owners = [s for s in report.skipped if s.path.startswith("CODEOWNERS:")]
    assert len(owners) >= 3, report.skipped
    for item in report.skipped:
        assert token not in item.reason and len(item.reason) <= REASON_LIMIT, item
    assert any("not an owner" in s.reason and "REDACTED" in s.reason for s in owners), owners

    out = subprocess.run([sys.executable, "-m", "graphmem.cli", "--home", str(tmp_path / "cli"), "ingest", str(repo)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "CODEOWNERS:1" in out.stderr
    assert token not in out.stderr and token not in out.stdout
    assert max(len(line) for line in out.stderr.splitlines()) < REASON_LIMIT + 100, len(out.stderr)

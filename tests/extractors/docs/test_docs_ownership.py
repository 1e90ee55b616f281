"""CODEOWNERS rules, service maps (declared and inferred), teams, and the ownership facts."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_helpers import assert_valid, rels_of

from extractors.ownership import (
    OwnershipRules,
    ServiceMap,
    extract_ownership,
    owner_key,
    teams_from_config,
)
from extractors.policy import Policy, read_project_config
from graphmem.errors import ConfigError

CODEOWNERS = """\
# comment
*                 @acme/platform
*.js              @js-owner
/build/logs/      @acme/ops
docs/*            docs@example.com
apps/             @acme/apps
/scripts/**       @acme/tooling
**/migrations     @acme/dba
/services/billing/ @acme/payments ANA@Example.com
/services/billing/vendored/
path\\#hash.txt    @acme/hash   # escaped hash
"""


@pytest.fixture()
def rules() -> OwnershipRules:
    return OwnershipRules.parse(CODEOWNERS)


@pytest.mark.parametrize(
    ("path", "owners"),
    [
        ("README.md", ["team:platform"]),
        ("web/app.js", ["person:js-owner"]),
        ("build/logs/today.log", ["team:ops"]),
        ("src/build/logs/x.log", ["team:platform"]),  # anchored pattern: root only
        ("docs/getting-started.md", ["person:docs@example.com"]),
        ("docs/build-app/troubleshooting.md", ["team:platform"]),  # docs/* does not descend
        ("apps/web/index.html", ["team:apps"]),
        ("libs/apps/x.py", ["team:apps"]),  # unanchored folder pattern: any depth
        ("scripts/deploy/run.sh", ["team:tooling"]),
        ("db/migrations/0001.sql", ["team:dba"]),
        ("services/billing/api.py", ["team:payments", "person:ana@example.com"]),
        ("services/billing/api.js", ["team:payments", "person:ana@example.com"]),  # last rule wins
        ("services/billing/vendored/lib.py", []),  # a rule without owners clears them
        ("path#hash.txt", ["team:hash"]),
    ],
)
def test_owners_of_follows_github_semantics(rules: OwnershipRules, path: str, owners: list[str]) -> None:
    assert rules.owners_of(path) == owners


def test_owners_of_folders(rules: OwnershipRules) -> None:
    assert rules.owners_of("services/billing", is_dir=True) == ["team:payments", "person:ana@example.com"]
    assert rules.owners_of("build/logs", is_dir=True) == ["team:ops"]
    assert rules.owners_of("build/logs") == ["team:platform"]  # a file named "logs" is not the folder


def test_owner_tokens_and_problems() -> None:
    assert owner_key("@acme/payments") == "team:payments"
    assert owner_key("@Bob-Dev") == "person:bob-dev"
    assert owner_key("Ana@Example.COM") == "person:ana@example.com"
    assert owner_key("nobody") is None
    parsed = OwnershipRules.parse("*.py @acme/py bogus\n!*.md @acme/docs\n")
    assert parsed.owners_of("a.py") == ["team:py"]
    reasons = [s.reason for s in parsed.problems]
    assert reasons == ["not an owner: 'bogus'", "negated patterns are not supported in CODEOWNERS"]
    assert parsed.problems[0].path == "CODEOWNERS:1"


def test_gitlab_sections_give_default_owners() -> None:
    parsed = OwnershipRules.parse("[Docs] @acme/docs\n*.md\n^[Backend][2] @acme/backend\n/api/ @acme/api\n")
    assert parsed.owners_of("x/readme.md") == ["team:docs"]
    assert parsed.owners_of("api/x.py") == ["team:api"]


def test_codeowners_location_order(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/CODEOWNERS").write_text("* @acme/docs\n")
    (tmp_path / "CODEOWNERS").write_text("* @acme/root\n")
    assert OwnershipRules.load(tmp_path).owners_of("x") == ["team:root"]  # type: ignore[union-attr]
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github/CODEOWNERS").write_text("* @acme/gh\n")
    loaded = OwnershipRules.load(tmp_path)
    assert loaded is not None and loaded.source == ".github/CODEOWNERS"
    assert loaded.owners_of("x") == ["team:gh"]
    (tmp_path / "empty").mkdir()
    assert OwnershipRules.load(tmp_path / "empty") is None


def test_declared_services_and_teams(fixtures: Path) -> None:
    config = read_project_config(fixtures / "owned_repo")
    services = ServiceMap.from_config(config)
    assert sorted(s.name for s in services) == ["billing", "ledger", "web"]
    assert services.service_of("services/billing/api/handlers.py") == "billing"
    assert services.service_of("./services/ledger/main.go") == "ledger"
    assert services.service_of("services/ledger") == "ledger"
    assert services.service_of("services/ledgerx/main.go") is None
    assert services.service_of("docs/index.md") is None
    billing = services.services["billing"]
    assert (billing.language, billing.team, billing.depends_on) == ("python", "payments", ["ledger"])
    teams = {t.name: t for t in teams_from_config(config)}
    assert teams["payments"].members == ["ana@example.com", "@bob-dev"]


def test_nested_service_paths_take_the_longest_prefix() -> None:
    services = ServiceMap.from_config(
        {"services": {"api": {"paths": ["src/"]}, "auth": {"paths": ["src/auth"]}}}
    )
    assert services.service_of("src/auth/login.py") == "auth"
    assert services.service_of("src/main.py") == "api"


def test_bad_service_config_raises_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"\[services.billing\] paths"):
        ServiceMap.from_config({"services": {"billing": {"paths": 3}}})
    with pytest.raises(ConfigError, match="members"):
        teams_from_config({"teams": {"x": {"members": "ana"}}})


def test_inferred_services_skip_docs_scripts_tests_and_config(fixtures: Path) -> None:
    files, _ = Policy().discover(fixtures / "inferred_repo")
    services = ServiceMap.infer(files)
    assert {s.name: (s.paths, s.language) for s in services} == {
        "billing": (["billing/"], "python"),
        "frontend": (["frontend/"], "typescript"),
        "ledger": (["services/ledger/"], "go"),
    }
    assert services.service_of("scripts/deploy.py") is None
    assert services.service_of("services/ledger/cmd/main.go") == "ledger"


def test_inferred_single_service_repository_and_name_clashes() -> None:
    single = ServiceMap.infer(["main.py", "README.md", "docs/x.md"], project="tool")
    assert [(s.name, s.paths) for s in single] == [("tool", [""])]
    assert single.service_of("docs/x.md") == "tool"
    clash = ServiceMap.infer(["apps/web/a.ts", "packages/web/b.ts"])
    assert sorted(s.name for s in clash) == ["apps-web", "packages-web"]


def test_layout_folders_name_no_service() -> None:
    def names(files: list[str], project: str) -> dict[str, list[str]]:
        return {s.name: s.paths for s in ServiceMap.infer(files, project=project)}

    # A src/ of packages: one service per package, the project's namesake with the root's tooling.
    assert names(["src/attr/_make.py", "src/attrs/__init__.py", "conftest.py", "tests/t.py"], "attrs") == {
        "attr": ["src/attr/"], "attrs": ["src/attrs/", ""]}
    # A src/ of modules is the project's own code; a Java package path is one service named after
    # its last folder, or after the project when it is the only code.
    assert names(["src/query.ts", "src/utils.ts"], "query-core") == {"query-core": ["src/"]}
    assert names(["src/main/java/org/apache/commons/cli/Option.java",
                  "src/main/java/org/apache/commons/cli/help/Help.java"], "commons-cli") == {
        "commons-cli": ["src/main/java/org/apache/commons/cli/"]}
    assert names(["src/main/java/com/acme/billing/A.java", "src/main/java/com/acme/ledger/B.java",
                  "src/main/java/org/acme/util/C.java"], "acme") == {
        "acme": ["src/main/java/com/acme/"], "util": ["src/main/java/org/acme/util/"]}
    # A Go module: its root package and internal/ are its own code; Go skips folders starting with "_".
    go = ServiceMap.infer(["mux.go", "middleware/logger.go", "internal/tree/t.go", "_examples/rest/main.go"],
                          project="chi")
    assert {s.name: s.paths for s in go} == {"chi": ["internal/", ""], "middleware": ["middleware/"]}
    assert go.service_of("internal/tree/t.go") == "chi" and go.service_of("middleware/logger.go") == "middleware"
    # Go's pkg/ is the module's own library too; a Rust workspace's crates/ holds one service per crate.
    assert names(["cmd/api/main.go", "pkg/store/store.go"], "kv") == {"api": ["cmd/api/"], "kv": ["pkg/"]}
    assert names(["crates/core/src/lib.rs", "crates/cli/src/main.rs"], "tool") == {
        "cli": ["crates/cli/"], "core": ["crates/core/"]}
    # Python's own underscore packages are code.
    assert names(["src/_pytest/main.py", "src/pytest/__init__.py"], "pytest") == {
        "_pytest": ["src/_pytest/"], "pytest": ["src/pytest/"]}


def test_extract_ownership_declared_repo(fixtures: Path) -> None:
    root = fixtures / "owned_repo"
    files, _ = Policy().discover(root)
    ex = extract_ownership(root, files, source_commit="a" * 40)
    assert_valid(ex)
    keys = {n.key for n in ex.nodes}
    assert {"service:billing", "service:ledger", "service:web"} <= keys
    assert {"team:payments", "team:ledger-team", "team:platform", "team:docs", "team:docs-core"} <= keys
    assert {"person:ana@example.com", "person:bob-dev", "person:carol@example.com"} <= keys
    bob = next(n for n in ex.nodes if n.key == "person:bob-dev")
    assert bob.props == {"handle": "bob-dev"}
    assert len(keys) == len(ex.nodes), "nodes are not repeated"

    assert rels_of(ex, "MEMBER_OF") == {
        ("person:ana@example.com", "team:payments"),
        ("person:bob-dev", "team:payments"),
        ("person:carol@example.com", "team:ledger-team"),
    }
    owns = rels_of(ex, "OWNS")
    # the service level: config team plus the CODEOWNERS rule covering the service root
    assert {
        ("team:payments", "service:billing"),
        ("person:ana@example.com", "service:billing"),
        ("team:ledger-team", "service:ledger"),
        ("team:platform", "service:web"),
    } <= owns
    # files whose owners differ from their service's get their own OWNS
    assert ("person:bob-dev", "file:services/billing/api/legacy.py") in owns
    assert ("team:docs", "file:services/billing/README.md") in owns
    assert ("team:docs-core", "file:docs/index.md") in owns
    assert ("team:docs", "file:docs/guides/setup.md") in owns
    # files owned like their service are not repeated; an owner-less rule owns nothing
    assert not any(dst == "file:services/billing/api/handlers.py" for _, dst in owns)
    assert not any(dst == "file:web/src/vendor.js" for _, dst in owns)
    contains = rels_of(ex, "CONTAINS")
    assert ("service:billing", "file:services/billing/api/handlers.py") in contains
    assert ("service:web", "file:web/src/vendor.js") in contains
    assert not any(dst == "file:docs/index.md" for _, dst in contains)
    assert rels_of(ex, "DEPENDS_ON") == {("service:billing", "service:ledger")}
    assert [s.path for s in ex.skipped] == [".github/CODEOWNERS:11"]
    assert all(r.provenance.source_commit == "a" * 40 for r in ex.rels)
    sources = {r.provenance.source_path for r in ex.rels if r.type.value == "OWNS"}
    assert sources == {"graphmem.toml", ".github/CODEOWNERS"}


def test_extract_ownership_inferred_repo_discovers_files_itself(fixtures: Path) -> None:
    ex = extract_ownership(fixtures / "inferred_repo")
    assert_valid(ex)
    assert sorted(n.key for n in ex.nodes) == ["service:billing", "service:frontend", "service:ledger"]
    assert rels_of(ex, "CONTAINS") == {
        ("service:billing", "file:billing/api/handlers.py"),
        ("service:billing", "file:billing/models.py"),
        ("service:frontend", "file:frontend/src/app.tsx"),
        ("service:ledger", "file:services/ledger/cmd/main.go"),
    }
    assert not rels_of(ex, "OWNS")


def test_extract_ownership_with_broken_config_falls_back(tmp_path: Path) -> None:
    (tmp_path / "graphmem.toml").write_text("[services.billing\npaths = [\n")
    (tmp_path / "billing").mkdir()
    (tmp_path / "billing/app.py").write_text("x = 1\n")
    ex = extract_ownership(tmp_path)
    assert_valid(ex)
    assert [n.key for n in ex.nodes] == ["service:billing"]
    assert ex.skipped and "not valid TOML" in ex.skipped[0].reason

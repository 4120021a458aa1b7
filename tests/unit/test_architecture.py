"""The house's rules that import-linter does not express (docs/architecture.md).

import-linter (`lint-imports`, run by ./scripts/test) checks the layers and that only a capability imports its
tables. These tests add: a capability reaches another only through the modules that form its declared public API,
every capability folder is declared exactly once, and the kits import no capability.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import codewell
from codewell.capabilities import CAPABILITIES

PACKAGE = Path(codewell.__path__[0])

# Per capability, the modules other capabilities may import: its service API and a documented handful
# (docs/architecture.md, "Public API of each capability"). Everything else is the capability's own business.
PUBLIC_API: dict[str, frozenset[str]] = {
    "accounts": frozenset({"service", "audit", "credentials", "tokens", "usernames", "verification"}),
    "analytics": frozenset({"service", "events", "credits"}),
    "auth": frozenset({"service"}),
    "codenav": frozenset({"service"}),
    "codehosts": frozenset({"service"}),
    "evaluator": frozenset({"service"}),
    # history.wire maps the MCP tools' argument names to service calls; the agents' toolbox asks the same way.
    "history": frozenset({"service", "wire"}),
    # jobs.runner drains one resource's jobs in the caller's thread (sync_repo, `codewell repos add`).
    # jobs.placement is the cluster's rendezvous hashing (who owns a repository), shared by search's fan-out.
    "jobs": frozenset({"service", "runner", "placement"}),
    "licensing": frozenset({"service"}),
    "mcp": frozenset(),
    "nls": frozenset({"service"}),
    "oauth": frozenset({"service"}),
    # repos.git is plain git plumbing (refs, revisions) that history's prefilter shares.
    "repos": frozenset({"service", "git"}),
    # The query language is part of search's contract (the evaluator parses queries before searching).
    # search.cluster and search.wire: the fan-out to searcher replicas and its formats, which nls's shares.
    "search": frozenset({"service", "query.parser", "cluster", "wire"}),
    "agents": frozenset({"service"}),
    "web": frozenset(),
}
KITS = ("http", "clikit", "hostapi", "authz", "runtime", "capability", "config", "db", "core")


def capability_folders() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "capability.py").exists())


def imports_of(path: Path) -> list[tuple[str, int]]:
    """Every `codewell.*` module imported by `path` (absolute imports; any depth of nesting)."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
    return [(module, line) for module, line in found if module.startswith("codewell.")]


def test_every_capability_folder_is_declared_once() -> None:
    declared = [capability.name for capability in CAPABILITIES]
    assert len(declared) == len(set(declared))
    assert sorted(declared) == capability_folders()


@pytest.mark.parametrize("capability", capability_folders())
def test_capabilities_reach_each_other_only_through_their_public_api(capability: str) -> None:
    crossings = []
    for path in sorted((PACKAGE / capability).rglob("*.py")):
        for module, line in imports_of(path):
            parts = module.split(".")
            target = parts[1]
            if target == capability or target not in PUBLIC_API:
                continue
            inner = ".".join(parts[2:])
            if inner not in PUBLIC_API[target]:
                crossings.append(f"{path.relative_to(PACKAGE)}:{line} imports {module}")
    assert crossings == [], "import the capability's service (or add the module to its documented public API)"


@pytest.mark.parametrize("kit", KITS)
def test_kits_import_no_capability(kit: str) -> None:
    root = PACKAGE / kit
    paths = sorted(root.rglob("*.py")) if root.is_dir() else [PACKAGE / f"{kit}.py"]
    capabilities = set(PUBLIC_API)
    offending = [
        f"{path.relative_to(PACKAGE)}:{line} imports {module}"
        for path in paths
        for module, line in imports_of(path)
        if module.split(".")[1] in capabilities
    ]
    assert offending == []


def test_the_public_api_table_names_existing_modules() -> None:
    for capability, modules in PUBLIC_API.items():
        for module in modules:
            if (PACKAGE / capability).is_dir() and (PACKAGE / capability / "capability.py").exists():
                assert (PACKAGE / capability / (module.replace(".", "/") + ".py")).exists(), (capability, module)


def jobs_table() -> str:
    """docs/architecture.md's events → jobs table, as the declared job kinds say it must read."""
    lines = ["| capability | job kind | enqueued by | lock | what it does |", "|---|---|---|---|---|"]
    for capability in CAPABILITIES:
        for kind in capability.jobs:
            causes = [f"`{event}`" for event in kind.on]
            if kind.every is not None:
                causes.append(f"every {kind.every:g} s")
            if kind.enqueued_by:
                causes.append(kind.enqueued_by)
            lines.append(
                f"| {capability.name} | `{kind.name}` | {'; '.join(causes) or '-'} | `{kind.lock_name}` "
                f"| {kind.description} |"
            )
    return "\n".join(lines) + "\n"


def test_the_architecture_doc_lists_every_job_kind_and_what_enqueues_it() -> None:
    text = (PACKAGE.parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("<!-- jobs-table:")
    start = text.index("\n", start) + 1
    documented = text[start : text.index("<!-- /jobs-table -->")]
    expected = jobs_table()
    assert documented == expected, "docs/architecture.md's jobs table is stale; it must read:\n" + expected


def test_job_kinds_are_named_after_their_capability_and_unique() -> None:
    names = [kind.name for capability in CAPABILITIES for kind in capability.jobs]
    assert len(names) == len(set(names))
    for capability in CAPABILITIES:
        for kind in capability.jobs:
            assert kind.name.startswith(capability.name + "."), kind.name

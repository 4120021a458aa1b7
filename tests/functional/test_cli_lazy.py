"""`codewell --help` imports no command: the lazy command table stays true to the capabilities' commands, help
imports neither the web app nor the database layer, and the CLI benchmark runs in its smallest mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from codewell.capabilities import CAPABILITIES
from codewell.cli.lazy import SHORT_HELP_LIMIT, LazyGroup
from codewell.cli.main import COMMANDS

BENCH = Path(__file__).parents[2] / "bench" / "cli_bench.py"
FOUNDATION = ("serve", "db", "config", "searcher", "read", "definition", "references", "login", "logout")


def test_the_command_table_is_the_capabilities_commands() -> None:
    declared = {str(command.name): command for capability in CAPABILITIES for command in capability.commands}
    assert set(COMMANDS) - set(FOUNDATION) == set(declared)
    for name, command in declared.items():
        assert COMMANDS[name].load() is command, name
        assert COMMANDS[name].short_help == command.get_short_help_str(SHORT_HELP_LIMIT), name
    for name in FOUNDATION:
        loaded = COMMANDS[name].load()
        assert loaded.name == name
        assert COMMANDS[name].short_help == loaded.get_short_help_str(SHORT_HELP_LIMIT)


def _modules_after(*args: str) -> tuple[str, set[str]]:
    """What `codewell ARGS` prints and which modules it imported, in a fresh interpreter."""
    script = (
        "import contextlib, io, json, sys\n"
        "from codewell.cli.main import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        f"    cli.main(args={list(args)!r}, prog_name='codewell')\n"
        "print(json.dumps({'out': out.getvalue(), 'modules': sorted(sys.modules)}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    answer = json.loads(result.stdout)
    return answer["out"], set(answer["modules"])


def test_help_lists_every_command_without_importing_one() -> None:
    out, modules = _modules_after("--help")
    for name in COMMANDS:
        assert f"\n  {name} " in out, name
    heavy = {"codewell.app", "codewell.capabilities", "codewell.runtime", "sqlalchemy", "starlette", "uvicorn"}
    assert heavy.isdisjoint(modules), heavy & modules
    assert not [m for m in modules if m.startswith("codewell.") and m.endswith(".cli") and m != "codewell.cli"]


@pytest.mark.parametrize("width", [60, 80, 110])
def test_lazy_help_reads_as_the_loaded_commands_help(width: int) -> None:
    """The commands section from the table is what click prints for the imported commands, at any width."""

    def commands_section(group: click.Group) -> str:
        formatter = click.HelpFormatter(width=width)
        group.format_commands(click.Context(group), formatter)
        return formatter.getvalue()

    lazy = LazyGroup("codewell", lazy_commands=COMMANDS)
    loaded = click.Group("codewell", commands={name: command.load() for name, command in COMMANDS.items()})
    assert commands_section(lazy) == commands_section(loaded)
    assert not lazy.commands  # formatting imported nothing


def test_a_commands_help_imports_only_that_command() -> None:
    out, modules = _modules_after("search", "--help")
    assert "--json" in out
    assert "codewell.search.cli" in modules
    assert "codewell.repos.cli" not in modules
    assert {"codewell.search.service", "codewell.runtime", "sqlalchemy"}.isdisjoint(modules)


@pytest.mark.parametrize(
    "args",
    [("search", "x"), ("read", "r", "p"), ("definition", "r", "p", "s"), ("deepsearch", "ask", "x"), ("nls", "x")],
)
def test_a_remote_command_imports_neither_the_house_nor_requests_nor_rich(args: tuple[str, ...]) -> None:
    """`codewell --server URL CMD` reaches its first request with the standard library's HTTP client only: requests
    and rich cost 0.2-0.3 s each to import on this machine, against the 0.5 s issue #32 allows (bench/cli_bench.py
    --remote measures it)."""
    _, modules = _modules_after("--server", "http://127.0.0.1:9", *args)
    assert "urllib.request" in modules  # it did get as far as a request (refused: nobody listens on port 9)
    heavy = {"codewell.runtime", "codewell.capabilities", "sqlalchemy", "starlette", "requests", "urllib3", "rich"}
    assert heavy.isdisjoint(modules), heavy & modules


def test_the_cli_bench_in_its_smallest_mode(tmp_path: Path) -> None:
    results = tmp_path / "cli.json"
    printed = subprocess.run(
        [sys.executable, str(BENCH), "--runs", "1", "--results", str(results)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    summary = json.loads(results.read_text())
    assert set(summary["cases"]) == {
        "python -c pass",
        "codewell --help",
        "codewell search --help",
        "codewell --version",
    }
    assert summary["cases"]["python -c pass"]["ratio_to_python"] == 1.0
    for name, figure in summary["cases"].items():
        assert figure["p50_s"] > 0
        assert name in printed


def test_the_web_app_leaves_the_libraries_of_rare_paths_unimported() -> None:
    """Every server, worker and searcher process imports the app: libraries only a command's table, a SCIP upload, a
    sign-in through a host, a deep-search page or the dense model use load when that first happens (each start of
    a process paid ~0.3-0.5 CPU-s for them: issue #30, process starts)."""
    script = "import json, sys\nimport codewell.app\nprint(json.dumps(sorted(sys.modules)))\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    modules = set(json.loads(result.stdout))
    rare = {"rich", "markdown_it", "authlib", "joserfc", "google.protobuf", "tokenizers", "threadpoolctl"}
    rare.add("safetensors")
    assert rare.isdisjoint(modules), sorted(rare & modules)

"""Python find_references through instances typed only by inference: the value of a call whose function states its
return type (`-> ProgressBar`) or returns what a constructor built, also bound by `with ... as x` (python_refs.py).

A small click-like package in a real git repository, through CodeNavService.find_references. Two classes define
`format_pct`, so a receiver of unknown type counts for neither: only what the code implies decides.
"""

from __future__ import annotations

from pathlib import Path

from codewell.codenav.service import CodeNavService
from codewell.core.actors import INTERNAL
from codewell.runtime import Runtime
from tests.gitfixtures import make_repo, register_local_repo

FILES = {
    "pkg/__init__.py": "from pkg.termui import progressbar as progressbar\n",
    "pkg/_impl.py": (
        "class ProgressBar:\n"  # 1
        "    def __init__(self, items):\n"
        "        self.items = items\n"
        "\n"
        "    def __enter__(self) -> 'ProgressBar':\n"  # 5
        "        return self\n"
        "\n"
        "    def __exit__(self, *exc):\n"
        "        return None\n"
        "\n"  # 10
        "    def format_pct(self):\n"
        "        return '0%'\n"
        "\n"
        "\n"
        "class Gauge:\n"  # 15
        "    def format_pct(self):\n"
        "        return '-'\n"
    ),
    "pkg/termui.py": (
        "import typing as t\n"  # 1
        "\n"
        "if t.TYPE_CHECKING:\n"
        "    from pkg._impl import ProgressBar\n"
        "\n"  # 5
        "\n"
        "def progressbar(\n"
        "    items,\n"
        "    label=None,\n"
        ") -> 'ProgressBar[int]':\n"  # 10
        "    from pkg._impl import ProgressBar\n"
        "\n"
        "    return ProgressBar(items)\n"
        "\n"
        "\n"  # 15
        "def gauge():\n"
        "    from pkg._impl import Gauge\n"
        "\n"
        "    return Gauge()\n"
    ),
    "tests/test_termui.py": (
        "import pkg\n"  # 1
        "from pkg._impl import ProgressBar\n"
        "from pkg.termui import gauge, progressbar\n"
        "\n"
        "\n"  # 5
        "def _create_progress(length=10):\n"
        "    progress = pkg.progressbar(tuple(range(length)))\n"
        "    progress.position = 0\n"
        "    return progress\n"
        "\n"  # 10
        "\n"
        "def test_constructed():\n"
        "    bar = ProgressBar([1])\n"
        "    assert bar.format_pct() == '0%'\n"
        "\n"  # 15
        "\n"
        "def test_annotated_return():\n"
        "    bar = progressbar([1])\n"
        "    assert bar.format_pct()\n"
        "\n"  # 20
        "\n"
        "def test_with_target():\n"
        "    with progressbar([1]) as bar:\n"
        "        bar.format_pct()\n"
        "\n"  # 25
        "\n"
        "def test_helper_returning_a_local():\n"
        "    with _create_progress(3) as progress:\n"
        "        progress.format_pct()\n"
        "\n"  # 30
        "\n"
        "def test_other_class():\n"
        "    g = gauge()\n"
        "    g.format_pct()\n"
        "\n"  # 35
        "\n"
        "def test_unknown(thing):\n"
        "    thing.format_pct()\n"
    ),
}


def refs(nav: CodeNavService, path: str, symbol: str) -> list[tuple[str, int]]:
    found = nav.find_references(INTERNAL, "acme/pkg", path, symbol, limit=100)
    assert not found.text_matches
    return [(f.path, line) for f in found.files for line, _, _ in f.lines]


def test_instances_typed_by_inference_are_references(runtime: Runtime, tmp_path: Path) -> None:
    register_local_repo(runtime, make_repo(tmp_path / "pkg", FILES), "acme/pkg")
    nav = runtime.get(CodeNavService)
    # A constructor call, a function annotated `-> 'ProgressBar[int]'`, the same through `with ... as bar`
    # (`__enter__` returns the instance), and an unannotated helper that returns a local holding such a call.
    assert refs(nav, "pkg/_impl.py", "ProgressBar.format_pct") == [
        ("tests/test_termui.py", 14),
        ("tests/test_termui.py", 19),
        ("tests/test_termui.py", 24),
        ("tests/test_termui.py", 29),
    ]
    # `gauge()` returns a Gauge: its call is Gauge's member, not ProgressBar's; a parameter of unknown type neither.
    assert refs(nav, "pkg/_impl.py", "Gauge.format_pct") == [("tests/test_termui.py", 34)]

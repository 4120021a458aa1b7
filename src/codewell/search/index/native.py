"""The index build kernels (search/_build.c), when they were built at install, and the switch that tests flip.

setup.py builds `_build` as optional: without a C compiler the install still succeeds and the index build
extracts and merges trigrams with numpy and pyroaring (search/index/builder.py), several times slower. Both
paths write the same shard format; the build tests run with and without the kernels.
"""

from __future__ import annotations

from types import ModuleType

_build: ModuleType | None
try:
    from codewell.search import _build as _module

    _build = _module
except ImportError:  # installed without a C compiler
    _build = None

__all__ = ["ENABLED", "kernels"]

# Tests switch the kernels off to compare them with the numpy path.
ENABLED = True


def kernels() -> ModuleType | None:
    """The `_build` module, or None when it is missing or switched off."""
    return _build if ENABLED else None

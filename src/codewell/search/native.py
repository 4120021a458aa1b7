"""The native kernels (search/_scan.c), when they were built at install, and the switch that tests flip.

setup.py builds `_scan` as optional: without a C compiler the install still succeeds, literals are then
verified by Hyperscan or RE2 and lines and posting lists are handled in Python. The property tests run
every case with and without the kernels.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from types import ModuleType

_scan: ModuleType | None
try:
    from codewell.search import _scan as _module

    _scan = _module
except ImportError:  # installed without a C compiler
    _scan = None

__all__ = ["ENABLED", "kernels"]

log = logging.getLogger(__name__)
# Tests switch the kernels off to compare them with the Python and Hyperscan paths.
ENABLED = True


def kernels() -> ModuleType | None:
    """The `_scan` module, or None when it is missing or switched off."""
    return _scan if ENABLED and _built() else None


@lru_cache(maxsize=1)
def _built() -> bool:
    if _scan is None:
        log.warning("codewell.search._scan is not built (no C compiler at install?): search runs slower paths")
    return _scan is not None

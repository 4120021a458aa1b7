"""Whether an opened shard's memory mappings still match its files (docs/security.md, "Storage faults").

A shard maps `content.bin`, `postings.bin` and its large `.npy` arrays. Reading a page of a mapping past the end
of a file truncated since it was mapped raises SIGBUS, which kills the process; a file deleted (or replaced by
a rename) keeps its mapping valid, but the shard no longer matches the data directory. `mapping_problem` tells
both apart from an intact shard with one `stat` per mapped file (~2 us each), so that the searcher can drop the
shard and have it rebuilt before a query reads through a broken mapping.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from codewell.search.index.shard import Shard


def _mapping_of(value: Any) -> mmap.mmap | None:
    """The mmap behind a shard field (an mmap, or an ndarray view of np.load(mmap_mode="r")), else None."""
    seen = 0
    while value is not None and seen < 8:
        if isinstance(value, mmap.mmap):
            return value
        inner = getattr(value, "_mmap", None) if isinstance(value, np.memmap) else None
        if isinstance(inner, mmap.mmap):
            return inner
        value = getattr(value, "base", None)
        seen += 1
    return None


def mapped_files(shard: Shard) -> Iterator[tuple[str, int]]:
    """(file name, size when mapped) of each memory-mapped file of `shard`."""
    for name, value in (
        ("content.bin", shard.content),
        ("postings.bin", shard.postings),
        ("nl_low.npy", shard.nl_low),
        ("tri_keys.npy", shard.tri_keys),
        ("tri_offs.npy", shard.tri_offs),
        ("tri_raw.npy", shard.tri_raw),
        ("tri_counts.npy", shard.tri_counts),
    ):
        mapping = _mapping_of(value)
        if mapping is not None:
            yield name, len(mapping)


def mapping_problem(shard: Shard) -> str | None:
    """None while every mapped file of `shard` is still on disk at least as long as its mapping; else what is
    wrong ("content.bin deleted", "postings.bin truncated from 4096 to 0 bytes"). A truncated file must never be
    read through its mapping again (SIGBUS); a deleted one can be, but the shard is gone from the data dir."""
    for name, mapped in mapped_files(shard):
        try:
            size = os.stat(shard.path / name).st_size
        except FileNotFoundError:
            return f"{name} deleted"
        except OSError as exc:
            return f"{name} unreadable: {exc.strerror}"
        if size < mapped:
            return f"{name} truncated from {mapped} to {size} bytes"
    return None

"""Where a repository's index lives in a cluster: rendezvous hashing over the live searcher replicas.

Each replica is a `job_workers` row of role `searcher` with its address and a heartbeat (`codewell searcher`):
membership is what the database already holds, with no protocol of our own. Every process computes the same
owner from the same rows: the replica with the highest hash of (replica, repository). When a replica joins,
only the repositories it now wins move to it; when one leaves, only its own move, each to its runner-up.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["SEARCHER", "Replica", "owner", "ranked", "weight"]

# The role of a searcher replica's row in `job_workers`.
SEARCHER = "searcher"


@dataclass(frozen=True, slots=True)
class Replica:
    """A searcher replica as its row says: its name, where it answers, and whether it is draining."""

    name: str
    address: str
    draining: bool = False


def weight(replica: str, key: str) -> int:
    """The replica's hash for `key` (a job resource such as `repo:42`): stable across processes and versions."""
    digest = hashlib.blake2b(f"{replica}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def ranked(key: str, replicas: Iterable[str]) -> list[str]:
    """The replicas in order of preference for `key` (the owner first, then who takes over if it leaves)."""
    return sorted(replicas, key=lambda name: (weight(name, key), name), reverse=True)


def owner(key: str, replicas: Sequence[str]) -> str | None:
    """The replica that holds `key`, or None without replicas."""
    if not replicas:
        return None
    return max(replicas, key=lambda name: (weight(name, key), name))

"""Which repositories a history query covers: `repos` entries (names or /regex/) among the readable ones.

The readable repositories come from `RepoService.readable_refs` (the one visibility rule, three columns);
history never reads the repos tables nor builds mirror paths itself. Unknown names get the repos
lookup's "did you mean" suggestion, chosen among readable repositories only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from codewell.authz import Action, allowed
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, NotFound
from codewell.history.params import compile_regex, terms
from codewell.repos.service import RepoRef, RepoService


@dataclass(slots=True)
class Scope:
    """The repositories a query covers: the repositories by id and the entries that named none."""

    repos: dict[int, RepoRef]
    unknown: list[str]
    everything: bool  # no repo_id filter needed (the actor reads all and asked for all)
    suggestions: dict[str, str] = field(default_factory=dict)  # unknown entry -> readable repository


def readable(repos: RepoService, actor: Actor) -> dict[int, RepoRef]:
    """The repositories `actor` may read, by id."""
    return {ref.id: ref for ref in repos.readable_refs(actor)}


def resolve(repos: RepoService, actor: Actor, names: Sequence[str] | None, *, required: bool = True) -> Scope:
    """Resolve `repos` entries (exact names, case-insensitive fallback, or /regex/) among readable ones."""
    entries = terms(names, "repos")
    everyone = readable(repos, actor)
    reads_all = allowed(actor, Action.REPOS_READ_ALL)
    if not entries:
        if required:
            raise InvalidInput(
                "`repos` must name at least one repository",
                hint='pass repository names, or a pattern like "/^github.com/org//"',
            )
        return Scope(everyone, [], reads_all)
    by_name = {repo.name: repo for repo in everyone.values()}
    by_lower = {name.lower(): repo for name, repo in by_name.items()}
    chosen: dict[int, RepoRef] = {}
    unknown: list[str] = []
    for entry in entries:
        if len(entry) > 2 and entry.startswith("/") and entry.endswith("/"):
            pattern = compile_regex(entry[1:-1], "repos")
            hits = [repo for name, repo in by_name.items() if pattern.search(name)]
        else:
            repo = by_name.get(entry) or by_lower.get(entry.lower())
            hits = [repo] if repo else []
        if not hits:
            unknown.append(entry)
        chosen.update((repo.id, repo) for repo in hits)
    suggestions = {
        entry: suggestion
        for entry in unknown
        if not entry.startswith("/") and (suggestion := repos.suggest(actor, entry)) is not None
    }
    if not chosen:
        raise NotFound(
            f"no repository found for: {describe_unknown(unknown, suggestions)}",
            hint="check the names with list_repos; patterns are written /regex/",
        )
    return Scope(chosen, unknown, reads_all and len(chosen) == len(everyone), suggestions)


def describe_unknown(unknown: Sequence[str], suggestions: dict[str, str]) -> str:
    """`a, b (did you mean org/b?)`: the unknown entries, each with its suggestion when there is one."""
    return ", ".join(
        f"{entry} (did you mean {suggestions[entry]}?)" if entry in suggestions else entry for entry in unknown
    )

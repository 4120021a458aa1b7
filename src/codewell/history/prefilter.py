"""Narrowing diff_search candidates with `git log -G` when the in-process scan finds matches too slowly.

diff_search diffs candidate commits one by one in-process (pygit2) and stops at `count`; for frequent
patterns that is the fastest way. For a rare pattern nearly every candidate is diffed for nothing, and
git's own walk (commit-graph, tree diff, pickaxe in C) is faster. So after a short while the service asks
git, per repository and in parallel, which commits add or remove a line containing a literal the pattern
requires, and diffs only those. The answer is a superset of the true matches (a required literal, the
same diff engine family, no renames, no textconv), so results are identical; the exact RE2 check still
runs on every candidate. When no literal can be extracted, or git fails, nothing is narrowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

from codewell.repos.git import GIT_PROCESS_LIMIT, GitCommandError, run_git

# Shorter literals select nearly every commit: not worth a git walk.
MIN_LITERAL = 3
# Dates are compared with git's committer-date filter; the slack keeps the answer a superset.
DATE_SLACK = timedelta(days=1)
_ERE_SPECIAL = set("\\.[]()*+?{}|^$")
_META = set(".[](){}|*+?^$")
_OPTIONAL = set("*?")  # quantifiers that may drop the preceding character ({ is handled on its own)
# Escapes of a letter that stand for one class or assertion and take no argument.
_SIMPLE_ESCAPES = set("dDwWsSbBAzntrfv")


def required_literal(pattern: str) -> str | None:
    """The longest run of plain characters every match of the RE2 `pattern` contains, or None.

    Deliberately conservative: top-level alternation or any flag group (`(?...`) gives None; groups,
    classes, class escapes (\\d, \\w...) and anchors end a run; escapes taking an argument (\\p, \\x,
    digits) give None; a character followed by `*`, `?` or `{` is dropped (it may occur zero times).
    """
    if "(?" in pattern or "\\Q" in pattern:
        return None
    runs: list[str] = []
    run = ""
    depth, i = 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt.isalnum() and nxt not in _SIMPLE_ESCAPES:
                return None  # \p{..}, \x41, octal digits...: an argument follows that is not literal text
            if depth == 0 and nxt and not nxt.isalnum() and not nxt.isspace():
                run += nxt
            else:
                runs.append(run)
                run = ""
            i += 2
            continue
        if ch == "{":  # a repetition count: the character before it may occur zero times
            runs.append(run[:-1])
            run = ""
            close = pattern.find("}", i)
            i = close + 1 if close > 0 else i + 1
            continue
        if ch == "[":
            runs.append(run)
            run = ""
            i = _class_end(pattern, i)
            continue
        if ch == "|" and depth == 0:
            return None
        if ch in _META:
            if ch in _OPTIONAL and run:
                run = run[:-1]
            depth += ch == "("
            depth -= ch == ")" and depth > 0
            runs.append(run)
            run = ""
        elif depth == 0:
            run += ch
        i += 1
    runs.append(run)
    best = max(runs, key=len)
    return best if len(best) >= MIN_LITERAL and "\n" not in best else None


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class starting at `start` (`[...]`, `]` first is literal)."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def ere_escape(literal: str) -> str:
    """`literal` as a POSIX extended regular expression (what `git log -G` takes) matching itself."""
    return "".join(f"\\{ch}" if ch in _ERE_SPECIAL else ch for ch in literal)


def candidate_shas(
    mirrors: Mapping[int, Path],
    literal: str,
    since: datetime | None,
    until: datetime | None,
    timeout: float,
) -> dict[int, set[str] | None]:
    """Per repository: the SHAs of commits (all branches and tags) whose diff adds or removes a line
    containing `literal`, within the dates (with slack); None for a repository git could not answer.

    Runs at most GIT_PROCESS_LIMIT git processes at once (run_git's limiter also bounds the whole process).
    """
    args = ["-c", "diff.renames=false", "log", "--branches", "--tags", "--no-renames", "--no-textconv"]
    args += ["--no-ext-diff", f"-G{ere_escape(literal)}", "--format=%H"]
    if since is not None:
        args.append(f"--since-as-filter={(since - DATE_SLACK).isoformat()}")
    if until is not None:
        args.append(f"--until={(until + DATE_SLACK).isoformat()}")

    def one(path: Path) -> set[str] | None:
        try:
            return set(run_git([f"--git-dir={path}", *args], timeout=timeout).split())
        except GitCommandError:
            return None

    ids = list(mirrors)
    with ThreadPoolExecutor(max_workers=max(1, min(GIT_PROCESS_LIMIT, len(ids)))) as pool:
        return dict(zip(ids, pool.map(one, [mirrors[i] for i in ids]), strict=True))

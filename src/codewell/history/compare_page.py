"""compare_revisions pages as text and JSON, shared by the MCP tool and the REST route.

The tool's answer is held under the MCP output budget: every file of the page keeps its line (path,
status, +/-); hunks are kept smallest file first, so the largest files are the ones cut, and a cut file
carries a cursor that returns its diff alone (`after=<cursor>, first=1`). REST gets every hunk.
"""

from __future__ import annotations

import json
from typing import Any

from codewell.history.diffs import DiffHunk, FileDiff
from codewell.history.params import encode_cursor
from codewell.history.render import PAGE_BUDGET_CHARS, answer_size
from codewell.history.results import Comparison
from codewell.http import urls


def _hunk_json(hunk: DiffHunk) -> dict[str, Any]:
    return {
        "oldRange": {"startLine": hunk.old_start, "lines": hunk.old_lines},
        "newRange": {"startLine": hunk.new_start, "lines": hunk.new_lines},
        "section": hunk.section,
        "body": hunk.body(),
    }


def _hunk_text(hunk: DiffHunk) -> str:
    return f"{hunk.header}\n{hunk.body().rstrip()}"


def _file_name(file: FileDiff) -> str:
    return f"{file.old_path} → {file.path}" if file.old_path != file.path else file.path


class _ComparePage:
    """One compare_revisions page rendered with the first `kept[i]` hunks of file i."""

    def __init__(self, comparison: Comparison, external_url: str, kept: list[int]) -> None:
        self.c = comparison
        self.url = urls.compare_url(external_url, comparison.repo, comparison.base, comparison.head)
        self.kept = kept

    def _cut_note(self, index: int) -> str | None:
        file, kept = self.c.files[index], self.kept[index]
        if kept >= len(file.hunks):
            return "... (diff truncated at 1,000 lines)" if file.truncated else None
        shown = f"{kept} of {len(file.hunks)} hunks shown to stay within the output budget"
        if len(self.c.files) == 1:
            return f"... ({shown}; the rest is larger than one answer: read the file at both revisions)"
        cursor = encode_cursor(self.c.offset + index)
        return f"... ({shown}; this file's diff alone: after={cursor!r}, first=1)"

    def text(self) -> str:
        c = self.c
        lines = [
            f"Comparing {c.repo}: {c.base} ({c.base_commit[:12]}) → {c.head} ({c.head_commit[:12]})",
            f"{c.total_files} files changed, {c.total_added} insertions(+), {c.total_deleted} deletions(-)",
            f"Files {c.offset + 1}-{c.offset + len(c.files)} of {c.total_files} on this page"
            if c.files
            else "No changed files on this page",
            f"URL: {self.url}",
        ]
        blocks = ["\n".join(lines)]
        for index, file in enumerate(c.files):
            head = f"# {_file_name(file)} ({file.status}, +{file.added} -{file.deleted})"
            if file.binary:
                blocks.append(f"{head}\nBinary file")
                continue
            parts = [head, *(_hunk_text(h) for h in file.hunks[: self.kept[index]])]
            if note := self._cut_note(index):
                parts.append(note)
            blocks.append("\n".join(parts))
        if c.has_next_page:
            blocks.append(f"More files: call again with after={c.end_cursor!r}")
        return "\n\n".join(blocks)

    def json(self) -> dict[str, Any]:
        c = self.c
        files = []
        for index, file in enumerate(c.files):
            data: dict[str, Any] = {
                "path": file.path,
                "status": file.status,
                "added": file.added,
                "deleted": file.deleted,
                "binary": file.binary,
                "hunks": [_hunk_json(h) for h in file.hunks[: self.kept[index]]],
            }
            if file.old_path != file.path:
                data["oldPath"] = file.old_path
            omitted = len(file.hunks) - self.kept[index]
            if file.truncated or omitted:
                data["truncated"] = True
            if omitted:
                data["omittedHunks"] = omitted
                data["fileCursor"] = encode_cursor(c.offset + index)
            files.append(data)
        return {
            "repository": c.repo,
            "base": c.base,
            "head": c.head,
            "baseCommit": c.base_commit,
            "headCommit": c.head_commit,
            "totalAdded": c.total_added,
            "totalDeleted": c.total_deleted,
            "totalModified": c.total_files,
            "files": files,
            "hasNextPage": c.has_next_page,
            "endCursor": c.end_cursor,
        }

    def size(self) -> int:
        return answer_size(self.text(), self.json())


def comparison_json(comparison: Comparison, external_url: str) -> dict[str, Any]:
    """The whole page, every hunk the service returned (REST)."""
    return _ComparePage(comparison, external_url, [len(f.hunks) for f in comparison.files]).json()


def comparison_answer(
    comparison: Comparison, external_url: str, budget: int = PAGE_BUDGET_CHARS
) -> tuple[str, dict[str, Any]]:
    """Text and JSON of a page within `budget` characters (the tool's answer).

    Every file of the page keeps its line (path, status, +/-). Hunks are added smallest file first, so
    the largest files are the ones cut; a cut file keeps its leading hunks and carries a cursor that
    shows its diff alone (`after=<fileCursor>, first=1`).
    """
    files = comparison.files
    full = _ComparePage(comparison, external_url, [len(f.hunks) for f in files])
    if full.size() <= budget:
        return full.text(), full.json()
    kept = [0] * len(files)
    # The page without hunks, every file carrying its cut note: an upper bound of what is not hunks.
    remaining = budget - _ComparePage(comparison, external_url, kept).size()
    costs = [
        [len(_hunk_text(h)) + 1 + len(json.dumps(_hunk_json(h), ensure_ascii=False)) + 2 for h in f.hunks]
        for f in files
    ]
    for index in sorted(range(len(files)), key=lambda i: (sum(costs[i]), i)):
        for cost in costs[index]:
            if cost > remaining:
                break
            kept[index] += 1
            remaining -= cost
    page = _ComparePage(comparison, external_url, kept)
    # The estimate ignores JSON escaping inside the hunks' neighbours; drop the largest kept hunks until it fits.
    while page.size() > budget and any(kept):
        largest = max(range(len(files)), key=lambda i: costs[i][kept[i] - 1] if kept[i] else -1)
        kept[largest] -= 1
        page = _ComparePage(comparison, external_url, kept)
    return page.text(), page.json()

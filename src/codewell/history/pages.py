"""History pages for people: a revision's commit log (whole repository or one path), one commit with its diff,
and the comparison of two revisions, at the addresses the tools print (`codewell.http.urls`).

Adapters only: one HistoryService call (which resolves the repository for the actor, so one the actor may not
read answers 404 exactly like a missing one), rendering out. Diff lines are rendered escaped by the template.

    /<repo>[@<rev>]/-/commits[/<path>]?page=N     log, 30 commits a page
    /<repo>[@<rev>]/-/commit/<sha>                 one commit (the revision in the address is ignored)
    /<repo>/-/compare/<base>...<head>[?after=C]    compare_revisions, 50 files a page
    /<repo>[@<rev>]/-/blame/<path>                 who last changed each line
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from codewell.core.errors import InvalidInput
from codewell.history.diffs import FileDiff
from codewell.history.service import LOG_PAGE_DEFAULT, Blame, HistoryService
from codewell.http import urls
from codewell.http.lines import asked_lines, line_pages, line_window, start_at
from codewell.http.paths import repo_and_revision
from codewell.http.requests import actor_of, runtime_of
from codewell.http.templates import render
from codewell.runtime import Runtime

__all__ = ["commits_url", "routes"]


def commits_url(repo: str, revision: str, path: str = "") -> str:
    """The log page of a revision, or of one path at it (a relative address, like the file views')."""
    return f"/{repo}@{revision}/-/commits/{path}".rstrip("/")


def _page(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= 10_000:
        raise InvalidInput("`page` must be a number from 1 to 10000", hint="e.g. ?page=2")
    return int(raw)


def _files(repo: str, head: str, base: str | None, files: list[FileDiff]) -> list[dict[str, Any]]:
    """Diff files with links to the file at both sides and its history."""
    shown = []
    for f in files:
        shown.append(
            {
                "diff": f,
                "anchor": "diff-" + f.path.replace("/", "-"),
                "head_url": urls.blob_url("", repo, head, f.path) if f.status != "deleted" else None,
                "base_url": urls.blob_url("", repo, base, f.old_path) if base and f.status != "added" else None,
                "history_url": commits_url(repo, head, f.path) if f.status != "deleted" else None,
            }
        )
    return shown


async def commits_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    name, revision = repo_and_revision(request)
    path = str(request.path_params["path"]).strip("/")
    page = _page(request)
    service = runtime.get(HistoryService)
    log = await run_in_threadpool(
        lambda: service.log(actor, name, revision, path, offset=(page - 1) * LOG_PAGE_DEFAULT)
    )
    shown_rev = revision or log.revision
    commits = [
        {
            "info": c,
            "url": urls.commit_url("", log.repo, c.sha),
            "tree_url": urls.tree_url("", log.repo, c.sha, path) if not path else None,
            "file_url": urls.blob_url("", log.repo, c.sha, path) if path else None,
        }
        for c in log.commits
    ]
    base = commits_url(log.repo, shown_rev, path)
    return render(
        request,
        "history/commits.html",
        log=log,
        commits=commits,
        revision=shown_rev,
        repo_url=urls.repo_url("", log.repo),
        path_url=(urls.blob_url("", log.repo, shown_rev, path) if path else urls.tree_url("", log.repo, shown_rev)),
        newer=f"{base}?page={page - 1}" if page > 1 else None,
        older=f"{base}?page={page + 1}" if log.has_more else None,
        page=page,
    )


async def commit_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    name, _ = repo_and_revision(request)
    detail = await run_in_threadpool(runtime.get(HistoryService).commit, actor, name, str(request.path_params["sha"]))
    info = detail.info
    return render(
        request,
        "history/commit.html",
        detail=detail,
        info=info,
        repo_url=urls.repo_url("", info.repo),
        tree_url=urls.tree_url("", info.repo, info.sha),
        parent_urls=[(p, urls.commit_url("", info.repo, p)) for p in info.parents],
        files=_files(info.repo, info.sha, detail.parent, detail.files),
        log_url=commits_url(info.repo, info.sha),
    )


async def compare_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    name, _ = repo_and_revision(request)
    spec = str(request.path_params["spec"])
    base, sep, head = spec.partition("...")
    if not sep or not base or not head:
        raise InvalidInput("compare addresses read <base>...<head>", hint="e.g. /-/compare/v1.0...main")
    after = request.query_params.get("after") or None
    comparison = await run_in_threadpool(
        lambda: runtime.get(HistoryService).compare(actor, name, base, head, after=after)
    )
    here = urls.compare_url("", comparison.repo, base, head)
    return render(
        request,
        "history/compare.html",
        c=comparison,
        repo_url=urls.repo_url("", comparison.repo),
        files=_files(comparison.repo, comparison.head_commit, comparison.base_commit, comparison.files),
        next_url=f"{here}?after={comparison.end_cursor}" if comparison.has_next_page else None,
        first_url=here if comparison.offset else None,
    )


# The length assumed before a file is read: any asked line is on a page then (http/lines.py clamps to it).
UNKNOWN_LENGTH = 2**31


def blame_rows(blame: Blame, hit: tuple[int, int] | None = None) -> Markup:
    """The blame table's rows as one HTML string: built here rather than in a Jinja loop, which costs ~60 us a row
    on a busy machine (a whole file of thousands of lines). Numbers are ints, every text from the repository is
    escaped."""
    out = []
    for line in blame.lines:
        who = ""
        if line.first:
            info = line.commit
            who = (
                f'<a href="{escape(urls.commit_url("", blame.repo, info.sha))}" title="{escape(info.subject)}">'
                f"{escape(info.sha[:8])}</a> {escape(info.author_name)} "
                f'<span class="muted">{info.committed_at.strftime("%Y-%m-%d")}</span>'
            )
        mark = ' class="hit"' if hit is not None and hit[0] <= line.number <= hit[1] else ""
        out.append(
            f'<tr id="L{line.number}"{mark}><td class="who">{who}</td>'
            f'<td class="num"><a href="#L{line.number}">{line.number}</a></td><td>{escape(line.text)}</td></tr>'
        )
    return Markup("\n".join(out))


async def blame_page(request: Request) -> Response:
    actor, runtime = actor_of(request), runtime_of(request)
    name, revision = repo_and_revision(request)
    path, hit = asked_lines(request, str(request.path_params["path"]))
    path = path.strip("/")
    service = runtime.get(HistoryService)

    def page() -> tuple[Blame, tuple[int, int]]:
        # The page of a long file holding the asked line (http/lines.py, as the file view): libgit2 blames that
        # page's lines only. The file's length is known once it is read: an asked line past the end (clamped to
        # the last page, as the file view does) costs a second call.
        asked = start_at(request)
        window = line_window(UNKNOWN_LENGTH, hit, asked)
        blame = service.blame(actor, name, revision, path, lines=window)
        real = line_window(blame.total_lines, hit, asked)
        if blame.total_lines and real[0] != window[0]:
            blame = service.blame(actor, name, revision, path, lines=real)
        return blame, real

    blame, window = await run_in_threadpool(page)
    shown = revision or blame.revision
    base = f"/{blame.repo}@{shown}/-/blame/{blame.path}"
    return render(
        request,
        "history/blame.html",
        blame=blame,
        revision=shown,
        repo_url=urls.repo_url("", blame.repo),
        file_url=urls.blob_url("", blame.repo, shown, blame.path),
        raw_url=urls.raw_url("", blame.repo, blame.commit, blame.path),
        history_url=commits_url(blame.repo, shown, blame.path),
        rows=blame_rows(blame, hit),
        window=window,
        pages=line_pages(base, blame.total_lines, window),
    )


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/{repo:repo}/-/commits{path:subpath}", commits_page, methods=["GET"]),
        Route("/{repo:repo}/-/commit/{sha}", commit_page, methods=["GET"]),
        Route("/{repo:repo}/-/compare/{spec:path}", compare_page, methods=["GET"]),
        Route("/{repo:repo}/-/blame/{path:path}", blame_page, methods=["GET"]),
    ]

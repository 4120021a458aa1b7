"""REST API of the repos capability under /.api/repos (thin: parse, call RepoService as the request's actor).

Repository names contain slashes, so sub-resources follow a `/-/` separator:
`GET /.api/repos?query=&limit=`, `POST /.api/repos` (add), `GET|DELETE /.api/repos/{name}`,
`GET /.api/repos/{name}/-/files?path=&revision=`, `GET /.api/repos/{name}/-/file?path=&startLine=&endLine=&revision=`,
`GET /.api/repos/{name}/-/refs?tagsOnly=&headsOnly=&containsCommit=&limit=`,
`POST /.api/repos/{name}/-/sync[?wait=false]` (wait: sync now and answer the outcome; false: queue it, 202).
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from codewell.core.errors import InvalidInput
from codewell.http.requests import actor_of, json_body, runtime_of
from codewell.repos import render
from codewell.repos.service import LIST_REFS_DEFAULT, LIST_REPOS_DEFAULT, RepoService
from codewell.runtime import Runtime


def _service(request: Request) -> RepoService:
    return runtime_of(request).get(RepoService)


def _int(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number (got {value!r})", hint=f"e.g. ?{name}=10") from None


def _bool(request: Request, name: str, *, default: bool = False) -> bool:
    value = request.query_params.get(name, "true" if default else "false").lower()
    if value not in ("true", "false", "1", "0", ""):
        raise InvalidInput(f"{name} must be true or false (got {value!r})", hint=f"e.g. ?{name}=true")
    return value in ("true", "1")


async def list_repos(request: Request) -> JSONResponse:
    limit = _int(request, "limit")
    page = await asyncio.to_thread(
        _service(request).list_repos,
        actor_of(request),
        request.query_params.get("query", ""),
        LIST_REPOS_DEFAULT if limit is None else limit,
    )
    return JSONResponse({"repos": [render.repo_json(r) for r in page.repos], "hasMoreResults": page.has_more})


async def add_repo(request: Request) -> JSONResponse:
    body = await json_body(request)
    if not isinstance(body.get("url"), str):
        raise InvalidInput("`url` (string) is required", hint='send {"url": "https://host/org/repo.git"}')
    name = body.get("name")
    private = body.get("private")  # absent: the site's repos.defaultVisibility
    if (name is not None and not isinstance(name, str)) or not isinstance(private, bool | None):
        raise InvalidInput("`name` must be a string and `private` a boolean", hint="or omit them")
    repo = await asyncio.to_thread(
        _service(request).add_repo, actor_of(request), body["url"], name=name, private=private
    )
    return JSONResponse(render.repo_json(repo), status_code=201)


async def get_repo(request: Request) -> JSONResponse:
    repo = await asyncio.to_thread(_service(request).get, actor_of(request), request.path_params["name"])
    return JSONResponse(render.repo_json(repo))


async def remove_repo(request: Request) -> JSONResponse:
    repo = await asyncio.to_thread(_service(request).remove_repo, actor_of(request), request.path_params["name"])
    return JSONResponse({"removed": repo.name})


async def list_files(request: Request) -> JSONResponse:
    listing = await asyncio.to_thread(
        _service(request).list_files,
        actor_of(request),
        request.path_params["name"],
        request.query_params.get("path", ""),
        request.query_params.get("revision") or None,
    )
    return JSONResponse({**render.files_json(listing), "notice": listing.notice})


async def read_file(request: Request) -> JSONResponse:
    content = await asyncio.to_thread(
        _service(request).read_file,
        actor_of(request),
        request.path_params["name"],
        request.query_params.get("path", ""),
        _int(request, "startLine"),
        _int(request, "endLine"),
        request.query_params.get("revision") or None,
    )
    return JSONResponse(render.file_json(content))


async def list_refs(request: Request) -> JSONResponse:
    limit = _int(request, "limit")
    refs = await asyncio.to_thread(
        _service(request).list_refs,
        actor_of(request),
        request.path_params["name"],
        tags_only=_bool(request, "tagsOnly"),
        heads_only=_bool(request, "headsOnly"),
        contains_commit=request.query_params.get("containsCommit") or None,
        limit=LIST_REFS_DEFAULT if limit is None else limit,
    )
    return JSONResponse(render.refs_json(refs))


async def sync_repo(request: Request) -> JSONResponse:
    if not _bool(request, "wait", default=True):
        # Long clones should not hold an HTTP request open: queue it for the scheduler instead.
        repo = await asyncio.to_thread(_service(request).request_sync, actor_of(request), request.path_params["name"])
        return JSONResponse({**render.repo_json(repo), "queued": True}, status_code=202)
    outcome = await asyncio.to_thread(_service(request).sync_repo, actor_of(request), request.path_params["name"])
    body = {**render.repo_json(outcome.repo), "ok": outcome.ok, "changed": outcome.changed, "error": outcome.error}
    return JSONResponse(body)


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The /.api/repos routes; the catch-all `{name:path}` route comes last."""
    prefix = "/.api/repos"
    return [
        Route(prefix, list_repos, methods=["GET"]),
        Route(prefix, add_repo, methods=["POST"]),
        Route(prefix + "/{name:path}/-/files", list_files, methods=["GET"]),
        Route(prefix + "/{name:path}/-/file", read_file, methods=["GET"]),
        Route(prefix + "/{name:path}/-/refs", list_refs, methods=["GET"]),
        Route(prefix + "/{name:path}/-/sync", sync_repo, methods=["POST"]),
        Route(prefix + "/{name:path}", get_repo, methods=["GET"]),
        Route(prefix + "/{name:path}", remove_repo, methods=["DELETE"]),
    ]

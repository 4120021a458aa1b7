"""The indexed router answers as Starlette's linear scan: same route, same 405, same redirect and 404."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.testclient import TestClient

import codewell.http.paths  # noqa: F401 - registers the repo and subpath convertors the app's routes use
from codewell.http.routing import IndexedRouter, literal_segments


def _named(name: str) -> object:
    async def endpoint(request: Request) -> Response:
        return PlainTextResponse(f"{name} {dict(request.path_params)}")

    return endpoint


PATHS = [
    "/",
    "/healthz",
    "/.api/users",
    "/.api/users/{username}",
    "/.api/users/{username}/repos",
    "/.api/mcp",
    "/.api/mcp/{rest:path}",
    "/.api/search",
    "/.static/{name}",
    "/site-admin/jobs/{job_id:int}/{action:str}",
    "/deepsearch/{token}",
    "/{repo:repo}/-/commits{path:subpath}",
    "/{repo:repo}/-/blob/{path:path}",
    "/{repo:repo}",
    "/x{tail}",
]
REQUESTS = [
    "/",
    "/healthz",
    "/healthz/",
    "/.api/users",
    "/.api/users/ann",
    "/.api/users/ann/repos",
    "/.api/users/ann/other",
    "/.api/mcp",
    "/.api/mcp/all",
    "/.api/mcp/a/b",
    "/.api/search",
    "/.api/searchx",
    "/.api",
    "/.static/app.css",
    "/site-admin/jobs/3/cancel",
    "/site-admin/jobs/x/cancel",
    "/deepsearch/abc",
    "/github.com/a/b/-/commits/main",
    "/github.com/a/b/-/blob/x.go",
    "/github.com/a/b",
    "/.api/mcp/-/blob/f",
    "/xyz",
    "/nowhere/at/all",
]


def _routes() -> list[BaseRoute]:
    routes: list[BaseRoute] = [Route(path, _named(path), methods=["GET"]) for path in PATHS]
    routes.insert(3, Route("/.api/users", _named("post users"), methods=["POST"]))
    return routes


def test_literal_segments() -> None:
    assert literal_segments(Route("/.api/mcp", _named("a"))) == (".api", "mcp")
    assert literal_segments(Route("/.api/mcp/{rest:path}", _named("a"))) == (".api", "mcp")
    assert literal_segments(Route("/.static/{name}", _named("a"))) == (".static",)
    assert literal_segments(Route("/x{tail}", _named("a"))) == ()
    assert literal_segments(Route("/", _named("a"))) == ("",)
    assert literal_segments(Mount("/.api", routes=[])) == ()  # not a plain route: tried for every path


def test_candidates_hold_every_route_that_matches() -> None:
    routes = _routes()
    router = IndexedRouter(routes)
    for path in REQUESTS:
        scope = {"type": "http", "path": path, "root_path": "", "method": "GET"}
        matching = [r for r in routes if r.matches(scope)[0] is not Match.NONE]
        candidates = router.candidates(path)
        assert all(r in candidates for r in matching), path
        assert len(candidates) < len(routes) or path.startswith("/x"), path  # the index does narrow


def test_answers_as_starlettes_router() -> None:
    indexed = Starlette(routes=_routes())
    indexed.router = IndexedRouter(_routes())
    plain = Starlette(routes=_routes())
    with TestClient(indexed) as a, TestClient(plain) as b:
        for path in REQUESTS:
            for method in ("GET", "POST"):
                x = a.request(method, path, follow_redirects=False)
                y = b.request(method, path, follow_redirects=False)
                assert (x.status_code, x.text, x.headers.get("location")) == (
                    y.status_code,
                    y.text,
                    y.headers.get("location"),
                ), (method, path)


def test_routes_added_later_are_found() -> None:
    router = IndexedRouter([Route("/a", _named("a"))])
    assert [r.path for r in router.candidates("/b")] == []  # type: ignore[attr-defined]
    router.routes.append(Route("/b", _named("b")))
    assert [r.path for r in router.candidates("/b")] == ["/b"]  # type: ignore[attr-defined]

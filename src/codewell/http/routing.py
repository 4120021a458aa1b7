"""The app's router: Starlette's, with the routes a request path could match found by its first two segments.

Starlette tries every route in order until one matches, and the app has ~180 of them: an MCP call (route 153)
ran 153 regular expressions before its handler (~0.15 ms of CPU per request). A route can only match a path
that starts with the literal text before its first parameter, so each route is filed under the complete path
segments of that text (at most two: `/.api/mcp/{rest:path}` under `.api`/`mcp`, `/{repo:repo}/-/blob/...` under
nothing), and a request tries only the routes filed under its own first segments or under nothing, in the
declared order. The answer is the one Starlette's loop gives: the first full match, else the first partial one
(a wrong method: 405); a path no candidate matches goes to Starlette's own code (trailing-slash redirect, 404).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Match, Route, Router
from starlette.types import Receive, Scope, Send

__all__ = ["IndexedRouter", "literal_segments"]

Key = tuple[str, ...]
_DEPTH = 2


def literal_segments(route: BaseRoute) -> Key:
    """The complete path segments (at most two) every path the route matches starts with; () when unknown."""
    if type(route) is not Route:  # mounts, hosts, websockets and subclasses may match in their own ways
        return ()
    path = route.path
    if not path.startswith("/"):
        return ()
    literal, brace, _ = path.partition("{")
    segments = literal[1:].split("/")
    if brace:
        segments.pop()  # the segment holding the first parameter is not known in full
    return tuple(segments[:_DEPTH])


class IndexedRouter(Router):
    # Set per instance by `_index` (never mutated in place: a rebuilt index replaces the whole dict).
    _by_key: dict[Key, tuple[BaseRoute, ...]] = {}  # noqa: RUF012
    _stamp: tuple[int, int] | None = None

    def _index(self) -> dict[Key, tuple[BaseRoute, ...]]:
        """Candidates by key, rebuilt when the route list changes (routes are added while the app is built)."""
        routes = self.routes
        stamp = (id(routes), len(routes))
        if self._stamp == stamp:
            return self._by_key
        keys = [literal_segments(route) for route in routes]
        index: dict[Key, tuple[BaseRoute, ...]] = {}
        for key in {key[:depth] for key in keys for depth in range(_DEPTH + 1)}:
            # Every route whose key is a prefix of this one (the wildcards, key ()), in the declared order.
            index[key] = tuple(route for route, own in zip(routes, keys, strict=True) if key[: len(own)] == own)
        self._by_key, self._stamp = index, stamp
        return index

    def candidates(self, route_path: str) -> Sequence[BaseRoute]:
        index = self._index()
        segments = tuple(route_path[1:].split("/", _DEPTH)[:_DEPTH])
        for depth in range(len(segments), -1, -1):
            found = index.get(segments[:depth])
            if found is not None:
                return found
        return ()

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().app(scope, receive, send)
            return
        if "router" not in scope:
            scope["router"] = self
        partial: BaseRoute | None = None
        partial_scope: Scope = {}
        for route in self.candidates(get_route_path(scope)):
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                scope["route"] = route
                scope.update(child_scope)
                await route.handle(scope, receive, send)
                return
            if match is Match.PARTIAL and partial is None:
                partial, partial_scope = route, child_scope
        if partial is not None:
            scope["route"] = partial
            scope.update(partial_scope)
            await partial.handle(scope, receive, send)
            return
        await super().app(scope, receive, send)  # no route matches: Starlette's redirect of slashes, or its 404

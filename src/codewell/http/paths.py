"""The path convertors of the repository addresses `codewell.http.urls` builds, shared by every page that
serves one (web's file views, history's commit log, commit and compare pages).

`{repo:repo}` matches `name` or `name@revision`; `{path:subpath}` matches nothing or `/...`. Registered when
this module is imported: a module that declares such routes imports it.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request


class RepoConvertor(Convertor[str]):
    """`name` or `name@revision`: segments that do not start with `.` or `-`, no `@` in the name.

    The revision may hold slashes (`feature/x`) but never a `/-/` (that starts the page part of the address).
    """

    regex = r"[^./@\-][^/@]*(?:/[^./@\-][^/@]*)*(?:@(?:(?!/-/)[^@])+)?"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


class SubpathConvertor(Convertor[str]):
    """Empty (the root, as `tree_url` prints it) or `/` followed by a path."""

    regex = r"(?:/.*)?"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("repo", RepoConvertor())
register_url_convertor("subpath", SubpathConvertor())


def repo_and_revision(request: Request) -> tuple[str, str | None]:
    """The `{repo:repo}` segment of a request split into the name and the revision (None: the default branch)."""
    name, _, revision = str(request.path_params["repo"]).partition("@")
    return name, revision or None

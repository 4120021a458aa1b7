"""Repository sources: turning site config `repositories` entries into the repositories they name.

Each source kind (`local`, `git`; code host listings later) is a discover function registered in
`SOURCE_KINDS`; the service reconciles what they return with the repos table.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from codewell.config.schema import GitRepoSource, LocalRepoSource, RepoSourceBase, SiteConfig
from codewell.core.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class RepoSpec:
    """A repository a source names: what the repos table should hold for it."""

    name: str
    clone_url: str  # credentials removed
    kind: str
    private: bool | None = None  # None: the site's repos.defaultVisibility (`default_private`)
    extra_branches: tuple[str, ...] = ()
    sync_interval_seconds: int = 3600
    credentials_env: str | None = None
    description: str = ""
    # Userinfo that was embedded in a configured URL; used for fetches, never stored or shown.
    secret: str | None = field(default=None, repr=False, compare=False)


Discover = Callable[[RepoSourceBase], list[RepoSpec]]

log = logging.getLogger(__name__)

_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/]+)@)?(?P<host>[^:/]+):(?P<path>(?!/).+)$")
# A name's parts: ASCII letters, digits and `._-~+@` (no whitespace, control character, quote, `%`, `?`, `#` or
# anything else a shell or a URL reads specially); matched whole (fullmatch: `$` alone would accept a final newline).
_NAME_PART = re.compile(r"[A-Za-z0-9._\-~+@]+")
_NAME_HINT = (
    "names are slash-separated parts of letters, digits and ._-~+@, starting with a letter or digit, and no part "
    "starts with '-', e.g. github.com/org/repo"
)
# Transports a repository may be fetched with; git itself is held to the same list (git.py's GIT_ALLOW_PROTOCOL),
# so `ext::` (runs a command) or another remote helper never runs.
URL_SCHEMES = ("https", "http", "ssh", "git", "file")
# git's `<transport>::<address>` syntax, which hands the address to a remote helper (`ext::` runs a command).
_REMOTE_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*::")


def split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without a password/token in its userinfo, and that userinfo (or None) for http(s) URLs.

    ssh user names (`git@host`) are not secrets and stay in the URL.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    return urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment)), unquote(userinfo)


def redact_url_credentials(text: str) -> str:
    """`text` with any `scheme://user:secret@` userinfo replaced by `scheme://***@`."""
    return re.sub(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/@\s]+@", r"\1***@", text)


def name_from_url(url: str, prefix: str | None = None) -> str:
    """The repository name of a clone URL: `host/path` without `.git` (or `<prefix>/path` when given).

    https://user:tok@github.com/org/repo.git → github.com/org/repo; git@host:org/repo.git → host/org/repo;
    file:///srv/git/x.git → localhost/srv/git/x.
    """
    clean, _ = split_credentials(url)
    scp = _SCP_LIKE.match(clean) if "://" not in clean else None
    if scp:
        host, path = scp.group("host"), scp.group("path")
    elif "://" in clean:
        parts = urlsplit(clean)
        host, path = (parts.hostname or "localhost"), parts.path
    else:
        host, path = "localhost", os.path.abspath(clean)
    path = path.strip("/").removesuffix(".git").strip("/")
    if not path:
        raise InvalidInput(
            f"cannot derive a repository name from {redact_url_credentials(url)!r}",
            hint="give a URL with a path, e.g. https://host/org/repo.git",
        )
    return check_name(f"{prefix.strip('/')}/{path}" if prefix else f"{host}/{path}")


def name_problem(name: str) -> str | None:
    """Why `name` is no usable repository name, or None. Checked like a user-chosen username: it must read the
    same to a shell (`codewell repos remove <name>`, no leading `-` or `~`), in a URL path and on disk."""
    if not name or len(name) > 500:
        return "a repository name has 1 to 500 characters"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "a repository name has no empty, '.' or '..' parts"
    bad = next((part for part in parts if not _NAME_PART.fullmatch(part)), None)
    if bad is not None:
        found = next((c for c in bad if not _NAME_PART.fullmatch(c)), bad[:1])
        return f"a repository name may contain only letters, digits, '/' and ._-~+@ (found {found!r})"
    if not name[0].isalnum():
        return "a repository name starts with a letter or a digit"
    if any(part.startswith("-") for part in parts):
        return "no part of a repository name starts with '-'"
    return None


def check_name(name: str) -> str:
    """`name` if it is a usable repository name (`name_problem`), else InvalidInput naming the broken rule."""
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInput(f"invalid repository name {name[:100]!r}: {problem}", hint=_NAME_HINT)
    return name


def default_private(config: SiteConfig) -> bool:
    """Whether a repository registered without saying who reads it is private (`repos.defaultVisibility`)."""
    return config.repos_default_visibility == "private"


def check_clone_url(url: str, *, local_must_exist: bool = True) -> str:
    """`url` if codewell may fetch it: a scheme git is allowed to use and no remote helper, and for `file://` (when
    `local_must_exist`: an added repository, whose every sync would fail otherwise) a git repository that exists
    here; InvalidInput otherwise. Site config sources pass False: a mount that is not there yet is a sync error
    that heals, shown on the repository, not a configuration error."""
    if _REMOTE_HELPER.match(url):
        raise InvalidInput(
            f"unsupported clone URL {redact_url_credentials(url)[:100]!r}: git remote helpers (`<transport>::`) are "
            "not fetched",
            hint="use https://, http://, ssh://, git:// or file:// (or a local path)",
        )
    if "://" not in url:
        return url  # scp-like ssh (`git@host:org/repo`): local paths are checked by the caller
    parts = urlsplit(url)
    if parts.scheme.lower() not in URL_SCHEMES:
        raise InvalidInput(
            f"unsupported clone URL scheme {parts.scheme!r}",
            hint="use https://, http://, ssh://, git:// or file:// (or a local path)",
        )
    if parts.scheme.lower() == "file" and local_must_exist:
        path = Path(unquote(parts.path))
        if not path.is_dir() or not is_git_dir(path):
            raise InvalidInput(
                f"{redact_url_credentials(url)!r} is not a git repository", hint="give the path of a git repository"
            )
    return url


def _matches(relpath: str, source: RepoSourceBase) -> bool:
    if source.include and not any(fnmatch.fnmatch(relpath, pattern) for pattern in source.include):
        return False
    return not any(fnmatch.fnmatch(relpath, pattern) for pattern in source.exclude)


def is_git_dir(path: Path) -> bool:
    """True for a work tree with `.git` or a bare repository directory."""
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def find_git_repos(root: Path, max_depth: int = 8) -> list[Path]:
    """Git repositories under `root` (root itself when it is one), not descending into repositories."""
    if is_git_dir(root):
        return [root]
    found: list[Path] = []
    stack = [(root, 0)]
    while stack:
        directory, depth = stack.pop()
        try:
            children = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            continue
        for child in children:
            if is_git_dir(child):
                found.append(child)
            elif depth + 1 < max_depth:
                stack.append((child, depth + 1))
    return sorted(found)


def discover_local(source: RepoSourceBase) -> list[RepoSpec]:
    """Every git repository under a local source's path, named `<prefix>/<relative path>`."""
    assert isinstance(source, LocalRepoSource)
    root = Path(source.path).expanduser().resolve()
    prefix = (source.prefix or "local").strip("/")
    specs = []
    for repo_dir in find_git_repos(root) if root.is_dir() else []:
        relpath = repo_dir.name if repo_dir == root else repo_dir.relative_to(root).as_posix()
        relpath = relpath.removesuffix(".git")
        if not _matches(relpath, source):
            continue
        name = f"{prefix}/{relpath}"
        problem = name_problem(name)
        if problem is not None:
            # One oddly named directory must not hide the rest of the source's repositories.
            log.warning("skipping local repository %r: %s", name, problem)
            continue
        specs.append(
            RepoSpec(
                name=name,
                clone_url=str(repo_dir),
                kind="local",
                private=source.private,
                extra_branches=tuple(source.branches),
                sync_interval_seconds=source.sync_interval_seconds,
            )
        )
    return specs


def discover_git(source: RepoSourceBase) -> list[RepoSpec]:
    """One repository per configured clone URL, named `host/path` (or `<prefix>/path`)."""
    assert isinstance(source, GitRepoSource)
    specs = []
    for url in source.urls:
        check_clone_url(url, local_must_exist=False)
        name = name_from_url(url, source.prefix)
        if not _matches(name, source):
            continue
        clean, secret = split_credentials(url)
        specs.append(
            RepoSpec(
                name=name,
                clone_url=clean,
                kind="git",
                private=source.private,
                extra_branches=tuple(source.branches),
                sync_interval_seconds=source.sync_interval_seconds,
                credentials_env=source.credentials_env,
                secret=secret,
            )
        )
    return specs


SOURCE_KINDS: dict[str, Discover] = {"local": discover_local, "git": discover_git}


def register_source_kind(kind: str, discover: Discover) -> None:
    """Add a source kind (e.g. a code host listing); its config model must join config.schema.RepoSource."""
    SOURCE_KINDS[kind] = discover


def discover(source: RepoSourceBase) -> list[RepoSpec]:
    """The repositories one configured source names."""
    kind = getattr(source, "kind", "")
    return SOURCE_KINDS[kind](source)

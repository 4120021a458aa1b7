"""Setting up code host connections without editing JSON: create one from a form, test what its token can do.

`ConnectionService.create` adds an entry to the site config's `codeHostConnections` (the one place connections
live: the schedule discovers the new one within seconds, as if it had been written by hand). A pasted token is
written to `<shared dir>/codehosts/<id>.token` (mode 0600) and the entry names that file (`tokenFile`), so that
the token never sits in the site config; an admin may name an environment variable (`tokenEnv`) instead.

`ConnectionService.remove` takes a connection out of `codeHostConnections` and deletes the token file the form
wrote. Its repositories stay registered and searchable unless the admin asks to remove them too (they hold
the code people may still want to read; nothing fetches them with the connection's token any more, so a
private one stops updating). What the connection synced is dropped at once: the read grants it wrote (so
stale permissions never outlive the connection; its private repositories are then read by site admins and
explicit grants only) and its discovery and sync records (an ID used again starts afresh).

`ConnectionService.test` is a probe that changes nothing: it reads the token, asks the host who the token
belongs to and which scopes it carries (where the host says), lists the repositories discovery would find
(without registering any) and says whether permission sync is on. Each check is a line with its outcome, so an
admin sees what works and what does not before (or instead of) waiting for a sync to fail.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import json5
from pydantic import ValidationError
from sqlalchemy import delete

from codewell.accounts.audit import AuditService
from codewell.authz import Action, ensure
from codewell.codehosts.clients import HostClient, client_for
from codewell.codehosts.models import CodeHostRepoRow, ConnectionStateRow, UserSyncRow
from codewell.codehosts.service import CodeHostService, read_token
from codewell.config import SiteConfig
from codewell.config.codehosts import CODE_HOST_KINDS, CodeHostConnection
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import InvalidInput
from codewell.hostapi.http import HostError, Missing
from codewell.repos.service import RepoService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

# How each kind names the groups of repositories it discovers (the form has one field for them).
SCOPE_FIELD = {
    "github": "orgs",
    "gitlab": "groups",
    "bitbucketcloud": "workspaces",
    "bitbucketserver": "projects",
    "gerrit": "projects",
}
KIND_LABELS = {
    "github": "GitHub or GitHub Enterprise Server",
    "gitlab": "GitLab",
    "bitbucketcloud": "Bitbucket Cloud",
    "bitbucketserver": "Bitbucket Server / Data Center",
    "gerrit": "Gerrit",
}
# The scopes discovery and permission sync need, per kind whose API reports a token's scopes.
NEEDED_SCOPES = {"github": ("repo", "read:org"), "gitlab": ("read_api",)}
NO_SCOPES = {kind: f"{label} does not report a token's scopes" for kind, label in KIND_LABELS.items()}
SAMPLE = 5  # repository names shown by a probe
CONFIG_HINT = "fix the site config on /site-admin/configuration first"


@dataclass(frozen=True, slots=True)
class NewConnection:
    """What the form asks for. `token` is the secret itself (stored in a file), `token_env` the name of an
    environment variable holding it; exactly one of them."""

    id: str
    kind: str
    url: str = ""
    display_name: str = ""
    token: str = ""
    token_env: str = ""
    username: str = ""
    scopes: tuple[str, ...] = ()  # orgs, groups, workspaces or projects, by kind
    repos: tuple[str, ...] = ()
    authorization: bool = False

    def entry(self, token_file: str | None) -> dict[str, Any]:
        """The `codeHostConnections` entry (only what was given: defaults stay implicit, as a person writes it)."""
        entry: dict[str, Any] = {"id": self.id, "kind": self.kind}
        if self.url:
            entry["url"] = self.url
        if self.display_name:
            entry["displayName"] = self.display_name
        if token_file is not None:
            entry["tokenFile"] = token_file
        elif self.token_env:
            entry["tokenEnv"] = self.token_env
        if self.username:
            entry["username"] = self.username
        if self.scopes:
            entry[SCOPE_FIELD.get(self.kind, "orgs")] = list(self.scopes)
        if self.repos:
            entry["repos"] = list(self.repos)
        if self.authorization:
            entry["authorization"] = True
        return entry


@dataclass(frozen=True, slots=True)
class Check:
    """One line of a probe: what was checked, whether it worked (None: not applicable or not reported), and what
    was found or how to fix it."""

    name: str
    ok: bool | None
    detail: str


@dataclass
class Probe:
    connection_id: str
    label: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.ok is not False for check in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "connection_id": self.connection_id,
            "ok": self.ok,
            "checks": [asdict(check) for check in self.checks],
        }


@dataclass(frozen=True, slots=True)
class Removal:
    """What removing a connection did: the repositories it had registered that stay, and those removed."""

    id: str
    label: str
    kept: list[str]
    removed: list[str]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _field_of(loc: tuple[int | str, ...]) -> str:
    """The form's name of a validation error's location (the config's alias: what docs/codehosts.md uses)."""
    names = {name: info.alias or name for name, info in CodeHostConnection.model_fields.items()}
    parts = [names.get(str(p), str(p)) for p in loc if not isinstance(p, int)]
    return ".".join(parts)


class ConnectionService:
    """Create code host connections in the site config and probe them (site admins)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.hosts = runtime.get(CodeHostService)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def token_dir(self) -> Path:
        return self.runtime.settings.shared_dir / "codehosts"

    # -- create ---------------------------------------------------------------------------------------------
    def add(self, actor: Actor, new: NewConnection) -> CodeHostConnection:
        """Validate `new`, store its token, append it to `codeHostConnections` and reload the site config.

        InvalidInput names the field and says how to fix it; nothing is written when anything is wrong (the token
        file is written last, just before the config, and removed again if the config cannot be written)."""
        ensure(actor, Action.SITE_ADMIN)
        if new.kind not in CODE_HOST_KINDS:
            raise InvalidInput(f"kind: choose one of {', '.join(CODE_HOST_KINDS)}")
        if bool(new.token) == bool(new.token_env):
            raise InvalidInput(
                "token: paste the token, or name the environment variable that holds it (one of the two)",
                hint="the token is stored in a file only the server can read, never in the site config",
            )
        if any(c.id == new.id for c in self.hosts.connections()):
            raise InvalidInput(f"id: a connection named {new.id!r} exists already", hint="choose another id")
        token_file = self.token_dir() / f"{new.id}.token"
        entry = new.entry(str(token_file) if new.token else None)
        try:
            connection = CodeHostConnection.model_validate(entry)
        except ValidationError as exc:
            problems = [
                f"{_field_of(tuple(e['loc'])) or 'connection'}: {str(e['msg']).removeprefix('Value error, ')}"
                for e in exc.errors()
            ]
            raise InvalidInput("; ".join(problems)) from None
        store = self.runtime.site_config
        text = store.path.read_text(encoding="utf-8")
        try:
            data = json5.loads(text) if text.strip() else {}
        except ValueError:
            raise InvalidInput("the site config file is not valid JSON", hint=CONFIG_HINT) from None
        if not isinstance(data, dict):
            raise InvalidInput("the site config file is not a JSON object", hint=CONFIG_HINT)
        data["codeHostConnections"] = [*data.get("codeHostConnections", []), entry]
        try:
            SiteConfig.model_validate(data)
        except ValidationError as exc:
            raise InvalidInput(
                f"the site config would be invalid: {exc.errors()[0]['msg']}", hint=CONFIG_HINT
            ) from None
        if new.token:
            _write_secret(token_file, new.token.strip())
        try:
            store.write_text(json.dumps(data, indent=2))
        except OSError:
            token_file.unlink(missing_ok=True)
            raise
        return connection

    # -- remove ---------------------------------------------------------------------------------------------
    def registered(self, actor: Actor) -> dict[str, list[str]]:
        """The repositories each connection registered (by connection ID, names sorted)."""
        ensure(actor, Action.REPOS_MANAGE)
        by_source: dict[str, list[str]] = {}
        for repo in self.runtime.get(RepoService).all_repos(INTERNAL):
            by_source.setdefault(repo.source, []).append(repo.name)
        return {c.id: sorted(by_source.get(c.source, [])) for c in self.hosts.connections()}

    def remove(self, actor: Actor, connection_id: str, *, with_repos: bool = False) -> Removal:
        """Take the connection out of the site config, delete the token file the form wrote for it and what it
        synced (read grants, discovery and sync records); remove its repositories too when `with_repos`.

        NotFound for an unknown ID; InvalidInput when the site config file cannot be read as JSON (nothing
        changed then)."""
        ensure(actor, Action.SITE_ADMIN)
        connection = self.hosts.connection(actor, connection_id)
        store = self.runtime.site_config
        data = self._config_data()
        entries = data.get("codeHostConnections", [])
        data["codeHostConnections"] = [e for e in entries if not (isinstance(e, dict) and e.get("id") == connection.id)]
        if len(data["codeHostConnections"]) == len(entries):
            # Defined by an include or an override the file does not hold: removing here would not take.
            raise InvalidInput(
                f"connection {connection.id!r} is not in the site config file {store.path}",
                hint="remove it where it is defined",
            )
        repos = self.runtime.get(RepoService)
        names = self.registered(actor).get(connection.id, [])
        store.write_text(json.dumps(data, indent=2))
        # Only the file the form wrote (a tokenFile written by hand may be shared with something else).
        if connection.token_file and Path(connection.token_file) == self.token_dir() / f"{connection.id}.token":
            Path(connection.token_file).unlink(missing_ok=True)
        repos.clear_permission_source(INTERNAL, connection.source)
        with self.hosts.db.session() as session:
            for table in (ConnectionStateRow, CodeHostRepoRow, UserSyncRow):
                session.execute(delete(table).where(table.connection_id == connection.id))
        removed: list[str] = []
        if with_repos:
            for name in names:
                repos.remove_repo(INTERNAL, name)
                removed.append(name)
        kept = [n for n in names if n not in removed]
        self.runtime.get(AuditService).record(
            "codehosts.connection",
            "removed",
            actor=actor,
            details={"connection": connection.id, "reposKept": len(kept), "reposRemoved": len(removed)},
        )
        return Removal(connection.id, connection.label, kept, removed)

    def _config_data(self) -> dict[str, Any]:
        text = self.runtime.site_config.path.read_text(encoding="utf-8")
        try:
            data = json5.loads(text) if text.strip() else {}
        except ValueError:
            raise InvalidInput("the site config file is not valid JSON", hint=CONFIG_HINT) from None
        if not isinstance(data, dict):
            raise InvalidInput("the site config file is not a JSON object", hint=CONFIG_HINT)
        return data

    # -- test -----------------------------------------------------------------------------------------------
    def test(self, actor: Actor, connection_id: str) -> Probe:
        """Probe a connection: token, identity, scopes, repositories visible, permission sync. Changes nothing."""
        connection = self.hosts.connection(actor, connection_id)
        probe = Probe(connection.id, connection.label)
        checks = probe.checks
        try:
            token = read_token(connection)
        except HostError as exc:
            checks.append(Check("token", False, exc.message))
            return probe
        where = f"tokenEnv {connection.token_env}" if connection.token_env else "tokenFile"
        checks.append(Check("token", True, f"read from {where}"))
        client = client_for(connection, token)
        try:
            checks.extend(_identity(client))
            checks.append(_repositories(client))
        except HostError as exc:
            checks.append(Check("token accepted", False, f"{exc.message}: check the token and the URL {client.api}"))
            return probe
        finally:
            client.http.close()  # a one-off conversation: its sockets go now, not with the garbage collector
        if not connection.authorization:
            checks.append(Check("permission sync", None, "off: authorization is false (only site admins and grants)"))
        elif self.hosts.permissions_enabled(connection):
            checks.append(Check("permission sync", True, "on: private repositories follow the host's permissions"))
        else:
            checks.append(Check("permission sync", False, "off: the license plan does not include permission sync"))
        return probe


def _write_secret(path: Path, secret: str) -> None:
    """`secret` into `path`, readable by this user only from the first byte (created 0600, then renamed)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secret + "\n")
    os.replace(tmp, path)


def _identity(client: HostClient) -> list[Check]:
    """Who the token belongs to and, where the host says, its scopes; HostError when the token is refused."""
    kind = client.connection.kind
    if kind == "bitbucketserver":
        # Its REST API does not say whose a token is; the whoami servlet does (empty: anonymous, token ignored).
        who = client.http.text(f"{client.connection.url}plugins/servlet/applinks/whoami").strip()
        if not who:
            raise HostError("the host answered as to an anonymous user: it did not take the token")
        return [Check("token accepted", True, f"signed in as {who}"), Check("scopes", None, NO_SCOPES[kind])]
    path = {"gerrit": "accounts/self"}.get(kind, "user")
    page = client.http.get(path)
    body = page.body if isinstance(page.body, dict) else {}
    who = str(body.get("login") or body.get("username") or body.get("display_name") or body.get("name") or "?")
    checks = [Check("token accepted", True, f"signed in as {who}")]
    needed = NEEDED_SCOPES.get(kind)
    if needed is None:
        checks.append(Check("scopes", None, NO_SCOPES[kind]))
        return checks
    scopes = _scopes(client, page.headers)
    if scopes is None:
        checks.append(Check("scopes", None, "not reported for this token (a fine-grained or project token)"))
        return checks
    missing = [s for s in needed if s not in scopes and not (s == "read_api" and "api" in scopes)]
    listed = ", ".join(sorted(scopes)) or "none"
    if missing:
        detail = f"{listed}; missing {', '.join(missing)}: private repositories or organizations may not be listed"
        checks.append(Check("scopes", False, detail))
    else:
        checks.append(Check("scopes", True, listed))
    return checks


def _scopes(client: HostClient, headers: Any) -> set[str] | None:
    if client.connection.kind == "github":
        header = headers.get("X-OAuth-Scopes")
        return None if header is None else {s.strip() for s in str(header).split(",") if s.strip()}
    try:
        body = client.http.get("personal_access_tokens/self").body  # GitLab 15.5 and later
    except (Missing, HostError):
        return None
    return {str(s) for s in body.get("scopes", [])} if isinstance(body, dict) else None


def _repositories(client: HostClient) -> Check:
    """What discovery would find now (nothing is registered)."""
    try:
        found = client.discover()
    except HostError as exc:
        return Check("repositories", False, exc.message)
    private = sum(1 for r in found.repos if r.visibility != "public")
    names = ", ".join(r.path for r in found.repos[:SAMPLE])
    more = f" and {len(found.repos) - SAMPLE} more" if len(found.repos) > SAMPLE else ""
    detail = f"{len(found.repos)} visible ({private} private)" + (f": {names}{more}" if names else "")
    problems = "; ".join(found.warnings)
    if problems:
        return Check("repositories", False, f"{detail}; not listed: {problems}")
    if not found.repos:
        return Check("repositories", False, "none visible: check the organizations, groups or projects, and the scopes")
    return Check("repositories", True, detail)

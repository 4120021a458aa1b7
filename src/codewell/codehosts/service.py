"""Code host connections: discovering repositories and syncing who may read the private ones.

`CodeHostService` reads `codeHostConnections` from the site config. For each connection it
- discovers repositories through the host's API (clients.py) and registers them with repos (source
  `codehost:<id>`), mirrored with the connection's token: each repository names `CODEWELL_CODEHOST_<ID>_GIT` as
  its credentials, which this service answers to repos at each fetch (`git_credential`, a credential source),
  read from the connection's token at that moment; it reaches only the git child fetching from this host (its
  own environment), never `os.environ`, argv, URLs or logs;
- removes repositories that disappeared upstream once they stayed missing for `removalGraceSeconds`
  (audited as `codehosts.repo` / `removed`);
- receives push webhooks (`receive_webhook`, verified with the connection's `webhookSecretEnv`/`webhookSecretFile`)
  and asks repos for a sync of the pushed repository at once (webhooks.py);
- when permissions are enabled (`permissions_enabled`), writes repos' permission table with source
  `codehost:<id>` in both directions: user-centric (each linked user's own OAuth token, refreshed when it
  expired) and repo-centric (members of each private repository, mapped to users by linked identities).

Failure never widens visibility and never loses what was synced: a host that is down, rate-limited or
refusing a token leaves the permission rows as they were and records the error in the status.
Upstream private and internal repositories are private here: without permission sync only site admins and
explicit grants read them.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import urlsplit

import requests
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from codewell.accounts.audit import AuditService
from codewell.auth.service import AuthService, Identity, LinkedIdentity
from codewell.authz import Action, UserRef, ensure
from codewell.codehosts.clients import HostClient, HostRepo, api_base, client_for
from codewell.codehosts.metrics import WEBHOOKS
from codewell.codehosts.models import CodeHostRepoRow, ConnectionStateRow, UserSyncRow
from codewell.codehosts.webhooks import ADDRESSES, HOSTS, Delivery, Event, HostHooks, RepoKeys, payload, unverified
from codewell.config.codehosts import CodeHostConnection
from codewell.core.actors import INTERNAL, Actor
from codewell.core.errors import CodewellError, InvalidInput, NotFound, Unauthenticated
from codewell.db.base import utcnow
from codewell.hostapi.http import HostError, HostHTTP, new_session
from codewell.http.urls import webhook_url
from codewell.licensing.service import PERMISSION_SYNC_FEATURE, LicensingService
from codewell.repos.git import GitCommandError
from codewell.repos.service import NewRepo, Repo, RepoService, check_name

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

CONCURRENCY = 8
SIGN_IN_WAIT_SECONDS = 10.0
T = TypeVar("T")
NOT_FOUND_HINT = "`codewell codehosts status` lists the configured connections"


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    id: str
    kind: str
    url: str
    label: str
    authorization: bool
    permissions_enabled: bool
    last_sync_at: datetime | None = None
    last_success_at: datetime | None = None
    next_sync_at: datetime | None = None
    repos_found: int = 0
    error: str | None = None
    warnings: tuple[str, ...] = ()
    perms_synced_at: datetime | None = None
    perms_error: str | None = None
    webhook_url: str = ""  # where this host posts push webhooks
    webhook_secret_set: bool = False  # without a secret the connection accepts no webhook

    @property
    def permissions_off_reason(self) -> str | None:
        """Why permission sync is off (the connection's config, or the plan), or None when it is on."""
        if not self.authorization:
            return "off: authorization is false in the connection config"
        if not self.permissions_enabled:
            return f"off: the license plan does not include permission sync ({PERMISSION_SYNC_FEATURE})"
        return None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["warnings"] = list(self.warnings)
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in data.items()}


@dataclass(frozen=True, slots=True)
class UserSyncStatus:
    connection_id: str
    label: str
    linked: bool
    last_synced_at: datetime | None
    repo_count: int
    error: str | None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in data.items()}

    @property
    def summary(self) -> str:
        if not self.linked:
            return "no linked account: none of this host's private repositories are visible"
        when = f"{self.last_synced_at:%Y-%m-%d %H:%M} UTC" if self.last_synced_at else "never"
        text = f"last synced {when}, {self.repo_count} private repositories"
        return f"{text}, error: {self.error}" if self.error else text


@dataclass
class SyncReport:
    connection_id: str
    found: int = 0
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    pending_removal: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    repos_permissions_synced: int = 0
    users_permissions_synced: int = 0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def git_env_name(connection: CodeHostConnection) -> str:
    """The environment variable holding `user:token` for git fetches of this connection's repositories."""
    return "CODEWELL_CODEHOST_" + re.sub(r"[^A-Z0-9]", "_", connection.id.upper()) + "_GIT"


def read_token(connection: CodeHostConnection) -> str:
    """The connection's token from its environment variable or file; HostError (safe message) when absent."""
    if connection.token_env is not None:
        token = os.environ.get(connection.token_env, "").strip()
        if not token:
            raise HostError(f"environment variable {connection.token_env} (tokenEnv) is not set")
        return token
    path = Path(str(connection.token_file)).expanduser()
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise HostError(f"cannot read tokenFile {path}: {exc.strerror}") from None
    if not token:
        raise HostError(f"tokenFile {path} is empty")
    return token


def read_webhook_secret(connection: CodeHostConnection) -> str | None:
    """The connection's webhook secret, or None when it has none (unset, empty or unreadable: such a connection
    accepts no webhook, it never accepts an empty secret)."""
    if connection.webhook_secret_env is not None:
        return os.environ.get(connection.webhook_secret_env, "").strip() or None
    if connection.webhook_secret_file is None:
        return None
    try:
        return Path(connection.webhook_secret_file).expanduser().read_text().strip() or None
    except OSError:
        return None


class CodeHostService:
    """Discovery and permission sync of every configured code host connection."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.db = runtime.db
        self.repos = runtime.get(RepoService)
        self.auth = runtime.get(AuthService)
        self.audit = runtime.get(AuditService)
        self.concurrency = CONCURRENCY
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        # ETags per connection and token owner, kept across syncs for conditional requests.
        self._etags: dict[str, dict[str, Any]] = {}
        # One pooled HTTP session per connection, shared by its users' syncs.
        self._sessions: dict[str, requests.Session] = {}
        # The connections' git credentials, for this process's fetches of their repositories (never os.environ).
        self.repos.add_credential_source(self.git_credential)

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    # -- configuration --------------------------------------------------------------------------------------
    def connections(self) -> list[CodeHostConnection]:
        return list(self.runtime.config.code_host_connections)

    def connection(self, actor: Actor, connection_id: str) -> CodeHostConnection:
        ensure(actor, Action.REPOS_MANAGE)
        for connection in self.connections():
            if connection.id == connection_id:
                return connection
        raise NotFound(f"code host connection {connection_id!r} not found", hint=NOT_FOUND_HINT)

    def permissions_enabled(self, connection: CodeHostConnection) -> bool:
        """Whether repository permissions from this connection are synced and enforced: the one place that
        decides it. It needs the connection's `authorization` and the plan's `permission-sync` feature; without
        the feature the schedule drops what the connection synced (`run_due`), so that private upstream
        repositories fall back to site admins and explicit grants: the gate fails closed."""
        return connection.authorization and self.runtime.get(LicensingService).has_feature(PERMISSION_SYNC_FEATURE)

    def _session(self, connection: CodeHostConnection) -> requests.Session:
        """The connection's pooled session: every conversation with its API reuses its connections, and `close`
        closes them (a session per call left its sockets to the garbage collector)."""
        with self._guard:
            session = self._sessions.get(connection.id)
            if session is None:
                session = self._sessions[connection.id] = new_session(api_base(connection))
            return session

    def close(self) -> None:
        """Close the pooled sessions' connections (Runtime.close)."""
        with self._guard:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def _client(self, connection: CodeHostConnection) -> HostClient:
        client = client_for(connection, read_token(connection), self._session(connection))
        client.http.use_etags(self._etags.setdefault(f"{connection.id}\n", {}))
        return client

    def git_credential(self, repo: Repo, name: str) -> str | None:
        """The git secret of a repository this service registered (repos' credential source, asked at each fetch):
        its connection's `user:token`, read now (a rotated token file counts at once). None for any other
        repository, so that a name alone (`credentialsEnv` of a hand-added repository) never obtains a token."""
        for connection in self.connections():
            if repo.source == connection.source and name == git_env_name(connection):
                try:
                    return client_for(connection, read_token(connection), self._session(connection)).git_secret()
                except HostError as exc:
                    raise GitCommandError(f"code host connection {connection.id}: {exc.message}") from None
        return None

    # -- status ---------------------------------------------------------------------------------------------
    def status(self, actor: Actor) -> list[ConnectionStatus]:
        """Every configured connection with its last sync (site admins)."""
        ensure(actor, Action.REPOS_MANAGE)
        with self.db.session() as session:
            states = {row.connection_id: row for row in session.scalars(select(ConnectionStateRow))}
            result = []
            for connection in self.connections():
                row = states.get(connection.id)
                base = ConnectionStatus(
                    id=connection.id,
                    kind=connection.kind,
                    url=connection.url,
                    label=connection.label,
                    authorization=connection.authorization,
                    permissions_enabled=self.permissions_enabled(connection),
                    webhook_url=webhook_url(self.runtime.external_url, ADDRESSES[connection.kind]),
                    webhook_secret_set=read_webhook_secret(connection) is not None,
                )
                if row is not None:
                    base = ConnectionStatus(
                        **{
                            **asdict(base),
                            "last_sync_at": row.last_sync_at,
                            "last_success_at": row.last_success_at,
                            "next_sync_at": row.next_sync_at,
                            "repos_found": row.repos_found,
                            "error": row.last_error,
                            "warnings": tuple(w for w in row.warnings.split("\n") if w),
                            "perms_synced_at": row.perms_synced_at,
                            "perms_error": row.perms_error,
                        }
                    )
                result.append(base)
        return result

    def user_status(self, actor: Actor, user_id: int) -> list[UserSyncStatus]:
        """The user's permission sync per connection with permissions (the user themself or a site admin)."""
        ensure(actor, Action.USER_READ, UserRef(user_id))
        with self.db.session() as session:
            rows = {
                r.connection_id: r for r in session.scalars(select(UserSyncRow).where(UserSyncRow.user_id == user_id))
            }
        result = []
        for connection in self.connections():
            if not self.permissions_enabled(connection):
                continue
            row = rows.get(connection.id)
            linked = bool(self.auth.linked_identities(INTERNAL, connection.kind, connection.url, user_id))
            result.append(
                UserSyncStatus(
                    connection.id,
                    connection.label,
                    linked,
                    row.last_synced_at if row else None,
                    row.repo_count if row else 0,
                    row.error if row else None,
                )
            )
        return result

    # -- discovery ------------------------------------------------------------------------------------------
    def sync_connection(self, actor: Actor, connection_id: str, *, permissions: bool = True) -> SyncReport:
        """Discover now, register/update/remove repositories, then (when enabled) sync permissions."""
        connection = self.connection(actor, connection_id)
        report = self.discover(connection)
        if permissions and report.error is None and self.permissions_enabled(connection):
            report.repos_permissions_synced = self.sync_repos_permissions(connection)
            report.users_permissions_synced = self.sync_users_permissions(connection)
        return report

    def discover(self, connection: CodeHostConnection) -> SyncReport:
        report = SyncReport(connection.id)
        with self._lock(f"discover:{connection.id}"):
            now = utcnow()
            try:
                client = self._client(connection)
                found = client.discover()
            except HostError as exc:
                report.error = exc.message
                self._record_discovery(connection, now, report, success=False)
                log.warning("code host %s: discovery failed: %s", connection.id, exc.message)
                return report
            report.found = len(found.repos)
            report.warnings = found.warnings
            self._reconcile(connection, found.repos, complete=not found.warnings, now=now, report=report)
            self._record_discovery(connection, now, report, success=True)
        if report.added or report.removed:
            log.info(
                "code host %s: %d found, %d added, %d removed",
                connection.id,
                report.found,
                len(report.added),
                len(report.removed),
            )
        return report

    def repo_name(self, connection: CodeHostConnection, repo: HostRepo) -> str:
        prefix = connection.prefix or urlsplit(connection.url).hostname or connection.id
        return f"{prefix.strip('/')}/{repo.path}"

    def _reconcile(
        self,
        connection: CodeHostConnection,
        found: list[HostRepo],
        *,
        complete: bool,
        now: datetime,
        report: SyncReport,
    ) -> None:
        with self.db.session() as session:
            rows = {
                r.external_id: r
                for r in session.scalars(select(CodeHostRepoRow).where(CodeHostRepoRow.connection_id == connection.id))
            }
            known = {r.repo_name: r.external_id for r in rows.values()}
        existing = {repo.name: repo for repo in self.repos.all_repos(INTERNAL)}
        upserts = self._register(connection, found, rows, known, existing, report)
        removals = self._track(connection, upserts, complete=complete, now=now, report=report)
        for name in removals:
            current = existing.get(name)
            if current is not None and current.source == connection.source:
                self.repos.remove_repo(INTERNAL, name)
                self.audit.record(
                    "codehosts.repo",
                    "removed",
                    actor=INTERNAL,
                    reason="disappeared upstream",
                    details={"connection": connection.id, "repo": name},
                )
                report.removed.append(name)

    def _register(
        self,
        connection: CodeHostConnection,
        found: list[HostRepo],
        rows: dict[str, CodeHostRepoRow],
        known: dict[str, str],
        existing: dict[str, Repo],
        report: SyncReport,
    ) -> list[tuple[HostRepo, str]]:
        """Add or update the repos rows of what was found; (repository, name) of each one kept."""
        env = git_env_name(connection)
        upserts: list[tuple[HostRepo, str]] = []
        new: list[NewRepo] = []
        for repo in found:
            row = rows.get(repo.external_id)
            name = row.repo_name if row is not None else self.repo_name(connection, repo)
            private = repo.visibility != "public"
            current = existing.get(name)
            if current is None:
                if name in known and known[name] != repo.external_id:
                    report.warnings.append(f"{repo.path}: name {name} is used by another repository of this host")
                    continue
                try:
                    check_name(name)
                except CodewellError as exc:
                    report.warnings.append(f"{repo.path}: {exc.message}")
                    continue
                new.append(
                    NewRepo(
                        name=name,
                        clone_url=repo.clone_url,
                        private=private,
                        fork=repo.fork,
                        archived=repo.archived,
                        description=repo.description,
                        credentials_env=env,
                        sync_interval_seconds=connection.repo_sync_interval_seconds,
                    )
                )
            elif current.source != connection.source:
                report.warnings.append(f"{repo.path}: {name} is already registered by {current.source}")
                continue
            elif (current.private, current.fork, current.archived, current.description, current.clone_url) != (
                private,
                repo.fork,
                repo.archived,
                repo.description,
                repo.clone_url,
            ):
                self.repos.update_repo(
                    INTERNAL,
                    name,
                    private=private,
                    fork=repo.fork,
                    archived=repo.archived,
                    description=repo.description,
                    clone_url=repo.clone_url,
                    credentials_env=env,
                )
                report.updated.append(name)
            upserts.append((repo, name))
        added = set(self.repos.add_repos(INTERNAL, new, source=connection.source))
        report.added = [r.name for r in new if r.name in added]
        return [(repo, name) for repo, name in upserts if name in added or name in existing]

    def _track(
        self,
        connection: CodeHostConnection,
        upserts: list[tuple[HostRepo, str]],
        *,
        complete: bool,
        now: datetime,
        report: SyncReport,
    ) -> list[str]:
        """Remember what was seen; names of repositories missing upstream for longer than the grace period."""
        seen = {repo.external_id for repo, _ in upserts}
        removals: list[str] = []
        with self.db.session() as session:
            tracked = {
                r.external_id: r
                for r in session.scalars(select(CodeHostRepoRow).where(CodeHostRepoRow.connection_id == connection.id))
            }
            for repo, name in upserts:
                row = tracked.get(repo.external_id)
                if row is None:
                    row = CodeHostRepoRow(connection_id=connection.id, external_id=repo.external_id, repo_name=name)
                    session.add(row)
                row.path, row.visibility, row.last_seen_at, row.missing_since = repo.path, repo.visibility, now, None
            if complete:
                grace = timedelta(seconds=connection.removal_grace_seconds)
                for row in tracked.values():
                    if row.external_id in seen:
                        continue
                    if row.missing_since is None:
                        row.missing_since = now
                    if now - row.missing_since >= grace:
                        removals.append(row.repo_name)
                        session.delete(row)
                    else:
                        report.pending_removal.append(row.repo_name)
        return removals

    def _record_discovery(
        self, connection: CodeHostConnection, now: datetime, report: SyncReport, *, success: bool
    ) -> None:
        with self.db.session() as session:
            row = session.get(ConnectionStateRow, connection.id)
            if row is None:
                row = ConnectionStateRow(connection_id=connection.id, repos_found=0, warnings="")
                session.add(row)
            row.last_sync_at = now
            row.next_sync_at = now + timedelta(seconds=connection.sync_interval_seconds)
            if success:
                row.last_success_at = now
                row.repos_found = report.found
                row.last_error = None
                row.warnings = "\n".join(report.warnings)
            else:
                row.last_error = report.error
                # Retry sooner than the interval after a failure, at most every minute.
                row.next_sync_at = now + timedelta(seconds=min(60, connection.sync_interval_seconds))

    # -- permissions: repo-centric --------------------------------------------------------------------------
    def _private_rows(self, connection: CodeHostConnection, repo_name: str | None = None) -> list[CodeHostRepoRow]:
        with self.db.session() as session:
            statement = select(CodeHostRepoRow).where(
                CodeHostRepoRow.connection_id == connection.id, CodeHostRepoRow.visibility != "public"
            )
            if repo_name is not None:
                statement = statement.where(CodeHostRepoRow.repo_name == repo_name)
            rows = list(session.scalars(statement))
            session.expunge_all()
            return rows

    def _account_map(self, connection: CodeHostConnection) -> dict[str, int]:
        identities = self.auth.linked_identities(INTERNAL, connection.kind, connection.url)
        return {identity.account_id: identity.user_id for identity in identities}

    def sync_repos_permissions(self, connection: CodeHostConnection, repo_name: str | None = None) -> int:
        """Repo-centric sync of every private repository of `connection` (or one); returns how many synced."""
        if not self.permissions_enabled(connection):
            return 0
        try:
            client = self._client(connection)
        except HostError as exc:
            self._record_perms(connection, exc.message)
            return 0
        accounts = self._account_map(connection)
        rows = self._private_rows(connection, repo_name)

        def one(row: CodeHostRepoRow) -> tuple[str | None, str | None]:
            repo = HostRepo(row.external_id, row.path, "", row.visibility)
            try:
                members = client.repo_members(repo)
                users = {accounts[m] for m in members if m in accounts}
                self.repos.set_repo_users(INTERNAL, row.repo_name, users, source=connection.source)
            except (HostError, CodewellError) as exc:
                return row.external_id, exc.message
            return row.external_id, None

        crashed: tuple[str | None, str | None] = (None, "crashed")
        outcomes = self._run(one, rows, crashed)
        self._record_repo_perms(connection, outcomes)
        failures = [error for _, error in outcomes if error is not None]
        if repo_name is None:
            self._record_perms(connection, f"{len(failures)} repositories failed: {failures[0]}" if failures else None)
        return len(outcomes) - len(failures)

    def _record_repo_perms(self, connection: CodeHostConnection, outcomes: list[tuple[str | None, str | None]]) -> None:
        now = utcnow()
        errors = {external_id: error for external_id, error in outcomes if external_id is not None}
        with self.db.session() as session:
            statement = select(CodeHostRepoRow).where(
                CodeHostRepoRow.connection_id == connection.id, CodeHostRepoRow.external_id.in_(list(errors))
            )
            for row in session.scalars(statement) if len(errors) < 500 else self._all_rows(session, connection):
                if row.external_id not in errors:
                    continue
                row.perms_error = errors[row.external_id]
                if row.perms_error is None:
                    row.perms_synced_at = now

    @staticmethod
    def _all_rows(session: Session, connection: CodeHostConnection) -> Iterable[CodeHostRepoRow]:
        return session.scalars(select(CodeHostRepoRow).where(CodeHostRepoRow.connection_id == connection.id))

    def _record_perms(self, connection: CodeHostConnection, error: str | None) -> None:
        now = utcnow()
        with self.db.session() as session:
            row = session.get(ConnectionStateRow, connection.id)
            if row is None:
                row = ConnectionStateRow(connection_id=connection.id, repos_found=0, warnings="")
                session.add(row)
            row.perms_error = error
            row.perms_next_at = now + timedelta(seconds=connection.sync_interval_seconds)
            if error is None:
                row.perms_synced_at = now

    def sync_repo_now(self, actor: Actor, repo_name: str) -> int:
        """ "Sync now" of one repository's permissions (site admins); NotFound when no connection has it."""
        ensure(actor, Action.REPOS_MANAGE)
        self.repos.get(actor, repo_name)
        for connection in self.connections():
            if self._private_rows(connection, repo_name):
                return self.sync_repos_permissions(connection, repo_name)
        raise NotFound(f"repository {repo_name!r} is not a private repository of a code host connection")

    # -- permissions: user-centric --------------------------------------------------------------------------
    def sync_users_permissions(self, connection: CodeHostConnection, user_ids: Iterable[int] | None = None) -> int:
        """User-centric sync of every linked user (or the given ones); returns how many succeeded."""
        if not self.permissions_enabled(connection):
            return 0
        identities = self.auth.linked_identities(INTERNAL, connection.kind, connection.url)
        by_user: dict[int, list[Identity]] = {}
        for identity in identities:
            by_user.setdefault(identity.user_id, []).append(identity)
        if user_ids is None:
            with self.db.session() as session:
                tracked = set(
                    session.scalars(select(UserSyncRow.user_id).where(UserSyncRow.connection_id == connection.id))
                )
            wanted = sorted(set(by_user) | tracked)
        else:
            wanted = sorted(set(user_ids))
        names = {row.external_id: row.repo_name for row in self._private_rows(connection)}
        # The user's own token goes in per request (_user_http).
        shell = client_for(connection, "-", self._session(connection))
        outcomes = self._run(lambda uid: self._sync_user(shell, uid, by_user.get(uid, []), names), wanted, None)
        self._record_users(connection, [o for o in outcomes if o is not None])
        return sum(1 for o in outcomes if o is not None and o.count is not None)

    def _sync_user(
        self, shell: HostClient, user_id: int, identities: list[Identity], names: dict[str, str]
    ) -> _UserOutcome:
        connection = shell.connection
        with self._lock(f"user:{connection.id}:{user_id}"):
            if not identities:
                # Unlinked (or never linked): nothing of this host's private repositories.
                self.repos.set_user_repos(INTERNAL, user_id, [], source=connection.source)
                return _UserOutcome(user_id, linked=False, count=0, error=None)
            readable: set[str] = set()
            warnings: list[str] = []
            try:
                for identity in identities:
                    http = self._user_http(shell, identity)
                    if http is None:
                        warnings.append("the linked account has no stored token: sign in with it again")
                        continue
                    found = shell.user_repos(http)
                    readable |= found.external_ids
                    warnings += found.warnings
            except (HostError, CodewellError) as exc:
                log.warning("code host %s: permission sync of user %d failed: %s", connection.id, user_id, exc.message)
                return _UserOutcome(user_id, linked=True, count=None, error=exc.message)
            granted = sorted({names[e] for e in readable if e in names})
            self.repos.set_user_repos(INTERNAL, user_id, granted, source=connection.source)
            return _UserOutcome(user_id, linked=True, count=len(granted), error="; ".join(warnings) or None)

    def _user_http(self, shell: HostClient, identity: Identity) -> HostHTTP | None:
        token = self.auth.identity_token(INTERNAL, identity)
        if not token:
            return None
        if shell.kind == "gerrit":
            http = shell.connect(str(token.get("password", "")), basic_user=str(token.get("username", "")))
        else:
            http = HostHTTP(
                shell.api, bearer=str(token.get("access_token", "")), session=self._session(shell.connection)
            )
        return http.use_etags(self._etags.setdefault(f"{shell.connection.id}\n{identity.id}", {}))

    def _record_users(self, connection: CodeHostConnection, outcomes: list[_UserOutcome]) -> None:
        now = utcnow()
        wanted = {o.user_id: o for o in outcomes}
        with self.db.session() as session:
            rows = {
                r.user_id: r
                for r in session.scalars(select(UserSyncRow).where(UserSyncRow.connection_id == connection.id))
                if r.user_id in wanted
            }
            for user_id, outcome in wanted.items():
                row = rows.get(user_id)
                if row is None:
                    row = UserSyncRow(user_id=user_id, connection_id=connection.id, repo_count=0)
                    session.add(row)
                row.linked = outcome.linked
                row.error = outcome.error
                row.next_sync_at = now + timedelta(seconds=connection.sync_interval_seconds)
                if outcome.count is not None:
                    row.repo_count = outcome.count
                    row.last_synced_at = now

    def sync_user_now(self, actor: Actor, user_id: int) -> list[UserSyncStatus]:
        """ "Sync now" of one user's permissions at every connection (the user themself or a site admin)."""
        ensure(actor, Action.USER_READ, UserRef(user_id))
        for connection in self.connections():
            if self.permissions_enabled(connection):
                self.sync_users_permissions(connection, [user_id])
        return self.user_status(actor, user_id)

    def identity_linked(self, identity: Identity) -> None:
        """Listener of sign-ins and links: sync that user's permissions at the matching connections now.

        The sign-in waits for it at most SIGN_IN_WAIT_SECONDS (a slow host must not hold the sign-in); the sync
        then finishes in the background.
        """
        matching = [
            c
            for c in self.connections()
            if c.kind == identity.kind and c.url == identity.service_id and self.permissions_enabled(c)
        ]
        if not matching:
            return

        def run() -> None:
            for connection in matching:
                try:
                    self.sync_users_permissions(connection, [identity.user_id])
                except Exception:
                    log.exception("code host %s: permission sync on sign-in failed", connection.id)

        worker = threading.Thread(target=run, name="codehost-sign-in-sync", daemon=True)
        worker.start()
        worker.join(SIGN_IN_WAIT_SECONDS)

    def identity_unlinked(self, user_id: int, identity: LinkedIdentity) -> None:
        """Listener of disconnects: what the identity's sync granted goes at once, not at the next sync.

        The user's rows of each matching connection are cleared under the user's sync lock (a sync already running
        for them finishes first; one starting later no longer finds the identity or its token); when another
        identity at that host stays linked, the user is synced again with it. Clearing happens whether or not
        permission sync is on: it only ever narrows.
        """
        for connection in self.connections():
            if connection.kind != identity.kind or connection.url != identity.service_id:
                continue
            with self._lock(f"user:{connection.id}:{user_id}"):
                self.repos.set_user_repos(INTERNAL, user_id, [], source=connection.source)
            remaining = bool(self.auth.linked_identities(INTERNAL, connection.kind, connection.url, user_id))
            self._record_users(connection, [_UserOutcome(user_id, linked=remaining, count=0, error=None)])
            self.audit.record(
                "codehosts.permissions",
                "cleared",
                actor=INTERNAL,
                reason="linked account disconnected",
                details={"connection": connection.id, "userID": user_id},
            )
            if remaining:
                self.sync_users_permissions(connection, [user_id])

    # -- webhooks -------------------------------------------------------------------------------------------
    def receive_webhook(self, host: str, delivery: Delivery) -> Event:
        """A push webhook from `host` (a key of webhooks.HOSTS): verified against the secret of every connection of
        that kind, then a sync of the repository it names is requested from repos. Returns the event (PING is
        answered 200; PUSH and OTHER alike 202, whether or not a repository matched, so that the answer tells
        nothing of what is registered). Unauthenticated (401) when no connection's secret verifies it, InvalidInput
        (400) for a body that is not a JSON object. Replays are harmless: a requested sync is idempotent."""
        try:
            event, result = self._receive_webhook(HOSTS[host], delivery)
        except Unauthenticated:
            WEBHOOKS.labels(host, "unauthorized").inc()
            raise
        except InvalidInput:
            WEBHOOKS.labels(host, "malformed").inc()
            raise
        WEBHOOKS.labels(host, result).inc()
        return event

    def _receive_webhook(self, hooks: HostHooks, delivery: Delivery) -> tuple[Event, str]:
        verified = []
        for connection in self.connections():
            if connection.kind != hooks.kind:
                continue
            secret = read_webhook_secret(connection)
            if secret is not None and hooks.verify(delivery, secret):
                verified.append(connection)
        if not verified:
            raise unverified()
        data = payload(delivery)
        event = hooks.event(delivery, data)
        if event is not Event.PUSH:
            return event, "ping" if event is Event.PING else "ignored"
        requested = False
        for connection_id, name in self._webhook_repos([c.id for c in verified], hooks.repo(data)):
            try:
                self.repos.request_sync(INTERNAL, name)
            except NotFound:
                continue  # removed since discovery tracked it
            requested = True
            log.info("code host webhook: connection %s, repository %s: sync requested", connection_id, name)
        return event, "accepted" if requested else "ignored"

    def _webhook_repos(self, connection_ids: list[str], keys: RepoKeys) -> list[tuple[str, str]]:
        """(connection ID, repository name) of what these connections registered under the payload's ID or path."""
        conditions = []
        if keys.external_id is not None:
            conditions.append(CodeHostRepoRow.external_id == keys.external_id)
        if keys.path is not None:
            conditions.append(func.lower(CodeHostRepoRow.path) == keys.path.lower())
        if not conditions:
            return []
        with self.db.session() as session:
            rows = session.execute(
                select(CodeHostRepoRow.connection_id, CodeHostRepoRow.repo_name).where(
                    CodeHostRepoRow.connection_id.in_(connection_ids), or_(*conditions)
                )
            )
            return sorted({(connection_id, name) for connection_id, name in rows})

    # -- scheduling -----------------------------------------------------------------------------------------
    def run_due(self, now: datetime | None = None) -> None:
        """One pass of the background schedule: discoveries, repository and user permission syncs that are due."""
        now = now or utcnow()
        with self.db.session() as session:
            states = {row.connection_id: row for row in session.scalars(select(ConnectionStateRow))}
            session.expunge_all()
        for connection in self.connections():
            state = states.get(connection.id)
            if state is None or state.next_sync_at is None or state.next_sync_at <= now:
                report = self.discover(connection)
                if report.error is not None:
                    continue
            if not self.permissions_enabled(connection):
                if connection.authorization:
                    # Switched off by the plan (or a lapsed license): what this connection synced must stop
                    # granting access at once; it is synced again, from the host, once the feature is back.
                    self.repos.clear_permission_source(INTERNAL, connection.source)
                continue
            if state is None or state.perms_next_at is None or state.perms_next_at <= now:
                self.sync_repos_permissions(connection)
            self.sync_users_permissions(connection, self._due_users(connection, now))

    def _due_users(self, connection: CodeHostConnection, now: datetime) -> list[int]:
        linked = {i.user_id for i in self.auth.linked_identities(INTERNAL, connection.kind, connection.url)}
        with self.db.session() as session:
            rows = list(
                session.execute(
                    select(UserSyncRow.user_id, UserSyncRow.next_sync_at).where(
                        UserSyncRow.connection_id == connection.id
                    )
                )
            )
        tracked: dict[int, datetime | None] = {uid: at for uid, at in rows}  # noqa: C416 (rows are Row objects)

        def is_due(uid: int) -> bool:
            at = tracked.get(uid)
            return at is None or at <= now

        return sorted(uid for uid in linked | set(tracked) if is_due(uid))

    def _run(self, work: Callable[[Any], T], items: list[Any], failed: T) -> list[T]:
        """`work` over `items` with at most `concurrency` at a time; an exception gives `failed` for that item."""

        def guarded(item: Any) -> T:
            try:
                return work(item)
            except Exception:
                log.exception("code host permission sync crashed")
                return failed

        if len(items) <= 1:
            return [guarded(item) for item in items]
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="codehost-sync") as pool:
            return list(pool.map(guarded, items))


@dataclass(frozen=True, slots=True)
class _UserOutcome:
    user_id: int
    linked: bool
    count: int | None  # None: the sync failed (rows kept as they were)
    error: str | None

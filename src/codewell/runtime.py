"""The runtime: settings, database, site config and the capability services built from them.

Capabilities never import each other's storage; they ask the runtime for each other's *services*:
`runtime.get(RepoService)` builds the service once (through its `create(runtime)` classmethod) and caches it.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from codewell.capability import Capability
from codewell.config import SiteConfig, SiteConfigStore
from codewell.core.errors import ConfigError
from codewell.core.settings import Settings
from codewell.db import Database

log = logging.getLogger(__name__)


class Service(Protocol):
    @classmethod
    def create(cls, runtime: Runtime) -> Self: ...


S = TypeVar("S", bound=Service)
BackgroundTask = Callable[["Runtime"], Coroutine[Any, Any, None]]


def ensure_data_dir(path: Path) -> None:
    """Create the data dir, or raise ConfigError saying exactly why it cannot be used."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create data directory {path}: {exc.strerror}",
            hint="set CODEWELL_DATA_DIR to a writable directory",
        ) from None
    if not path.is_dir():
        raise ConfigError(f"data directory {path} is not a directory", hint="set CODEWELL_DATA_DIR")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(
            f"data directory {path} is not writable", hint="set CODEWELL_DATA_DIR to a writable directory"
        )


@dataclass
class Runtime:
    settings: Settings
    db: Database
    site_config: SiteConfigStore
    _services: dict[type[Any], Any] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    # Async loops started by `codewell serve` (sync scheduler, config watcher, ...), registered by capabilities.
    background: list[tuple[str, BackgroundTask]] = field(default_factory=list)
    # The declared capabilities (codewell.capabilities), handed over by the composition root; services read
    # what others contribute from here (tools, templates, readiness checks) without importing the top.
    capabilities: tuple[Capability, ...] = ()
    capabilities_ready: bool = False
    # Whether this process runs background jobs (`codewell serve --no-jobs` is a web replica that only serves),
    # and with how many threads (`codewell serve --job-threads`).
    run_jobs: bool = True
    job_threads: int = field(default_factory=lambda: 3 * (os.cpu_count() or 1))
    # `codewell worker` child processes of `codewell serve` (`--job-processes`): one per further core, so that
    # background work is not held to the one core a Python process's own code runs on.
    # One `codewell worker` child per core: they run the index builds (JobKind.isolated), one Python process per
    # core; the web process keeps the light kinds.
    job_processes: int = field(default_factory=lambda: os.cpu_count() or 1)

    @classmethod
    def open(cls, settings: Settings, *, create_config: bool = True) -> Runtime:
        """Open the data dir, site config and database; raise ConfigError/Unavailable with a clear message."""
        ensure_data_dir(settings.data_dir)
        store = SiteConfigStore.open(settings.site_config_path, create=create_config)
        return cls(
            settings=settings,
            db=Database(settings.database_url, busy_timeout=settings.db_busy_timeout),
            site_config=store,
        )

    @property
    def config(self) -> SiteConfig:
        return self.site_config.current

    @property
    def external_url(self) -> str:
        """The instance's external address: site config externalURL, else the env default, else the listen URL."""
        configured = self.config.external_url or self.settings.external_url
        return (configured or f"http://{self.settings.host}:{self.settings.port}").rstrip("/")

    def get(self, cls: type[S]) -> S:
        with self._lock:
            service = self._services.get(cls)
            if service is None:
                service = cls.create(self)
                self._services[cls] = service
            return service

    def provide(self, cls: type[Any], service: Any) -> None:
        """Install a specific implementation of a service (e.g. a Null implementation)."""
        with self._lock:
            self._services[cls] = service

    def provided(self, cls: type[Any]) -> Any:
        """The implementation installed with `provide` for an interface (a Protocol, which `get` cannot
        build), or None when none was installed."""
        with self._lock:
            return self._services.get(cls)

    def path(self, *parts: str) -> Path:
        """A path inside the data dir, with its parent created."""
        target = self.settings.data_dir.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def secret_key(self) -> bytes:
        """A per-instance secret (cookie signing, encryption at rest), generated on first use."""
        # Shared by every process of a deployment: a session signed by one web replica is read by another.
        key_file = self.settings.shared_dir / "secret.key"
        key_file.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            if not key_file.exists():
                tmp = key_file.with_suffix(".tmp")
                tmp.write_text(secrets.token_hex(32))
                tmp.chmod(0o600)
                os.replace(tmp, key_file)
        return bytes.fromhex(key_file.read_text().strip())

    def close(self) -> None:
        """Close every service built (job runners, search's and codenav's process pools, the evaluator's
        workers), then the database. Safe to call again.

        A service whose close fails is logged and the others still close: one error at shutdown must not leave
        another service's processes running."""
        with self._lock:
            services = list(self._services.values())
        for service in services:
            closer = getattr(service, "close", None)
            if callable(closer):
                try:
                    closer()
                except Exception:
                    log.exception("closing %s failed", type(service).__name__)
        self.db.dispose()

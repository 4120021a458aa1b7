"""Process settings, declared once as a table; read from `CODEWELL_*` environment variables at start-up."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from codewell.core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class SettingSpec:
    name: str
    env: str
    default: str
    help: str


# The table feeds Settings.from_env, `codewell serve --help` and docs/configuration.md (a test checks the docs).
SETTING_SPECS: tuple[SettingSpec, ...] = (
    SettingSpec("data_dir", "CODEWELL_DATA_DIR", "./data", "Directory for the database, git mirrors and index shards."),
    SettingSpec(
        "shared_dir",
        "CODEWELL_SHARED_DIR",
        "",
        "Directory every process of a deployment shares (git mirrors, symbol tables, the instance secret, the "
        "site config); empty means the data dir. In a cluster, a volume mounted by every process.",
    ),
    SettingSpec(
        "searchers",
        "CODEWELL_SEARCHERS",
        "",
        "Where searches run: empty means in this process over this data dir; `database` means on the "
        "`codewell searcher` replicas registered in the database, each holding its share of the indexes.",
    ),
    SettingSpec(
        "database_url",
        "CODEWELL_DATABASE_URL",
        "",
        "SQLAlchemy URL of the database; empty means SQLite at <data_dir>/codewell.db. "
        "PostgreSQL: postgresql+psycopg://user@host:5432/dbname.",
    ),
    SettingSpec(
        "site_config_path",
        "CODEWELL_SITE_CONFIG",
        "",
        "Path of the site configuration file (JSON with comments); empty means <data_dir>/site-config.json.",
    ),
    SettingSpec(
        "db_busy_timeout",
        "CODEWELL_DB_BUSY_TIMEOUT",
        "30",
        "Seconds a database write waits for another process's write lock (SQLite) before the request answers "
        "503 with Retry-After.",
    ),
    SettingSpec("host", "CODEWELL_HOST", "127.0.0.1", "Address the HTTP server listens on."),
    SettingSpec("port", "CODEWELL_PORT", "7080", "Port the HTTP server listens on."),
    SettingSpec(
        "external_url",
        "CODEWELL_EXTERNAL_URL",
        "",
        "Default for the site config option externalURL when that option is unset.",
    ),
    SettingSpec("log_format", "CODEWELL_LOG_FORMAT", "text", "Log format: text or json."),
    SettingSpec("log_level", "CODEWELL_LOG_LEVEL", "info", "Log level: debug, info, warning or error."),
    SettingSpec(
        "workers",
        "CODEWELL_WORKERS",
        "0",
        "Processes for CPU-heavy background work (indexing); 0 means one per core.",
    ),
    SettingSpec(
        "metrics_token",
        "CODEWELL_METRICS_TOKEN",
        "",
        "Secret a Prometheus scraper sends as `Authorization: Bearer <token>` to read /metrics; "
        "empty means only site admins may read it.",
    ),
)

_CASTS: dict[str, Callable[[str], Any]] = {"port": int, "workers": int, "db_busy_timeout": float}
_CHOICES: dict[str, tuple[str, ...]] = {
    "log_format": ("text", "json"),
    "log_level": ("debug", "info", "warning", "error"),
    "searchers": ("", "database"),
}


@dataclass(frozen=True, slots=True)
class Settings:
    """Settings of one process; built once and passed down, never read from os.environ deep in the code."""

    data_dir: Path
    shared_dir: Path
    searchers: str
    database_url: str
    site_config_path: Path
    db_busy_timeout: float
    host: str
    port: int
    external_url: str
    log_format: str
    log_level: str
    workers: int
    metrics_token: str = field(default="", repr=False)  # a secret: kept out of reprs and tracebacks

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from the environment; keyword overrides (from CLI flags) win when not None."""
        env = os.environ if environ is None else environ
        raw: dict[str, Any] = {}
        for spec in SETTING_SPECS:
            value = overrides.get(spec.name)
            raw[spec.name] = str(value) if value is not None else env.get(spec.env, spec.default)
        return cls._build(raw)

    @classmethod
    def _build(cls, raw: dict[str, Any]) -> Settings:
        values: dict[str, Any] = {}
        for spec in SETTING_SPECS:
            text = raw[spec.name]
            if spec.name in _CHOICES and text not in _CHOICES[spec.name]:
                choices = ", ".join(_CHOICES[spec.name])
                raise ConfigError(f"{spec.env}={text!r} is not valid", hint=f"use one of: {choices}")
            try:
                values[spec.name] = _CASTS.get(spec.name, str)(text)
            except ValueError:
                kind = "a number" if spec.name == "db_busy_timeout" else "a whole number"
                raise ConfigError(f"{spec.env}={text!r} is not {kind}") from None
        data_dir = Path(values["data_dir"]).expanduser().absolute()
        values["data_dir"] = data_dir
        shared_dir = Path(values["shared_dir"]).expanduser().absolute() if values["shared_dir"] else data_dir
        values["shared_dir"] = shared_dir
        values["site_config_path"] = (
            Path(values["site_config_path"]).expanduser().absolute()
            if values["site_config_path"]
            else shared_dir / "site-config.json"
        )
        if not values["database_url"]:
            values["database_url"] = f"sqlite:///{data_dir / 'codewell.db'}"
        if not 0 < values["db_busy_timeout"] <= 3600:
            raise ConfigError(
                f"CODEWELL_DB_BUSY_TIMEOUT={values['db_busy_timeout']} is out of range", hint="use 0.1-3600 seconds"
            )
        if not 0 < values["port"] < 65536:
            raise ConfigError(f"CODEWELL_PORT={values['port']} is out of range", hint="use 1-65535")
        return cls(**values)

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def clustered(self) -> bool:
        """Searches run on searcher replicas (CODEWELL_SEARCHERS=database), not in this process."""
        return self.searchers == "database"

    @property
    def effective_workers(self) -> int:
        return self.workers or (os.cpu_count() or 1)

    def as_dict(self) -> dict[str, str]:
        return {f.name: str(getattr(self, f.name)) for f in fields(self) if f.repr}

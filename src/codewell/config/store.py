"""Loading, validating and hot-reloading the site configuration file."""

from __future__ import annotations

import difflib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json5
from pydantic import ValidationError

from codewell.config.providers import not_a_boolean
from codewell.config.schema import SiteConfig
from codewell.core.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_SITE_CONFIG_TEXT = """\
// codewell site configuration (JSON with comments). Every option is described in docs/configuration.md.
// Changes are picked up while the server runs; an invalid file keeps the previous configuration running.
{
  // Accounts are created by site admins (`codewell users create`, /site-admin/users); set allowSignup to true
  // to let anyone who reaches this server create one.
  "auth.providers": [{"type": "builtin", "allowSignup": false}],
  // Who reads a repository added without --private/--public: "private" (site admins and users granted it) or
  // "everyone" (every signed-in user).
  "repos.defaultVisibility": "private",
  "mcp.enabled": true,
  "mcp.tools.disabled": []
}
"""


def _known_keys() -> list[str]:
    return [field.alias or name for name, field in SiteConfig.model_fields.items()]


def _format_location(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not path:
            path = str(part)
        else:
            path += f".{part}" if not str(part).startswith("[") else str(part)
    return path or "(top level)"


def _describe(error: dict[str, Any]) -> str:
    loc = _format_location(tuple(error["loc"]))
    if error["type"] == "extra_forbidden":
        key = str(error["loc"][-1])
        close = difflib.get_close_matches(key, _known_keys(), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else "; see docs/configuration.md for the options"
        return f"{loc}: unknown option{hint}"
    if error["type"] == "bool_type":
        # Booleans are strict (`"yes"`, `"false"`, `1` are refused, issue #32): say what is taken.
        return f"{loc}: {not_a_boolean(error.get('input'))}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{loc}: {message}"


def parse_site_config(text: str, source: str = "site config") -> SiteConfig:
    """Parse and validate site config text; raise ConfigError naming every offending key path."""
    try:
        data = json5.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc}", hint="fix the syntax error") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a JSON object at the top level, got {type(data).__name__}")
    try:
        return SiteConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_describe(dict(e)) for e in exc.errors())
        raise ConfigError(f"{source} is invalid: {problems}") from None


def dump_site_config(config: SiteConfig) -> str:
    return json.dumps(config.model_dump(by_alias=True, mode="json"), indent=2)


@dataclass(frozen=True, slots=True)
class _Loaded:
    config: SiteConfig
    mtime_ns: int
    size: int


class SiteConfigStore:
    """Holds the current valid site config; re-reads the file when it changes (checked at most once a second).

    An invalid new version never replaces a valid one: the old config keeps running and `error` says why.
    """

    def __init__(self, path: Path, *, check_interval: float = 1.0) -> None:
        self.path = path
        self.check_interval = check_interval
        self.error: str | None = None
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None
        self._last_check = 0.0
        self._listeners: list[Any] = []

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> SiteConfigStore:
        """Load the file (creating it with defaults when missing); an invalid file at start-up is fatal."""
        if not path.exists():
            if not create:
                raise ConfigError(f"site config {path} does not exist")
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(DEFAULT_SITE_CONFIG_TEXT)
            os.replace(tmp, path)
        store = cls(path)
        store._loaded = store._read()
        store._last_check = time.monotonic()
        return store

    @classmethod
    def from_config(cls, config: SiteConfig, path: Path) -> SiteConfigStore:
        store = cls(path)
        store._loaded = _Loaded(config, -1, -1)
        return store

    def _read(self) -> _Loaded:
        try:
            stat = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read site config {self.path}: {exc.strerror}") from None
        return _Loaded(parse_site_config(text, str(self.path)), stat.st_mtime_ns, stat.st_size)

    @property
    def current(self) -> SiteConfig:
        if time.monotonic() - self._last_check >= self.check_interval:
            self.refresh()
        assert self._loaded is not None
        return self._loaded.config

    def on_change(self, listener: Any) -> None:
        """Call listener(new_config) after each successful reload."""
        self._listeners.append(listener)

    def refresh(self) -> bool:
        """Reload if the file changed; return True when a new valid config was swapped in."""
        with self._lock:
            self._last_check = time.monotonic()
            try:
                stat = self.path.stat()
            except OSError as exc:
                self._set_error(f"cannot read site config {self.path}: {exc.strerror}")
                return False
            old = self._loaded
            if old and (stat.st_mtime_ns, stat.st_size) == (old.mtime_ns, old.size):
                return False
            try:
                loaded = self._read()
            except ConfigError as exc:
                self._set_error(str(exc))
                return False
            self._loaded = loaded
            self.error = None
        log.info("site config reloaded", extra={"path": str(self.path)})
        for listener in self._listeners:
            listener(loaded.config)
        return True

    def _set_error(self, message: str) -> None:
        if message != self.error:
            log.error("site config rejected, keeping the previous one: %s", message)
        self.error = message

    def write(self, config: SiteConfig) -> None:
        """Replace the file atomically with `config` (used by admin pages and tests)."""
        self.write_text(dump_site_config(config))

    def write_text(self, text: str) -> None:
        """Replace the file atomically with `text` (checked by the caller; comments kept) and reload it."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        os.replace(tmp, self.path)
        self.refresh()

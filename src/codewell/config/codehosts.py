"""Typed `codeHostConnections` entries: where codewell discovers repositories and their permissions.

One model for every kind (`github` also for GitHub Enterprise Server, `gitlab`, `bitbucketcloud`,
`bitbucketserver`, `gerrit`; the spec's neutral provider names are accepted as aliases). Which fields a kind
reads is documented in docs/codehosts.md; fields that make no sense for a kind are refused at their path.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from codewell.config.providers import PROVIDER_TYPE_ALIASES

CODE_HOST_KINDS = ("github", "gitlab", "bitbucketcloud", "bitbucketserver", "gerrit")
DEFAULT_URLS = {
    "github": "https://github.com/",
    "gitlab": "https://gitlab.com/",
    "bitbucketcloud": "https://bitbucket.org/",
}
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_ENV = r"^[A-Za-z_][A-Za-z0-9_]*$"
_HTTP_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")
# Fields only some kinds understand: kind → fields it refuses.
_ONLY_FOR = {
    "orgs": ("github",),
    "groups": ("gitlab",),
    "projects": ("bitbucketserver", "gerrit", "gitlab"),
    "workspaces": ("bitbucketcloud",),
    "sync_internal_repo_permissions": ("gitlab",),
}


class ExcludeRule(BaseModel):
    """A repository left out: by exact name (`owner/repo` as the host spells it) or by regular expression."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    name: str | None = Field(None, min_length=1)
    pattern: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> ExcludeRule:
        if (self.name is None) == (self.pattern is None):
            raise ValueError("set exactly one of name or pattern")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern is not a regular expression: {exc}") from None
        return self

    def matches(self, path: str) -> bool:
        if self.name is not None:
            return path.lower() == self.name.lower()
        return re.search(str(self.pattern), path) is not None


class CodeHostConnection(BaseModel):
    """One `codeHostConnections` entry (docs/codehosts.md)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    id: str = Field(description="stable identifier: names the connection in CLI, REST and permission sources")
    kind: Literal["github", "gitlab", "bitbucketcloud", "bitbucketserver", "gerrit"]
    url: str = ""
    display_name: str = Field("", alias="displayName", max_length=200)
    token_env: str | None = Field(None, alias="tokenEnv", pattern=_ENV)
    token_file: str | None = Field(None, alias="tokenFile", min_length=1)
    # Basic-auth user of the token: Bitbucket Cloud (app password) and Gerrit (HTTP password).
    username: str | None = Field(None, min_length=1, max_length=200)
    orgs: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    projects: list[str] = Field(default_factory=list)
    workspaces: list[str] = Field(default_factory=list)
    repos: list[str] = Field(default_factory=list)
    exclude: list[ExcludeRule] = Field(default_factory=list)
    archived: StrictBool = False
    forks: StrictBool = True
    prefix: str | None = Field(None, min_length=1, max_length=200)
    sync_interval_seconds: int = Field(3600, alias="syncIntervalSeconds", ge=10, le=7 * 24 * 3600)
    repo_sync_interval_seconds: int = Field(3600, alias="repoSyncIntervalSeconds", ge=10, le=7 * 24 * 3600)
    removal_grace_seconds: int = Field(86400, alias="removalGraceSeconds", ge=0, le=90 * 86400)
    authorization: StrictBool = False
    sync_internal_repo_permissions: StrictBool = Field(True, alias="syncInternalRepoPermissions")
    # The shared secret of push webhooks from this host (docs/codehosts.md, "Webhooks"): like the token, named
    # through an environment variable or a file so that it never sits in the site config.
    webhook_secret_env: str | None = Field(None, alias="webhookSecretEnv", pattern=_ENV)
    webhook_secret_file: str | None = Field(None, alias="webhookSecretFile", min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("kind"), str):
            kind = PROVIDER_TYPE_ALIASES.get(data["kind"], data["kind"])
            return {**data, "kind": kind}
        return data

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("must be 1-40 lowercase letters, digits, - or _ (e.g. github-main)")
        return value

    @model_validator(mode="after")
    def _check(self) -> CodeHostConnection:
        url = self.url or DEFAULT_URLS.get(self.kind, "")
        if not url:
            raise ValueError(f"url is required for kind {self.kind}")
        if not _HTTP_URL.match(url):
            raise ValueError("url must be an absolute http:// or https:// URL, e.g. https://git.example.com/")
        object.__setattr__(self, "url", url.rstrip("/") + "/")
        if self.token_env is not None and self.token_file is not None:
            raise ValueError("set either tokenEnv or tokenFile, not both")
        if self.token_env is None and self.token_file is None:
            raise ValueError("a token is required: set tokenEnv (environment variable) or tokenFile (path)")
        if self.webhook_secret_env is not None and self.webhook_secret_file is not None:
            raise ValueError("set either webhookSecretEnv or webhookSecretFile, not both")
        for name, kinds in _ONLY_FOR.items():
            if getattr(self, name) not in ([], True) and self.kind not in kinds:
                alias = type(self).model_fields[name].alias or name
                raise ValueError(f"{alias} is not used by kind {self.kind} (only {', '.join(kinds)})")
        if self.kind in ("gerrit", "bitbucketcloud") and self.username is None:
            raise ValueError(f"username is required for kind {self.kind} (the token is sent with basic auth)")
        return self

    @property
    def source(self) -> str:
        """The `source` of this connection's repositories and permission rows."""
        return f"codehost:{self.id}"

    @property
    def label(self) -> str:
        return self.display_name or self.id

    def excluded(self, path: str) -> bool:
        return any(rule.matches(path) for rule in self.exclude)


def check_connections(value: list[CodeHostConnection]) -> list[CodeHostConnection]:
    """Cross-entry rules: unique ids."""
    seen: dict[str, int] = {}
    for index, connection in enumerate(value):
        if connection.id in seen:
            raise ValueError(f"[{index}].id {connection.id!r} duplicates [{seen[connection.id]}]")
        seen[connection.id] = index
    return value

"""The site configuration schema. Keys are the flat, dotted option names of the spec (`mcp.enabled`).

Every option is documented in docs/configuration.md; tests/unit/config/test_docs.py checks that.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, field_validator, model_validator

from codewell.config.codehosts import CodeHostConnection, check_connections
from codewell.config.deepsearch import DeepSearchConfig
from codewell.config.help import OPTION_HELP
from codewell.config.models import ModelsConfig
from codewell.config.providers import Provider, parse_providers


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class AccessTokensConfig(Strict):
    allow: Literal["all-users-create", "site-admin-create", "none"] = "all-users-create"
    allow_no_expiration: StrictBool = Field(True, alias="allowNoExpiration")
    default_expiration_days: int = Field(90, alias="defaultExpirationDays", ge=1, le=3650)
    expiration_option_days: list[int] = Field(default_factory=lambda: [7, 14, 30, 60, 90], alias="expirationOptionDays")


class LockoutConfig(Strict):
    consecutive_period: int = Field(3600, alias="consecutivePeriod", ge=1)
    failed_attempt_threshold: int = Field(5, alias="failedAttemptThreshold", ge=1)
    lockout_period: int = Field(1800, alias="lockoutPeriod", ge=1)


class SmtpConfig(Strict):
    """An SMTP relay for outgoing mail (e-mail verification links); see docs/configuration.md, `email.smtp`."""

    host: str = Field(min_length=1, max_length=255)
    port: int = Field(587, ge=1, le=65535)
    username: str | None = Field(None, min_length=1)
    password: str | None = Field(None, min_length=1)
    password_env: str | None = Field(None, alias="passwordEnv", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    tls: Literal["none", "starttls", "tls"] = "starttls"
    timeout_seconds: int = Field(10, alias="timeoutSeconds", ge=1, le=300)

    @model_validator(mode="after")
    def _check_credentials(self) -> SmtpConfig:
        if self.password is not None and self.password_env is not None:
            raise ValueError("set either password or passwordEnv, not both")
        if (self.password is not None or self.password_env is not None) and self.username is None:
            raise ValueError("a password needs a username")
        return self


class RepoSourceBase(Strict):
    """Options every repository source kind shares (see docs/configuration.md, `repositories`)."""

    prefix: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    branches: list[str] = Field(default_factory=list)
    sync_interval_seconds: int = Field(3600, alias="syncIntervalSeconds", ge=10, le=7 * 24 * 3600)
    # Unset: the site's `repos.defaultVisibility` decides.
    private: StrictBool | None = None


class LocalRepoSource(RepoSourceBase):
    """A directory scanned for git repositories (bare or with a work tree)."""

    kind: Literal["local"]
    path: str = Field(min_length=1)


class GitRepoSource(RepoSourceBase):
    """Clone URLs of any git transport (https, ssh, git, file)."""

    kind: Literal["git"]
    urls: list[str] = Field(min_length=1)
    credentials_env: str | None = Field(None, alias="credentialsEnv", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


# New source kinds (code host listings) join this union and codewell.repos.sources.SOURCE_KINDS.
RepoSource = Annotated[LocalRepoSource | GitRepoSource, Field(discriminator="kind")]


class AutoIndexers(Strict):
    """`codeIntel.autoIndexing.indexers`: the SCIP indexer executable per language (installed by an admin)."""

    # Absolute paths: the indexer runs with a scrubbed environment, so a bare name would depend on PATH.
    python: str | None = Field(None, min_length=2, max_length=4096)
    typescript: str | None = Field(None, min_length=2, max_length=4096)

    @field_validator("python", "typescript")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or "\x00" in value or value != value.strip()):
            raise ValueError("must be the absolute path of the indexer executable, e.g. /opt/scip/bin/scip-python")
        return value


class AutoIndexingConfig(Strict):
    """`codeIntel.autoIndexing`: SCIP indexing jobs after search indexes a repository (codenav/autoindex.py)."""

    enabled: StrictBool = False
    indexers: AutoIndexers = Field(default_factory=AutoIndexers)
    # One job's indexer run; past it the indexer's process group is killed and nothing is stored.
    timeout_seconds: int = Field(600, alias="timeoutSeconds", ge=1, le=24 * 3600)

    @model_validator(mode="after")
    def _check_indexers(self) -> AutoIndexingConfig:
        if self.enabled and self.indexers.python is None and self.indexers.typescript is None:
            raise ValueError("enabled needs at least one indexer (indexers.python or indexers.typescript)")
        return self


# 512 MB: a large monorepo's index; protobuf itself refuses messages of 2 GB and more.
DEFAULT_MAX_UPLOAD_BYTES = 512 << 20
MAX_PROTOBUF_BYTES = (2 << 30) - 1


def _default_providers() -> list[dict[str, Any]]:
    # Builtin sign-in without sign-up (issue #33): whoever reaches the port must not be able to make an account
    # and read the code. Site admins create accounts (`codewell users create`, /site-admin/users) or set
    # `allowSignup`.
    return [{"type": "builtin", "allowSignup": False}]


class SiteConfig(Strict):
    """The whole site configuration; every field has a default so an empty file `{}` is valid."""

    external_url: str | None = Field(None, alias="externalURL")
    auth_providers: list[dict[str, Any]] = Field(default_factory=_default_providers, alias="auth.providers")
    auth_access_tokens: AccessTokensConfig = Field(default_factory=AccessTokensConfig, alias="auth.accessTokens")
    auth_idp_dynamic_client_registration_enabled: StrictBool = Field(
        True, alias="auth.idpDynamicClientRegistrationEnabled"
    )
    auth_min_password_length: int = Field(12, alias="auth.minPasswordLength", ge=1, le=256)
    auth_lockout: LockoutConfig = Field(default_factory=LockoutConfig, alias="auth.lockout")
    auth_password_reset_link_expiry: int = Field(14400, alias="auth.passwordResetLinkExpiry", ge=60)
    auth_public: StrictBool = Field(False, alias="auth.public")
    code_host_connections: list[CodeHostConnection] = Field(default_factory=list, alias="codeHostConnections")
    # Precise code navigation (docs/codenav.md): auto-indexing jobs, and the size limit of one SCIP index.
    code_intel_auto_indexing: AutoIndexingConfig = Field(
        default_factory=AutoIndexingConfig, alias="codeIntel.autoIndexing"
    )
    code_intel_max_upload_bytes: int = Field(
        DEFAULT_MAX_UPLOAD_BYTES, alias="codeIntel.maxUploadBytes", ge=1024, le=MAX_PROTOBUF_BYTES
    )
    # Deep search conversations: waiting, sharing, workers, budgets (codewell.config.deepsearch, docs/agents.md).
    deep_search: DeepSearchConfig = Field(default_factory=DeepSearchConfig, alias="deepSearch")
    email_smtp: SmtpConfig | None = Field(None, alias="email.smtp")
    email_sender_address: str | None = Field(
        None, alias="email.senderAddress", pattern=r"^[^@\s<>]{1,64}@[^@\s<>]+\.[^@\s<>]+$"
    )
    email_verification_link_expiry: int = Field(86400, alias="email.verificationLinkExpiry", ge=300, le=30 * 86400)
    # A signed license key (codewell.licensing.keys); takes precedence over one set with `codewell license set`.
    license_key: str | None = Field(None, alias="licenseKey", max_length=16_384)
    mcp_enabled: StrictBool = Field(True, alias="mcp.enabled")
    mcp_tools_disabled: list[str] = Field(default_factory=list, alias="mcp.tools.disabled")
    # Language models of the agents (codewell.config.models); none: the retrieval pipeline answers.
    models: ModelsConfig = Field(default_factory=ModelsConfig, alias="models")
    repositories: list[RepoSource] = Field(default_factory=list, alias="repositories")
    # Who reads a repository registered without saying (`repos add` without --private/--public, a REST add without
    # `private`, a `repositories` source without `private`): "private" (site admins and granted users: the safe
    # default, issue #33) or "everyone" (every signed-in user; anyone when auth.public is on).
    repos_default_visibility: Literal["private", "everyone"] = Field("private", alias="repos.defaultVisibility")
    # Dense ranking of nls_search (nls/dense.py): embeds every chunk at index time; off, it costs nothing.
    search_nls_dense: StrictBool = Field(False, alias="search.nls.dense")
    _providers: list[Provider] = PrivateAttr(default_factory=list)

    @field_validator("external_url")
    @classmethod
    def _check_external_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an absolute http:// or https:// URL, e.g. https://code.example.com")
        return value.rstrip("/")

    @field_validator("code_host_connections")
    @classmethod
    def _check_code_hosts(cls, value: list[CodeHostConnection]) -> list[CodeHostConnection]:
        return check_connections(value)

    @field_validator("auth_providers")
    @classmethod
    def _check_providers(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        parse_providers(value)  # raises ValueError naming each bad entry and field
        return value

    @model_validator(mode="after")
    def _check_email(self) -> SiteConfig:
        if self.email_smtp is not None and self.email_sender_address is None:
            raise ValueError("email.smtp needs email.senderAddress (the From address of outgoing mail)")
        return self

    @model_validator(mode="after")
    def _typed_providers(self) -> SiteConfig:
        # The raw entries stay as written (aliases too); the typed models, with defaults, are kept beside them.
        self._providers = parse_providers(self.auth_providers)
        return self

    @property
    def providers(self) -> list[Provider]:
        """`auth.providers` as typed models (codewell.config.providers), in file order, defaults applied."""
        return list(self._providers)

    @property
    def mcp_dynamic_client_registration_enabled(self) -> bool:
        # Dynamic client registration only exists for the MCP server; off when the server is off.
        return self.auth_idp_dynamic_client_registration_enabled and self.mcp_enabled


def site_config_json_schema() -> dict[str, Any]:
    """The JSON schema of the site config: option names as written in the file, each with its help line
    (`config/help.py`), for the configuration page and for editors."""
    schema = SiteConfig.model_json_schema(by_alias=True, mode="validation")
    for name, prop in schema.get("properties", {}).items():
        if name in OPTION_HELP:
            prop["description"] = OPTION_HELP[name]
    return schema

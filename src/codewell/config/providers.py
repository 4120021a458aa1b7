"""Typed `auth.providers` entries: one pydantic model per provider kind with that kind's defaults.

The site config keeps the raw entries (so a file round-trips unchanged, aliases included); `parse_providers`
validates them into these models, which the sign-in code reads. Field names are the documented camelCase
option names (docs/authentication.md); unknown fields are rejected with the path that holds them.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

PROVIDER_TYPES = (
    "builtin",
    "saml",
    "github",
    "gitlab",
    "bitbucketcloud",
    "bitbucketserver",
    "gerrit",
    "openidconnect",
    "http-header",
)
# The spec's neutral names for the code host providers.
PROVIDER_TYPE_ALIASES = {
    "codehost_a": "github",
    "codehost_b": "gitlab",
    "codehost_c_cloud": "bitbucketcloud",
    "codehost_c_server": "bitbucketserver",
    "codehost_d": "gerrit",
}
# Kinds configured at most once: their routes (/sign-in form, /.auth/saml/*, the proxy header) are global.
SINGLETON_KINDS = frozenset({"builtin", "saml", "http-header"})
DEFAULT_DISPLAY_PREFIX = "Continue with "
_HTTP_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def _url(value: str) -> str:
    """An absolute http(s) URL normalized to end with `/` (so `service_id`s compare equal)."""
    if not _HTTP_URL.match(value):
        raise ValueError("must be an absolute http:// or https:// URL, e.g. https://code.example.com/")
    return value.rstrip("/") + "/"


class ProviderBase(BaseModel):
    """Fields every provider kind accepts."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    display_name: str = Field("", alias="displayName", max_length=200)
    display_prefix: str = Field(DEFAULT_DISPLAY_PREFIX, alias="displayPrefix", max_length=100)
    hidden: StrictBool = False  # not listed on the sign-in page (its login URL still works)
    no_sign_in: StrictBool = Field(False, alias="noSignIn")  # identity only (repository permissions), never a session
    order: int | None = None  # position on the sign-in page; unset sorts after every set value

    @property
    def kind(self) -> str:
        kind: str = getattr(self, "type")  # noqa: B009 - every subclass declares a Literal `type`
        return kind

    @property
    def service_id(self) -> str:
        """The external service this provider signs in to (URL or issuer); part of each identity's key."""
        return self.kind

    @property
    def client_id(self) -> str:
        return ""

    @property
    def id(self) -> str:
        """A stable, URL-safe identifier of this entry (the `pc` parameter of its login URL)."""
        digest = hashlib.sha256(f"{self.kind}\n{self.service_id}\n{self.client_id}".encode()).hexdigest()
        return digest[:16]

    @property
    def label(self) -> str:
        """The button text on the sign-in page."""
        return f"{self.display_prefix}{self.display_name or DEFAULT_NAMES.get(self.kind, self.kind)}"

    @property
    def signup_allowed(self) -> bool:
        """Whether an unknown external account may create an account (each kind's documented default)."""
        value: bool | None = getattr(self, "allow_signup", False)
        return True if value is None else value


class BuiltinProvider(ProviderBase):
    type: Literal["builtin"]
    allow_signup: StrictBool = Field(False, alias="allowSignup")


class _OAuthCodeHost(ProviderBase):
    client_id_: str = Field(alias="clientID", min_length=1)
    client_secret: str = Field(alias="clientSecret", min_length=1, repr=False)

    @property
    def client_id(self) -> str:
        return self.client_id_

    @property
    def service_id(self) -> str:
        url: str = getattr(self, "url")  # noqa: B009 - subclasses declare `url`
        return url


class GitHubProvider(_OAuthCodeHost):
    type: Literal["github"]
    url: str = "https://github.com/"
    allow_signup: StrictBool = Field(False, alias="allowSignup")
    allow_orgs: list[str] = Field(default_factory=list, alias="allowOrgs")
    allow_orgs_map: dict[str, list[str]] = Field(default_factory=dict, alias="allowOrgsMap")
    required_sso_orgs: list[str] = Field(default_factory=list, alias="requiredSsoOrgs")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _url(value or "https://github.com/")

    @field_validator("required_sso_orgs")
    @classmethod
    def _check_sso(cls, value: list[str]) -> list[str]:
        if value == ["all"] or all(v.isdigit() for v in value):
            return value
        raise ValueError(
            'must be numeric organization IDs (not names), or the single entry "all"; '
            "find an organization's ID at https://api.github.com/orgs/<name>"
        )


class GitLabProvider(_OAuthCodeHost):
    type: Literal["gitlab"]
    url: str = "https://gitlab.com/"
    api_scope: Literal["api", "read_api"] = Field("api", alias="apiScope")
    allow_signup: StrictBool = Field(True, alias="allowSignup")
    allow_groups: list[str] = Field(default_factory=list, alias="allowGroups")
    sso_url: str | None = Field(None, alias="ssoURL")
    sync_internal_repo_permissions: StrictBool = Field(True, alias="syncInternalRepoPermissions")
    token_refresh_window_minutes: int = Field(10, alias="tokenRefreshWindowMinutes", ge=0)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _url(value or "https://gitlab.com/")

    @field_validator("allow_groups")
    @classmethod
    def _check_groups(cls, value: list[str]) -> list[str]:
        for group in value:
            if not group or group.startswith("/") or group.endswith("/") or "//" in group:
                raise ValueError(f"{group!r} is not a group's full path (e.g. my-group/my-subgroup)")
        return value


class BitbucketCloudProvider(ProviderBase):
    type: Literal["bitbucketcloud"]
    url: str = "https://bitbucket.org/"
    client_key: str = Field(alias="clientKey", min_length=1)
    client_secret: str = Field(alias="clientSecret", min_length=1, repr=False)
    api_scope: str = Field("account,email,repository", alias="apiScope")
    allow_signup: StrictBool = Field(True, alias="allowSignup")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _url(value or "https://bitbucket.org/")

    @property
    def client_id(self) -> str:
        return self.client_key

    @property
    def service_id(self) -> str:
        return self.url


class BitbucketServerProvider(_OAuthCodeHost):
    type: Literal["bitbucketserver"]
    url: str
    allow_signup: StrictBool = Field(False, alias="allowSignup")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _url(value)


class GerritProvider(ProviderBase):
    """Beta: users add Gerrit HTTP credentials under account security; they are checked with the REST API."""

    type: Literal["gerrit"]
    url: str

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _url(value)

    @property
    def service_id(self) -> str:
        return self.url


class OpenIDConnectProvider(ProviderBase):
    type: Literal["openidconnect"]
    issuer: str
    client_id_: str = Field(alias="clientID", min_length=1)
    client_secret: str = Field("", alias="clientSecret", repr=False)
    config_id: str = Field("", alias="configID")
    require_email_domain: str = Field("", alias="requireEmailDomain")
    allow_signup: StrictBool | None = Field(None, alias="allowSignup")  # unset = true
    single_identity_per_user: StrictBool = Field(False, alias="singleIdentityPerUser")

    @field_validator("issuer")
    @classmethod
    def _check_issuer(cls, value: str) -> str:
        if not _HTTP_URL.match(value):
            raise ValueError("must be the issuer's absolute http(s) URL, e.g. https://accounts.example.com")
        return value.rstrip("/")

    @field_validator("require_email_domain")
    @classmethod
    def _check_domain(cls, value: str) -> str:
        if value.startswith("@"):
            raise ValueError(f"write the domain without a leading '@' (e.g. {value[1:]!r})")
        if value and not re.fullmatch(r"[A-Za-z0-9.-]+\.[A-Za-z]{2,}", value):
            raise ValueError(f"{value!r} is not a domain name (e.g. example.com)")
        return value.lower()

    @property
    def client_id(self) -> str:
        return self.client_id_

    @property
    def service_id(self) -> str:
        return self.issuer


class SAMLProvider(ProviderBase):
    type: Literal["saml"]
    config_id: str = Field("", alias="configID")
    service_provider_issuer: str = Field("", alias="serviceProviderIssuer")
    identity_provider_metadata_url: str = Field("", alias="identityProviderMetadataURL")
    identity_provider_metadata: str = Field("", alias="identityProviderMetadata")
    service_provider_certificate: str = Field("", alias="serviceProviderCertificate")
    service_provider_private_key: str = Field("", alias="serviceProviderPrivateKey", repr=False)
    name_id_format: str = Field("urn:oasis:names:tc:SAML:2.0:nameid-format:persistent", alias="nameIDFormat")
    sign_requests: StrictBool | None = Field(None, alias="signRequests")
    insecure_skip_assertion_signature_validation: StrictBool = Field(
        False, alias="insecureSkipAssertionSignatureValidation"
    )
    allow_signup: StrictBool | None = Field(None, alias="allowSignup")  # unset = true
    allow_groups: list[str] = Field(default_factory=list, alias="allowGroups")
    groups_attribute_name: str = Field("groups", alias="groupsAttributeName")
    username_attribute_names: list[str] = Field(default_factory=list, alias="usernameAttributeNames")

    @model_validator(mode="after")
    def _check_metadata(self) -> SAMLProvider:
        if bool(self.identity_provider_metadata_url) == bool(self.identity_provider_metadata):
            raise ValueError("set exactly one of identityProviderMetadataURL and identityProviderMetadata")
        if bool(self.service_provider_certificate) != bool(self.service_provider_private_key):
            raise ValueError("serviceProviderCertificate and serviceProviderPrivateKey go together")
        if self.sign_requests and not self.service_provider_private_key:
            raise ValueError("signRequests needs serviceProviderCertificate and serviceProviderPrivateKey")
        return self

    @property
    def service_id(self) -> str:
        return self.identity_provider_metadata_url or self.config_id or "saml"


class HTTPHeaderProvider(ProviderBase):
    type: Literal["http-header"]
    username_header: str = Field(alias="usernameHeader", min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    email_header: str = Field("", alias="emailHeader", pattern=r"^[A-Za-z0-9-]*$")
    strip_username_header_prefix: str = Field("", alias="stripUsernameHeaderPrefix")

    @property
    def signup_allowed(self) -> bool:
        return True  # the proxy decides who gets in; their first request creates the account


Provider = Annotated[
    BuiltinProvider
    | GitHubProvider
    | GitLabProvider
    | BitbucketCloudProvider
    | BitbucketServerProvider
    | GerritProvider
    | OpenIDConnectProvider
    | SAMLProvider
    | HTTPHeaderProvider,
    Field(discriminator="type"),
]
OAuthCodeHostProvider = GitHubProvider | GitLabProvider | BitbucketCloudProvider | BitbucketServerProvider
_ADAPTER: TypeAdapter[Provider] = TypeAdapter(Provider)

DEFAULT_NAMES = {
    "builtin": "username and password",
    "github": "GitHub",
    "gitlab": "GitLab",
    "bitbucketcloud": "Bitbucket Cloud",
    "bitbucketserver": "Bitbucket Data Center",
    "gerrit": "Gerrit",
    "openidconnect": "OpenID Connect",
    "saml": "SAML",
    "http-header": "HTTP authentication proxy",
}


def canonical_type(kind: object) -> object:
    """The real type string for a spec alias (`codehost_a` → `github`); other values unchanged."""
    return PROVIDER_TYPE_ALIASES.get(kind, kind) if isinstance(kind, str) else kind


def _location(loc: tuple[int | str, ...]) -> str:
    # Drop the discriminator tag pydantic inserts (e.g. "github") so the path reads like the file.
    return ".".join(str(p) for p in loc[1:]) or "(entry)"


def not_a_boolean(value: object) -> str:
    """The message for a value given to a boolean option: booleans are strict JSON booleans (issue #32)."""
    return f"must be true or false (a JSON boolean, without quotes), not {json.dumps(value, default=str)}"


def parse_provider(index: int, raw: dict[str, Any]) -> Provider:
    """One validated entry; ValueError naming `[index].field` and the problem for each mistake."""
    kind = canonical_type(raw.get("type"))
    if kind not in PROVIDER_TYPES:
        known = ", ".join(PROVIDER_TYPES)
        raise ValueError(f"[{index}].type must be one of {known} (got {raw.get('type')!r})")
    try:
        return _ADAPTER.validate_python({**raw, "type": kind})
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = _location(tuple(error["loc"]))
            message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
            if error["type"] == "bool_type":
                message = not_a_boolean(error.get("input"))
            problems.append(f"[{index}] ({kind}) {where}: {str(message).removeprefix('Value error, ')}")
        raise ValueError("; ".join(problems)) from None


def parse_providers(raw: list[dict[str, Any]]) -> list[Provider]:
    """Every entry validated, plus the cross-entry rules (one builtin/saml/http-header; no duplicates)."""
    problems: list[str] = []
    providers: list[Provider] = []
    for index, entry in enumerate(raw):
        try:
            providers.append(parse_provider(index, entry))
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))
    seen: dict[str, int] = {}
    for index, provider in enumerate(providers):
        key = provider.kind if provider.kind in SINGLETON_KINDS else provider.id
        if key in seen:
            raise ValueError(
                f"[{index}] duplicates [{seen[key]}]: "
                + (f"at most one {provider.kind} provider" if key == provider.kind else "same type, URL and client")
            )
        seen[key] = index
    return providers

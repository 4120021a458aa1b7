"""`auth.providers` entries: one typed model per kind, each kind's defaults, aliases and readable errors."""

from __future__ import annotations

import json

import pytest

from codewell.config import parse_site_config
from codewell.config.providers import (
    BitbucketCloudProvider,
    BitbucketServerProvider,
    GerritProvider,
    GitHubProvider,
    GitLabProvider,
    HTTPHeaderProvider,
    OpenIDConnectProvider,
    SAMLProvider,
)
from codewell.core.errors import ConfigError

OAUTH = {"clientID": "id", "clientSecret": "secret"}


def providers(*entries: dict[str, object]) -> list[object]:

    return list(parse_site_config(json.dumps({"auth.providers": list(entries)})).providers)


def test_aliases_and_defaults_per_kind() -> None:
    gh, gl, bbc, bbs, gerrit, oidc, header = providers(
        {"type": "codehost_a", **OAUTH},
        {"type": "codehost_b", **OAUTH},
        {"type": "codehost_c_cloud", "clientKey": "k", "clientSecret": "s"},
        {"type": "codehost_c_server", "url": "https://bitbucket.corp", **OAUTH},
        {"type": "codehost_d", "url": "https://gerrit.corp/"},
        {"type": "openidconnect", "issuer": "https://idp.corp/", "clientID": "c"},
        {"type": "http-header", "usernameHeader": "X-Forwarded-User"},
    )
    assert isinstance(gh, GitHubProvider)
    assert (gh.url, gh.allow_signup, gh.signup_allowed) == ("https://github.com/", False, False)
    assert isinstance(gl, GitLabProvider)
    assert (gl.url, gl.api_scope, gl.allow_signup, gl.token_refresh_window_minutes) == (
        "https://gitlab.com/",
        "api",
        True,
        10,
    )
    assert isinstance(bbc, BitbucketCloudProvider)
    assert (bbc.url, bbc.api_scope, bbc.signup_allowed) == ("https://bitbucket.org/", "account,email,repository", True)
    assert isinstance(bbs, BitbucketServerProvider)
    assert (bbs.url, bbs.signup_allowed) == ("https://bitbucket.corp/", False)
    assert isinstance(gerrit, GerritProvider)
    assert isinstance(oidc, OpenIDConnectProvider)
    assert (oidc.issuer, oidc.allow_signup, oidc.signup_allowed, oidc.single_identity_per_user) == (
        "https://idp.corp",
        None,
        True,
        False,
    )
    assert isinstance(header, HTTPHeaderProvider)
    assert gh.label == "Continue with GitHub"
    assert gh.id != gl.id
    assert len(gh.id) == 16


def test_saml_defaults() -> None:
    (saml,) = providers({"type": "saml", "identityProviderMetadata": "<xml/>"})
    assert isinstance(saml, SAMLProvider)
    assert saml.signup_allowed is True
    assert saml.name_id_format == "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent"
    assert saml.groups_attribute_name == "groups"
    assert saml.insecure_skip_assertion_signature_validation is False


def test_common_fields() -> None:
    (gh,) = providers(
        {"type": "github", **OAUTH, "displayName": "Corp", "displayPrefix": "Log in via ", "hidden": True, "order": 2}
    )
    assert isinstance(gh, GitHubProvider)
    assert (gh.label, gh.hidden, gh.order, gh.no_sign_in) == ("Log in via Corp", True, 2, False)


def test_raw_entries_round_trip_unchanged() -> None:
    config = parse_site_config('{"auth.providers": [{"type": "codehost_a", "clientID": "x", "clientSecret": "y"}]}')
    assert config.auth_providers == [{"type": "codehost_a", "clientID": "x", "clientSecret": "y"}]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"type": "github", "clientID": "x"}, "[0] (github) clientSecret: Field required"),
        ({"type": "github", **OAUTH, "requiredSsoOrgs": ["acme"]}, "numeric organization IDs (not names)"),
        ({"type": "github", **OAUTH, "requiredSsoOrgs": ["all", "1"]}, "numeric organization IDs"),
        ({"type": "github", **OAUTH, "allowOrg": ["x"]}, "[0] (github) allowOrg: unknown field"),
        ({"type": "gitlab", **OAUTH, "apiScope": "write"}, "(gitlab) apiScope"),
        ({"type": "gitlab", **OAUTH, "allowGroups": ["/eng"]}, "not a group's full path"),
        (
            {"type": "openidconnect", "issuer": "https://i", "clientID": "c", "requireEmailDomain": "@corp.com"},
            "without a leading '@'",
        ),
        ({"type": "openidconnect", "issuer": "idp.corp", "clientID": "c"}, "issuer's absolute http(s) URL"),
        ({"type": "saml"}, "exactly one of identityProviderMetadataURL and identityProviderMetadata"),
        ({"type": "http-header"}, "usernameHeader: Field required"),
        ({"type": "bitbucketserver", **OAUTH}, "url: Field required"),
        ({"type": "ldap"}, "[0].type must be one of"),
    ],
)
def test_invalid_entries_name_the_field(entry: dict[str, object], message: str) -> None:

    with pytest.raises(ConfigError) as info:
        parse_site_config(json.dumps({"auth.providers": [entry]}))
    assert message in info.value.message


def test_singletons_and_duplicates_are_refused() -> None:
    with pytest.raises(ConfigError, match="at most one builtin provider"):
        providers({"type": "builtin"}, {"type": "builtin"})
    with pytest.raises(ConfigError, match="same type, URL and client"):
        providers({"type": "github", **OAUTH}, {"type": "codehost_a", **OAUTH})


def test_secrets_are_not_in_reprs() -> None:
    (gh,) = providers({"type": "github", "clientID": "id", "clientSecret": "s3cr3t-value"})
    assert "s3cr3t-value" not in repr(gh)

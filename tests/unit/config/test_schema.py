from __future__ import annotations

import pytest

from codewell.config import SiteConfig, parse_site_config
from codewell.core.errors import ConfigError


def test_empty_object_gives_documented_defaults() -> None:
    config = parse_site_config("{}")
    assert config.mcp_enabled is True
    assert config.mcp_tools_disabled == []
    assert config.auth_idp_dynamic_client_registration_enabled is True
    # Sign-up is off unless the site config turns it on (issue #33).
    assert config.auth_providers == [{"type": "builtin", "allowSignup": False}]
    assert config.auth_access_tokens.default_expiration_days == 90
    assert config.auth_access_tokens.expiration_option_days == [7, 14, 30, 60, 90]
    assert config.external_url is None


def test_comments_and_trailing_commas_are_accepted() -> None:
    text = """
    // a comment
    {
      /* block */ "mcp.enabled": false,
      "mcp.tools.disabled": ["read_file",],
    }
    """
    config = parse_site_config(text)
    assert config.mcp_enabled is False
    assert config.mcp_tools_disabled == ["read_file"]


def test_unknown_key_is_rejected_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        parse_site_config('{"mcp.enabeld": true}')
    assert "mcp.enabeld: unknown option; did you mean 'mcp.enabled'?" in info.value.message


def test_wrong_type_names_the_key_path() -> None:
    with pytest.raises(ConfigError) as info:
        parse_site_config('{"auth.accessTokens": {"defaultExpirationDays": "soon"}}')
    assert "auth.accessTokens.defaultExpirationDays:" in info.value.message


def test_nested_unknown_key_names_the_full_path() -> None:
    with pytest.raises(ConfigError) as info:
        parse_site_config('{"auth.lockout": {"lockoutPeriodd": 5}}')
    assert "auth.lockout.lockoutPeriodd: unknown option" in info.value.message


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_site_config('{"mcp.enabled": "maybe", "externalURL": "code.example.com"}')
    assert "mcp.enabled:" in info.value.message
    assert "externalURL: must be an absolute http:// or https:// URL" in info.value.message


def test_unknown_provider_type_is_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        parse_site_config('{"auth.providers": [{"type": "builtin"}, {"type": "ldap"}]}')
    assert "auth.providers: [1].type must be one of" in info.value.message


def test_spec_neutral_provider_names_are_accepted() -> None:
    config = parse_site_config('{"auth.providers": [{"type": "codehost_a", "clientID": "x", "clientSecret": "y"}]}')
    assert config.auth_providers[0]["type"] == "codehost_a"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 2]", "must be a JSON object at the top level"),
        ('{"mcp.enabled": tru}', "is not valid JSON"),
    ],
)
def test_malformed_files_are_rejected(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_site_config(text)
    assert expected in info.value.message


def test_external_url_is_normalised_without_trailing_slash() -> None:
    assert parse_site_config('{"externalURL": "https://code.example.com/"}').external_url == (
        "https://code.example.com"
    )


def test_dynamic_client_registration_is_off_when_mcp_is_off() -> None:
    assert not SiteConfig.model_validate({"mcp.enabled": False}).mcp_dynamic_client_registration_enabled
    assert SiteConfig.model_validate({}).mcp_dynamic_client_registration_enabled

"""`email.smtp` / `email.senderAddress` validation and the SMTP password lookup."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from codewell.accounts.mail import MailNotConfigured, smtp_password
from codewell.config.schema import SiteConfig

SENDER = {"email.senderAddress": "codewell@example.org"}


def test_defaults_and_a_full_entry() -> None:
    assert SiteConfig.model_validate({}).email_smtp is None
    config = SiteConfig.model_validate(
        {"email.smtp": {"host": "smtp.example.org", "username": "u", "passwordEnv": "SMTP_PW"}, **SENDER}
    )
    assert config.email_smtp is not None
    assert (config.email_smtp.port, config.email_smtp.tls, config.email_smtp.timeout_seconds) == (587, "starttls", 10)
    assert config.email_verification_link_expiry == 86400


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"email.smtp": {"host": "h"}}, "email.smtp needs email.senderAddress"),
        ({"email.smtp": {"host": "h", "password": "p"}, **SENDER}, "a password needs a username"),
        ({"email.smtp": {"host": "h", "username": "u", "password": "p", "passwordEnv": "P"}, **SENDER}, "not both"),
        ({"email.smtp": {"host": "h", "tls": "ssl"}, **SENDER}, "'none', 'starttls' or 'tls'"),
        ({"email.smtp": {"host": "h", "port": 0}, **SENDER}, "greater than or equal to 1"),
        ({"email.smtp": {"host": ""}, **SENDER}, "at least 1 character"),
        ({"email.smtp": {"host": "h", "from": "x@y.z"}, **SENDER}, "Extra inputs are not permitted"),
        ({"email.senderAddress": "not an address"}, "should match pattern"),
        ({"email.verificationLinkExpiry": 10}, "greater than or equal to 300"),
    ],
)
def test_bad_entries_name_the_problem(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SiteConfig.model_validate(options)


def test_password_env_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    config = SiteConfig.model_validate(
        {"email.smtp": {"host": "h", "username": "u", "passwordEnv": "CODEWELL_TEST_PW"}, **SENDER}
    ).email_smtp
    assert config is not None
    monkeypatch.delenv("CODEWELL_TEST_PW", raising=False)
    with pytest.raises(MailNotConfigured, match="CODEWELL_TEST_PW"):
        smtp_password(config)
    monkeypatch.setenv("CODEWELL_TEST_PW", "secret")
    assert smtp_password(config) == "secret"

"""Outgoing mail through the configured SMTP relay (`email.smtp`), with the stdlib's smtplib.

`Mailer.send` blocks (network I/O): call it from a worker thread, as the threaded REST and page handlers do.
"""

from __future__ import annotations

import os
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import TYPE_CHECKING

from codewell.config.schema import SmtpConfig
from codewell.core.errors import InvalidInput, Unavailable

if TYPE_CHECKING:
    from codewell.runtime import Runtime


class MailNotConfigured(InvalidInput):
    """Raised when mail is needed but `email.smtp` is not set."""


class MailDeliveryFailed(Unavailable):
    """The relay refused the message or could not be reached (the message says which, never a credential)."""


def smtp_password(config: SmtpConfig) -> str | None:
    """The SMTP password from `password` or the `passwordEnv` variable; InvalidInput when the variable is unset."""
    if config.password_env is None:
        return config.password
    value = os.environ.get(config.password_env)
    if not value:
        raise MailNotConfigured(
            f"the environment variable {config.password_env} (email.smtp.passwordEnv) is not set",
            hint="set it in the environment of the codewell process, or remove passwordEnv",
        )
    return value


class Mailer:
    """Sends plain-text messages from `email.senderAddress` through `email.smtp`."""

    def __init__(self, config: SmtpConfig, sender: str) -> None:
        self.config = config
        self.sender = sender

    @classmethod
    def from_runtime(cls, runtime: Runtime) -> Mailer | None:
        """The mailer for the current site config; None when `email.smtp` is not configured."""
        config = runtime.config
        if config.email_smtp is None or config.email_sender_address is None:
            return None
        return cls(config.email_smtp, config.email_sender_address)

    def send(self, to: str, subject: str, body: str) -> None:
        """Deliver one message; returns once the relay accepted it, else raises MailDeliveryFailed."""
        message = EmailMessage()
        message["From"] = self.sender
        message["To"] = to
        message["Subject"] = subject
        message["Date"] = formatdate(usegmt=True)
        message["Message-ID"] = make_msgid(domain=self.sender.rsplit("@", 1)[-1])
        message.set_content(body)
        password = smtp_password(self.config)
        try:
            with self._connect() as client:
                if self.config.username is not None and password is not None:
                    client.login(self.config.username, password)
                client.send_message(message)
        except (OSError, smtplib.SMTPException) as exc:
            # The exception text names the host and the SMTP reply; it never contains the password.
            raise MailDeliveryFailed(
                f"could not send mail through {self.config.host}:{self.config.port}: {exc}",
                hint="check email.smtp in the site configuration and that the relay is reachable",
            ) from None

    def _connect(self) -> smtplib.SMTP:
        cfg = self.config
        if cfg.tls == "tls":
            return smtplib.SMTP_SSL(
                cfg.host, cfg.port, timeout=cfg.timeout_seconds, context=ssl.create_default_context()
            )
        client = smtplib.SMTP(cfg.host, cfg.port, timeout=cfg.timeout_seconds)
        try:
            if cfg.tls == "starttls":
                client.ehlo()
                if not client.has_extn("starttls"):
                    raise smtplib.SMTPNotSupportedError("the server does not offer STARTTLS (email.smtp.tls)")
                client.starttls(context=ssl.create_default_context())
                client.ehlo()
        except BaseException:
            client.close()
            raise
        return client

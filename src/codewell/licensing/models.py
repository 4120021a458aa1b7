"""Tables owned by licensing: the license keys this instance has seen, and the credits keys allocated."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import BigInteger, Boolean, Date, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base, UTCDateTime, utcnow


class LicenseKeyRow(Base):
    """A key installed with `codewell license set` (`active`: the one in force unless site config sets
    `licenseKey`) or found in site config. `problem` is the last problem found with it ("" when none):
    a problem is audited once, when it first appears, not on every request."""

    __tablename__ = "license_keys"

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(20))
    active: Mapped[bool] = mapped_column(Boolean, default=False)
    problem: Mapped[str] = mapped_column(String(50), default="")
    installed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Not a foreign key: the record of who installed a key outlives the account.
    installed_by: Mapped[int | None] = mapped_column(Integer, nullable=True)


class LicenseCreditRow(Base):
    """How many credits license keys allocated for one feature in one period (a calendar month, UTC).

    The ledger that makes allocation idempotent: a key applied again (or by another process) finds its
    amount here and allocates nothing; a key entitling more this period allocates only the difference."""

    __tablename__ = "license_credit_allocations"

    period: Mapped[date] = mapped_column(Date, primary_key=True)
    feature: Mapped[str] = mapped_column(String(50), primary_key=True)
    amount: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

"""Tables owned by the foundation: instance-wide metadata."""

from __future__ import annotations

from sqlalchemy import BigInteger, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base


class InstanceMeta(Base):
    """Key/value facts about this instance (its ID, when it was initialised)."""

    __tablename__ = "instance_meta"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class CacheEpochRow(Base):
    """One counter per kind of access data (`accounts`, `repos`), bumped in the transaction of every change of
    it by the triggers of the tables that hold it: processes keep access answers while it stays the same
    (codewell/db/epochs.py)."""

    __tablename__ = "cache_epochs"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)

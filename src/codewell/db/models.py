"""Tables owned by the foundation: instance-wide metadata."""

from __future__ import annotations

from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column

from codewell.db.base import Base


class InstanceMeta(Base):
    """Key/value facts about this instance (its ID, when it was initialised)."""

    __tablename__ = "instance_meta"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)

"""Storage: SQLAlchemy engine and sessions, the declarative base, and Alembic migrations."""

from codewell.db.base import Base
from codewell.db.database import Database, MigrationState

__all__ = ["Base", "Database", "MigrationState"]

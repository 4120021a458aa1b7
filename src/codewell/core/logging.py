"""Structured logging: text or JSON lines, each carrying the request ID of the request being served."""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime

request_id_var: ContextVar[str] = ContextVar("codewell_request_id", default="")

# Attributes every LogRecord has; anything else passed with `extra=` is emitted as a structured field.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's ANSI-coloured duplicate of the message
}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id and any extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if request_id := request_id_var.get():
            entry["request_id"] = request_id
        entry.update(_fields(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """Human-readable lines with the request ID and extra fields appended as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S")
        parts = [f"{stamp} {record.levelname.lower():7} {record.name}: {record.getMessage()}"]
        if request_id := request_id_var.get():
            parts.append(f"request_id={request_id}")
        parts.extend(f"{k}={v}" for k, v in _fields(record).items())
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(log_format: str = "text", level: str = "info") -> None:
    """Route every logger (ours, uvicorn's, SQLAlchemy's) through one stderr handler in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # Access lines are written by our own middleware, with the request ID and duration.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    # Alembic announces its dialect on every status check; only migrations actually run are worth a line.
    logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)

"""The analytics interface's reports: usage by user/client/date and the user registry, as streamed CSV.

Each granularity reads the rollup kept at its grain (`codewell.analytics.models`), whose stored `csv_tail`
column already holds the row's CSV cells after the user cells, so a report is a sequential read of two
values per row and one string concatenation in Python (issue #9: 5M events, ≤ 2 s to the last byte). User
cells (e-mail, username) come from the accounts directory, escaped once per user. Memory stays flat: rows
are fetched in partitions from a raw (on PostgreSQL server-side) cursor and yielded as encoded chunks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from sqlalchemy import ColumnElement, String, cast, func, literal_column, select

from codewell.accounts.service import AccountService
from codewell.analytics.credits import CreditBucket, CreditService
from codewell.analytics.models import UsageDailyRow, UsageUserDayRow, UsageUserMonthRow, UsageUserTotalRow
from codewell.analytics.rollup import COUNTERS
from codewell.authz import Action, ensure
from codewell.core.actors import Actor
from codewell.core.errors import InvalidInput, PermissionDenied

if TYPE_CHECKING:
    from codewell.runtime import Runtime

FETCH_ROWS = 5000
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# A cell starting with one of these is a formula to spreadsheet programs (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NEEDS_QUOTES = re.compile(r'[",\r\n]')


def _unknown_user(user_id: int) -> str:
    """The user cells of an ID that has no account any more (deleted): the ID only, not active."""
    return f"{user_id},,,false,"


class Granularity(StrEnum):
    BY_USER = "by_user"
    BY_USER_MONTH = "by_user_month"
    BY_USER_DAY = "by_user_day"
    BY_USER_DAY_CLIENT_LANGUAGE = "by_user_day_client_language"


USER_COLUMNS = ("Instance user ID", "User Email", "Username", "Active User")
COUNTER_COLUMNS = (
    "Events",
    "Searches",
    "Code Navigation Events",
    "Deep Search Questions",
    "Code Finder Calls",
    "MCP Tool Calls",
    "Errors",
)
GRAIN_COLUMNS: dict[Granularity, tuple[str, ...]] = {
    Granularity.BY_USER: (),
    Granularity.BY_USER_MONTH: ("Timestamp Month",),
    Granularity.BY_USER_DAY: ("Timestamp Date",),
    Granularity.BY_USER_DAY_CLIENT_LANGUAGE: ("Client Name", "Timestamp Date", "Language"),
}
REGISTRY_COLUMNS = ("Instance user ID", "Service Account", "Site Admin")


def report_header(granularity: Granularity) -> tuple[str, ...]:
    """The stable column list of the usage report at `granularity` (documented in docs/analytics.md)."""
    return (*USER_COLUMNS, *GRAIN_COLUMNS[granularity], *COUNTER_COLUMNS)


def csv_cell(value: str) -> str:
    """`value` as one RFC 4180 field, neutralised for spreadsheets: a leading = + - @ tab or CR gets a `'`
    prefix so the cell is text, not a formula."""
    if value.startswith(_FORMULA_START):
        value = "'" + value
    if _NEEDS_QUOTES.search(value):
        value = '"' + value.replace('"', '""') + '"'
    return value


def csv_line(cells: tuple[str, ...] | list[str]) -> str:
    return ",".join(cells) + "\r\n"


def parse_date(name: str, value: str | None) -> date | None:
    """A `YYYY-MM-DD` query parameter, None when absent or empty; InvalidInput naming the parameter."""
    if value is None or value == "":
        return None
    try:
        if not _DATE.match(value):
            raise ValueError
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{name} must be a date in the form YYYY-MM-DD, got {value[:40]!r}") from None


def parse_range(start: str | None, end: str | None) -> tuple[date | None, date | None]:
    """The (startDate, endDate) filter; each bound optional; InvalidInput when reversed."""
    first, last = parse_date("startDate", start), parse_date("endDate", end)
    if first is not None and last is not None and first > last:
        raise InvalidInput(
            f"startDate ({first}) is after endDate ({last})", hint="swap them: startDate is the first day"
        )
    return first, last


def parse_granularity(value: str | None) -> Granularity:
    if value is None or value == "":
        return Granularity.BY_USER_DAY_CLIENT_LANGUAGE
    try:
        return Granularity(value)
    except ValueError:
        choices = ", ".join(g.value for g in Granularity)
        raise InvalidInput(f"granularity must be one of {choices}, got {value[:40]!r}") from None


def instance_host(url: str) -> tuple[str, int | None]:
    """(lower-cased host, port or None) of a URL or bare host name; InvalidInput when it has none."""
    text = url.strip()
    try:
        # urlsplit itself raises on a bracketed host that is not an IPv6 address (`[127.0.0.1]:7080`),
        # .port on a port that is not a number or is out of range.
        parts = urlsplit(text if "://" in text else "//" + text)
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or any(c.isspace() for c in text):
        raise InvalidInput(
            f"instanceURL is not a host name or URL: {url[:80]!r}",
            hint="e.g. code.example.com (IPv6 addresses go in brackets: [::1]:7080)",
        )
    return host.lower(), port


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """A validated usage report request."""

    granularity: Granularity
    start: date | None
    end: date | None


# Asked before every /analytics/api/ call of an authenticated caller; raises (a CodewellError) to refuse it.
ApiGate = Callable[[], None]


class AnalyticsService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.accounts = runtime.get(AccountService)
        self._api_gates: list[ApiGate] = []

    @classmethod
    def create(cls, runtime: Runtime) -> Self:
        return cls(runtime)

    def add_api_gate(self, gate: ApiGate) -> None:
        """Ask `gate()` before every analytics API call (after authentication); it raises to refuse
        (licensing: the analytics-api feature). Idempotent."""
        if gate not in self._api_gates:
            self._api_gates.append(gate)

    def check_api(self) -> None:
        """Raise what an API gate raises when the analytics API is refused."""
        for gate in list(self._api_gates):
            gate()

    # -- access -------------------------------------------------------------------------------------------
    def check_access(self, actor: Actor, instance_url: str | None) -> None:
        """Allow instance-wide data only for `instance_url` naming this instance's externalURL host
        (case-insensitive, scheme optional, port optional but must match) and a site admin actor.

        PermissionDenied (403) for anyone but a site admin, checked first so that a caller who may not read
        the data learns nothing from the instanceURL checks (not even this instance's host name); then
        InvalidInput (400) when instanceURL is missing or malformed, PermissionDenied (403) for another instance.
        """
        ensure(actor, Action.ANALYTICS_READ)
        if instance_url is None or not instance_url.strip():
            raise InvalidInput("instanceURL is required", hint=f"pass instanceURL={self.instance_host()}")
        host, port = instance_host(instance_url)
        own_host, own_port = instance_host(self.runtime.external_url)
        if host != own_host or (port is not None and port != self._effective_port(own_port)):
            raise PermissionDenied(f"the instance {instance_url[:80]!r} is not accessible with this token")

    def instance_host(self) -> str:
        return instance_host(self.runtime.external_url)[0]

    def _effective_port(self, port: int | None) -> int:
        if port is not None:
            return port
        return 443 if self.runtime.external_url.startswith("https://") else 80

    # -- usage report -------------------------------------------------------------------------------------
    def usage_report(self, actor: Actor, instance_url: str | None, request: ReportRequest) -> Iterator[bytes]:
        """The usage report as UTF-8 CSV chunks (header first; header only when nothing is in range).

        Access is checked now, before the first chunk; the rows are read lazily while the caller iterates.
        """
        self.check_access(actor, instance_url)
        prefixes = self._user_prefixes(actor)
        return self._stream(request, prefixes)

    def _user_prefixes(self, actor: Actor) -> dict[int, str]:
        """Per user ID, the escaped first four cells of a report line (ID, e-mail, username, active) + ","."""
        return {
            user.id: f"{user.id},{csv_cell(email)},{csv_cell(user.username)},true,"
            for user, email in self.accounts.directory(actor)
        }

    @staticmethod
    def _report_query(request: ReportRequest) -> Any:
        """(user_id, line tail) rows in report order: the tail is the rest of the CSV line after the user
        cells (grain cells and counters, no line end), so Python handles two values per row.

        Each granularity reads the rollup kept at its grain, whose `csv_tail` the database maintains on every
        write: no grouping or formatting at query time. A date filter on `by_user` or `by_user_month` sums
        `usage_user_day` over the range instead (same semantics as before: only days in range count).
        """
        grain = request.granularity
        filtered = request.start is not None or request.end is not None
        source: Any
        if grain is Granularity.BY_USER_DAY_CLIENT_LANGUAGE:
            source = UsageDailyRow.__table__.c
            keys: list[ColumnElement[Any]] = [source.day, source.client, source.language]
        elif grain is Granularity.BY_USER_DAY or filtered:
            source = UsageUserDayRow.__table__.c
            keys = [source.day]
        elif grain is Granularity.BY_USER_MONTH:
            source = UsageUserMonthRow.__table__.c
            keys = [source.month]
        else:
            source = UsageUserTotalRow.__table__.c
            keys = []
        if grain in (Granularity.BY_USER, Granularity.BY_USER_MONTH) and filtered:
            keys = [func.substr(source.day, 1, 7)] if grain is Granularity.BY_USER_MONTH else []
            parts = [*keys, *(func.sum(source[name]) for name in COUNTERS)]
            tail: ColumnElement[Any] = cast(parts[0], String)
            for part in parts[1:]:
                tail = tail.concat(literal_column("','", String)).concat(cast(part, String))
            stmt = select(source.user_id, tail).group_by(source.user_id, *keys)
        else:
            stmt = select(source.user_id, source.csv_tail)
        if request.start is not None:
            stmt = stmt.where(source.day >= request.start.isoformat())
        if request.end is not None:
            stmt = stmt.where(source.day <= request.end.isoformat())
        return stmt.order_by(source.user_id, *keys)

    def _stream(self, request: ReportRequest, prefixes: dict[int, str]) -> Iterator[bytes]:
        """Header, then one chunk per fetched partition. Grain cells need no escaping: days are digits and
        dashes, client and language values are sanitized when rolled up (`codewell.analytics.rollup`).

        Rows come from a raw DBAPI cursor (a server-side one on PostgreSQL), FETCH_ROWS at a time: no ORM or
        Row objects, one string concatenation per line, so memory stays flat and Python work per row is tiny.
        """
        header = report_header(request.granularity)
        yield csv_line(list(header)).encode()
        engine = self.runtime.db.engine
        compiled = self._report_query(request).compile(dialect=engine.dialect)
        sql = str(compiled)
        postgres = engine.dialect.name == "postgresql"
        with engine.connect() as connection:
            raw: Any = connection.connection.driver_connection
            if postgres:
                cursor = raw.cursor(name="codewell_usage_report")
                cursor.itersize = FETCH_ROWS
                cursor.execute(sql, compiled.params)
            else:
                cursor = raw.cursor()
                cursor.execute(sql, [compiled.params[name] for name in compiled.positiontup or ()])
            try:
                while rows := cursor.fetchmany(FETCH_ROWS):
                    text = "\r\n".join([(prefixes.get(uid) or _unknown_user(uid)) + tail for uid, tail in rows])
                    yield (text + "\r\n").encode()
            finally:
                cursor.close()

    # -- user registry ------------------------------------------------------------------------------------
    def user_registry(self, actor: Actor, instance_url: str | None) -> Iterator[bytes]:
        """Every current user as `Instance user ID,Service Account,Site Admin` CSV (true/false), by ID."""
        self.check_access(actor, instance_url)
        users = self.accounts.directory(actor)

        def chunks() -> Iterator[bytes]:
            yield csv_line(list(REGISTRY_COLUMNS)).encode()
            for start in range(0, len(users), FETCH_ROWS):
                part = users[start : start + FETCH_ROWS]
                yield "".join(
                    f"{u.id},{str(u.service_account).lower()},{str(u.site_admin).lower()}\r\n" for u, _ in part
                ).encode()

        return chunks()

    # -- credits ------------------------------------------------------------------------------------------
    def credits(
        self, actor: Actor, instance_url: str | None, start: date | None, end: date | None
    ) -> dict[str, object]:
        """The credits document: {"instanceURL", "startDate", "endDate", "buckets": [...]} (docs/analytics.md)."""
        self.check_access(actor, instance_url)
        buckets: list[CreditBucket] = self.runtime.get(CreditService).list_buckets(actor, start, end)
        return {
            "instanceURL": self.instance_host(),
            "startDate": start.isoformat() if start else None,
            "endDate": end.isoformat() if end else None,
            "buckets": [b.as_json() for b in buckets],
        }

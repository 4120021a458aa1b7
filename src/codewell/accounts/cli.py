"""`codewell users|tokens|roles|audit ...` (thin over the accounts services).

The CLI acts as the service itself (INTERNAL): whoever can run it can read the data dir and database anyway.
"""

from __future__ import annotations

import json
import sys

import click

from codewell.clikit import handle_errors, open_runtime
from codewell.core.actors import INTERNAL

# accounts.tokens.SCOPES by name, spelled here so that `--help` need not import the database layer
# (tests/functional/test_cli_remote.py keeps the two equal).
TOKEN_SCOPES = ("mcp", "site-admin:sudo", "user:all")


def _flag(value: bool) -> str:
    return "yes" if value else "no"


# -- users --------------------------------------------------------------------------------------------------
@click.group("users")
def users() -> None:
    """User accounts: create, list, set-admin, delete, reset-link, unlock, verify-email, repos."""


@users.command("create")
@click.argument("username")
@click.option("--email", help="E-mail address (marked verified).")
@click.option("--site-admin", is_flag=True, help="Make the user a site admin.")
@click.option("--service-account", is_flag=True, help="A service account: no password, access tokens only.")
@click.option("--display-name", default="", help="Display name.")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin (else print a reset link).")
@click.pass_context
@handle_errors
def users_create(
    ctx: click.Context,
    username: str,
    email: str | None,
    site_admin: bool,
    service_account: bool,
    display_name: str,
    password_stdin: bool,
) -> None:
    """Create a user; prints a password reset link unless --password-stdin or --service-account."""
    from codewell.accounts.credentials import CredentialService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    password = sys.stdin.readline().rstrip("\n") if password_stdin else None
    user = runtime.get(AccountService).create_user(
        INTERNAL,
        username,
        password=password,
        email=email,
        email_verified=email is not None,
        site_admin=site_admin,
        service_account=service_account,
        display_name=display_name,
    )
    click.echo(f"created user {user.username} (id {user.id}, site admin: {_flag(user.site_admin)})")
    if not service_account and password is None:
        link = runtime.get(CredentialService).password_reset_link(INTERNAL, user.id)
        click.echo(f"password reset link: {link}")


@users.command("list")
@click.option("--query", default="", help="Filter by a username or display name substring.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@handle_errors
def users_list(ctx: click.Context, query: str, as_json: bool) -> None:
    """List users."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    found = runtime.get(AccountService).list_users(INTERNAL, query, limit=10000)
    if as_json:
        click.echo(json.dumps([u.as_json() for u in found], indent=2))
        return
    roles = runtime.get(RoleService)
    for user in found:
        kind = "service account" if user.service_account else "user"
        names = ", ".join(roles.roles_of_user(user.id, site_admin=user.site_admin))
        click.echo(f"{user.id:>6}  {user.username:<30} {kind:<16} {names}")


@users.command("set-admin")
@click.argument("username")
@click.argument("value", type=click.Choice(["true", "false"]))
@click.pass_context
@handle_errors
def users_set_admin(ctx: click.Context, username: str, value: str) -> None:
    """Make USERNAME a site admin (true) or not (false); the last site admin cannot be demoted."""
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    accounts = open_runtime(ctx).get(AccountService)
    user = accounts.set_site_admin(INTERNAL, accounts.get_by_username(username).id, value == "true")
    click.echo(f"{user.username}: site admin {_flag(user.site_admin)}")


@users.command("delete")
@click.argument("username")
@click.pass_context
@handle_errors
def users_delete(ctx: click.Context, username: str) -> None:
    """Delete USERNAME with its tokens, sessions, e-mails, roles and repository grants."""
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    accounts = open_runtime(ctx).get(AccountService)
    accounts.delete_user(INTERNAL, accounts.get_by_username(username).id)
    click.echo(f"deleted user {username}")


@users.command("reset-link")
@click.argument("username")
@click.pass_context
@handle_errors
def users_reset_link(ctx: click.Context, username: str) -> None:
    """Print a one-time password reset link for USERNAME."""
    from codewell.accounts.credentials import CredentialService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).get_by_username(username)
    click.echo(runtime.get(CredentialService).password_reset_link(INTERNAL, user.id))


@users.command("unlock")
@click.argument("username")
@click.pass_context
@handle_errors
def users_unlock(ctx: click.Context, username: str) -> None:
    """End a sign-in lockout of USERNAME (auth.lockout) now."""
    from codewell.accounts.credentials import CredentialService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).get_by_username(username)
    runtime.get(CredentialService).unlock(INTERNAL, user.id)
    click.echo(f"{user.username}: unlocked")


@users.command("verify-email")
@click.argument("username")
@click.argument("email")
@click.pass_context
@handle_errors
def users_verify_email(ctx: click.Context, username: str, email: str) -> None:
    """Add EMAIL to USERNAME (if missing) and mark it verified."""
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    accounts = open_runtime(ctx).get(AccountService)
    user = accounts.get_by_username(username)
    if email.strip().lower() in {e.email for e in accounts.list_emails(INTERNAL, user.id)}:
        accounts.set_email_verified(INTERNAL, user.id, email, True)
    else:
        accounts.add_email(INTERNAL, user.id, email, verified=True)
    click.echo(f"{user.username}: {email.strip().lower()} verified")


@users.command("repos")
@click.argument("username")
@click.option("--set", "names", help="Comma-separated repository names: replaces the user's explicit grants.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/users/{username}/repos).")
@click.pass_context
@handle_errors
def users_repos(ctx: click.Context, username: str, names: str | None, as_json: bool) -> None:
    """Show (or --set) the private repositories explicitly granted to USERNAME."""
    from codewell.accounts.audit import AuditService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.repos.service import RepoService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).get_by_username(username)
    repos = runtime.get(RepoService)
    if names is not None:
        granted = [n.strip() for n in names.split(",") if n.strip()]
        repos.set_user_repos(INTERNAL, user.id, granted)
        # Explicit grants override what code hosts sync: audited.
        details = {"user": user.username, "repos": sorted(granted)[:100]}
        runtime.get(AuditService).record("repos.grants", "set", actor=INTERNAL, details=details)
    granted_now = [repo.name for repo in repos.repos_of_user(INTERNAL, user.id)]
    if as_json:
        click.echo(json.dumps({"repos": granted_now}, indent=2))
        return
    for name in granted_now:
        click.echo(name)


# -- tokens -------------------------------------------------------------------------------------------------
@click.group("tokens")
def tokens() -> None:
    """Access tokens: create, list, revoke."""


@tokens.command("create")
@click.argument("username")
@click.option("--note", default="", help="What the token is for.")
@click.option(
    "--scope", "scopes", multiple=True, type=click.Choice(TOKEN_SCOPES), help="Scope (repeatable; default user:all)."
)
@click.option("--expires-in-days", type=int, help="Expiry in days (default: no expiry when the site allows it).")
@click.pass_context
@handle_errors
def tokens_create(
    ctx: click.Context, username: str, note: str, scopes: tuple[str, ...], expires_in_days: int | None
) -> None:
    """Create an access token for USERNAME and print it (the only time it is shown)."""
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.tokens import TokenService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).get_by_username(username)
    raw, info = runtime.get(TokenService).create_token(
        INTERNAL, user.id, note, scopes or ("user:all",), expires_in_days
    )
    click.echo(raw)
    click.echo(f"token {info.id} for {user.username}: scopes {' '.join(info.scopes)}", err=True)


@tokens.command("list")
@click.argument("username")
@click.option("--active", "only_active", is_flag=True, help="Only tokens that work now (not revoked or expired).")
# Revoked tokens used to be hidden unless --all was given; they are listed by default now (docs/security.md).
@click.option("--all", "_all", is_flag=True, hidden=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/tokens?user=USERNAME).")
@click.pass_context
@handle_errors
def tokens_list(ctx: click.Context, username: str, only_active: bool, _all: bool, as_json: bool) -> None:
    """List USERNAME's tokens with their state: active, expired or revoked (never the secrets)."""
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.tokens import TokenService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.db.base import utcnow  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).get_by_username(username)
    now = utcnow()
    listed = runtime.get(TokenService).list(INTERNAL, user.id, include_revoked=not only_active)
    shown = [t for t in listed if not only_active or t.state(now) == "active"]
    if as_json:
        click.echo(json.dumps({"tokens": [t.as_json() for t in shown]}, indent=2))
        return
    for t in shown:
        state = t.state(now)
        expires = t.expires_at.date().isoformat() if t.expires_at else "never"
        used = t.last_used_at.isoformat(timespec="minutes") if t.last_used_at else "never"
        click.echo(f"{t.id:>6}  {state:<8} {' '.join(t.scopes):<26} expires {expires:<10} used {used:<16} {t.note}")


@tokens.command("revoke")
@click.argument("token_id", type=int)
@click.pass_context
@handle_errors
def tokens_revoke(ctx: click.Context, token_id: int) -> None:
    """Revoke token TOKEN_ID (it stops working at once)."""
    from codewell.accounts.tokens import TokenService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    open_runtime(ctx).get(TokenService).revoke(INTERNAL, token_id)
    click.echo(f"revoked token {token_id}")


# -- roles --------------------------------------------------------------------------------------------------
@click.group("roles")
def roles() -> None:
    """Roles and permissions: list, create, rename, delete, grant, revoke, assign, unassign."""


@roles.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the shape of GET /.api/roles).")
@click.pass_context
@handle_errors
def roles_list(ctx: click.Context, as_json: bool) -> None:
    """List roles with their permissions and members."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    service = open_runtime(ctx).get(RoleService)
    found = service.list_roles(INTERNAL)
    if as_json:
        click.echo(json.dumps({"roles": [role.as_json() for role in found]}, indent=2))
        return
    for role in found:
        members = "" if role.system else f"  members: {', '.join(service.users_with_role(INTERNAL, role.name))}"
        kind = "system" if role.system else "custom"
        click.echo(f"{role.name} ({kind}): {', '.join(role.permissions) or '(no permissions)'}{members}")


@roles.command("permissions")
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"permissions": [{"name", "description"}]}.')
def roles_permissions(as_json: bool) -> None:
    """List the permissions roles can hold."""
    from codewell.accounts.permissions import PERMISSIONS  # noqa: PLC0415 - lazy command (docs/architecture.md)

    if as_json:
        listed = [{"name": name, "description": text} for name, text in sorted(PERMISSIONS.items())]
        click.echo(json.dumps({"permissions": listed}, indent=2))
        return
    for name, description in sorted(PERMISSIONS.items()):
        click.echo(f"{name}  {description}")


@roles.command("create")
@click.argument("name")
@click.option("--permission", "permissions", multiple=True, help="Permission to include (repeatable).")
@click.pass_context
@handle_errors
def roles_create(ctx: click.Context, name: str, permissions: tuple[str, ...]) -> None:
    """Create a custom role."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    role = open_runtime(ctx).get(RoleService).create_role(INTERNAL, name, permissions)
    click.echo(f"created role {role.name}: {', '.join(role.permissions) or '(no permissions)'}")


@roles.command("rename")
@click.argument("name")
@click.argument("new_name")
@click.pass_context
@handle_errors
def roles_rename(ctx: click.Context, name: str, new_name: str) -> None:
    """Rename a custom role."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    open_runtime(ctx).get(RoleService).rename_role(INTERNAL, name, new_name)
    click.echo(f"renamed role {name} to {new_name}")


@roles.command("delete")
@click.argument("name")
@click.pass_context
@handle_errors
def roles_delete(ctx: click.Context, name: str) -> None:
    """Delete a custom role (its assignments go with it)."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    open_runtime(ctx).get(RoleService).delete_role(INTERNAL, name)
    click.echo(f"deleted role {name}")


@roles.command("grant")
@click.argument("name")
@click.argument("permission")
@click.pass_context
@handle_errors
def roles_grant(ctx: click.Context, name: str, permission: str) -> None:
    """Add PERMISSION to role NAME (e.g. `codewell roles grant User MCP#ACCESS`)."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    role = open_runtime(ctx).get(RoleService).set_permission(INTERNAL, name, permission, granted=True)
    click.echo(f"{role.name}: {', '.join(role.permissions) or '(no permissions)'}")


@roles.command("revoke")
@click.argument("name")
@click.argument("permission")
@click.pass_context
@handle_errors
def roles_revoke(ctx: click.Context, name: str, permission: str) -> None:
    """Remove PERMISSION from role NAME (e.g. `codewell roles revoke User MCP#ACCESS`)."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    role = open_runtime(ctx).get(RoleService).set_permission(INTERNAL, name, permission, granted=False)
    click.echo(f"{role.name}: {', '.join(role.permissions) or '(no permissions)'}")


@roles.command("assign")
@click.argument("name")
@click.argument("username")
@click.pass_context
@handle_errors
def roles_assign(ctx: click.Context, name: str, username: str) -> None:
    """Assign custom role NAME to USERNAME."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).get_by_username(username)
    runtime.get(RoleService).set_assignment(INTERNAL, name, user.id, assigned=True)
    click.echo(f"assigned {name} to {user.username}")


@roles.command("unassign")
@click.argument("name")
@click.argument("username")
@click.pass_context
@handle_errors
def roles_unassign(ctx: click.Context, name: str, username: str) -> None:
    """Remove custom role NAME from USERNAME."""
    from codewell.accounts.roles import RoleService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user = runtime.get(AccountService).get_by_username(username)
    runtime.get(RoleService).set_assignment(INTERNAL, name, user.id, assigned=False)
    click.echo(f"unassigned {name} from {user.username}")


# -- audit --------------------------------------------------------------------------------------------------
@click.command("audit")
@click.option("--entity", default="", help="Only this entity, e.g. auth.accessToken.")
@click.option("--action", default="", help="Only this action, e.g. failed.")
@click.option("--user", "username", default="", help="Only entries whose actor is this user.")
@click.option("--limit", default=50, show_default=True, help="How many entries (newest first).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@click.pass_context
@handle_errors
def audit(ctx: click.Context, entity: str, action: str, username: str, limit: int, as_json: bool) -> None:
    """Show the security audit log, newest first."""
    from codewell.accounts.audit import AuditService  # noqa: PLC0415 - lazy command (docs/architecture.md)
    from codewell.accounts.service import AccountService  # noqa: PLC0415 - lazy command (docs/architecture.md)

    runtime = open_runtime(ctx)
    user_id = runtime.get(AccountService).get_by_username(username).id if username else None
    entries = runtime.get(AuditService).list(INTERNAL, entity=entity, action=action, user_id=user_id, limit=limit)
    for e in entries:
        if as_json:
            click.echo(json.dumps(e.as_json(), sort_keys=True))
            continue
        who = e.actor_username or "-"
        reason = f" ({e.reason})" if e.reason else ""
        click.echo(f"{e.created_at:%Y-%m-%d %H:%M:%S}  {e.entity} {e.action}{reason}  by {who}  ip {e.ip or '-'}")


COMMANDS: list[click.Command] = [users, tokens, roles, audit]

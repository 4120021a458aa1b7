"""Site admin pages of the web capability: the hub, repositories (add, remove, sync now, errors, index status),
the site configuration (view, edit with errors at their key paths, nothing saved when invalid) and the MCP
switches with the tool list. The users, roles, audit, OAuth, license and credits pages belong to their
capabilities; base.html links them all from one admin nav.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import json5
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.authz import Action
from codewell.config import SiteConfig
from codewell.config.providers import not_a_boolean
from codewell.config.schema import site_config_json_schema
from codewell.core.actors import Actor
from codewell.core.errors import CodewellError
from codewell.http import urls
from codewell.http.csrf import verify_form
from codewell.http.guards import require
from codewell.http.requests import form_text, runtime_of
from codewell.http.templates import render
from codewell.jobs.service import JobService
from codewell.repos.service import RepoService, repo_resource
from codewell.runtime import Runtime

# -- the hub --------------------------------------------------------------------------------------------------


async def admin_home(request: Request) -> Response:
    require(request, Action.SITE_ADMIN)
    return render(request, "web/admin_home.html")


# -- repositories ---------------------------------------------------------------------------------------------


def _repos_context(runtime: Runtime, actor: Actor) -> dict[str, Any]:
    service = runtime.get(RepoService)
    columns = service.status_columns()  # e.g. search's index state, label -> name -> text
    all_repos = service.all_repos(actor)
    # Every stage's latest job (mirror, search, symbols, nls, history), in one query.
    jobs = runtime.get(JobService)
    stage_names = list(dict.fromkeys(jobs.stage_kinds().values()))
    stages = jobs.stages([repo_resource(r.id) for r in all_repos])
    repos = [
        {
            "repo": r,
            "url": urls.repo_url("", r.name),
            "status": [(label, values.get(r.name, "")) for label, values in columns.items()]
            + [(stage, stages.get(repo_resource(r.id), {}).get(stage, "-")) for stage in stage_names],
        }
        for r in all_repos
    ]
    config = runtime.config
    return {
        "repos": repos,
        "columns": [*columns, *stage_names],
        "source_errors": service.source_errors,
        "form": {},
        # Who reads a repository registered without saying (issue #33): shown, and the add form's default.
        "default_visibility": config.repos_default_visibility,
        "auth_public": config.auth_public,
    }


async def repos_page(request: Request) -> Response:
    actor = require(request, Action.REPOS_MANAGE)
    context = await run_in_threadpool(_repos_context, runtime_of(request), actor)
    return render(request, "web/admin_repos.html", error="", notice=request.query_params.get("notice", ""), **context)


async def repos_action(request: Request) -> Response:
    """Add (url, name, private), sync now or remove (name); errors re-render the page with the form kept."""
    actor = require(request, Action.REPOS_MANAGE)
    runtime = runtime_of(request)
    form = await request.form()
    verify_form(request, form)
    action, name = form_text(form, "action"), form_text(form, "name").strip()
    service = runtime.get(RepoService)

    def act() -> str:
        if action == "add":
            repo = service.add_repo(
                actor,
                form_text(form, "url").strip(),
                name=name or None,
                private=form_text(form, "private") == "on",
                verify=True,
            )
            service.request_sync(actor, repo.name)
            return f"Added {repo.name}; its sync is queued (see /site-admin/jobs)."
        if action == "sync":
            service.request_sync(actor, name)
            return f"Sync of {name} requested."
        if action == "remove":
            service.remove_repo(actor, name)
            return f"Removed {name}."
        return "Nothing done."

    try:
        notice = await run_in_threadpool(act)
    except CodewellError as exc:
        context = await run_in_threadpool(_repos_context, runtime, actor)
        context["form"] = {"url": form_text(form, "url"), "name": name} if action == "add" else {}
        return render(
            request, "web/admin_repos.html", status_code=exc.http_status, error=exc.message, notice="", **context
        )
    return RedirectResponse(f"/site-admin/repositories?{urlencode({'notice': notice})}", status_code=303)


# -- site configuration ---------------------------------------------------------------------------------------


def _key_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def _line_of(text: str, key: str) -> int | None:
    """The line where `"key"` first appears in the file (1-based), to point at it."""
    needle = f'"{key}"'
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def config_errors(text: str) -> list[dict[str, Any]]:
    """Every problem of a site config text, each at its key path (empty when it is valid)."""
    try:
        data = json5.loads(text) if text.strip() else {}
    except ValueError as exc:
        return [{"path": "(syntax)", "message": f"not valid JSON: {exc}", "line": None}]
    if not isinstance(data, dict):
        return [{"path": "(top level)", "message": "must be a JSON object", "line": None}]
    try:
        SiteConfig.model_validate(data)
    except ValidationError as exc:
        found = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            message = "unknown option" if error["type"] == "extra_forbidden" else str(error["msg"])
            if error["type"] == "bool_type":
                message = not_a_boolean(error.get("input"))
            top = next((p for p in loc if isinstance(p, str)), "")
            found.append(
                {"path": _key_path(loc), "message": message.removeprefix("Value error, "), "line": _line_of(text, top)}
            )
        return found
    return []


def _write_config(runtime: Runtime, text: str) -> None:
    """Replace the site config file atomically with `text` (comments kept) and reload it."""
    runtime.site_config.write_text(text)


async def config_page(request: Request) -> Response:
    require(request, Action.SITE_ADMIN)
    runtime = runtime_of(request)
    status = 200
    if request.method == "POST":
        form = await request.form()
        verify_form(request, form)
        text = form_text(form, "config").replace("\r\n", "\n")
        errors = config_errors(text)
        if form_text(form, "check") == "1":
            # Validation as you type (codewell.js): the problems only, nothing saved.
            return render(request, "web/admin_config_check.html", errors=errors)
        if not errors:
            await run_in_threadpool(_write_config, runtime, text)
            return RedirectResponse("/site-admin/configuration?saved=1", status_code=303)
        status = 400
    else:
        text = await run_in_threadpool(runtime.site_config.path.read_text, "utf-8")
        errors = []
    return render(
        request,
        "web/admin_config.html",
        status_code=status,
        text=text,
        errors=errors,
        path=str(runtime.site_config.path),
        saved=request.query_params.get("saved") == "1",
        store_error=runtime.site_config.error,
        options=config_options(),
    )


def config_options() -> list[dict[str, str]]:
    """Every top-level option with its type, default and help line, from the site config's JSON schema."""
    schema = site_config_json_schema()
    options = []
    for name, prop in sorted(schema["properties"].items()):
        options.append(
            {
                "name": name,
                "type": _schema_type(prop),
                "default": json.dumps(prop["default"]) if "default" in prop else "",
                "help": str(prop.get("description", "")),
            }
        )
    return options


def _schema_type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " or ".join(json.dumps(v) for v in prop["enum"])
    if "type" in prop:
        return {"array": "list", "object": "object"}.get(str(prop["type"]), str(prop["type"]))
    kinds = [str(p.get("type", "object")) for p in prop.get("anyOf", []) if p.get("type") != "null"]
    return " or ".join(kinds) or "object"


# -- MCP switches and tools -----------------------------------------------------------------------------------


def _tools(runtime: Runtime) -> list[dict[str, Any]]:
    disabled = set(runtime.config.mcp_tools_disabled)
    tools = [
        {
            "name": spec.name,
            "capability": capability.name,
            "summary": spec.description.strip().split("\n", 1)[0],
            "endpoints": sorted(str(e) for e in spec.endpoints),
            "disabled": spec.name in disabled,
        }
        for capability in runtime.capabilities
        for spec in capability.tools
    ]
    return sorted(tools, key=lambda t: t["name"])


async def mcp_page(request: Request) -> Response:
    require(request, Action.SITE_ADMIN)
    runtime = runtime_of(request)
    error = ""
    if request.method == "POST":
        form = await request.form()
        verify_form(request, form)
        known = {t["name"] for t in _tools(runtime)}
        enabled = {v for v in form.getlist("enabled") if isinstance(v, str)}
        if unknown := sorted(enabled - known):
            error = f"unknown tool {unknown[0]!r}: nothing saved"
        else:
            text = await run_in_threadpool(runtime.site_config.path.read_text, "utf-8")
            data = json5.loads(text) if text.strip() else {}
            data["mcp.enabled"] = form_text(form, "mcp") == "on"
            data["mcp.tools.disabled"] = sorted(known - enabled)
            new_text = json.dumps(data, indent=2)
            problems = config_errors(new_text)
            if not problems:
                await run_in_threadpool(_write_config, runtime, new_text)
                return RedirectResponse("/site-admin/mcp?saved=1", status_code=303)
            error = "; ".join(f"{p['path']}: {p['message']}" for p in problems)
    return render(
        request,
        "web/admin_mcp.html",
        status_code=400 if error else 200,
        tools=_tools(runtime),
        mcp_enabled=runtime.config.mcp_enabled,
        endpoint=runtime.external_url + "/.api/mcp",
        saved=request.query_params.get("saved") == "1",
        error=error,
    )


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/site-admin", admin_home, methods=["GET"]),
        Route("/site-admin/repositories", repos_page, methods=["GET"]),
        Route("/site-admin/repositories", repos_action, methods=["POST"]),
        Route("/site-admin/configuration", config_page, methods=["GET", "POST"]),
        Route("/site-admin/mcp", mcp_page, methods=["GET", "POST"]),
    ]

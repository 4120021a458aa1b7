"""A click group whose sub-commands are imported only when one of them runs (click's documented `LazyGroup`).

Importing a command's module imports its capability's services, the database models and, through them, most of
the house (seconds on a slow machine). `codewell --help` needs only each command's name and one-line help, so
the group keeps those beside the command's import path and imports the module when the command is invoked (or
its own `--help` is asked for).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

# Long enough to hold any command's first sentence: `--help` shortens it to the terminal's width itself.
SHORT_HELP_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """Where a command lives ("package.module:attribute") and its one-line help, as the command itself gives it
    (`command.get_short_help_str(SHORT_HELP_LIMIT)`; tests/functional/test_cli_lazy.py keeps the two equal)."""

    path: str
    short_help: str

    def load(self) -> click.Command:
        module_name, _, attribute = self.path.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.path} is not a click command")
        return command


class LazyGroup(click.Group):
    """A group listing `lazy_commands` by name and help, importing each one only when it is resolved."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, LazyCommand] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, LazyCommand] = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = self.lazy_commands.get(cmd_name)
        if lazy is None or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        command = lazy.load()
        # Cached like an eagerly added command: resolving it twice (help, then invocation) imports it once.
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of `--help` from the stored one-line helps, without importing any command."""
        rows: list[tuple[str, str]] = []
        limit = formatter.width - 6 - max((len(name) for name in self.list_commands(ctx)), default=0)
        for name in self.list_commands(ctx):
            loaded = self.commands.get(name)
            if loaded is not None:
                if loaded.hidden:
                    continue
                rows.append((name, loaded.get_short_help_str(limit)))
            else:
                # Shortened to the width exactly as click shortens a loaded command's help.
                stand_in = click.Command(name, help=self.lazy_commands[name].short_help)
                rows.append((name, stand_in.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

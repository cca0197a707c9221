"""The command registry of `orbitmq admin`: what a command is and how it registers.

Each module of ``orbitmq.admin.commands`` registers its commands here with ``@command`` when it
is imported, as upstream's MQAdminStartup#initCommand fills its subCommandList; cli.py imports
those modules and builds its parser from COMMANDS. Command modules import this module, never
cli.py, so each of them imports on its own.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from orbitmq.admin.admin_api import MQAdminExt


@dataclass
class Result:
    """What a command produced: the JSON document and the human-readable text (None when the
    command printed its lines while it ran, as clusterRT does)."""

    data: Any
    text: str | None


Handler = Callable[[MQAdminExt, argparse.Namespace], Awaitable[Result]]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


class UsageError(Exception):
    """Flags that do not fit together: the CLI prints the command's usage and exits 2."""


def command(name: str, help_text: str, configure: Callable[[argparse.ArgumentParser], None]):
    def register(handler: Handler) -> Handler:
        COMMANDS[name] = (help_text, configure, handler)
        return handler
    return register


def without_namesrv(handler):
    """Mark a handler that runs without MQAdminExt (cli._run then passes None)."""
    handler.without_namesrv = True
    return handler

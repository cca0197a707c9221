"""How `orbitmq admin` finds its commands: every module of orbitmq.admin.commands registers its
own in the registry, cli.py imports them all, and nothing imports cli.py back (the cycle that
kept the command modules from importing on their own)."""

from __future__ import annotations

import ast

from orbitmq.admin import cli
from orbitmq.admin.registry import COMMANDS
from tests.support.source_roots import module_name, source_roots

_ADMIN = source_roots()["orbitmq"] / "admin"


def _command_modules() -> set[str]:
    return {module_name(path) for path in (_ADMIN / "commands").glob("*.py") if path.name != "__init__.py"}


def test_cli_imports_every_command_module() -> None:
    """A module cli.py does not list would register nothing: its commands would be missing."""
    assert {module.__name__ for module in cli.PACKAGES} == _command_modules()
    assert len(cli.PACKAGES) == len(set(cli.PACKAGES))


def test_help_lists_each_command_once_grouped_by_package() -> None:
    listed = cli._listed()
    assert sorted(listed) == sorted(COMMANDS)
    order = {module.__name__: i for i, module in enumerate(cli.PACKAGES)}
    rank = [order[COMMANDS[name][2].__module__] for name in listed]
    assert rank == sorted(rank)
    assert listed[:5] == ["updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus"]


def test_nothing_below_admin_imports_cli() -> None:
    for path in _ADMIN.rglob("*.py"):
        if path.name == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert "orbitmq.admin.cli" not in names, f"{path} imports orbitmq.admin.cli"

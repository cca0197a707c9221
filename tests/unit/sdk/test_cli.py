"""The `orbitmq` entry point, run as real subprocesses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import orbitmq
from orbitmq import cli

VENV_BIN = Path(sys.executable).parent
ORBITMQ = VENV_BIN / "orbitmq"


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kwargs)


def test_help_lists_every_subcommand():
    proc = _run([str(ORBITMQ), "--help"])
    assert proc.returncode == 0, proc.stderr
    for name in ("local", "namesrv", "broker", "controller", "proxy", "admin", "bench"):
        assert name in proc.stdout


def test_version_and_python_dash_m():
    proc = _run([sys.executable, "-m", "orbitmq", "--version"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"orbitmq {orbitmq.__version__}"


def test_unknown_command_is_an_error():
    proc = _run([str(ORBITMQ), "nosuchcommand"])
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr


def test_not_built_subcommand_reports_and_exits_2():
    # A command whose target module does not exist, registered in a child interpreter so the
    # test keeps meaning the same thing after every real component lands.
    code = textwrap.dedent(
        """
        import sys
        from orbitmq import cli
        cli.COMMANDS["ghost"] = ("orbitmq.ghost_component.startup", "not there")
        sys.exit(cli.main(["ghost", "--flag"]))
        """
    )
    proc = _run([sys.executable, "-c", code])
    assert proc.returncode == 2
    assert proc.stderr.strip() == "orbitmq ghost: not built yet"


def test_every_subcommand_either_dispatches_or_reports_not_built():
    for name, (module, _help) in cli.COMMANDS.items():
        try:
            __import__(module)
        except ModuleNotFoundError as exc:
            if not cli._module_missing(exc, module):
                raise
            proc = _run([str(ORBITMQ), name, "--help"])
            assert proc.returncode == 2
            assert f"orbitmq {name}: not built yet" in proc.stderr


def test_arguments_pass_through_and_exit_code(tmp_path):
    (tmp_path / "fake_target.py").write_text(
        "import json, sys\ndef main(argv):\n    print(json.dumps(argv))\n    return 7\n"
    )
    code = textwrap.dedent(
        """
        import sys
        from orbitmq import cli
        cli.COMMANDS["broker"] = ("fake_target", "fake")
        sys.exit(cli.main(["broker", "-c", "broker.conf", "--help", "x=1"]))
        """
    )
    proc = _run([sys.executable, "-c", code], env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout.strip() == '["-c", "broker.conf", "--help", "x=1"]'


def test_broken_dependency_is_not_hidden(tmp_path):
    # The target exists but imports something missing: that is a bug, not "not built yet".
    (tmp_path / "broken_target.py").write_text("import orbitmq_no_such_dependency\n")
    code = textwrap.dedent(
        """
        import sys
        from orbitmq import cli
        cli.COMMANDS["bench"] = ("broken_target", "broken")
        sys.exit(cli.main(["bench"]))
        """
    )
    proc = _run([sys.executable, "-c", code], env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 1
    assert "orbitmq_no_such_dependency" in proc.stderr
    assert "not built yet" not in proc.stderr

"""A stock static tool (jedi) follows `orbitmq.<root>.X` to the source file, for every root.

The editable install reaches core/, services/ and sdk/ through an import hook that only a
running interpreter runs; `make setup` adds a tree of links on the venv's path
(scripts/link_tree.py) so go-to-definition works in editors and language servers too. jedi
is run as an editor runs it: a Project on the repository with the venv as its environment,
nothing else configured.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jedi
import pytest

from tests.support.source_roots import REPO, source_roots

# One import of each root of setup.py's table: (import line, name to follow, file it is in).
IMPORTS = {
    "orbitmq": ("from orbitmq.local import main", "main", "local.py"),
    "orbitmq.remoting": ("from orbitmq.remoting.protocol import RemotingCommand", "RemotingCommand", "protocol.py"),
    "orbitmq.common": ("from orbitmq.common.config import ConfigBase", "ConfigBase", "config.py"),
    "orbitmq.auth": ("from orbitmq.auth.signature import sign_remoting_fields", "sign_remoting_fields", "signature.py"),
    "orbitmq.client": ("from orbitmq.client.api import MQClientAPI", "MQClientAPI", "api.py"),
    "orbitmq.namesrv": ("from orbitmq.namesrv.routeinfo import RouteInfoManager", "RouteInfoManager", "routeinfo.py"),
    "orbitmq.broker": ("from orbitmq.broker.store.commit_log import CommitLog", "CommitLog", "store/commit_log.py"),
    "orbitmq.controller": ("from orbitmq.controller.replicas_info import ReplicasInfoManager",
                           "ReplicasInfoManager", "replicas_info.py"),
    "orbitmq.proxy": ("from orbitmq.proxy.server import ProxyServer", "ProxyServer", "server.py"),
}


def test_every_root_has_an_import_to_follow() -> None:
    assert set(IMPORTS) == set(source_roots())


@pytest.fixture(scope="module")
def project() -> jedi.Project:
    return jedi.Project(REPO, environment_path=str(Path(sys.executable).parent.parent))


@pytest.mark.parametrize("root", sorted(IMPORTS))
def test_go_to_definition_reaches_the_source(project: jedi.Project, root: str) -> None:
    line, name, relative = IMPORTS[root]
    expected = (source_roots()[root] / relative).resolve()
    assert expected.is_file(), expected
    code = f"{line}\n{name}\n"
    script = jedi.Script(code, path=REPO / "tests" / "example_usage.py", project=project)
    definitions = script.goto(2, 0, follow_imports=True)
    assert definitions, f"jedi found no definition of {name} ({line})"
    found = {Path(d.module_path).resolve() for d in definitions if d.module_path}
    assert expected in found, f"{name}: jedi went to {found}, not {expected}"
    assert all(d.type in ("class", "function") for d in definitions), definitions

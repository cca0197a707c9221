"""ORBITMQ_EVENT_LOOP selects the server commands' event loop (issue 17, lever 4)."""

from __future__ import annotations

import asyncio

import pytest

from orbitmq.cli import select_event_loop


@pytest.fixture(autouse=True)
def _restore_policy():
    policy = asyncio.get_event_loop_policy()
    yield
    asyncio.set_event_loop_policy(policy)


def test_asyncio_is_the_default_and_clients_never_switch() -> None:
    assert select_event_loop("proxy", {}) == "asyncio"
    assert select_event_loop("bench", {"ORBITMQ_EVENT_LOOP": "uvloop"}) == "asyncio"
    assert select_event_loop("admin", {"ORBITMQ_EVENT_LOOP": "uvloop"}) == "asyncio"


def test_an_unknown_loop_falls_back_to_asyncio(capsys) -> None:
    assert select_event_loop("broker", {"ORBITMQ_EVENT_LOOP": "trio"}) == "asyncio"
    assert "is not asyncio or uvloop" in capsys.readouterr().err


def test_uvloop_when_asked_and_installed() -> None:
    uvloop = pytest.importorskip("uvloop")
    assert select_event_loop("local", {"ORBITMQ_EVENT_LOOP": "uvloop"}) == "uvloop"
    assert isinstance(asyncio.get_event_loop_policy(), uvloop.EventLoopPolicy)

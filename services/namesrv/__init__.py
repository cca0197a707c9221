"""NameServer: the in-memory route registry brokers register with and clients ask for routes.

Embed one with ``NamesrvController(NamesrvConfig(...))`` and ``await start()`` / ``await
shutdown()``; ``orbitmq namesrv`` (orbitmq.namesrv.startup) runs one as its own process.
"""

from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.controller import NamesrvController

__all__ = ["NamesrvConfig", "NamesrvController"]

"""A round-robin TCP load balancer on loopback: what stands in front of proxies in production.

Each accepted connection goes to the next backend in turn and bytes are copied both ways; the
backend each connection went to is recorded, so a test knows which server its client is on. A
drained backend gets no new connections, as Kubernetes removes a terminating pod from its
Service's endpoints while the pod's open connections stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools


class TcpBalancer:
    def __init__(self, backends: list[str], host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.backends = list(backends)
        self.connections: list[str] = []  # the backend of each accepted connection, in order
        self.drained: set[str] = set()
        self._next = itertools.cycle(range(len(self.backends)))
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.address = ""

    async def start(self) -> TcpBalancer:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.address = f"{self.host}:{self._server.sockets[0].getsockname()[1]}"
        return self

    def drain(self, backend: str) -> None:
        self.drained.add(backend)

    def _pick(self) -> str:
        for _ in self.backends:
            backend = self.backends[next(self._next)]
            if backend not in self.drained:
                return backend
        return self.backends[next(self._next)]  # all drained: any, rather than none

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        backend = self._pick()
        self.connections.append(backend)
        host, _, port = backend.rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        pumps = [asyncio.ensure_future(self._pump(reader, up_writer)), asyncio.ensure_future(self._pump(up_reader, writer))]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
                self._tasks.discard(task)
            for w in (writer, up_writer):
                w.close()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

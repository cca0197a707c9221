"""Reading and writing length-prefixed Remoting frames on asyncio streams (shared by both ends)."""

from __future__ import annotations

import asyncio
import struct

from orbitmq.remoting.errors import RemotingCommandError
from orbitmq.remoting.protocol import RemotingCommand

DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024  # NettyDecoder's default FRAME_MAX_LENGTH (16 MiB)
_LENGTH = struct.Struct(">i")


async def read_frame(reader: asyncio.StreamReader, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> bytes | None:
    """The next frame without its length prefix, or None on a clean EOF between frames.

    Raises RemotingCommandError for an impossible length and asyncio.IncompleteReadError when
    the peer disappears mid-frame.
    """
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    (length,) = _LENGTH.unpack(prefix)
    if length < 4:
        raise RemotingCommandError(f"bad frame length {length}")
    if length > max_frame_size:
        raise RemotingCommandError(f"frame length {length} exceeds the maximum {max_frame_size}")
    return await reader.readexactly(length)


async def read_command(reader: asyncio.StreamReader,
                       max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> RemotingCommand | None:
    frame = await read_frame(reader, max_frame_size)
    return None if frame is None else RemotingCommand.decode(frame)


def write_command(writer: asyncio.StreamWriter, command: RemotingCommand) -> None:
    """Queue one whole frame; StreamWriter.write is synchronous, so frames never interleave."""
    writer.write(command.encode())

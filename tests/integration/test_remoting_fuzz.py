"""Malformed frames from many raw sockets must not disturb a well-behaved client."""

import asyncio
import json
import logging
import random
import struct

from orbitmq.remoting import (
    Channel,
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    RequestCode,
    ResponseCode,
    SerializeType,
)

MAX_FRAME = 64 * 1024
ECHO = RequestCode.QUERY_MESSAGE
ROUNDS = 10


def _frame(header: bytes, serialize_type: int = 0, body: bytes = b"", header_len: int | None = None) -> bytes:
    hl = len(header) if header_len is None else header_len
    payload = struct.pack(">I", (serialize_type << 24) | hl) + header + body
    return struct.pack(">i", len(payload)) + payload


def _binary_header(remark_len: int = 0, ext: bytes = b"", ext_len: int | None = None, language: int = 0) -> bytes:
    fixed = struct.pack(">hbhii", 11, language, 1, 1, 0)
    ext_len = len(ext) if ext_len is None else ext_len
    return fixed + struct.pack(">i", remark_len) + struct.pack(">i", ext_len) + ext


def _definitely_bad(rng: random.Random) -> list[bytes]:
    """Payloads after which the server must drop the connection."""
    good_json = RemotingCommand.request(ECHO, {"n": "0"}).encode()
    return [
        struct.pack(">i", -rng.randint(1, 2**31)),                      # negative length
        struct.pack(">i", MAX_FRAME + rng.randint(1, 10**6)),             # oversize length
        struct.pack(">i", rng.randint(0, 3)) + b"\x00" * 8,               # shorter than the header word
        _frame(b'{"code":1}', header_len=5000),                           # header length beyond frame
        _frame(b'{"code":1,,}'),                                          # invalid JSON
        _frame(b"\xff\xfe{}"),                                            # not UTF-8
        _frame(b'{"code":"abc"}'),                                        # ill-typed JSON field
        _frame(b'{"code":1,"language":"KLINGON"}'),                       # unknown language
        _frame(b'{"code":1,"extFields":[1,2]}'),                          # extFields not an object
        _frame(b'{"code":1}', serialize_type=rng.randint(2, 255)),        # unknown serialize type
        _frame(_binary_header(remark_len=0x7FFFFFFF), serialize_type=1),  # absurd remark length
        _frame(_binary_header(remark_len=-7), serialize_type=1),
        _frame(_binary_header(ext_len=0x7FFFFFF0), serialize_type=1),     # absurd extFields length
        _frame(_binary_header(ext=b"\x7f\xff" + b"k" * 4 + struct.pack(">i", 1) + b"v"), serialize_type=1),
        _frame(_binary_header(ext=b"\x00\x01k" + struct.pack(">i", 2**30) + b"v"), serialize_type=1),
        _frame(_binary_header(language=99), serialize_type=1),
        _frame(b"\x00\x01", serialize_type=1),                            # truncated binary header
        _frame(b"[" * 5000),                                              # deeply nested JSON
        good_json[:4] + b"\x00" * 4 + good_json[8:],                      # header length 0 -> empty JSON
    ]


def _random_garbage(rng: random.Random) -> bytes:
    choice = rng.randrange(3)
    if choice == 0:
        return rng.randbytes(rng.randint(1, 300))
    if choice == 1:  # a plausible prefix followed by noise, then the sender vanishes (truncated frame)
        return struct.pack(">i", rng.randint(10, 5000)) + rng.randbytes(rng.randint(0, 9))
    header = json.dumps({"code": rng.randint(0, 400), "opaque": rng.randint(0, 9)}).encode()
    frame = _frame(header, body=rng.randbytes(20))
    return frame[: rng.randint(1, len(frame) - 1)]  # truncated mid-frame


async def _attack_expect_close(port: int, payload: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        # the server must hang up on its own (EOF), not wait for more bytes from us
        data = await asyncio.wait_for(reader.read(), 5)
        assert data == b"", f"server answered a malformed frame: {data[:60]!r}"
    finally:
        writer.close()


async def _attack_random(port: int, payload: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        await asyncio.sleep(0.01)
    except ConnectionError:
        pass
    finally:
        writer.close()


async def test_fuzzed_connections_never_disturb_a_good_client(caplog):
    caplog.set_level(logging.WARNING, logger="orbitmq.remoting")

    async def echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        await asyncio.sleep(0)
        return request.response_to(ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields), body=request.body)

    server = RemotingServer(max_frame_size=MAX_FRAME)
    server.register(ECHO, echo)
    await server.start()
    client = RemotingClient()
    addr = f"127.0.0.1:{server.port}"
    rng = random.Random(20261121)
    stop = asyncio.Event()
    good_results: list[bool] = []

    async def good_client() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            st = SerializeType.ROCKETMQ if n % 2 else SerializeType.JSON
            req = RemotingCommand.request(ECHO, {"n": str(n)}, body=n.to_bytes(4, "big"), serialize_type=st)
            resp = await client.invoke(addr, req, timeout=5)
            good_results.append(resp.code == ResponseCode.SUCCESS and resp.ext_fields == {"n": str(n)}
                                and resp.body == n.to_bytes(4, "big") and resp.opaque == req.opaque)

    try:
        goods = [asyncio.create_task(good_client()) for _ in range(4)]
        bad = _definitely_bad(rng)
        for _round in range(ROUNDS):
            attacks = [_attack_expect_close(server.port, p) for p in bad]
            attacks += [_attack_random(server.port, _random_garbage(rng)) for _ in range(60)]
            rng.shuffle(attacks)
            for i in range(0, len(attacks), 25):  # many sockets at once, in waves
                await asyncio.gather(*attacks[i:i + 25])
        stop.set()
        await asyncio.gather(*goods)  # raises if any good request failed

        assert good_results and all(good_results), "the well-behaved client got a wrong answer"
        bad_frame_logs = [r for r in caplog.records if "bad frame" in r.getMessage()]
        assert len(bad_frame_logs) >= ROUNDS * len(bad)
        print(f"good requests answered: {len(good_results)}; bad-frame closes logged: {len(bad_frame_logs)}")
        # the server still accepts and serves new connections afterwards
        fresh = RemotingClient()
        try:
            resp = await fresh.invoke(addr, RemotingCommand.request(ECHO, {"n": "last"}))
            assert resp.ext_fields == {"n": "last"}
        finally:
            await fresh.close()
        await asyncio.sleep(0.1)
        assert len(server.channels) == 1  # only the good client's connection is left
    finally:
        stop.set()
        await client.close()
        await server.close()

"""`orbitmq bench rocketmq --profile` sums self time the way its docs say (issue 24).

Fed a small py-spy raw file and a small `jfr print --json` document in the shapes the tools
write (py-spy 0.4's ``--format raw --full-filenames``, JDK 17's jdk.ExecutionSample), without
running either tool.
"""

from __future__ import annotations

import json

from orbitmq.bench.rocketmq_profile import (
    format_summary,
    java_package,
    python_package,
    raw_stacks,
    summarise_jfr,
    summarise_py_spy,
)

SITE = "/work/main/.venv/lib/python3.11/site-packages"
STDLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11"
LINKS = "/work/main/.venv/orbitmq-links/orbitmq"
RUN = f"process 7:\"python -m orbitmq proxy\";<module> ({STDLIB}/runpy.py:198);run_forever ({STDLIB}/asyncio/base_events.py:607)"
RAW = "\n".join([
    f"{RUN};_run ({STDLIB}/asyncio/events.py:80) 50",
    f"{RUN};_run ({STDLIB}/asyncio/events.py:81);send_message ({LINKS}/proxy/producer.py:120) 20",
    f"{RUN};_run ({STDLIB}/asyncio/events.py:80);send_message ({LINKS}/proxy/producer.py:131) 10",
    f"{RUN};SerializeToString ({SITE}/google/protobuf/message.py:9) 10",
    f"{RUN};write ({SITE}/grpc/_cython/cygrpc.cpython-311-x86_64-linux-gnu.so) 5",
    f"{RUN};sendmsg (/usr/lib/x86_64-linux-gnu/libc.so.6) 5",
    f"{RUN};select ({STDLIB}/selectors.py:469) 100",  # the loop waiting: left out
    f"{RUN};epoll_wait (/usr/lib/x86_64-linux-gnu/libc.so.6) 100",
    "a command line's second line, no count",
])


def test_raw_lines_split_into_frames_and_counts() -> None:
    stacks = list(raw_stacks("a (x.py:1);b (y.py:2) 3\nnot a sample\n"))
    assert stacks == [(["a (x.py:1)", "b (y.py:2)"], 3)]


def test_py_spy_self_time_by_function_and_package_without_waits() -> None:
    s = summarise_py_spy(RAW)
    assert s["samples"] == 300 and s["busy_samples"] == 100
    assert abs(s["waiting_pct"] - 200 / 3) < 1e-9
    top = {e["name"]: e["pct"] for e in s["top"]}
    assert top == {"_run (asyncio/events.py)": 50.0, "send_message (orbitmq/proxy/producer.py)": 30.0,
                   "SerializeToString (google/protobuf/message.py)": 10.0,
                   "write (cygrpc)": 5.0, "sendmsg (libc)": 5.0}
    assert [e["name"] for e in s["top"]][:2] == ["_run (asyncio/events.py)", "send_message (orbitmq/proxy/producer.py)"]
    packages = {e["name"]: e["pct"] for e in s["packages"]}
    assert packages == {"stdlib asyncio": 50.0, "orbitmq.proxy": 30.0, "google.protobuf": 10.0,
                        "grpc (C)": 5.0, "native libc": 5.0}
    text = format_summary("proxy", {"tool": "py-spy", **s})
    assert " 50.0%  _run (asyncio/events.py)" in text and "67% waiting left out" in text
    assert "by package: stdlib asyncio 50.0%, orbitmq.proxy 30.0%" in text


def test_python_packages() -> None:
    assert python_package(f"{LINKS}/remoting/channel.py") == "orbitmq.remoting"
    assert python_package(f"{SITE}/grpc/aio/_server.py") == "grpc"
    assert python_package(f"{SITE}/google/_upb/_message.abi3.so") == "google._upb (C)"
    assert python_package(f"{STDLIB}/concurrent/futures/thread.py") == "stdlib concurrent"
    assert python_package("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0") == "CPython (C)"
    assert python_package("/work/main/services/broker/store/_speedups_dispatch.pyx") == "_speedups_dispatch (Cython)"


def _sample(cls: str, method: str, *callers: tuple[str, str], thread: str = "grpc-default-executor-0") -> dict:
    frames = [{"method": {"type": {"name": c, "package": {"name": c.rsplit("/", 1)[0]}}, "name": m},
               "lineNumber": 1, "type": "JIT compiled"} for c, m in ((cls, method), *callers)]
    return {"type": "jdk.ExecutionSample",
            "values": {"sampledThread": {"javaName": thread}, "state": "STATE_RUNNABLE",
                       "stackTrace": {"truncated": False, "frames": frames}}}


def test_jfr_self_time_is_the_top_frame_by_method_and_package() -> None:
    netty = "io/grpc/netty/shaded/io/netty/buffer/AbstractByteBuf"
    events = ([_sample(netty, "writeBytes", ("io/grpc/internal/ServerImpl", "run"))] * 3
              + [_sample("org/apache/rocketmq/proxy/grpc/v2/producer/SendMessageActivity", "sendMessage")]
              + [_sample("java/util/HashMap", "get", ("org/apache/rocketmq/proxy/Foo", "bar"))] * 2
              + [_sample("sun/nio/ch/Util", "offerFirstTemporaryDirectBuffer", thread="Attach Listener")])
    doc = json.loads(json.dumps({"recording": {"events": events}}))
    s = summarise_jfr(doc)
    assert s["samples"] == 6  # jcmd's Attach Listener left out
    assert [(e["name"], e["pct"]) for e in s["top"]] == [
        ("io.grpc.netty.shaded.io.netty.buffer.AbstractByteBuf.writeBytes", 50.0),
        ("java.util.HashMap.get", 100 / 3),
        ("org.apache.rocketmq.proxy.grpc.v2.producer.SendMessageActivity.sendMessage", 100 / 6)]
    assert {e["name"]: e["samples"] for e in s["packages"]} == {"io.grpc.netty": 3, "java.util": 2,
                                                                 "org.apache.rocketmq.proxy": 1}


def test_java_packages() -> None:
    assert java_package("org.apache.rocketmq.store.CommitLog") == "org.apache.rocketmq.store"
    assert java_package("java/lang/String") == "java.lang"
    assert java_package("Spin") == "(default package)"


def test_a_failed_capture_says_why() -> None:
    text = format_summary("broker", {"tool": "JFR", "samples": 0, "top": [], "packages": [], "error": "jcmd: no"})
    assert text.endswith("not measured: jcmd: no")

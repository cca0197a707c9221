"""Apache's mqadmin (rocketmq-tools 5.5.0, this Maven suite) and `orbitmq admin`, side by side
against one cluster, for tests/interop/java/test_apache_mqadmin*.py.

``mqadmin`` runs many command lines in one JVM (Batch.java: a JVM start costs about a second, a
command a tenth of that) and returns each one's stdout and stderr; ``orbit`` runs the same
command of `orbitmq admin` in-process with --json. The parsers turn the tool's printf tables and
"key : value" lists into rows and dicts, so the tests compare facts, not spacing.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbitmq.admin.cli import main as admin_main
from tests.support import jvm

SUITE = "mqadmin"
BATCH = "orbitmq.interop.mqadmin.Batch"
CLIENTS = "orbitmq.interop.mqadmin.Clients"


@dataclass
class Run:
    args: list[str]
    out: str
    err: str
    ms: int
    stopped: bool

    def ok(self) -> str:
        """stdout of a command that succeeded: MQAdminStartup#main0 prints a failure's stack trace
        on stderr (and a SubCommandException's cause)."""
        assert not self.err.strip(), f"mqadmin {' '.join(self.args)} failed:\n{self.err}\n{self.out}"
        return self.out

    def failure(self) -> str:
        """The stack trace of a command that failed (the cause's message is in it)."""
        assert self.err.strip(), f"mqadmin {' '.join(self.args)} did not fail:\n{self.out}"
        return self.err


def _jvm_flags(workdir: Path) -> list[str]:
    # The tool's and the client's logback files go under user.home (rmq.tools.logback.xml) and
    # rocketmq.client.logRoot: keep them in the test's directory.
    return [f"-Duser.home={workdir}", f"-Drocketmq.client.logRoot={workdir / 'logs'}"]


def mqadmin(workdir: Path, lines: Sequence[Sequence[str] | tuple[Sequence[str], int]],
            credentials: tuple[str, str] | None = None, timeout: float = 240) -> list[Run]:  # noqa: ASYNC109
    """Run each command line (``[name, *flags]``, or ``(line, limitMillis)`` for a command that
    repeats until stopped) in one JVM, in order."""
    workdir.mkdir(parents=True, exist_ok=True)
    batch = workdir / f"batch-{len(list(workdir.glob('batch-*.jsonl')))}.jsonl"
    with batch.open("w") as f:
        for line in lines:
            if isinstance(line, tuple):
                f.write(json.dumps({"args": list(line[0]), "limitMillis": line[1]}) + "\n")
            else:
                f.write(json.dumps(list(line)) + "\n")
    done = jvm.suite(SUITE).run(BATCH, str(batch), *(credentials or ()), timeout=timeout,
                                jvm_flags=_jvm_flags(workdir))
    runs = [Run(**json.loads(line[len("RESULT "):])) for line in done.stdout.splitlines()
            if line.startswith("RESULT ")]
    assert done.returncode == 0 and len(runs) == len(lines), (done.returncode, done.stdout[-3000:],
                                                              done.stderr[-3000:])
    return runs


def orbit(namesrv: str, *args: str) -> Any:
    """`orbitmq admin <args> -n namesrv --json`, in-process; its JSON document."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = admin_main([args[0], "-n", namesrv, *args[1:], "--json"])
    assert code == 0, f"orbitmq admin {' '.join(args)}: {err.getvalue()}"
    return json.loads(out.getvalue())


@contextlib.contextmanager
def live_clients(workdir: Path, namesrv: str, topic: str, producer_group: str, consumer_group: str,
                 count: int) -> Iterator[dict[str, Any]]:
    """A Remoting DefaultMQProducer and DefaultMQPushConsumer (Clients.java) that sent and
    consumed ``count`` messages and stay connected until the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = jvm.suite(SUITE).command(CLIENTS, namesrv, topic, producer_group, consumer_group, str(count),
                                       jvm_flags=_jvm_flags(workdir))
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        sent: dict[str, str] = {}
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("SENT "):
                _tag, key, msg_id = line.split()
                sent[key] = msg_id
            if line.startswith("READY "):
                _tag, producer_id, consumer_id = line.split()
                yield {"sent": sent, "producerClientId": producer_id, "consumerClientId": consumer_id}
                return
        raise AssertionError("the clients stopped before READY:\n" + "".join(lines[-60:]))
    finally:
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---- parsers --------------------------------------------------------------------------------


def table(text: str, columns: int | None = None) -> list[list[str]]:
    """The rows under a "#Header ..." line, split on whitespace (the first ``columns`` cells
    when the last cell may hold spaces); blank lines end the table."""
    rows: list[list[str]] = []
    started = False
    for line in text.splitlines():
        if line.startswith("#") and not started:
            started = True
            continue
        if not started:
            continue
        if not line.strip():
            if rows:
                break
            continue
        cells = line.split()
        rows.append(cells[:columns] if columns else cells)
    return rows


def pairs(text: str, sep: str) -> dict[str, str]:
    """"key <sep> value" lines (brokerStatus ':', getBrokerConfig '=') as a dict."""
    result = {}
    for line in text.splitlines():
        if sep in line and not line.startswith("="):
            key, _, value = line.partition(sep)
            result[key.strip()] = value.strip()
    return result


def sections(text: str) -> dict[str, dict[str, str]]:
    """getBrokerConfig / getNamesrvConfig / getControllerConfig: "====addr====" blocks of
    "key = value" lines, by address (a broker block's "Master: " / "Slave: " prefix dropped)."""
    result: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        head = re.fullmatch(r"=+(?:Master: |Slave: )?([^=]+?)=+", line.strip())
        if head:
            current = result.setdefault(head.group(1), {})
        elif current is not None and "=" in line:
            key, _, value = line.partition("=")
            current[key.strip()] = value.strip()
    return result


def tabbed(text: str) -> list[dict[str, str]]:
    """"#Key<TAB>value" blocks (getSyncStateSet, getBrokerEpoch, haStatus, electMaster...), one
    dict per blank-line-separated block that has any."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        match = re.fullmatch(r"#([^\t:]+):?\t(.*)", line.strip())
        if match:
            current.setdefault(match.group(1), match.group(2).strip())
    if current:
        blocks.append(current)
    return blocks


def fastjson_text(text: str) -> Any:
    """fastjson's pretty print (topicRoute), whose map keys of brokerAddrs are bare numbers."""
    return json.loads(re.sub(r'(?m)^(\s*)(-?\d+):', r'\1"\2":', text))
